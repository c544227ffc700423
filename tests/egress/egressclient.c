/*
 * egressclient.c: a test client for egressd that plays launchd-sbx (and
 * policyd, whose signature it forges with a key of its own that the
 * daemon under test trusts).  It opens and closes channels and reads the
 * admin socket, printing one line per answer for tests/egress/run.
 *
 *   egressclient keygen SK PK
 *   egressclient open -s SOCK -k SK [-x EXEC] [-t TASK] [-e TTL] [-B]
 *       [-b SPENT] [-c CA_OUT] [-S CHANNEL] [-g GID] [-G CGROUP] [-N] POLICY.yaml
 *   egressclient close -s SOCK [-f] EXEC	(-f: each rule's first denial,
 *					 time and detail, on stderr)
 *   egressclient admin -s SOCK metrics|verify|audit [TASK]
 *   egressclient broker SOCK LOG
 *
 * broker stands in for brokerd until it exists: it answers every
 * credential request with "Bearer test-SECRET" (an error for the secret
 * "broken") and appends "host secret header signed=N" lines to LOG.
 *
 * -b signs SPENT into the grant as the bytes the task's earlier
 * executions sent (egress_spent), as policyd does.
 *
 * open binds the channel's listening socket as launchd-sbx would (CHANNEL,
 * default run/EXEC.sock beside SOCK, run/ made 0711 if missing, where
 * egressd put its sockets before; mode 0660, the caller's uid, group GID) and passes it to egressd with the sandbox's group (-g,
 * default the caller's) and cgroup (-G, default the caller's own, as
 * /proc/self/cgroup shows it for the pids hierarchy, or the unified one),
 * so the test's own processes are "the sandbox"; -N sends no descriptor.
 * open prints "socket=PATH hash=HASH"; close prints "requests=N
 * bytes_out=N bytes_in=N denials=RULE:N,..."; a refusal prints "error
 * code=N: message" and exits 3; no reply prints "noreply", exit 4.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "frame.h"
#include "peer.h"
#include "log.h"
#include "tests/lib/testclient.h"
#include "policy.h"
#include "sign.h"
#include "util.h"
#include "yaml.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: egressclient keygen SK PK\n"
	    "       egressclient open -s SOCK -k SK [-x EXEC] [-t TASK] "
	    "[-e TTL] [-B] [-b SPENT] [-c CA_OUT] [-T TRACEPARENT]\n"
	    "           [-S CHANNEL] [-g GID] [-G CGROUP] [-N] POLICY.yaml\n"
	    "       egressclient close -s SOCK [-f] EXEC\n"
	    "       egressclient admin -s SOCK metrics|verify|audit "
	    "[TASK]\n");
	exit(2);
}

static int
call(const char *sock, const Sbx__V1__Envelope *req, Sbx__V1__Envelope **rep)
{
	int	 fd, rc;

	if ((fd = frame_client_connect(sock)) == -1)
		return -1;
	rc = frame_client_call(fd, req, rep, 16 * 1024 * 1024);
	close(fd);
	return rc;
}

/* The caller's cgroup as egressd will read it: the pids line, else the
 * unified one. */
static void
own_cgroup(char *out, size_t len)
{
	FILE	*f;
	char	 line[1024], *c1, *c2;
	int	 found = 0;

	snprintf(out, len, "/");
	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((c1 = strchr(line, ':')) == NULL ||
		    (c2 = strchr(c1 + 1, ':')) == NULL)
			continue;
		*c2 = '\0';
		if (strstr(c1 + 1, "pids") != NULL) {
			snprintf(out, len, "%s", c2 + 1);
			found = 1;
		} else if (!found && c1 + 1 == c2 && line[0] == '0')
			snprintf(out, len, "%s", c2 + 1);
	}
	fclose(f);
}

/* Bind and listen on path, mode 0660, group gid (launchd-sbx's way). */
static int
channel_socket(const char *path, gid_t gid)
{
	struct sockaddr_un	 sun;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		fatalx("%s: too long", path);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
		fatal("socket");
	(void)unlink(path);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chown(path, (uid_t)-1, gid) == -1 || chmod(path, 0660) == -1 ||
	    listen(fd, 128) == -1)
		fatal("%s", path);
	return fd;
}

