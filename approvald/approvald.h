/*
 * approvald.h: approvald's structures and the prototypes of its modules.
 * approvald holds the capability requests that policyd's rules could not
 * grant, in a SQLite queue that survives restarts, until a person in the
 * approvers group decides them at the console (approvalctl).  A decision
 * becomes final only once policyd has taken it (an approval becomes a
 * task-scoped grant and a new compiled policy there) and the reply is on
 * disk here: when policyd cannot be reached the request stays pending.
 *
 * Module prefixes carry an "a" (aqueue_, acontrol_, aparse_, aquote_) so
 * libapprovald links beside the other daemons' libraries in unit tests.
 */
#ifndef SBX_APPROVALD_H
#define SBX_APPROVALD_H

#include <sys/queue.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pg.h"

#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/capability.pb-c.h"

#define APPROVALD_CONF_DEFAULT	"/etc/sbx/approvald.yaml"
#define APPROVALD_DB		"approvald.db"
#define APPROVALD_REASON_MAX	1024	/* an approver's reason */
#define APPROVALD_WHY_MAX	4096	/* a request's justification */
#define APPROVALD_DENIALS_MAX	32	/* a request's task denials */
#define APPROVALD_DETAIL_MAX	1024	/* one denial's detail */

/* Rule ids of refusals (Error.rule and the audit record's rule). */
#define ARULE_PEER		"peer-not-allowed"
#define ARULE_BAD_REQUEST	"bad-request"
#define ARULE_UNKNOWN		"request-unknown"
#define ARULE_DECIDED		"already-decided"
#define ARULE_IN_FLIGHT		"decision-in-flight"
#define ARULE_UNREACHABLE	"policyd-unreachable"
#define ARULE_POLICYD		"policyd-refused"
#define ARULE_SOD		"separation-of-duties"

struct event_base;
struct frame_conn;
struct ucred;
struct yerrs;
struct audit;
struct sqlite3;

/* ---- parse.c ---- */

/* approvers: one Unix user (an approver at the console) and the tenant
 * users who are that person, each "TENANT/USER" (USER "*": every user of
 * TENANT): a request of their tasks is not theirs to decide. */
struct aapprover {
	uid_t			 uid;
	char			*name;		/* as written in the file */
	char			**users;	/* "TENANT/USER" */
	size_t			 nusers;
};

struct approvald_conf {
	struct cfg_common	 common;	/* file, user, state_dir, ... */
	/* policyd's approvals socket, and who must be listening on it. */
	char			*policyd_socket;
	uid_t			 policyd_uid;
	uint32_t		 policyd_timeout;	/* seconds */
	struct cfg_sock		 submit;
	struct cfg_sock		 console;
	struct aapprover	*approvers;
	size_t			 napprovers;
	struct pg_store		 store;		/* never logged */
};

/* The keys of approvald.yaml, for the skeleton (daemon.h) and cfg_parse. */
extern const struct cfg_table aparse_table;
/*
 * Separation of duties: whether the Unix user uid (named name) is the
 * user of a task of tenant/user.  So is a Unix user whose name is the
 * task's user name (in any tenant), and one approvers: maps to
 * TENANT/USER, or to TENANT with USER "*".  1 with why set, or 0.
 */
int		 aparse_own_task(const struct approvald_conf *, uid_t uid,
		    const char *name, const char *tenant, const char *user,
		    char *why, size_t len);

/* ---- queue.c ---- */

struct aqueue;

/* Open (creating) the queue database; its audit log lives in it too, so a
 * queue change and its audit record commit together.  NULL with err. */
struct aqueue	*aqueue_open(const char *path, char *err, size_t errlen);
void		 aqueue_close(struct aqueue *);
struct audit	*aqueue_audit(struct aqueue *);
/*
 * Add a request (its request_id set by policyd) as pending, with an audit
 * record "submit" by actor, in one commit.  1 when added, 0 when a request
 * with that id is already queued (nothing changes), -1 with err.
 */
int		 aqueue_add(struct aqueue *, const Sbx__V1__CapabilityRequest *,
		    const char *actor, char *err, size_t errlen);
/*
 * One request and its decision (status PENDING while open).  1 found, 0
 * not, -1 with err.  Free both with aqueue_item_free.
 */
int		 aqueue_get(struct aqueue *, const char *request_id,
		    Sbx__V1__CapabilityRequest **req,
		    Sbx__V1__CapabilityDecision **dec, char *err,
		    size_t errlen);
