/*
 * approvalctl.c: the approvers' console.  It talks to approvald's console
 * socket, which admits root and the group sbx-approvers only; approvald
 * takes the approver's name from the kernel, so nothing here claims an
 * identity.  Interactive (a prompt: list, show, approve, deny, history,
 * help, quit) when run without a command, one command and exit otherwise.
 *
 * Invariant: nothing a request carries reaches the terminal unquoted.
 * Every string that came from a request or a daemon goes through aquote(),
 * so an escape sequence in an agent's justification or source is shown
 * (^[[2J) and never obeyed.
 */
#include <sys/types.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "policy.h"
#include "util.h"
#include "version.h"
#include "approvald/approvald.h"

#define APPROVALCTL_GROUP	"sbx-approvers"
#define APPROVALCTL_SOCK	"/run/sbx/approvald-console.sock"
#define APPROVALCTL_MAX		(16 * 1024 * 1024)

/* Exit codes. */
#define EX_FAIL			1
#define EX_USAGE		2
#define EX_REFUSED		3

static const char	*sock_path;
static uint64_t		 next_rid = 1;

/* --help: on stdout, exit 0; a bad option or command: stderr, EX_USAGE. */
static void __attribute__((noreturn))
usage_to(FILE *f, int status)
{
	fprintf(f,
	    "usage: approvalctl [-s socket] [command]\n"
	    "       approvalctl --help | --version\n"
	    "commands: list | show ID | approve ID [REASON...] |\n"
	    "          deny ID REASON... | history | audit [TASK] | help\n"
	    "without a command: an interactive console\n");
	exit(status);
}

static void __attribute__((noreturn))
usage(void)
{
	usage_to(stderr, EX_USAGE);
}

/* A string from the wire, shown safely (malloc'd). */
static char *
q(const char *s)
{
	return aquote(s != NULL ? s : "", s != NULL ? strlen(s) : 0, NULL);
}

static void
put_q(FILE *f, const char *label, const char *s)
{
	char	*t = q(s);

	fprintf(f, "%s%s\n", label, t);
	free(t);
}

