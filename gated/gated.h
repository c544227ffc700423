/*
 * gated.h: gated's structures and the prototypes of its modules.  gated is
 * the output release gate: once every process of a sandbox is dead,
 * launchd-sbx hands it the scratch directory as a file descriptor with the
 * signed policy, the declared output names and the captured stdout and
 * stderr.  The invariant everything here serves: nothing leaves a sandbox
 * but declared regular files, opened beneath that descriptor without
 * following a link, whose content type is allowed by the policy and agrees
 * with their name, within the policy's caps; text reaches the agent without
 * terminal control sequences and labelled as data; every release and
 * every drop is audited before the result is sent.
 *
 * Module prefixes: gparse_, gcontrol_, release_, sniff_, text_, gstore_
 * (libgated links beside the other daemons' modules in the unit tests).
 */
#ifndef SBX_GATED_H
#define SBX_GATED_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "peer.h"

#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/gate.pb-c.h"
#include "sbx/v1/policy.pb-c.h"

#define GATED_CONF_DEFAULT	"/etc/sbx/gated.yaml"
#define GATED_DB		"gated.db"	/* the audit log */
#define GATED_TEXT_KB_DEFAULT	64	/* outputs.max_text_kb 0 */
#define GATED_NAME_MAX		1024	/* a declared name, bytes */
#define GATED_OUTPUTS_MAX	256	/* declared names per request */
#define GATED_WALK_MAX		4096	/* undeclared entries listed */
#define GATED_WALK_DEPTH	16

/* Rule ids of refused requests (Error.rule and the audit record). */
#define RULE_PEER		"peer-not-allowed"
#define RULE_SIGNATURE		"signature-invalid"
#define RULE_EXPIRED		"policy-expired"
#define RULE_BAD_REQUEST	"bad-request"
#define RULE_NO_DIR		"no-scratch-directory"

/* Reasons of dropped outputs (DroppedOutput.reason, audit rule). */
#define DROP_UNDECLARED		"undeclared"
#define DROP_TYPE_NOT_ALLOWED	"type-not-allowed"
#define DROP_TYPE_MISMATCH	"type-mismatch"
#define DROP_TOO_LARGE		"too-large"
#define DROP_TOTAL		"total-too-large"
#define DROP_NOT_REGULAR	"not-regular-file"
#define DROP_SYMLINK		"symlink"
#define DROP_HARDLINK		"hardlink"
#define DROP_MISSING		"missing"
#define DROP_BAD_NAME		"bad-name"
#define DROP_DUPLICATE		"duplicate"
#define DROP_UNREADABLE		"unreadable"
#define DROP_DESTINATION	"destination-failed"

struct yerrs;

/* ---- parse.c ---- */

struct gated_conf {
	char			*file;
	char			*dir;
	char			*user;		/* NULL: no drop */
	uid_t			 uid;
	gid_t			 gid;
	char			*state_dir;
	char			*store_dir;	/* default state_dir/store */
	char			*policy_public_key;
	uint32_t		 max_frame_kb;
	struct cfg_sock		 release;
	struct cfg_sock		 admin;		/* path NULL: none */
};

struct gated_conf *gparse_config(const char *file, struct yerrs *);
void		 gparse_config_free(struct gated_conf *);

/* ---- text.c (pure) ---- */

/*
 * Remove terminal control: CSI (ESC [ and 8-bit U+009B), OSC (ESC ], up
 * to BEL or ST), DCS, SOS, PM and APC strings, other two- and three-byte
 * ESC sequences, C0 controls but \n and \t, DEL and C1 controls.  A byte
 * that is not part of valid UTF-8 becomes '?'.  out holds at least len
 * bytes; returns the length written (never more than len).
 */
size_t		 text_strip(const uint8_t *in, size_t len, uint8_t *out);
/*
 * Cut to at most max bytes at a UTF-8 character boundary and append
 * "\n[sbx: truncated N bytes]" when anything was cut.  Returns malloc'd
 * bytes (NUL-terminated, *outlen without the NUL).
 */
uint8_t		*text_truncate(const uint8_t *in, size_t len, size_t max,
		    size_t *outlen, int *truncated);
/* The same for the first len bytes of something whole bytes long (a file
 * read only up to its cap): the marker counts from whole. */
