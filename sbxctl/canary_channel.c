/*
 * canary_channel.c: `sbxctl canary`'s check of invariant 11 against a
 * live deployment: no one but the sandbox itself -- no other host user,
 * no other sandbox -- can reach an execution's egress channel.
 *
 * A task of the canary type holds its channel open (one allowed request
 * of its own, then it sleeps).  While it runs, an unprivileged host user
 * (--intruder-user, default nobody, when the canary runs as root; the
 * canary's own user otherwise) runs the installed _intruder.py: command
 * lines, the cgroup tree, the state directory, ptrace and /proc/PID of
 * every sandbox process, and a request through every socket it can name
 * -- given, as root sees them, every socket under the state directory
 * and the execution's id -- and a second task runs _neighbour.py, which
 * looks for the same from inside its own sandbox.  The check is DENIED
 * only when the intruder found and rode nothing, the neighbour found and
 * rode nothing, and the holding task's usage shows its one request alone.
 * Like every probe, anything the canary cannot tell is a failure.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "sbxctl/sbxctl.h"
#include "sbxctl/canary.h"

#define CHANNEL_PYTHON		"/usr/bin/python3"
#define CHANNEL_OPEN_WAIT_MS	60000	/* the holding task's channel */
#define CHANNEL_SETTLE_MS	2000	/* ... and its sandbox, started */
#define CHANNEL_OUT_MAX		(256 * 1024)

static const char channel_hold[] =
    "import time, urllib.request\n"
    "print('own', urllib.request.urlopen('@TARGET@/ok', timeout=20).status,"
    " flush=True)\n"
    "time.sleep(@HOLD@)\n"
    "print('HOLD-DONE', flush=True)\n";

static FILE	*channel_socks;		/* nftw has no argument */

static int
channel_walk(const char *path, const struct stat *st, int type,
    struct FTW *ftw)
{
	(void)type;
	(void)ftw;
	if (S_ISSOCK(st->st_mode))
		fprintf(channel_socks, "%s\n", path);
	return 0;
}

static void
channel_sleep_ms(long ms)
{
	struct timespec	ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* The execution id of the task's open channel, from egressd's audit. */
static int
channel_opened(const struct canary_opts *o, const char *task, char *xid,
    size_t len, char *why, size_t whylen)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__AuditQuery	 q = SBX__V1__AUDIT_QUERY__INIT;
	char			*path;
	int			 found = 0;

	xasprintf(&path, "%s/sockets/egressd-admin.sock", o->state);
	q.task_id = (char *)task;
	req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
	req.audit_query = &q;
	rep = canary_call(path, &req, SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS,
	    why, whylen);
	free(path);
	if (rep == NULL)
		return -1;
	for (size_t i = 0; i < rep->audit_records->n_events && !found; i++) {
		const Sbx__V1__AuditEvent *e = rep->audit_records->events[i];

		if (strcmp(e->action, "open") == 0) {
			snprintf(xid, len, "%s", e->execution_id);
			found = 1;
		}
	}
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return found;
}

/* Start the intruder as the other host user; its stdout on *outfd. */
static pid_t
channel_intruder(const struct canary_opts *o, const char *dir,
    const char *xid, const char *cands, int *outfd, char *why,
    size_t whylen)
{
	struct passwd	*pw = NULL;
	char		*script;
	int		 p[2];
	pid_t		 pid;

	if (geteuid() == 0 && (pw = getpwnam(o->intruder)) == NULL) {
		snprintf(why, whylen, "no user %s (--intruder-user)",
		    o->intruder);
		return -1;
	}
	if (pw != NULL && pw->pw_uid == 0) {
		snprintf(why, whylen, "--intruder-user %s is root",
		    o->intruder);
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) == -1) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		return -1;
	}
	xasprintf(&script, "%s/_intruder.py", dir);
	if ((pid = fork()) == -1) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		free(script);
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		if (dup2(p[1], STDOUT_FILENO) == -1 ||
		    dup2(p[1], STDERR_FILENO) == -1)
			_exit(127);
		if (pw != NULL && (setgroups(0, NULL) == -1 ||
		    setgid(pw->pw_gid) == -1 || setuid(pw->pw_uid) == -1 ||
		    getuid() == 0)) {
			printf("cannot become %s\n", o->intruder);
			_exit(127);
		}
		(void)setenv("SBX_VICTIM", xid, 1);
		execl(CHANNEL_PYTHON, "python3", script, "--target", o->target,
		    "--state", o->state, "--candidates", cands, (char *)NULL);
		printf("cannot run %s: %s\n", CHANNEL_PYTHON, strerror(errno));
		_exit(127);
	}
	free(script);
	close(p[1]);
	*outfd = p[0];
	return pid;
}