static int
call_fd(const char *sock, const Sbx__V1__Envelope *req, int pass,
    Sbx__V1__Envelope **rep)
{
	int	 fd, rc;

	if ((fd = frame_client_connect(sock)) == -1)
		return -1;
	rc = frame_write_fd(fd, req, pass) == 0 ?
	    frame_read(fd, 16 * 1024 * 1024, rep) : -1;
	close(fd);
	return rc;
}

static int
check(int rc, Sbx__V1__Envelope *rep)
{
	if (rc != 0) {
		printf("noreply\n");
		return 4;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR) {
		if (rep->error->rule != NULL && rep->error->rule[0] != '\0')
			printf("error code=%d rule=%s: %s\n",
			    (int)rep->error->code, rep->error->rule,
			    rep->error->message);
		else
			printf("error code=%d: %s\n", (int)rep->error->code,
			    rep->error->message);
		return 3;
	}
	return 0;
}

static int
cmd_open(int argc, char **argv)
{
	Sbx__V1__Policy		*pol;
	Sbx__V1__PolicyGrant	 g = SBX__V1__POLICY_GRANT__INIT;
	Sbx__V1__SignedPolicy	 sp = SBX__V1__SIGNED_POLICY__INIT;
	Sbx__V1__EgressOpen	 o = SBX__V1__EGRESS_OPEN__INIT;
	Sbx__V1__Envelope	 req, *rep = NULL;
	struct sign_key		*key;
	struct yerrs		 errs = { NULL, 0 };
	const char		*sock = NULL, *sk = NULL, *caout = NULL;
	const char		*task = "task-egress-test";
	const char		*chan = NULL;
	char			 hash[POLICY_HASH_HEX], xid[64], err[512];
	char			 cg[1024], dir[PATH_MAX];
	char			 chanbuf[PATH_MAX];
	long			 ttl = 600;
	uint64_t		 spent = 0;
	int			 ch, badsig = 0, rc, lfd, nofd = 0;
	/* Root's group is no sandbox's: as root, a group nobody has. */
	gid_t			 gid = getgid() != 0 ? getgid() : 2147480000;
	FILE			*f;

	random_id("exec", xid, sizeof(xid));
	own_cgroup(cg, sizeof(cg));
	while ((ch = getopt(argc, argv, "b:Bc:e:g:G:k:Ns:S:t:T:x:")) != -1) {
		switch (ch) {
		case 'T': o.traceparent = optarg; break;
		case 'b': spent = strtoull(optarg, NULL, 10); break;
		case 'N': nofd = 1; break;
		case 'g': gid = (gid_t)strtoul(optarg, NULL, 10); break;
		case 'G': snprintf(cg, sizeof(cg), "%s", optarg); break;
		case 'S': chan = optarg; break;
		case 'B': badsig = 1; break;
		case 'c': caout = optarg; break;
		case 'e': ttl = strtol(optarg, NULL, 10); break;
		case 'k': sk = optarg; break;
		case 's': sock = optarg; break;
		case 't': task = optarg; break;
		case 'x': snprintf(xid, sizeof(xid), "%s", optarg); break;
		default: usage();
		}
	}
	if (sock == NULL || sk == NULL || argc - optind != 1)
		usage();
	if ((pol = policy_parse_file(argv[optind], &errs)) == NULL) {
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msgs[i]);
		exit(1);
	}
	if ((key = sign_key_load(sk, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	policy_normalize(pol);
	if (policy_hash(pol, hash) == -1)
		fatalx("cannot hash the policy");
	g.policy = pol;
	g.policy_hash = hash;
	g.task_id = (char *)task;
	g.execution_id = xid;
	g.tenant = (char *)"test";
	g.user = (char *)"tester";
	g.issued_at = now_s() - (ttl < 0 ? 1200 : 0);
	g.expires_at = now_s() + ttl;
	g.egress_spent = spent;
	if (sign_grant(key, &g, &sp) == -1)
		fatalx("cannot sign the grant");
	if (badsig)
		sp.signature.data[5] ^= 0x01;
	if (chan == NULL) {
		const char	*slash = strrchr(sock, '/');

		snprintf(dir, sizeof(dir), "%.*s/run", slash != NULL ?
		    (int)(slash - sock) : 1, slash != NULL ? sock : ".");
		if (mkdir(dir, 0711) == -1 && errno != EEXIST)
			fatal("%s", dir);
		if (snprintf(chanbuf, sizeof(chanbuf), "%s/%s.sock", dir,
		    xid) >= (int)sizeof(chanbuf))
			fatalx("%s: too long", dir);
		chan = chanbuf;
	}
	lfd = channel_socket(chan, gid);
	o.signed_ = &sp;
	o.sandbox_gid = (uint32_t)gid;
	o.cgroup = cg;
	frame_env_init(&req, 3);
	req.body_case = SBX__V1__ENVELOPE__BODY_EGRESS_OPEN;
	req.egress_open = &o;
	rc = nofd ? call(sock, &req, &rep) : call_fd(sock, &req, lfd, &rep);
	close(lfd);
	rc = check(rc, rep);
	if (rc == 0) {
		if (rep->body_case != SBX__V1__ENVELOPE__BODY_EGRESS_OPENED) {
			printf("unexpected reply %d\n", (int)rep->body_case);
			rc = 5;
		} else {
			printf("socket=%s hash=%s execution=%s\n", chan, hash,
			    xid);
			if (caout != NULL) {
				if ((f = fopen(caout, "w")) == NULL)
					fatal("%s", caout);
				fwrite(rep->egress_opened->ca_cert_pem.data, 1,
				    rep->egress_opened->ca_cert_pem.len, f);
				fclose(f);
			}
		}
	}
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	sign_signed_clear(&sp);
	sign_key_free(key);
	policy_free(pol);
	return rc;
}

static int
cmd_close(int argc, char **argv)
{
	Sbx__V1__EgressClose	 cl = SBX__V1__EGRESS_CLOSE__INIT;
	Sbx__V1__Envelope	 req, *rep = NULL;
	const char		*sock = NULL;
	int			 ch, rc, first = 0;

	while ((ch = getopt(argc, argv, "fs:")) != -1) {
		if (ch == 's')
			sock = optarg;
		else if (ch == 'f')
			first = 1;
		else
			usage();
	}
	if (sock == NULL || argc - optind != 1)
		usage();
	cl.execution_id = argv[optind];
	frame_env_init(&req, 4);
	req.body_case = SBX__V1__ENVELOPE__BODY_EGRESS_CLOSE;
	req.egress_close = &cl;
	rc = call(sock, &req, &rep);
	if ((rc = check(rc, rep)) == 0) {
		const Sbx__V1__EgressUsage *u = rep->egress_usage;

		printf("requests=%llu bytes_out=%llu bytes_in=%llu denials=",
		    (unsigned long long)u->requests,
		    (unsigned long long)u->bytes_out,
		    (unsigned long long)u->bytes_in);
		for (size_t i = 0; i < u->n_denials; i++)
			printf("%s%s:%llu", i ? "," : "", u->denials[i]->rule,
			    (unsigned long long)u->denials[i]->count);
		printf("\n");
		/* Each rule's first denial, apart: its detail is free text. */
		for (size_t i = 0; first && i < u->n_denials; i++)
			fprintf(stderr, "first %s at %lld: %s\n",
			    u->denials[i]->rule,
			    (long long)u->denials[i]->first_ns,
			    u->denials[i]->first);
	}
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

static int
cmd_admin(int argc, char **argv)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__MetricsRequest	 mr = SBX__V1__METRICS_REQUEST__INIT;
	Sbx__V1__AuditVerify	 av = SBX__V1__AUDIT_VERIFY__INIT;
	Sbx__V1__AuditQuery	 aq = SBX__V1__AUDIT_QUERY__INIT;
	const char		*sock = NULL, *what;
	int			 ch, rc;

	while ((ch = getopt(argc, argv, "s:")) != -1) {
		if (ch == 's')
			sock = optarg;
		else
			usage();
	}
	if (sock == NULL || argc - optind < 1)
		usage();
	what = argv[optind];
	frame_env_init(&req, 5);
	if (strcmp(what, "metrics") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_METRICS_REQUEST;
		req.metrics_request = &mr;
	} else if (strcmp(what, "verify") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY;
		req.audit_verify = &av;
	} else if (strcmp(what, "audit") == 0) {
		aq.task_id = argc - optind > 1 ? argv[optind + 1] : (char *)"";
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
		req.audit_query = &aq;
	} else
		usage();
	rc = call(sock, &req, &rep);
	if ((rc = check(rc, rep)) != 0)
		goto out;
	switch (rep->body_case) {
	case SBX__V1__ENVELOPE__BODY_METRICS:
		fputs(rep->metrics->text, stdout);
		break;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFIED:
		printf("ok=%d records=%llu daemon=%s\n",
		    rep->audit_verified->ok,
		    (unsigned long long)rep->audit_verified->records,
		    rep->audit_verified->daemon);
		break;
	case SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS:
		for (size_t i = 0; i < rep->audit_records->n_events; i++) {
			const Sbx__V1__AuditEvent *e =
			    rep->audit_records->events[i];

			printf("action=%s rule=%s task=%s execution=%s "
			    "hash=%s trace=%s detail=%s\n", e->action,
			    e->rule[0] ? e->rule : "-", e->task_id,
			    e->execution_id, e->policy_hash,
			    e->traceparent[0] ? e->traceparent : "-",
			    e->detail);
		}
		break;
	default:
		printf("unexpected reply %d\n", (int)rep->body_case);
		rc = 5;
	}
out:
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

static FILE *broker_log;

static void
broker_handle(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	Sbx__V1__CredentialReply	 cr = SBX__V1__CREDENTIAL_REPLY__INIT;
	Sbx__V1__Envelope		 env;
	const Sbx__V1__CredentialRequest *q = req->credential;
	char				*v;

	(void)arg;
	if (req->body_case != SBX__V1__ENVELOPE__BODY_CREDENTIAL) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "", "credential "
		    "requests only");
		return;
	}
	fprintf(broker_log, "host=%s secret=%s header=%s signed=%d\n",
	    q->host, q->secret, q->header,
	    q->signed_ != NULL && q->signed_->grant.len > 0);
	fflush(broker_log);
	if (strcmp(q->secret, "broken") == 0) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE, "",
		    "store unavailable");
		return;
	}
	xasprintf(&v, "Bearer test-%s", q->secret);
	cr.header = q->header;
	cr.value.data = (uint8_t *)v;
	cr.value.len = strlen(v);
	cr.expires_at = now_s() + 60;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_CREDENTIAL_REPLY;
	env.credential_reply = &cr;
	frame_conn_send(c, &env);
	free(v);
}