static void
fmt_time(int64_t t, char *buf, size_t len)
{
	struct tm	 tm;
	time_t		 tt = (time_t)t;

	if (t <= 0 || gmtime_r(&tt, &tm) == NULL)
		snprintf(buf, len, "-");
	else
		strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/*
 * One exchange with approvald.  0 with *rep set (an error reply included),
 * or -1 after saying why; *refused set when the console refused us.
 */
static int
call(Sbx__V1__Envelope *req, Sbx__V1__Envelope **rep, int *refused)
{
	int	 fd, rc, e;

	*refused = 0;
	*rep = NULL;
	if ((fd = frame_client_connect(sock_path)) == -1) {
		e = errno;
		if (e == EACCES || e == EPERM) {
			*refused = 1;
			fprintf(stderr, "approvalctl: not allowed: you must be "
			    "in group %s (%s: %s)\n", APPROVALCTL_GROUP,
			    sock_path, strerror(e));
		} else
			fprintf(stderr, "approvalctl: cannot connect to "
			    "approvald at %s: %s\n", sock_path, strerror(e));
		return -1;
	}
	rc = frame_client_call(fd, req, rep, APPROVALCTL_MAX);
	e = errno;
	close(fd);
	if (rc == -1 && (e == EPIPE || e == ECONNRESET)) {
		/* The peer check closes the socket before reading a byte. */
		*refused = 1;
		fprintf(stderr, "approvalctl: not allowed: you must be in "
		    "group %s (approvald closed the connection without a "
		    "reply)\n", APPROVALCTL_GROUP);
		return -1;
	}
	if (rc != 0) {
		fprintf(stderr, "approvalctl: no usable reply from approvald "
		    "at %s: %s\n", sock_path, rc == -2 ? "a bad frame" :
		    strerror(e));
		return -1;
	}
	return 0;
}

/* An error reply: say it and return 1; 0 when rep is not an error. */
static int
reply_error(const Sbx__V1__Envelope *rep)
{
	char	*m, *r;

	if (rep->body_case != SBX__V1__ENVELOPE__BODY_ERROR)
		return 0;
	m = q(rep->error->message);
	r = q(rep->error->rule);
	fprintf(stderr, "approvalctl: %s%s%s%s\n", m, r[0] != '\0' ?
	    " (" : "", r, r[0] != '\0' ? ")" : "");
	free(m);
	free(r);
	return 1;
}

/* The queue; pending_only or all.  0, or an exit code. */
static int
fetch(int pending_only, Sbx__V1__Envelope **rep)
{
	Sbx__V1__Envelope	 req;
	Sbx__V1__ApprovalList	 al;
	int			 refused;

	sbx__v1__approval_list__init(&al);
	al.pending_only = pending_only;
	frame_env_init(&req, next_rid++);
	req.body_case = SBX__V1__ENVELOPE__BODY_APPROVAL_LIST;
	req.approval_list = &al;
	if (call(&req, rep, &refused) == -1)
		return refused ? EX_REFUSED : EX_FAIL;
	if (reply_error(*rep)) {
		sbx__v1__envelope__free_unpacked(*rep, NULL);
		return EX_FAIL;
	}
	if ((*rep)->body_case != SBX__V1__ENVELOPE__BODY_APPROVAL_ITEMS ||
	    (*rep)->approval_items->n_requests !=
	    (*rep)->approval_items->n_decisions) {
		fprintf(stderr, "approvalctl: approvald answered with "
		    "something other than the queue\n");
		sbx__v1__envelope__free_unpacked(*rep, NULL);
		return EX_FAIL;
	}
	return 0;
}

static int
cmd_list(void)
{
	Sbx__V1__Envelope	*rep;
	Sbx__V1__ApprovalItems	*it;
	Sbx__V1__CapabilityRequest *r;
	char			*id, *task, *user, *tmpl, *what, when[32];
	int			 rc;

	if ((rc = fetch(1, &rep)) != 0)
		return rc;
	it = rep->approval_items;
	if (it->n_requests == 0)
		printf("no pending requests\n");
	else
		printf("%-30s %-20s %-12s %-20s %-24s %s\n", "REQUEST",
		    "TASK", "USER", "TEMPLATE", "CREATED", "ASKS FOR");
	for (size_t i = 0; i < it->n_requests; i++) {
		r = it->requests[i];
		id = q(r->request_id);
		task = q(r->task_id);
		user = q(r->user);
		tmpl = q(r->template_);
		what = aquote_what(r);
		fmt_time(r->created_at, when, sizeof(when));
		printf("%-30s %-20s %-12s %-20s %-24s %s\n", id, task, user,
		    tmpl, when, what);
		free(id);
		free(task);
		free(user);
		free(tmpl);
		free(what);
	}
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

static void
show_decision(const Sbx__V1__CapabilityDecision *d)
{
	char	 when[32];

	printf("status:    %s\n", capability_status_name(d->status));
	if (d->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING)
		return;
	fmt_time(d->decided_at, when, sizeof(when));
	put_q(stdout, "decided by: ", d->approver);
	printf("decided at: %s\n", when);
	put_q(stdout, "reason:    ", d->reason);
	put_q(stdout, "policy hash: ", d->policy_hash[0] != '\0' ?
	    d->policy_hash : "(unchanged)");
}

/*
 * What sbx itself recorded of the task (policyd attached it; the
 * orchestrator cannot): its latest policy and its recent denials, each
 * with its time, how long before the request, and the hash it was
 * refused under.  A denial that names the host the request asks for is
 * marked: the request may be the task asking for what it was just
 * refused.
 */
static void
show_task_record(const Sbx__V1__CapabilityRequest *r)
{
	const Sbx__V1__TaskDenial	*d;
	const char			*host = NULL;
	char				*rule, *bnd, *hash, *xid, *det, when[32];
	int64_t				 t, ago;

	put_q(stdout, "policy:    ", r->policy_hash != NULL &&
	    r->policy_hash[0] != '\0' ? r->policy_hash : "(no compile yet)");
	if (r->what_case == SBX__V1__CAPABILITY_REQUEST__WHAT_HOST &&
	    r->host != NULL && r->host->host != NULL && r->host->host[0] != '\0')
		host = r->host->host;
	if (r->n_denials == 0) {
		printf("denials:   none recorded for the task\n");
		return;
	}
	printf("denials (%zu, newest first, as sbx recorded them for the "
	    "task; quoted):\n", r->n_denials);
	for (size_t i = 0; i < r->n_denials; i++) {
		d = r->denials[i];
		t = d->time_ns / 1000000000LL;
		fmt_time(t, when, sizeof(when));
		rule = q(d->rule);
		bnd = q(d->boundary);
		hash = q(d->policy_hash[0] != '\0' ? d->policy_hash : "-");
		xid = q(d->execution_id[0] != '\0' ? d->execution_id : "-");
		det = q(d->detail);
		ago = r->created_at - t;
		if (ago >= 0)
			printf("  %s, %llds before the request: %s (%s)%s\n",
			    when, (long long)ago, rule, bnd, host != NULL &&
			    strstr(d->detail, host) != NULL ?
			    "  <- the host this request asks for" : "");
		else
			printf("  %s: %s (%s)\n", when, rule, bnd);
		printf("    policy %s, execution %s\n", hash, xid);
		printf("    | %s\n", det);
		free(rule);
		free(bnd);
		free(hash);
		free(xid);
		free(det);
	}
}

static int
cmd_show(const char *id)
{
	Sbx__V1__Envelope		*rep;
	Sbx__V1__ApprovalItems		*it;
	Sbx__V1__CapabilityRequest	*r = NULL;
	char				*s, when[32];
	size_t				 i;
	int				 rc;

	if ((rc = fetch(0, &rep)) != 0)
		return rc;
	it = rep->approval_items;
	for (i = 0; i < it->n_requests; i++)
		if (strcmp(it->requests[i]->request_id, id) == 0) {
			r = it->requests[i];
			break;
		}
	if (r == NULL) {
		s = q(id);
		fprintf(stderr, "approvalctl: no request %s in the queue\n", s);
		free(s);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return EX_FAIL;
	}
	put_q(stdout, "request:   ", r->request_id);
	show_decision(it->decisions[i]);
	put_q(stdout, "task:      ", r->task_id);
	put_q(stdout, "tenant:    ", r->tenant);
	put_q(stdout, "user:      ", r->user);
	put_q(stdout, "template:  ", r->template_);
	fmt_time(r->created_at, when, sizeof(when));
	printf("created:   %s\n", when);
	s = aquote_what(r);
	printf("asks for:  %s\n", s);
	free(s);
	show_task_record(r);
	printf("why (quoted; control characters shown as ^X, \\xNN, "
	    "\\u{NNNN}):\n");
	s = aquote(r->why != NULL ? r->why : "", r->why != NULL ?
	    strlen(r->why) : 0, "  | ");
	printf("%s\n", s);
	free(s);
	printf("source (%zu bytes, quoted the same way):\n", r->source.len);
	if (r->source.len == 0)
		printf("  (none)\n");
	else {
		s = aquote(r->source.data, r->source.len, "  | ");
		printf("%s%s", s, s[strlen(s) - 1] == '\n' ? "" : "\n");
		free(s);
	}
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

static int
cmd_history(void)
{
	Sbx__V1__Envelope		*rep;
	Sbx__V1__ApprovalItems		*it;
	Sbx__V1__CapabilityDecision	*d;
	char				*id, *task, *by, *reason, *what;
	char				 when[32];
	size_t				 n = 0;
	int				 rc;

	if ((rc = fetch(0, &rep)) != 0)
		return rc;
	it = rep->approval_items;
	for (size_t i = 0; i < it->n_requests; i++) {
		d = it->decisions[i];
		if (d->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING)
			continue;
		if (n++ == 0)
			printf("%-24s %-30s %-9s %-12s %-20s %-16s %s\n",
			    "DECIDED", "REQUEST", "STATUS", "BY", "TASK",
			    "POLICY HASH", "ASKED FOR / REASON");
		id = q(d->request_id);
		task = q(it->requests[i]->task_id);
		by = q(d->approver);
		reason = q(d->reason);
		what = aquote_what(it->requests[i]);
		fmt_time(d->decided_at, when, sizeof(when));
		printf("%-24s %-30s %-9s %-12s %-20s %-16.16s %s: %s\n", when,
		    id, capability_status_name(d->status), by, task,
		    d->policy_hash[0] != '\0' ? d->policy_hash : "-", what,
		    reason);
		free(id);
		free(task);
		free(by);
		free(reason);
		free(what);
	}
	if (n == 0)
		printf("no decisions yet\n");
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

static int
cmd_decide(const char *id, int approve, const char *reason)
{
	Sbx__V1__Envelope		 req, *rep;
	Sbx__V1__CapabilityDecision	 d, *r;
	char				*s, *by, *why;
	int				 refused;

	if (!approve && (reason == NULL || reason[0] == '\0')) {
		fprintf(stderr, "approvalctl: deny needs a reason: deny ID "
		    "REASON\n");
		return EX_USAGE;
	}
	sbx__v1__capability_decision__init(&d);
	d.request_id = (char *)id;
	d.status = approve ? SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED :
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED;
	d.reason = (char *)(reason != NULL ? reason : "");
	frame_env_init(&req, next_rid++);
	req.body_case = SBX__V1__ENVELOPE__BODY_DECISION;
	req.decision = &d;
	if (call(&req, &rep, &refused) == -1)
		return refused ? EX_REFUSED : EX_FAIL;
	if (reply_error(rep)) {
		/* Not this approver's to decide (separation of duties). */
		refused = rep->error->code == SBX__V1__ERROR_CODE__ERROR_DENIED;
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return refused ? EX_REFUSED : EX_FAIL;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_DECISION) {
		fprintf(stderr, "approvalctl: approvald answered with "
		    "something other than a decision\n");
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return EX_FAIL;
	}
	r = rep->decision;
	s = q(r->request_id);
	by = q(r->approver);
	why = q(r->reason);
	if (r->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED)
		printf("request %s approved by %s; policyd recorded the grant: "
		    "new policy hash %s\n", s, by, r->policy_hash);
	else
		printf("request %s denied by %s: %s%s%s\n", s, by, why,
		    r->policy_hash[0] != '\0' ? "; policy hash " : "",
		    r->policy_hash);
	free(s);
	free(by);
	free(why);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

static int
cmd_audit(const char *task)
{
	Sbx__V1__Envelope	 req, *rep;
	Sbx__V1__AuditQuery	 aq;
	Sbx__V1__AuditEvent	*e;
	char			*act, *det, *rule;
	int			 refused;

	sbx__v1__audit_query__init(&aq);
	aq.task_id = (char *)(task != NULL ? task : "");
	frame_env_init(&req, next_rid++);
	req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
	req.audit_query = &aq;
	if (call(&req, &rep, &refused) == -1)
		return refused ? EX_REFUSED : EX_FAIL;
	if (reply_error(rep)) {
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return EX_FAIL;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS) {
		fprintf(stderr, "approvalctl: approvald answered with "
		    "something other than audit records\n");
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return EX_FAIL;
	}
	for (size_t i = 0; i < rep->audit_records->n_events; i++) {
		e = rep->audit_records->events[i];
		act = q(e->actor);
		det = q(e->detail);
		rule = q(e->rule);
		printf("seq=%llu action=%s actor=%s rule=%s task=%s detail=%s"
		    "\n", (unsigned long long)e->seq, e->action, act,
		    rule[0] != '\0' ? rule : "-",
		    e->task_id[0] != '\0' ? e->task_id : "-", det);
		free(act);
		free(det);
		free(rule);
	}
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

static void
help(void)
{
	printf("commands:\n"
	    "  list                 pending requests\n"
	    "  show ID              one request: task, user, template, what "
	    "it asks for,\n"
	    "                       the justification and the source, quoted\n"
	    "  approve ID [REASON]  grant it (policyd recompiles the task's "
	    "policy)\n"
	    "  deny ID REASON       refuse it; the reason is recorded\n"
	    "  history              decisions so far\n"
	    "  audit [TASK]         approvald's audit log\n"
	    "  help, quit\n");
}

/* Run one command of argv form; an exit code. */
static int
run(int argc, char *argv[], const char *rest)
{
	const char	*cmd = argv[0];

	if (strcmp(cmd, "list") == 0 && argc == 1)
		return cmd_list();
	if (strcmp(cmd, "history") == 0 && argc == 1)
		return cmd_history();
	if (strcmp(cmd, "show") == 0 && argc == 2)
		return cmd_show(argv[1]);
	if (strcmp(cmd, "approve") == 0 && argc >= 2)
		return cmd_decide(argv[1], 1, rest);
	if (strcmp(cmd, "deny") == 0 && argc >= 2)
		return cmd_decide(argv[1], 0, rest);
	if (strcmp(cmd, "audit") == 0 && argc <= 2)
		return cmd_audit(argc == 2 ? argv[1] : NULL);
	if (strcmp(cmd, "help") == 0) {
		help();
		return 0;
	}
	return -1;
}

/* Words of a console line; the reason is the rest of the line after the
 * second word, as typed. */
static int
split(char *line, char *words[], int max, const char **rest)
{
	char	*p = line;
	int	 n = 0;

	*rest = NULL;
	while (n < max) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		if (n == 2) {
			*rest = p;
			break;
		}
		words[n++] = p;
		while (*p != '\0' && *p != ' ' && *p != '\t')
			p++;
		if (*p != '\0')
			*p++ = '\0';
	}
	return n;
}

static int
interactive(void)
{
	Sbx__V1__Envelope	*rep;
	char			 line[4096], *words[3];
	const char		*rest;
	size_t			 len;
	int			 n, rc, tty = isatty(STDIN_FILENO);

	/* Refused or unreachable: say so now, not at the first command. */
	if ((rc = fetch(1, &rep)) != 0)
		return rc;
	printf("approvald console on %s: %zu pending request%s; type help\n",
	    sock_path, rep->approval_items->n_requests,
	    rep->approval_items->n_requests == 1 ? "" : "s");
	sbx__v1__envelope__free_unpacked(rep, NULL);
	for (;;) {
		printf("approvalctl> ");
		fflush(stdout);
		if (fgets(line, sizeof(line), stdin) == NULL) {
			if (tty)
				printf("\n");
			return 0;
		}
		len = strlen(line);
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		else if (!feof(stdin)) {
			printf("line too long\n");
			while ((n = getchar()) != EOF && n != '\n')
				;
			continue;
		}
		n = split(line, words, 3, &rest);
		if (n == 0)
			continue;
		if (strcmp(words[0], "quit") == 0 ||
		    strcmp(words[0], "exit") == 0)
			return 0;
		if (rest != NULL && strcmp(words[0], "approve") != 0 &&
		    strcmp(words[0], "deny") != 0) {
			printf("too many words; type help\n");
			continue;
		}
		if (run(n, words, rest) == -1)
			printf("unknown command or wrong arguments; type "
			    "help\n");
		fflush(stderr);
	}
}

int
main(int argc, char *argv[])
{
	const char	*state;
	char		*def = NULL, *rest = NULL;
	size_t		 len = 0;
	int		 ch, rc;
	static const struct option longopts[] = {
		{ "help",	no_argument,	NULL,	'h' },
		{ "version",	no_argument,	NULL,	'V' },
		{ NULL,		0,		NULL,	0 }
	};

	while ((ch = getopt_long(argc, argv, "+hs:", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			sock_path = optarg;
			break;
		case 'h':
			usage_to(stdout, 0);
		case 'V':
			printf("approvalctl %s\n", SBX_VERSION);
			return 0;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (sock_path == NULL) {
		if ((state = getenv("SBX_STATE")) != NULL && *state != '\0') {
			xasprintf(&def, "%s/sockets/approvald-console.sock",
			    state);
			sock_path = def;
		} else
			sock_path = APPROVALCTL_SOCK;
	}
	if (argc == 0) {
		rc = interactive();
		free(def);
		return rc;
	}
	/* approve ID REASON... and deny ID REASON...: the words after the
	 * id are the reason. */
	for (int i = 2; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (len > 0) {
		rest = xcalloc(1, len);
		for (int i = 2; i < argc; i++) {
			if (i > 2)
				strcat(rest, " ");
			strcat(rest, argv[i]);
		}
	}
	if ((strcmp(argv[0], "approve") == 0 || strcmp(argv[0], "deny") == 0)
	    && argc >= 2)
		rc = run(2, argv, rest);
	else
		rc = run(argc, argv, NULL);
	free(rest);
	free(def);
	if (rc == -1)
		usage();
	return rc;
}