static char *
channel_read_all(int fd)
{
	char	*buf = xmalloc(CHANNEL_OUT_MAX + 1), junk[4096];
	size_t	 len = 0;
	ssize_t	 n;

	for (;;) {
		if (len < CHANNEL_OUT_MAX)
			n = read(fd, buf + len, CHANNEL_OUT_MAX - len);
		else
			n = read(fd, junk, sizeof(junk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (len < CHANNEL_OUT_MAX)
			len += (size_t)n;
	}
	buf[len] = '\0';
	return buf;
}

/* The first line of the intruder's output that is a finding, or NULL. */
static const char *
channel_finding(const char *out, char *line, size_t len)
{
	static const char *const bad[] = { "LEAK ", "RODE ", "PTRACE ",
	    "ENVIRON ", "ROOT ", NULL };

	for (const char *l = out; *l != '\0'; ) {
		size_t	 n = strcspn(l, "\n");

		for (size_t i = 0; bad[i] != NULL; i++)
			if (strncmp(l, bad[i], strlen(bad[i])) == 0) {
				snprintf(line, len, "%.*s", (int)n, l);
				return line;
			}
		l += n;
		if (*l == '\n')
			l++;
	}
	return NULL;
}

/* The neighbour: a second task, run to its end now.  0/1/2. */
static int
channel_neighbour(const struct canary_opts *o, const char *dir,
    const char *xid, char *msg, size_t msglen)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__RunRequest	 rr = SBX__V1__RUN_REQUEST__INIT;
	Sbx__V1__Task		 t = SBX__V1__TASK__INIT;
	struct canary_probe	 p;
	char			*path, id[160], why[512], allowed[512];
	size_t			 denied;
	int			 done, rc;

	xasprintf(&path, "%s/_neighbour.py", dir);
	rc = canary_load(o, path, "_neighbour", &p);
	free(path);
	if (rc == -1) {
		snprintf(msg, msglen, "cannot read %s/_neighbour.py", dir);
		return 2;
	}
	canary_subst(&p.code, &p.len, "@VICTIM@", xid);
	snprintf(id, sizeof(id), "canary-channel-neighbour-%lld-%d",
	    (long long)time(NULL), (int)getpid());
	t.id = id;
	t.type = (char *)o->type;
	t.tenant = (char *)o->tenant;
	t.user = (char *)o->user;
	t.code_name = (char *)"neighbour.py";
	t.code.data = (uint8_t *)p.code;
	t.code.len = p.len;
	rr.task = &t;
	req.body_case = SBX__V1__ENVELOPE__BODY_RUN;
	req.run = &rr;
	rep = canary_call(o->orch_sock, &req, SBX__V1__ENVELOPE__BODY_RESULT,
	    why, sizeof(why));
	canary_probe_free(&p);
	if (rep == NULL) {
		snprintf(msg, msglen, "the neighbour could not run: %.300s", why);
		return 2;
	}
	canary_scan(&rep->result->stdout, &denied, allowed, sizeof(allowed),
	    &done);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	if (allowed[0] != '\0') {
		snprintf(msg, msglen, "the neighbour sandbox: %.300s", allowed);
		return 1;
	}
	if (!done || denied == 0) {
		snprintf(msg, msglen, "the neighbour did not finish (task %s)",
		    id);
		return 2;
	}
	return 0;
}

int
canary_channel(const struct canary_opts *o, const char *dir)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep = NULL;
	Sbx__V1__RunRequest	 rr = SBX__V1__RUN_REQUEST__INIT;
	Sbx__V1__Task		 t = SBX__V1__TASK__INIT;
	char			 id[160], xid[160] = "", why[512], msg[2048];
	char			 hold[16];
	char			 cands[] = "/tmp/sbx-canary-socks.XXXXXX";
	char			 line[512], *code, *out = NULL;
	size_t			 len = sizeof(channel_hold) - 1;
	const char		*f, *tried;
	pid_t			 pid = -1;
	int			 fd = -1, ofd = -1, cfd = -1, st, rc = 2, nb;

	if (access(CHANNEL_PYTHON, X_OK) == -1) {
		printf("%-10s FAILED   could not run: no %s on this host\n",
		    CANARY_CHANNEL, CHANNEL_PYTHON);
		return 2;
	}
	for (int i = 0; i < 2; i++) {
		char	*h;
		int	 ok;

		xasprintf(&h, "%s/%s", dir, i ? "_neighbour.py" :
		    "_intruder.py");
		ok = access(h, R_OK) == 0;
		if (!ok)
			printf("%-10s FAILED   could not run: %s is missing\n",
			    CANARY_CHANNEL, h);
		free(h);
		if (!ok)
			return 2;
	}
	code = canary_strndup(channel_hold, len);
	canary_subst(&code, &len, "@TARGET@", o->target);
	snprintf(hold, sizeof(hold), "%d", o->hold);
	canary_subst(&code, &len, "@HOLD@", hold);
	snprintf(id, sizeof(id), "canary-channel-hold-%lld-%d",
	    (long long)time(NULL), (int)getpid());
	t.id = id;
	t.type = (char *)o->type;
	t.tenant = (char *)o->tenant;
	t.user = (char *)o->user;
	t.code_name = (char *)"hold.py";
	t.code.data = (uint8_t *)code;
	t.code.len = len;
	rr.task = &t;
	req.version = SBX_PROTO_VERSION;
	req.request_id = canary_next_id();
	req.body_case = SBX__V1__ENVELOPE__BODY_RUN;
	req.run = &rr;
	/* The holding task: asked now, its result read at the end. */
	if ((fd = frame_client_connect(o->orch_sock)) == -1 ||
	    frame_write(fd, &req) == -1) {
		snprintf(msg, sizeof(msg), "could not run: %s: %s",
		    o->orch_sock, strerror(errno));
		goto out;
	}
	for (int waited = 0; waited < CHANNEL_OPEN_WAIT_MS; waited += 200) {
		if (channel_opened(o, id, xid, sizeof(xid), why,
		    sizeof(why)) != 0)
			break;
		channel_sleep_ms(200);
	}
	if (xid[0] == '\0') {
		snprintf(msg, sizeof(msg), "could not run: the holding task "
		    "%s opened no channel (%.300s)", id, why[0] ? why : "none");
		goto out;
	}
	channel_sleep_ms(CHANNEL_SETTLE_MS);
	/* Every socket root can name under the state directory: the
	 * intruder tries them all, as if it had guessed every name. */
	if ((cfd = mkstemp(cands)) == -1 || fchmod(cfd, 0644) == -1 ||
	    (channel_socks = fdopen(cfd, "w")) == NULL) {
		snprintf(msg, sizeof(msg), "could not run: %s: %s", cands,
		    strerror(errno));
		goto out;
	}
	cfd = -1;
	(void)nftw(o->state, channel_walk, 16, FTW_PHYS);
	fclose(channel_socks);
	channel_socks = NULL;
	if ((pid = channel_intruder(o, dir, xid, cands, &ofd, why,
	    sizeof(why))) == -1) {
		snprintf(msg, sizeof(msg), "could not run: %.400s", why);
		goto out;
	}
	nb = channel_neighbour(o, dir, xid, why, sizeof(why));
	out = channel_read_all(ofd);
	(void)waitpid(pid, &st, 0);
	pid = -1;
	if (o->verbose)
		fputs(out, stdout);
	if (frame_read(fd, CANARY_REPLY_MAX, &rep) != 0 ||
	    rep->body_case != SBX__V1__ENVELOPE__BODY_RESULT) {
		snprintf(msg, sizeof(msg), "could not tell: the holding task "
		    "%s did not finish", id);
		goto out;
	}
	tried = strstr(out, "TRIED ");
	if ((f = channel_finding(out, line, sizeof(line))) != NULL) {
		snprintf(msg, sizeof(msg), "a host user (%.64s): %.400s (task %s)",
		    geteuid() == 0 ? o->intruder : "this user", f, id);
		rc = 1;
	} else if (nb == 1) {
		snprintf(msg, sizeof(msg), "%.400s (task %s)", why, id);
		rc = 1;
	} else if (rep->result->usage != NULL &&
	    rep->result->usage->egress_requests > 1) {
		snprintf(msg, sizeof(msg), "the holding task's channel carried "
		    "%u requests, it made one (task %s)",
		    rep->result->usage->egress_requests, id);
		rc = 1;
	} else if (tried == NULL || strstr(out, "INTRUDER-DONE") == NULL) {
		snprintf(msg, sizeof(msg), "could not tell: the intruder did "
		    "not finish: %.200s", out);
	} else if (nb == 2) {
		snprintf(msg, sizeof(msg), "could not tell: %.400s", why);
	} else if (rep->result->usage == NULL ||
	    rep->result->usage->egress_requests != 1) {
		snprintf(msg, sizeof(msg), "could not tell: the holding task "
		    "made no request of its own (task %s)", id);
	} else {
		snprintf(msg, sizeof(msg), "a host user (%.64s) and a second "
		    "sandbox: %.*s (task %s)", geteuid() == 0 ? o->intruder :
		    "this user", (int)strcspn(tried + 6, "\n"), tried + 6, id);
		rc = 0;
	}
 out:
	printf("%-10s %-8s %s\n", CANARY_CHANNEL, rc == 0 ? "DENIED" :
	    rc == 1 ? "ALLOWED" : "FAILED", msg);
	if (pid > 0) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
	}
	if (ofd != -1)
		close(ofd);
	if (fd != -1)
		close(fd);
	if (cfd != -1)
		close(cfd);
	if (channel_socks != NULL)
		fclose(channel_socks);
	channel_socks = NULL;
	(void)unlink(cands);
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	free(out);
	free(code);
	return rc;
}
