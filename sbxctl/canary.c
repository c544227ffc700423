/*
 * canary.c: `sbxctl canary`, the denial suite against a live deployment.
 * Each probe program (tests/denial/probes/NAME.py, installed in
 * $(PREFIX)/share/sbx/canary) attempts one forbidden action from inside a
 * sandbox; canary submits each as a task of the canary task type through
 * policyd's orchestrator socket, exactly as an orchestrator would, and
 * reads what came back.  A probe counts as denied only when it ran to the
 * end (PROBE-DONE), reported at least one attempt, reported none of them
 * ALLOWED, and, for a probe whose header says "# sbx-expect: egress RULE",
 * the result lists RULE at the egress boundary and egressd's audit holds
 * a deny record with that rule for the execution.  Anything else, a probe
 * that could not run included, is a failure: a canary that cannot tell is
 * as bad as one that was allowed, so the exit status is non-zero for both.
 * After the probes comes the channel check (canary_channel.c): no other
 * host user and no other sandbox can reach a live task's egress channel.
 * canary decides nothing about the deployment; it only reports what the
 * daemons did.
 */
#include <errno.h>
#include <dirent.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
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

#ifndef SBX_CANARY_DIR
#define SBX_CANARY_DIR		"/usr/local/share/sbx/canary"
#endif
#define CANARY_MAX_PROBES	64

static int
canary_usage(const char *why)
{
	if (why != NULL)
		fprintf(stderr, "sbxctl: %s\n", why);
	fprintf(stderr, "usage: sbxctl canary [--state S] [--probes DIR] "
	    "[--type T] [--tenant T] [--user U]\n"
	    "              [--target URL] [--host-port N] "
	    "[--intruder-user U] [--hold S] [--verbose]\n"
	    "              [probe ... | channel]\n");
	return SBXCTL_USAGE;
}

/* The host's first nameserver, for the DNS probe to try and fail. */
static void
canary_host_dns(char *buf, size_t len)
{
	FILE	*f;
	char	 line[256], addr[64];

	snprintf(buf, len, "127.0.0.53");
	if ((f = fopen("/etc/resolv.conf", "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, " nameserver %63s", addr) == 1) {
			snprintf(buf, len, "%s", addr);
			break;
		}
	}
	fclose(f);
}

/*
 * Where the probes are: --probes, else $SBX_CANARY_DIR, else the installed
 * copy, else tests/denial/probes of the source tree this sbxctl was built
 * in (build/bin/sbxctl or build/san/bin/sbxctl).
 */
static char *
canary_find_dir(const char *opt)
{
	static const char *const up[] = { "/../..", "/../../.." };
	const char	*env = getenv("SBX_CANARY_DIR");
	char		 exe[PATH_MAX], *d, *p;
	ssize_t		 n;

	if (opt != NULL)
		return xstrdup(opt);
	if (env != NULL && *env != '\0')
		return xstrdup(env);
	if (access(SBX_CANARY_DIR "/tcp.py", R_OK) == 0)
		return xstrdup(SBX_CANARY_DIR);
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0) {
		exe[n] = '\0';
		d = dirname(exe);
		for (size_t i = 0; i < 2; i++) {
			char	 real[PATH_MAX];

			xasprintf(&p, "%s%s/tests/denial/probes", d, up[i]);
			if (realpath(p, real) != NULL &&
			    access(real, R_OK) == 0) {
				free(p);
				return xstrdup(real);
			}
			free(p);
		}
	}
	return xstrdup(SBX_CANARY_DIR);
}

static int
canary_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every NAME.py in dir (files starting with _ or . are helpers). */
static size_t
canary_list(const char *dir, char **names, size_t max)
{
	DIR		*d;
	struct dirent	*de;
	size_t		 n = 0, l;

	if ((d = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < max) {
		l = strlen(de->d_name);
		if (l < 4 || strcmp(de->d_name + l - 3, ".py") != 0 ||
		    de->d_name[0] == '_' || de->d_name[0] == '.')
			continue;
		names[n++] = canary_strndup(de->d_name, l - 3);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), canary_name_cmp);
	return n;
}

/* Does egressd's audit hold "deny RULE" for this execution? */
static int
canary_audited(const struct canary_opts *o, const char *task,
    const char *xid, const char *rule, char *why, size_t whylen)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__AuditQuery	 q = SBX__V1__AUDIT_QUERY__INIT;
	Sbx__V1__AuditRecords	*r;
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
	r = rep->audit_records;
	for (size_t i = 0; i < r->n_events && !found; i++)
		if (strcmp(r->events[i]->action, "deny") == 0 &&
		    strcmp(r->events[i]->rule, rule) == 0 &&
		    strcmp(r->events[i]->execution_id, xid) == 0)
			found = 1;
	sbx__v1__envelope__free_unpacked(rep, NULL);
	if (!found)
		snprintf(why, whylen, "no egressd deny %s record for %s",
		    rule, xid);
	return found;
}

