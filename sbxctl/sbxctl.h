/*
 * sbxctl.h: the command-line client's shared declarations.  sbxctl speaks
 * the public protocol (proto/sbx/v1) to the daemons' sockets and never
 * decides anything itself: every refusal it prints came from a daemon, and
 * its exit status says which kind (DESIGN.md: 0 ok, 3 policy refused,
 * 4 launch refused, 5 daemon unreachable, 1 other errors, 2 usage).
 */
#ifndef SBXCTL_H
#define SBXCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sbx/v1/audit.pb-c.h"
#include "sbx/v1/envelope.pb-c.h"

#define SBXCTL_OK		0
#define SBXCTL_ERR		1
#define SBXCTL_USAGE		2
#define SBXCTL_POLICY		3
#define SBXCTL_LAUNCH		4
#define SBXCTL_UNREACHABLE	5

/* Code sent with a task: the server's default frame cap is 4 MiB. */
#define SBXCTL_CODE_MAX		(2 * 1024 * 1024)
/* Entitlement and task files are small; the YAML loader caps at 1 MiB. */
#define SBXCTL_FILE_MAX		(1024 * 1024)

struct yerrs;

/* parse.c */
Sbx__V1__Task	*parse_task_file(const char *path, struct yerrs *);
int		 parse_entitlements_file(const char *path,
		    Sbx__V1__Entitlement ***out, size_t *n, struct yerrs *);
void		 parse_entitlements_free(Sbx__V1__Entitlement **, size_t);
Sbx__V1__Entitlement *parse_entitlement_new(void);
int		 parse_limit(const char *kv, Sbx__V1__Limits *,
		    char *err, size_t errlen);
int		 parse_template_ref(const char *s, char **name,
		    uint32_t *version, char *err, size_t errlen);
int		 parse_is_path(const char *s);
void		 parse_strv_add(char ***v, size_t *n, const char *s);

/* secret.c */
int		 cmd_secret(int argc, char **argv, const char *admin_sock);

/* canary.c */
int		 cmd_canary(int argc, char **argv, const char *state,
		    const char *orch_sock);

/* request.c */
int		 cmd_request(int argc, char **argv, const char *orch_sock);

/* render.c */
int		 cmd_render(int argc, char **argv, const char *state,
		    const char *orch_sock, int json);

/* fleet.c: the audit chains shipped to a fleet's database */
struct fleet_ship;
/* audit ship (fleet.c): open the fleet database for host's chains; NULL
 * with *rc set when it cannot be. */
struct fleet_ship *fleet_ship_open(const char *conninfo, const char *host,
		    int *rc);
/* The seq a daemon's next page starts after (one before the last the
 * fleet holds, which must come back the same); -1 on a database error. */
int		 fleet_ship_resume(struct fleet_ship *, const char *daemon,
		    uint64_t *after);
/* A page must be at most limit records of daemon, numbered after + 1 on
 * without a hole; -1 with err set if not. */
int		 fleet_page_check(const char *daemon, uint64_t after,
		    uint32_t limit, Sbx__V1__AuditEvent *const *ev, size_t n,
		    char *err, size_t errlen);
/* Ship a checked page: 0, 1 when the fleet holds a different record (the
 * daemon's chain stops there), -1 on a database error. */
int		 fleet_ship_page(struct fleet_ship *, const char *daemon,
		    Sbx__V1__AuditEvent *const *ev, size_t n);
void		 fleet_ship_fail(struct fleet_ship *, int rc);
/* Print the totals; the exit code of the whole ship. */
int		 fleet_ship_close(struct fleet_ship *);
int		 fleet_verify(const char *conninfo, int64_t stale);
int		 fleet_task(const char *conninfo, const char *task_id,
		    Sbx__V1__AuditEvent ***, size_t *);
void		 fleet_task_free(Sbx__V1__AuditEvent **, size_t);

/* metrics.c */
void		 metrics_merge(FILE *, char *const *texts, size_t n);

/* print.c */
void		 print_iso_time(char *buf, size_t len, int64_t sec, long nsec);
void		 print_yaml_scalar(FILE *, const char *);
void		 print_json_string(FILE *, const char *);
void		 print_compiled(FILE *, const Sbx__V1__CompileReply *, int json);
void		 print_entitlements(FILE *, const Sbx__V1__Entitlements *,
		    int json);
void		 print_templates(FILE *, const Sbx__V1__Templates *, int json);
void		 print_template(FILE *, const Sbx__V1__TemplateReply *);
void		 print_audit(FILE *, Sbx__V1__AuditEvent *const *, size_t,
		    int json);
void		 print_verify(FILE *, Sbx__V1__AuditVerifyReply *const *,
		    size_t, int json);
void		 print_result(FILE *, const Sbx__V1__ExecutionResult *);
void		 print_rollouts(FILE *, const Sbx__V1__Rollouts *, int json);

#endif