uint8_t		*text_truncate_of(const uint8_t *in, size_t len, size_t whole,
		    size_t max, size_t *outlen, int *truncated);
/* text_strip, then text_truncate. */
uint8_t		*text_clean(const uint8_t *in, size_t len, size_t max,
		    size_t *outlen, int *truncated);
/*
 * Wrap as labelled tool output: <tool-output source="sbx" execution="ID"
 * stream="S">\n ... </tool-output>, the
 * closing tag on a line of its own.  Inside the body, any "<tool-output"
 * or "</tool-output" (any case) has its '<' written as "&lt;", so the data
 * cannot close the label and speak outside it.  Attribute values keep only
 * [A-Za-z0-9._:@-].  Malloc'd, NUL-terminated.
 */
char		*text_label(const char *execution, const char *stream,
		    const uint8_t *body, size_t len, size_t *outlen);
/* A name as it may appear in a result, a log or the audit log: control
 * bytes and invalid UTF-8 as '?', at most GATED_NAME_MAX bytes. */
char		*text_name_clean(const char *name);

/* ---- sniff.c ---- */

struct sniff;

struct sniff	*sniff_open(char *err, size_t errlen);
void		 sniff_close(struct sniff *);
/* The MIME type of the bytes, from their content (libmagic);
 * "application/octet-stream" when it cannot tell.  Valid until the next
 * call. */
const char	*sniff_type(struct sniff *, const void *, size_t);
/* The type a file of this name is released as, when content_type agrees
 * with the name's extension (the table in sniff.c); NULL when the
 * extension is unknown or the content disagrees. */
const char	*sniff_agree(const char *name, const char *content_type);
/* 1 if the name has an extension in the table. */
int		 sniff_known_ext(const char *name);
/* 1 for types released as text (truncatable, cleaned for the agent). */
int		 sniff_is_text(const char *type);

/* ---- store.c ---- */

/* Content-addressed blob: STORE/blobs/sha256/HEX, written once, 0444;
 * *where = "sha256:HEX".  0 or -1 with err. */
int		 gstore_blob(const char *store, const uint8_t *, size_t,
		    const char *hex, char **where, char *err, size_t errlen);
/* A file for the user: STORE/tasks/TASK/EXECUTION/NAME ('/' in the name
 * as '_'), never replacing a file; *where = its path. */
int		 gstore_user(const char *store, const char *task,
		    const char *execution, const char *name, const uint8_t *,
		    size_t, char **where, char *err, size_t errlen);

/* ---- release.c ---- */

struct release_ctx {
	const Sbx__V1__Outputs	*outputs;	/* from the verified policy */
	const char		*task_id;
	const char		*execution_id;
	struct sniff		*sniff;
	const char		*store_dir;	/* user, storage-bucket */
};

/*
 * Decide and deliver every declared output beneath dirfd, list every
 * undeclared file, clean and label stdout and stderr.  res is filled with
 * malloc'd memory (free with release_result_clear).  Returns 0, or -1 with
 * err when the directory itself cannot be read (res then empty).
 */
int		 release_run(const struct release_ctx *, int dirfd,
		    const Sbx__V1__ReleaseRequest *, Sbx__V1__ReleaseResult *,
		    char *err, size_t errlen);
void		 release_result_clear(Sbx__V1__ReleaseResult *);
/* 1 if a declared name may be opened at all: relative, no "." or ".."
 * component, no empty component, printable, at most GATED_NAME_MAX. */
int		 release_name_ok(const char *);
/* Open a declared name beneath dirfd the only way gated does.  The fd, or
 * -1 with *reason one of the DROP_ reasons. */
int		 release_open(int dirfd, const char *name, const char **reason);

/* ---- control.c ---- */

struct gated_metrics {
	uint64_t	 requests;
	uint64_t	 refused;
	uint64_t	 released;
	uint64_t	 dropped;
	uint64_t	 peers_refused;
};

struct gated {
	struct gated_conf	*conf;
	unsigned char		 pk[32];	/* policyd's public key */
	struct audit		*audit;
	struct sniff		*sniff;
	struct event_base	*base;
	struct gcontrol		*ctl;
	struct gated_metrics	 metrics;
};

struct gcontrol	*gcontrol_start(struct gated *);
void		 gcontrol_stop(struct gcontrol *);
char		*gcontrol_metrics(const struct gated *);

#endif
