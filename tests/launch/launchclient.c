/*
 * launchclient.c: a test client for launchd-sbx that plays policyd.  It
 * builds a policy, signs a grant for it with a key of its own (the daemon
 * under test is configured to trust that key's public half), sends a
 * LaunchRequest and prints the result, one line, so the integration
 * script can check it.  It also puts datasets through the admin socket.
 *
 *   launchclient keygen SK PK
 *   launchclient put -s ADMIN_SOCK NAME FILE
 *   launchclient admin -s ADMIN_SOCK datasets|images|metrics|verify
 *   launchclient run -s SOCK -k SK -i IMAGE [-t TIER] [-w WALL] [-m MB]
 *       [-p PIDS] [-C MILLICPUS] [-S SCRATCH_MB] [-T TEXT_KB] [-d DATASET]
 *       [-e TTL] [-x EXEC_ID] [-B] [-O STDOUT_FILE] [-E STDERR_FILE]
 *       [-o OUTPUT_NAME]... [-y ALLOWED_TYPE]... [-H HOST:PORT]...
 *       [-W OUTDIR] -n CODE_NAME CODE_FILE
 *
 * run prints "exit=N signal=N limits=a,b wall_ms=N cpu_ms=N peak_kb=N
 * ... egress_out=N egress_in=N egress_requests=N labelled=0|1", then one
 * line per released output ("released NAME type=T bytes=N where=W"),
 * dropped output ("dropped NAME reason=R") and denial ("denial RULE
 * boundary=B detail=D"), and exits 0.  -O/-E save stdout/stderr without
 * gated's <tool-output> label (labelled=1 says it was there, around
 * them); -W saves each released output's content as OUTDIR/NAME.  -o
 * declares an output, -y allows a type, -H allows GET to a host (any
 * path, cidrs 127.0.0.0/8, as a loopback test needs); on a refusal
 * "error code=N rule=R: message" and exits 3; on a refusal "error code=N rule=R: message" and exits 3;
 * when the daemon closes without a reply, "noreply" and exits 4.  -e with
 * a negative TTL signs an already expired grant; -B flips a bit of the
 * signature.
 */
#include <errno.h>
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

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: launchclient keygen SK PK\n"
	    "       launchclient put -s ADMIN_SOCK NAME FILE\n"
	    "       launchclient admin -s ADMIN_SOCK "
	    "datasets|images|metrics|verify\n"
	    "       launchclient run -s SOCK -k SK -i IMAGE [-t TIER] [-w WALL]"
	    " [-m MB] [-p PIDS]\n"
	    "           [-C MILLICPUS] [-S SCRATCH_MB] [-T TEXT_KB] "
	    "[-d DATASET] [-e TTL]\n"
	    "           [-x EXEC_ID] [-B] [-O FILE] [-E FILE] -n CODE_NAME "
	    "CODE_FILE\n");
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
save(const char *path, const ProtobufCBinaryData *d)
{
	FILE	*f;

	if (path == NULL)
		return;
	if ((f = fopen(path, "w")) == NULL)
		fatal("%s", path);
	if (d->len > 0 && fwrite(d->data, 1, d->len, f) != d->len)
		fatal("%s", path);
	fclose(f);
}

/*
 * Save a stream without gated's label: "<tool-output ...>\n" BODY
 * "</tool-output>" (the closing tag on a line of its own).  1 if the
 * label was there.
 */
static int
save_text(const char *path, const ProtobufCBinaryData *d)
{
	ProtobufCBinaryData	 b = *d;
	static const char	 head[] = "<tool-output source=\"sbx\" ";
	static const char	 tail[] = "</tool-output>";
	const char		*nl;
	int			 labelled = 0;

	if (b.len >= sizeof(head) - 1 &&
	    memcmp(b.data, head, sizeof(head) - 1) == 0 &&
	    (nl = memchr(b.data, '\n', b.len)) != NULL &&
	    b.len >= sizeof(tail) - 1 &&
	    memcmp(b.data + b.len - (sizeof(tail) - 1), tail,
	    sizeof(tail) - 1) == 0) {
		size_t	 off = (size_t)((const uint8_t *)nl + 1 - b.data);
		size_t	 end = b.len - (sizeof(tail) - 1);

		/* A body without a final newline gets one from the label:
		 * kept, as a line of text. */
		labelled = 1;
		b.data += off;
		b.len = end >= off ? end - off : 0;
	}
	save(path, &b);
	return labelled;
}

