/*
 * gateclient.c: a test client for gated that plays launchd-sbx and
 * policyd.  It signs a grant with a key of its own (the gated under test
 * trusts that key's public half), opens the scratch directory and passes
 * it as a descriptor with the release request, and prints the result one
 * line per output so tests/gate/run can check it.  Contents go to files
 * (-w DIR) so the script can compare bytes.
 *
 *   gateclient keygen SK PK
 *   gateclient release -s SOCK -k SK -d DIR [-w OUTDIR] [-t TASK] [-x EXEC]
 *       [-e TTL] [-B] [-N] [-T TYPE]... [-m MAX_TOTAL_KB] [-f MAX_FILE_KB]
 *       [-o refuse|truncate] [-D agent|user|storage-bucket]
 *       [-X MAX_TEXT_KB] [-O STDOUT_FILE] [-E STDERR_FILE] [-K] [-F]
 *       [-Y ARCHIVE_MB] [-R RATIO] [-n ENTRIES] [-z NESTING] [-W SIDE]
 *       [-P PIXELS] NAME...
 *   gateclient admin -s ADMIN audit|verify|metrics
 *
 * release prints "released NAME type=T bytes=N truncated=0|1 where=W
 * sha256=H" lines, each followed by "text NAME controls=N invisible=N
 * invalid=N links=N" and "csv NAME cells=N row=R col=C neutralised=0|1"
 * when gated reported them, "dropped NAME reason=R[ cut=1]" lines, then
 * "streams stdout_truncated=0|1 stderr_truncated=0|1", "report stdout|
 * stderr ..." and "unlisted entries=N name_bytes=N bytes=N" when present,
 * and exits 0; with -w, the
 * i-th released content goes to OUTDIR/out.i and the streams to
 * OUTDIR/stdout and OUTDIR/stderr.  A refusal prints "error code=N rule=R:
 * message" and exits 3; no reply at all prints "noreply" and exits 4.
 * -e with a negative TTL signs an expired grant; -B flips a bit of the
 * signature; -N sends no descriptor.  -K keeps remote links, -F
 * neutralises CSV formulas; -Y -R -n -z -W -P set the archive and image
 * caps of the policy (outputs.archives, outputs.images).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "tests/lib/testclient.h"
#include "policy.h"
#include "sign.h"
#include "util.h"

#define REPLY_MAX	(64 * 1024 * 1024)

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: gateclient keygen SK PK\n"
	    "       gateclient release -s SOCK -k SK -d DIR [-w OUTDIR] "
	    "[-t TASK] [-x EXEC] [-e TTL]\n"
	    "           [-B] [-N] [-T TYPE]... [-m KB] [-f KB] "
	    "[-o refuse|truncate] [-D DEST]\n"
	    "           [-X KB] [-O FILE] [-E FILE] [-K] [-F] [-Y MB] [-R N] "
	    "[-n N] [-z N]\n"
	    "           [-W N] [-P N] NAME...\n"
	    "       gateclient admin -s ADMIN audit|verify|metrics\n");
	exit(2);
}

static long
num(const char *s)
{
	char	*end;
	long	 v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0')
		usage();
	return v;
}


static void
slurp(const char *path, ProtobufCBinaryData *out)
{
	size_t	 len;
	char	*buf;

	if ((buf = read_file(path, 32 * 1024 * 1024, &len)) == NULL)
		fatal("%s", path);
	out->data = (uint8_t *)buf;
	out->len = len;
}

static void
spill(const char *dir, const char *name, const ProtobufCBinaryData *b)
{
	char	 path[4096];
	FILE	*f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "w")) == NULL)
		fatal("%s", path);
	if (b->len > 0 && fwrite(b->data, 1, b->len, f) != b->len)
		fatal("%s", path);
	fclose(f);
}

static void
print_report(const char *what, const char *name, const Sbx__V1__TextReport *t)
{
	printf("%s %s controls=%u invisible=%u invalid=%u links=%u\n", what,
	    name, t->controls_removed, t->invisible_removed,
	    t->invalid_replaced, t->links_neutralised);
}

static int
cmd_release(int argc, char **argv)
{
	Sbx__V1__Policy			*pol = policy_new();
	Sbx__V1__Outputs		*o = pol->outputs;
	const Sbx__V1__Destination	 bucket =
	    SBX__V1__DESTINATION__DESTINATION_STORAGE_BUCKET;
	Sbx__V1__PolicyGrant		 g = SBX__V1__POLICY_GRANT__INIT;
	Sbx__V1__SignedPolicy		 sp = SBX__V1__SIGNED_POLICY__INIT;
	Sbx__V1__ReleaseRequest		 rr = SBX__V1__RELEASE_REQUEST__INIT;
	Sbx__V1__Envelope		 req, *rep = NULL;
	const Sbx__V1__ReleaseResult	*res;
	struct sign_key			*key;
	const char			*sock = NULL, *sk = NULL, *dir = NULL;
	const char			*outdir = NULL;
	const char			*task = "task-gate-test";
	char				 hash[POLICY_HASH_HEX], xid[64];
	char				 err[512], name[32];
	long				 ttl = 300;
	int				 ch, badsig = 0, nofd = 0, rc = 0;
	int				 fd, dfd = -1;

	free(pol->name);
	pol->name = xstrdup("gate-test");
	pol->version = 1;
	o->max_total_kb = 1024;
	o->destination = SBX__V1__DESTINATION__DESTINATION_AGENT;
	snprintf(xid, sizeof(xid), "exec-gate-1");
	while ((ch = getopt(argc, argv,
	    "Bd:D:e:E:f:Fk:Km:n:No:O:P:R:s:t:T:w:W:x:X:Y:z:")) != -1) {
		switch (ch) {
		case 'B': badsig = 1; break;
		case 'd': dir = optarg; break;
		case 'D':
			if (strcmp(optarg, "agent") == 0)
				o->destination =
				    SBX__V1__DESTINATION__DESTINATION_AGENT;
			else if (strcmp(optarg, "user") == 0)
				o->destination =
				    SBX__V1__DESTINATION__DESTINATION_USER;
			else if (strcmp(optarg, "storage-bucket") == 0)
				o->destination = bucket;
			else
				usage();
			break;
		case 'e': ttl = num(optarg); break;
		case 'E': slurp(optarg, &rr.stderr); break;
		case 'f': o->max_file_kb = (uint32_t)num(optarg); break;
		case 'F':
			o->csv_formulas =
			    SBX__V1__CSV_FORMULAS__CSV_FORMULAS_NEUTRALISE;
			break;
		case 'K':
			o->remote_links =
			    SBX__V1__REMOTE_LINKS__REMOTE_LINKS_KEEP;
			break;
		case 'n': o->archive_max_entries = (uint32_t)num(optarg); break;
		case 'P': o->image_max_pixels = (uint32_t)num(optarg); break;
		case 'R': o->archive_max_ratio = (uint32_t)num(optarg); break;
		case 'W': o->image_max_side = (uint32_t)num(optarg); break;
		case 'Y':
			o->archive_max_expanded_mb = (uint32_t)num(optarg);
			break;
		case 'z': o->archive_max_nesting = (uint32_t)num(optarg); break;
		case 'k': sk = optarg; break;
		case 'm': o->max_total_kb = (uint32_t)num(optarg); break;
		case 'N': nofd = 1; break;
		case 'o':
			if (strcmp(optarg, "truncate") == 0)
				o->oversize =
				    SBX__V1__OVERSIZE__OVERSIZE_TRUNCATE;
			else if (strcmp(optarg, "refuse") == 0)
				o->oversize =
				    SBX__V1__OVERSIZE__OVERSIZE_REFUSE;
			else
				usage();
			break;
		case 'O': slurp(optarg, &rr.stdout); break;
		case 's': sock = optarg; break;
		case 't': task = optarg; break;
		case 'T':
			o->allowed_types = xreallocarray(o->allowed_types,
			    o->n_allowed_types + 1, sizeof(char *));
			o->allowed_types[o->n_allowed_types++] =
			    xstrdup(optarg);
			break;
		case 'w': outdir = optarg; break;
		case 'x': snprintf(xid, sizeof(xid), "%s", optarg); break;
		case 'X': o->max_text_kb = (uint32_t)num(optarg); break;
		default: usage();
		}
	}
	if (sock == NULL || sk == NULL || dir == NULL)
		usage();
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
	g.issued_at = now_s() - (ttl < 0 ? 600 : 0);
	g.expires_at = now_s() + ttl;
	if (sign_grant(key, &g, &sp) == -1)
		fatalx("cannot sign the grant");
	if (badsig)
		sp.signature.data[7] ^= 0x10;

	rr.signed_ = &sp;
	rr.outputs = argv + optind;
	rr.n_outputs = (size_t)(argc - optind);
	frame_env_init(&req, 11);
	req.body_case = SBX__V1__ENVELOPE__BODY_RELEASE;
	req.release = &rr;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		fatal("%s", dir);
	if ((fd = frame_client_connect(sock)) == -1) {
		printf("noreply connect %s: %s\n", sock, strerror(errno));
		rc = 4;
		goto out;
	}
	if ((nofd ? frame_write(fd, &req) : frame_write_fd(fd, &req,
	    dfd)) == -1 || frame_read(fd, REPLY_MAX, &rep) != 0) {
		printf("noreply\n");
		close(fd);
		rc = 4;
		goto out;
	}
	close(fd);
	if (tc_print_error(rep)) {
		rc = 3;
		goto out;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_RELEASED) {
		printf("unexpected reply %d\n", (int)rep->body_case);
		rc = 5;
		goto out;
	}
	res = rep->released;
	for (size_t i = 0; i < res->n_outputs; i++) {
		const Sbx__V1__ReleasedOutput *r = res->outputs[i];

		printf("released %s type=%s bytes=%llu truncated=%d where=%s "
		    "sha256=%s\n", r->name, r->type,
		    (unsigned long long)r->bytes, (int)r->truncated, r->where,
		    r->sha256);
		if (r->text != NULL)
			print_report("text", r->name, r->text);
		if (r->csv != NULL)
			printf("csv %s cells=%u row=%u col=%u neutralised=%d\n",
			    r->name, r->csv->formula_cells, r->csv->first_row,
			    r->csv->first_column, (int)r->csv->neutralised);
		if (outdir != NULL) {
			snprintf(name, sizeof(name), "out.%zu", i);
			spill(outdir, name, &r->content);
		}
	}
	for (size_t i = 0; i < res->n_dropped; i++)
		printf("dropped %s reason=%s%s\n", res->dropped[i]->name,
		    res->dropped[i]->reason, res->dropped[i]->name_truncated ?
		    " cut=1" : "");
	printf("streams stdout_truncated=%d stderr_truncated=%d\n",
	    (int)res->stdout_truncated, (int)res->stderr_truncated);
	if (res->stdout_report != NULL)
		print_report("report", "stdout", res->stdout_report);
	if (res->stderr_report != NULL)
		print_report("report", "stderr", res->stderr_report);
	if (res->dropped_unlisted != NULL)
		printf("unlisted entries=%u name_bytes=%llu bytes=%llu\n",
		    res->dropped_unlisted->entries, (unsigned long long)
		    res->dropped_unlisted->name_bytes, (unsigned long long)
		    res->dropped_unlisted->bytes);
	if (outdir != NULL) {
		spill(outdir, "stdout", &res->stdout);
		spill(outdir, "stderr", &res->stderr);
	}
out:
	if (dfd != -1)
		close(dfd);
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	free(rr.stdout.data);
	free(rr.stderr.data);
	sign_signed_clear(&sp);
	sign_key_free(key);
	policy_free(pol);
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
	int			 ch, fd, rc = 0;

	while ((ch = getopt(argc, argv, "s:")) != -1) {
		if (ch == 's')
			sock = optarg;
		else
			usage();
	}
	if (sock == NULL || argc - optind != 1)
		usage();
	what = argv[optind];
	frame_env_init(&req, 3);
	if (strcmp(what, "metrics") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_METRICS_REQUEST;
		req.metrics_request = &mr;
	} else if (strcmp(what, "verify") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY;
		req.audit_verify = &av;
	} else if (strcmp(what, "audit") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
		req.audit_query = &aq;
	} else
		usage();
	if ((fd = frame_client_connect(sock)) == -1 ||
	    frame_client_call(fd, &req, &rep, REPLY_MAX) != 0) {
		printf("noreply\n");
		return 4;
	}
	close(fd);
	rc = tc_print_admin(rep, 0);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

int
main(int argc, char **argv)
{
	log_init("gateclient", 1, 0);
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "keygen") == 0) {
		if (tc_keygen(argc - 1, argv + 1) == -1)
			usage();
		return 0;
	}
	if (strcmp(argv[1], "release") == 0)
		return cmd_release(argc - 1, argv + 1);
	if (strcmp(argv[1], "admin") == 0)
		return cmd_admin(argc - 1, argv + 1);
	usage();
}