/* 0 denied, 1 allowed, 2 could not run or could not tell. */
static int
canary_run(const struct canary_opts *o, struct canary_probe *p)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__RunRequest	 rr = SBX__V1__RUN_REQUEST__INIT;
	Sbx__V1__Task		 t = SBX__V1__TASK__INIT;
	const Sbx__V1__ExecutionResult *res;
	char			 id[160], code[160], why[512], allowed[512];
	char			 rules[512] = "";
	size_t			 denied;
	int			 done, rc = 0;

	snprintf(id, sizeof(id), "canary-%s-%lld-%d", p->name,
	    (long long)time(NULL), (int)getpid());
	snprintf(code, sizeof(code), "%s.py", p->name);
	t.id = id;
	t.type = (char *)o->type;
	t.tenant = (char *)o->tenant;
	t.user = (char *)o->user;
	t.code_name = code;
	t.code.data = (uint8_t *)p->code;
	t.code.len = p->len;
	rr.task = &t;
	req.body_case = SBX__V1__ENVELOPE__BODY_RUN;
	req.run = &rr;
	if ((rep = canary_call(o->orch_sock, &req,
	    SBX__V1__ENVELOPE__BODY_RESULT, why, sizeof(why))) == NULL) {
		printf("%-10s FAILED   could not run: %s\n", p->name, why);
		return 2;
	}
	res = rep->result;
	canary_scan(&res->stdout, &denied, allowed, sizeof(allowed), &done);
	if (o->verbose) {
		fwrite(res->stdout.data, 1, res->stdout.len, stdout);
		if (res->stdout.len > 0 &&
		    res->stdout.data[res->stdout.len - 1] != '\n')
			fputc('\n', stdout);
	}
	if (allowed[0] != '\0') {
		printf("%-10s ALLOWED  %s (task %s)\n", p->name, allowed, id);
		rc = 1;
		goto out;
	}
	if (!done || denied == 0) {
		printf("%-10s FAILED   the probe did not finish (exit %d, "
		    "signal %d%s%s; task %s)\n", p->name, res->exit_code,
		    res->signal, res->n_limits_hit > 0 ? ", limit " : "",
		    res->n_limits_hit > 0 ? res->limits_hit[0] : "", id);
		rc = 2;
		goto out;
	}
	for (size_t i = 0; i < p->negress; i++) {
		size_t	 k;
		int	 a;

		for (k = 0; k < res->n_denials; k++)
			if (strcmp(res->denials[k]->rule, p->egress[i]) == 0 &&
			    strcmp(res->denials[k]->boundary, "egress") == 0)
				break;
		if (k == res->n_denials) {
			printf("%-10s FAILED   the result lists no egress "
			    "denial %s (task %s)\n", p->name, p->egress[i], id);
			rc = 2;
			goto out;
		}
		if ((a = canary_audited(o, id, res->execution_id, p->egress[i],
		    why, sizeof(why))) != 1) {
			printf("%-10s FAILED   %s%s (task %s)\n", p->name,
			    a == -1 ? "egressd's audit: " : "", why, id);
			rc = 2;
			goto out;
		}
		snprintf(rules + strlen(rules), sizeof(rules) - strlen(rules),
		    "%s%s", rules[0] != '\0' ? "," : "", p->egress[i]);
	}
	if (p->limit != NULL) {
		size_t	 k;

		/* gVisor refuses the fork itself (the probe saw EAGAIN)
		 * without the host cgroup's counter moving: both count. */
		for (k = 0; k < res->n_limits_hit; k++)
			if (strcmp(res->limits_hit[k], p->limit) == 0)
				break;
		snprintf(rules + strlen(rules), sizeof(rules) - strlen(rules),
		    "%slimit:%s%s", rules[0] != '\0' ? "," : "", p->limit,
		    k < res->n_limits_hit ? "" : " (refused in the sandbox)");
	}
	printf("%-10s DENIED   %s (%zu attempt%s; task %s)\n", p->name,
	    rules[0] != '\0' ? rules : "in-sandbox", denied,
	    denied == 1 ? "" : "s", id);
 out:
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