static int
call(const char *sock, const Sbx__V1__Envelope *req, Sbx__V1__Envelope **rep)
{
	int	 fd, rc;

	if ((fd = frame_client_connect(sock)) == -1)
		fatal("connect %s", sock);
	rc = frame_client_call(fd, req, rep, 64 * 1024 * 1024);
	close(fd);
	return rc;
}


static int
cmd_put(int argc, char **argv)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__DatasetPut	 put = SBX__V1__DATASET_PUT__INIT;
	const char		*sock = NULL;
	size_t			 len;
	char			*data;
	int			 ch;

	while ((ch = getopt(argc, argv, "s:")) != -1) {
		if (ch == 's')
			sock = optarg;
		else
			usage();
	}
	if (sock == NULL || argc - optind != 2)
		usage();
	if ((data = read_file(argv[optind + 1], 64 * 1024 * 1024,
	    &len)) == NULL)
		fatal("%s", argv[optind + 1]);
	put.name = argv[optind];
	put.content.data = (uint8_t *)data;
	put.content.len = len;
	frame_env_init(&req, 1);
	req.body_case = SBX__V1__ENVELOPE__BODY_DATASET_PUT;
	req.dataset_put = &put;
	if (call(sock, &req, &rep) != 0) {
		printf("noreply\n");
		return 4;
	}
	free(data);
	if (tc_print_error(rep)) {
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return 3;
	}
	printf("ok %s\n", rep->body_case == SBX__V1__ENVELOPE__BODY_ACK ?
	    rep->ack->detail : "?");
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