/*
 * Record the final decision of a pending request with its audit record
 * (action "approve" or "deny", actor the approver) in one commit.  0,
 * or -1 with err (ARULE_DECIDED in *rule when it was no longer pending).
 */
int		 aqueue_decide(struct aqueue *,
		    const Sbx__V1__CapabilityDecision *, const char **rule,
		    char *err, size_t errlen);
/* Requests oldest first (pending ones only if pending_only), with their
 * decisions in the same order.  Free with aqueue_items_clear. */
int		 aqueue_list(struct aqueue *, int pending_only,
		    Sbx__V1__ApprovalItems *, char *err, size_t errlen);
/* Append one audit record on its own.  0 or -1. */
int		 aqueue_audit_event(struct aqueue *, const char *actor,
		    const char *action, const char *task_id, const char *hash,
		    const char *rule, const char *detail);

/* In a fleet (store.backend postgresql): the queue is the database's,
 * the audit log stays this file's.  The connection is made on first use. */
void		 aqueue_use_pg(struct aqueue *, const struct pg_store *);

/* ---- queue_item.c: what the queue hands out, from either store ---- */

void		 aqueue_item_free(Sbx__V1__CapabilityRequest *,
		    Sbx__V1__CapabilityDecision *);
/* Append r and d to it, growing both arrays (*cap: their room; 0 at
 * first); it owns them from then on.  Free with aqueue_items_clear. */
void		 aqueue_append(Sbx__V1__ApprovalItems *it, size_t *cap,
		    Sbx__V1__CapabilityRequest *r,
		    Sbx__V1__CapabilityDecision *d);
void		 aqueue_items_clear(Sbx__V1__ApprovalItems *);

/* ---- queue_pg.c: the queue in the fleet's database ---- */

struct pg;

extern const char aqueue_pg_schema[];
/* 1 added, 0 already there, -1 with err. */
int		 aqueue_pg_add(struct pg *, const char *host,
		    const Sbx__V1__CapabilityRequest *, const uint8_t *body,
		    size_t len, char *err, size_t errlen);
/* As aqueue_get. */
int		 aqueue_pg_get(struct pg *, const char *request_id,
		    Sbx__V1__CapabilityRequest **,
		    Sbx__V1__CapabilityDecision **, char *err, size_t errlen);
/* 1 recorded, 0 it was decided already (anywhere), -1 with err. */
int		 aqueue_pg_decide(struct pg *, const char *host,
		    const Sbx__V1__CapabilityDecision *, char *err,
		    size_t errlen);
/* As aqueue_list. */
int		 aqueue_pg_list(struct pg *, int pending_only,
		    Sbx__V1__ApprovalItems *, char *err, size_t errlen);

/* ---- quote.c ---- */

/*
 * Text from a request made safe for a terminal: printable ASCII and valid
 * UTF-8 pass; ESC and other C0 controls become caret notation (^[, ^G),
 * DEL ^?, C1 controls and invisible or direction-changing code points
 * \u{XXXX}, bytes that are not valid UTF-8 \xNN, and a backslash \\.  With
 * prefix non-NULL, each line starts with it and newlines stay line breaks;
 * otherwise a newline becomes \n and tab \t.  malloc'd.
 */
char		*aquote(const void *buf, size_t len, const char *prefix);
/* The capability asked for, one line: "dataset NAME" or "host H methods
 * GET,POST paths /a,/b" (quoted). malloc'd. */
char		*aquote_what(const Sbx__V1__CapabilityRequest *);

/* ---- control.c ---- */

struct aforward;

struct approvald {
	struct approvald_conf	*conf;
	struct aqueue		*queue;
	struct event_base	*base;
	/* Decisions on their way to policyd. */
	TAILQ_HEAD(, aforward)	 forwards;
};

/* The frame handlers of the submit and console sockets (arg: the struct
 * approvald), and the audit of a peer refused at either. */
void		 acontrol_submit_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
void		 acontrol_console_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
void		 acontrol_refused_peer(void *, const char *sock,
		    const struct ucred *, const char *why);
/* Drop the decisions still on their way (they stay pending). */
void		 acontrol_stop(struct approvald *);
/* The Unix user name of uid (getpwuid), or "uid:N" when it has none. */
void		 acontrol_user_name(uid_t, char *buf, size_t len);

#endif