static int
cmd_broker(int argc, char **argv)
{
	struct frame_server_config	 cfg;
	struct peer_allow		 allow = { NULL, 0, NULL, 0 };
	struct event_base		*base;

	if (argc != 3)
		usage();
	if ((broker_log = fopen(argv[2], "a")) == NULL)
		fatal("%s", argv[2]);
	/* Anyone may ask: the test runs egressd as root or not. */
	peer_allow_uid(&allow, getuid());
	peer_allow_uid(&allow, 0);
	memset(&cfg, 0, sizeof(cfg));
	cfg.name = "broker";
	cfg.path = argv[1];
	cfg.mode = 0666;
	cfg.owner = (uid_t)-1;
	cfg.group = (gid_t)-1;
	cfg.allow = &allow;
	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new");
	if (frame_server_listen(base, &cfg, broker_handle, NULL) == NULL)
		fatalx("cannot listen on %s", argv[1]);
	event_base_dispatch(base);
	return 0;
}

int
main(int argc, char **argv)
{
	log_init("egressclient", 1, 0);
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "keygen") == 0) {
		if (tc_keygen(argc - 1, argv + 1) == -1)
			usage();
		return 0;
	}
	if (strcmp(argv[1], "open") == 0)
		return cmd_open(argc - 1, argv + 1);
	if (strcmp(argv[1], "close") == 0)
		return cmd_close(argc - 1, argv + 1);
	if (strcmp(argv[1], "admin") == 0)
		return cmd_admin(argc - 1, argv + 1);
	if (strcmp(argv[1], "broker") == 0)
		return cmd_broker(argc - 1, argv + 1);
	usage();
}