static int
cmd_run(int argc, char **argv)
{
	Sbx__V1__Policy		*pol = policy_new();
	Sbx__V1__PolicyGrant	 g = SBX__V1__POLICY_GRANT__INIT;
	Sbx__V1__SignedPolicy	 sp = SBX__V1__SIGNED_POLICY__INIT;
	Sbx__V1__LaunchRequest	 lr = SBX__V1__LAUNCH_REQUEST__INIT;
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__Input		*inputs[16], inbuf[16];
	struct sign_key		*key;
	const char		*sock = NULL, *sk = NULL, *outf = NULL;
	const char		*errf = NULL, *code_name = NULL;
	const char		*outdir = NULL;
	char			*outs[16];
	size_t			 nouts = 0;
	int			 labelled = 0;
	char			 hash[POLICY_HASH_HEX], xid[64], err[512];
	char			*code;
	size_t			 codelen, ninputs = 0;
	long			 ttl = 300;
	int			 ch, badsig = 0, rc;

	free(pol->name);
	pol->name = xstrdup("launch-test");
	pol->version = 1;
	pol->isolation = SBX__V1__ISOLATION__ISOLATION_CONTAINER;
	pol->limits->cpus_milli = 1000;
	pol->limits->memory_mb = 128;
	pol->limits->pids = 32;
	pol->limits->wall_seconds = 30;
	pol->limits->scratch_mb = 16;
	random_id("exec", xid, sizeof(xid));
	while ((ch = getopt(argc, argv, "BC:d:e:E:H:i:k:m:n:o:O:p:s:S:t:T:w:W:x:y:"))
	    != -1) {
		switch (ch) {
		case 'B': badsig = 1; break;
		case 'C': pol->limits->cpus_milli = (uint32_t)num(optarg);
			break;
		case 'd':
			if (ninputs == 16)
				usage();
			sbx__v1__input__init(&inbuf[ninputs]);
			inbuf[ninputs].dataset = optarg;
			inputs[ninputs] = &inbuf[ninputs];
			ninputs++;
			break;
		case 'e': ttl = num(optarg); break;
		case 'E': errf = optarg; break;
		case 'i': free(pol->image); pol->image = xstrdup(optarg);
			break;
		case 'k': sk = optarg; break;
		case 'm': pol->limits->memory_mb = (uint32_t)num(optarg);
			break;
		case 'n': code_name = optarg; break;
		case 'O': outf = optarg; break;
		case 'p': pol->limits->pids = (uint32_t)num(optarg); break;
		case 's': sock = optarg; break;
		case 'S': pol->limits->scratch_mb = (uint32_t)num(optarg);
			break;
		case 't': pol->isolation = (Sbx__V1__Isolation)num(optarg);
			break;
		case 'T': pol->outputs->max_text_kb = (uint32_t)num(optarg);
			break;
		case 'w': pol->limits->wall_seconds = (uint32_t)num(optarg);
			break;
		case 'x': snprintf(xid, sizeof(xid), "%s", optarg); break;
		case 'o':
			if (nouts == 16)
				usage();
			outs[nouts++] = optarg;
			break;
		case 'W': outdir = optarg; break;
		case 'y': {
			Sbx__V1__Outputs *o = pol->outputs;

			o->allowed_types = xreallocarray(o->allowed_types,
			    o->n_allowed_types + 1, sizeof(char *));
			o->allowed_types[o->n_allowed_types++] =
			    xstrdup(optarg);
			o->destination =
			    SBX__V1__DESTINATION__DESTINATION_AGENT;
			if (o->max_total_kb == 0)
				o->max_total_kb = 64;
			break;
		}
		case 'H': {
			Sbx__V1__Network	*n = pol->network;
			Sbx__V1__AllowRule	*a = xcalloc(1, sizeof(*a));
			char			*colon;

			sbx__v1__allow_rule__init(a);
			a->host = xstrdup(optarg);
			if ((colon = strrchr(a->host, ':')) != NULL) {
				*colon = '\0';
				a->port = (uint32_t)num(colon + 1);
			}
			a->methods = xcalloc(1, sizeof(char *));
			a->methods[0] = xstrdup("GET");
			a->n_methods = 1;
			a->cidrs = xcalloc(1, sizeof(char *));
			a->cidrs[0] = xstrdup("127.0.0.0/8");
			a->n_cidrs = 1;
			n->allow = xreallocarray(n->allow, n->n_allow + 1,
			    sizeof(*n->allow));
			n->allow[n->n_allow++] = a;
			break;
		}
		default: usage();
		}
	}
	if (sock == NULL || sk == NULL || code_name == NULL ||
	    argc - optind != 1)
		usage();
	if ((code = read_file(argv[optind], 1024 * 1024, &codelen)) == NULL)
		fatal("%s", argv[optind]);
	if ((key = sign_key_load(sk, err, sizeof(err))) == NULL)
		fatalx("%s", err);

	pol->inputs = xcalloc(ninputs + 1, sizeof(*pol->inputs));
	for (size_t i = 0; i < ninputs; i++) {
		pol->inputs[i] = xcalloc(1, sizeof(**pol->inputs));
		sbx__v1__input__init(pol->inputs[i]);
		pol->inputs[i]->dataset = xstrdup(inputs[i]->dataset);
	}
	pol->n_inputs = ninputs;
	policy_normalize(pol);
	if (policy_hash(pol, hash) == -1)
		fatalx("cannot hash the policy");
	g.policy = pol;
	g.policy_hash = hash;
	g.task_id = (char *)"task-launch-test";
	g.execution_id = xid;
	g.tenant = (char *)"test";
	g.user = (char *)"tester";
	g.issued_at = now_s() - (ttl < 0 ? 600 : 0);
	g.expires_at = now_s() + ttl;
	if (sign_grant(key, &g, &sp) == -1)
		fatalx("cannot sign the grant");
	if (badsig)
		sp.signature.data[7] ^= 0x10;

	lr.signed_ = &sp;
	lr.code_name = (char *)code_name;
	lr.code.data = (uint8_t *)code;
	lr.code.len = codelen;
	lr.outputs = outs;
	lr.n_outputs = nouts;
	frame_env_init(&req, 7);
	req.body_case = SBX__V1__ENVELOPE__BODY_LAUNCH;
	req.launch = &lr;
	if (call(sock, &req, &rep) != 0) {
		printf("noreply\n");
		rc = 4;
		goto out;
	}
	if (tc_print_error(rep)) {
		rc = 3;
		goto out;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_RESULT) {
		printf("unexpected reply %d\n", (int)rep->body_case);
		rc = 5;
		goto out;
	}
	{
		const Sbx__V1__ExecutionResult	*r = rep->result;
		char				 lim[128] = "";

		size_t				 o = 0;

		for (size_t i = 0; i < r->n_limits_hit && o < sizeof(lim);
		    i++)
			o += (size_t)snprintf(lim + o, sizeof(lim) - o, "%s%s",
			    i > 0 ? "," : "", r->limits_hit[i]);
		labelled = save_text(outf, &r->stdout);
		(void)save_text(errf, &r->stderr);
		printf("exit=%d signal=%d limits=%s wall_ms=%llu cpu_ms=%llu "
		    "peak_kb=%llu stdout_truncated=%d execution=%s "
		    "policy_hash=%s egress_out=%llu egress_in=%llu "
		    "egress_requests=%u labelled=%d\n", r->exit_code,
		    r->signal,
		    lim[0] ? lim : "-",
		    (unsigned long long)(r->usage ? r->usage->wall_ms : 0),
		    (unsigned long long)(r->usage ? r->usage->cpu_ms : 0),
		    (unsigned long long)(r->usage ?
		    r->usage->peak_memory_kb : 0),
		    r->stdout_truncated, r->execution_id,
		    r->policy != NULL ? r->policy->hash : "",
		    (unsigned long long)(r->usage ?
		    r->usage->egress_bytes_out : 0),
		    (unsigned long long)(r->usage ?
		    r->usage->egress_bytes_in : 0),
		    r->usage ? r->usage->egress_requests : 0, labelled);
		for (size_t i = 0; i < r->n_outputs; i++) {
			const Sbx__V1__ReleasedOutput *ro = r->outputs[i];

			printf("released %s type=%s bytes=%llu where=%s\n",
			    ro->name, ro->type, (unsigned long long)ro->bytes,
			    ro->where);
			if (outdir != NULL && strchr(ro->name, '/') == NULL) {
				char	*p;

				xasprintf(&p, "%s/%s", outdir, ro->name);
				/* Text comes labelled, as stdout does. */
				(void)save_text(p, &ro->content);
				free(p);
			}
		}
		for (size_t i = 0; i < r->n_dropped; i++)
			printf("dropped %s reason=%s\n", r->dropped[i]->name,
			    r->dropped[i]->reason);
		for (size_t i = 0; i < r->n_denials; i++)
			printf("denial %s boundary=%s detail=%s\n",
			    r->denials[i]->rule, r->denials[i]->boundary,
			    r->denials[i]->detail);
	}
	rc = 0;
out:
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	sign_signed_clear(&sp);
	sign_key_free(key);
	policy_free(pol);
	free(code);
	return rc;
}