int
cmd_canary(int argc, char **argv, const char *state, const char *orch_sock)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "probes", required_argument, NULL, 'p' },
		{ "type", required_argument, NULL, 't' },
		{ "tenant", required_argument, NULL, 'T' },
		{ "user", required_argument, NULL, 'u' },
		{ "target", required_argument, NULL, 'g' },
		{ "host-port", required_argument, NULL, 'P' },
		{ "intruder-user", required_argument, NULL, 'I' },
		{ "hold", required_argument, NULL, 'H' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 }
	};
	struct canary_opts	 o;
	struct canary_probe	 p;
	char			*names[CANARY_MAX_PROBES], *dir, *sock = NULL;
	char			*path;
	const char		*probe_dir = NULL;
	size_t			 n = 0, nden = 0, nallow = 0, nfail = 0;
	int			 ch, r, channel = 1;

	memset(&o, 0, sizeof(o));
	o.state = state;
	o.orch_sock = orch_sock;
	o.type = "canary";
	o.tenant = "canary";
	o.user = "canary";
	o.target = "http://127.0.0.1:8419";
	o.host_port = "8417";
	o.intruder = "nobody";
	o.hold = 20;
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.state = optarg;
			break;
		case 'p':
			probe_dir = optarg;
			break;
		case 't':
			o.type = optarg;
			break;
		case 'T':
			o.tenant = optarg;
			break;
		case 'u':
			o.user = optarg;
			break;
		case 'g':
			o.target = optarg;
			break;
		case 'P':
			o.host_port = optarg;
			break;
		case 'I':
			o.intruder = optarg;
			break;
		case 'H':
			if (strspn(optarg, "0123456789") != strlen(optarg) ||
			    optarg[0] == '\0' || strlen(optarg) > 4 ||
			    (o.hold = atoi(optarg)) < 1 || o.hold > 3600)
				return canary_usage("--hold takes seconds, "
				    "1 to 3600");
			break;
		case 'v':
			o.verbose = 1;
			break;
		case ':':
			return canary_usage("an option needs a value");
		default:
			return canary_usage("unknown option");
		}
	}
	if (!name_ok(o.type) || !name_ok(o.tenant) || !name_ok(o.user))
		return canary_usage("--type, --tenant and --user take names");
	if (strncmp(o.target, "http://", 7) != 0 ||
	    strpbrk(o.target, "\"\\\n") != NULL)
		return canary_usage("--target takes an http:// URL");
	if (strspn(o.host_port, "0123456789") != strlen(o.host_port) ||
	    o.host_port[0] == '\0')
		return canary_usage("--host-port takes a port number");
	/* --state names the whole deployment, sockets included. */
	if (o.state != state) {
		xasprintf(&sock, "%s/sockets/policyd.sock", o.state);
		o.orch_sock = sock;
	}
	canary_host_dns(o.host_dns, sizeof(o.host_dns));
	dir = canary_find_dir(probe_dir);
	if (optind < argc) {
		channel = 0;
		for (int i = optind; i < argc && n < CANARY_MAX_PROBES; i++) {
			if (strcmp(argv[i], CANARY_CHANNEL) == 0) {
				channel = 1;
				continue;
			}
			if (!name_ok(argv[i])) {
				free(dir);
				free(sock);
				for (size_t k = 0; k < n; k++)
					free(names[k]);
				return canary_usage("a probe is a name");
			}
			names[n++] = xstrdup(argv[i]);
		}
	} else
		n = canary_list(dir, names, CANARY_MAX_PROBES);
	if (n == 0 && !channel) {
		log_warnx("canary: no probes in %s (--probes DIR)", dir);
		free(dir);
		free(sock);
		return SBXCTL_ERR;
	}
	printf("canary: %zu probes from %s, task type %s, %s/%s, target %s\n",
	    n + (size_t)channel, dir, o.type, o.tenant, o.user, o.target);
	fflush(stdout);
	for (size_t i = 0; i < n; i++) {
		xasprintf(&path, "%s/%s.py", dir, names[i]);
		if (canary_load(&o, path, names[i], &p) == -1) {
			printf("%-10s FAILED   cannot read %s\n", names[i], path);
			nfail++;
		} else {
			r = canary_run(&o, &p);
			if (r == 0)
				nden++;
			else if (r == 1)
				nallow++;
			else
				nfail++;
			canary_probe_free(&p);
		}
		fflush(stdout);
		free(path);
		free(names[i]);
	}
	/* Last: it holds a task open for a while. */
	if (channel) {
		r = canary_channel(&o, dir);
		if (r == 0)
			nden++;
		else if (r == 1)
			nallow++;
		else
			nfail++;
		fflush(stdout);
	}
	printf("canary: %zu denied, %zu allowed, %zu could not run\n", nden,
	    nallow, nfail);
	free(dir);
	free(sock);
	return nallow + nfail == 0 ? SBXCTL_OK : SBXCTL_ERR;
}