/* admin -s SOCK datasets|images|metrics|verify: one line per item. */
static int
cmd_admin(int argc, char **argv)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__DatasetList	 dl = SBX__V1__DATASET_LIST__INIT;
	Sbx__V1__ImageList	 il = SBX__V1__IMAGE_LIST__INIT;
	Sbx__V1__MetricsRequest	 mr = SBX__V1__METRICS_REQUEST__INIT;
	Sbx__V1__AuditVerify	 av = SBX__V1__AUDIT_VERIFY__INIT;
	const char		*sock = NULL, *what;
	int			 ch;

	while ((ch = getopt(argc, argv, "s:")) != -1) {
		if (ch == 's')
			sock = optarg;
		else
			usage();
	}
	if (sock == NULL || argc - optind != 1)
		usage();
	what = argv[optind];
	frame_env_init(&req, 2);
	if (strcmp(what, "datasets") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_DATASET_LIST;
		req.dataset_list = &dl;
	} else if (strcmp(what, "images") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_IMAGE_LIST;
		req.image_list = &il;
	} else if (strcmp(what, "metrics") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_METRICS_REQUEST;
		req.metrics_request = &mr;
	} else if (strcmp(what, "verify") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY;
		req.audit_verify = &av;
	} else
		usage();
	if (call(sock, &req, &rep) != 0) {
		printf("noreply\n");
		return 4;
	}
	if (tc_print_error(rep)) {
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return 3;
	}
	switch (rep->body_case) {
	case SBX__V1__ENVELOPE__BODY_DATASET_NAMES:
		for (size_t i = 0; i < rep->dataset_names->n_names; i++)
			printf("%s\n", rep->dataset_names->names[i]);
		break;
	case SBX__V1__ENVELOPE__BODY_IMAGE_INFOS:
		for (size_t i = 0; i < rep->image_infos->n_images; i++)
			printf("%s verified=%d unpacked=%d\n",
			    rep->image_infos->images[i]->digest,
			    rep->image_infos->images[i]->verified,
			    rep->image_infos->images[i]->unpacked);
		break;
	case SBX__V1__ENVELOPE__BODY_METRICS:
		fputs(rep->metrics->text, stdout);
		break;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFIED:
		printf("ok=%d records=%llu daemon=%s\n",
		    rep->audit_verified->ok,
		    (unsigned long long)rep->audit_verified->records,
		    rep->audit_verified->daemon);
		break;
	default:
		printf("unexpected reply %d\n", (int)rep->body_case);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return 5;
	}
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

int
main(int argc, char **argv)
{
	log_init("launchclient", 1, 0);
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "keygen") == 0) {
		if (tc_keygen(argc - 1, argv + 1) == -1)
			usage();
		return 0;
	}
	if (strcmp(argv[1], "put") == 0)
		return cmd_put(argc - 1, argv + 1);
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "admin") == 0)
		return cmd_admin(argc - 1, argv + 1);
	usage();
}
