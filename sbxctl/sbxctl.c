/*
 * sbxctl.c: the command-line client for orchestrators and operators.  It
 * reads a command, sends one request to the daemon that owns the answer,
 * prints the reply, and exits with a status that says what happened
 * (DESIGN.md): 0 ok, 3 policy refused, 4 launch refused, 5 daemon
 * unreachable, 1 other errors, 2 usage.  sbxctl holds no authority of its
 * own: the daemons check who is calling (SO_PEERCRED) and decide; a refusal
 * is printed with the daemon's rule id and message, never softened.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "name.h"
#include "policy.h"
#include "receipt.h"
#include "sign.h"
#include "util.h"
#include "version.h"
#include "yaml.h"
#include "sbxctl.h"

/* Replies may carry a whole audit log; the daemons cap what they send. */
#define SBXCTL_REPLY_MAX	(64 * 1024 * 1024)

/*
 * Every daemon that keeps an audit chain, with the socket sbxctl asks it
 * on.  `audit` and `audit verify` walk this list; later daemons add a line.
 * A daemon marked optional whose socket does not exist is skipped (not
 * installed here); one that exists but does not answer is an error.
 */
struct ctl_daemon {
	const char	*name;
	const char	*socket;	/* file name under $SBX_STATE/sockets */
	int		 optional;
};

static const struct ctl_daemon ctl_audit_daemons[] = {
	{ "policyd", "policyd.sock", 0 },
	{ "launchd-sbx", "launchd-admin.sock", 1 },
	{ "brokerd", "brokerd-admin.sock", 1 },
	{ "egressd", "egressd-admin.sock", 1 },
	{ "gated", "gated-admin.sock", 1 },
	{ "approvald", "approvald-console.sock", 1 },
};
#define CTL_NDAEMONS	(sizeof(ctl_audit_daemons) / sizeof(ctl_audit_daemons[0]))

static struct {
	char		*state;
	char		*orch_sock;	/* policyd's orchestrator socket */
	char		*admin_sock;	/* policyd's admin socket */
	char		*launchd_sock;	/* launchd-sbx's admin socket */
	char		*broker_sock;	/* brokerd's admin socket */
	int		 json;
	int		 quiet;		/* do not report unreachable */
	uint64_t	 request_id;
} ctl;

static const char usage_text[] =
"usage: sbxctl [-hj] [-s state] [-S socket] [-A socket] [-L socket]\n"
"              [-B socket] command [arg ...]\n"
"       sbxctl --help | --version | help | command --help\n"
"       sbxctl compile [--preview] taskfile\n"
"       sbxctl render k8s [-o yaml|json] [--key pubfile] taskfile\n"
"       sbxctl run [--receipt file] taskfile\n"
"       sbxctl receipt verify [--key pubfile] file\n"
"       sbxctl request task-id (--dataset D | --host H [--method M ...]\n"
"              [--path P ...]) --why TEXT [--source FILE]\n"
"       sbxctl dataset add name file\n"
"       sbxctl dataset list\n"
"       sbxctl image list\n"
"       sbxctl secret put [--minted] name < value\n"
"       sbxctl secret list\n"
"       sbxctl entitlement add --tenant T --user U [--dataset D ...]\n"
"              [--host H ...] [--limit key=value ...]\n"
"       sbxctl entitlement remove --tenant T --user U [--dataset D ...]\n"
"              [--host H ...]\n"
"       sbxctl entitlement list [--tenant T] [--user U]\n"
"       sbxctl entitlement import file\n"
"       sbxctl template list\n"
"       sbxctl template show name[@version]\n"
"       sbxctl template diff a b\n"
"       sbxctl audit task-id\n"
"       sbxctl audit verify [--fleet [--stale seconds]]\n"
"       sbxctl audit ship --host name\n"
"       sbxctl metrics [--prometheus]\n"
"       sbxctl rollout status [type]\n"
"       sbxctl rollout promote|halt type\n"
"       sbxctl rollout set-percent type percent\n"
"       sbxctl canary [--state S] [--probes DIR] [--target URL] [probe ...]\n"
"       sbxctl keys\n"
"       sbxctl hello socket\n";

static int
ctl_usage(const char *why)
{
	if (why != NULL)
		fprintf(stderr, "sbxctl: %s\n", why);
	fputs(usage_text, stderr);
	return SBXCTL_USAGE;
}

static const char *
ctl_code_name(Sbx__V1__ErrorCode c)
{
	switch (c) {
	case SBX__V1__ERROR_CODE__ERROR_MALFORMED:
		return "malformed request";
	case SBX__V1__ERROR_CODE__ERROR_FRAME_TOO_LARGE:
		return "request too large";
	case SBX__V1__ERROR_CODE__ERROR_TRUNCATED:
		return "truncated request";
	case SBX__V1__ERROR_CODE__ERROR_UNSUPPORTED_VERSION:
		return "unsupported protocol version";
	case SBX__V1__ERROR_CODE__ERROR_UNEXPECTED:
		return "request not accepted on this socket";
	case SBX__V1__ERROR_CODE__ERROR_INVALID:
		return "invalid request";
	case SBX__V1__ERROR_CODE__ERROR_POLICY:
	case SBX__V1__ERROR_CODE__ERROR_LIMIT:
		return "policy refused";
	case SBX__V1__ERROR_CODE__ERROR_NOT_FOUND:
		return "not found";
	case SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE:
		return "unavailable";
	case SBX__V1__ERROR_CODE__ERROR_INTERNAL:
		return "internal error";
	case SBX__V1__ERROR_CODE__ERROR_DENIED:
		return "denied";
	case SBX__V1__ERROR_CODE__ERROR_LAUNCH:
		return "launch refused";
	default:
		return "error";
	}
}

/* Print a daemon's Error and map it to an exit status. */
static int
ctl_server_error(const char *daemon, const Sbx__V1__Error *e)
{
	const char	*what = ctl_code_name(e->code);
	int		 rc = SBXCTL_ERR;

	if (e->code == SBX__V1__ERROR_CODE__ERROR_POLICY ||
	    e->code == SBX__V1__ERROR_CODE__ERROR_LIMIT)
		rc = SBXCTL_POLICY;
	else if (e->code == SBX__V1__ERROR_CODE__ERROR_LAUNCH)
		rc = SBXCTL_LAUNCH;
	/* A daemon the answering one needs is down (launchd-sbx behind
	 * policyd): as unreachable as if we had called it ourselves. */
	else if (e->code == SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE)
		rc = SBXCTL_UNREACHABLE;
	if (rc != SBXCTL_ERR) {
		if (e->rule[0] != '\0')
			log_warnx("%s (%s): %s", what, e->rule, e->message);
		else
			log_warnx("%s: %s", what, e->message);
	} else if (e->rule[0] != '\0')
		log_warnx("%s: %s (%s): %s", daemon, what, e->rule,
		    e->message);
	else
		log_warnx("%s: %s: %s", daemon, what, e->message);
	return rc;
}

/*
 * Send req on the socket at path and read one reply of type want.
 * Returns an exit status; on SBXCTL_OK *reply holds the reply.
 */
static int
ctl_call(const char *daemon, const char *path, Sbx__V1__Envelope *req,
    Sbx__V1__Envelope__BodyCase want, Sbx__V1__Envelope **reply)
{
	Sbx__V1__Envelope	*rep = NULL;
	int			 fd, r, rc;

	*reply = NULL;
	/* Not frame_env_init(): that would clear the body already set. */
	req->version = SBX_PROTO_VERSION;
	req->request_id = ++ctl.request_id;
	if ((fd = frame_client_connect(path)) == -1) {
		if (ctl.quiet)
			return SBXCTL_UNREACHABLE;
		log_warnx("%s unreachable: cannot connect to %s: %s", daemon,
		    path, strerror(errno));
		return SBXCTL_UNREACHABLE;
	}
	r = frame_client_call(fd, req, &rep, SBXCTL_REPLY_MAX);
	close(fd);
	if (r == -2) {
		log_warnx("%s at %s sent a reply that does not decode",
		    daemon, path);
		return SBXCTL_ERR;
	}
	if (r == -1) {
		/* A daemon closes without a word on a peer it does not
		 * allow (DESIGN.md invariant 10), so say that too. */
		if (ctl.quiet)
			return SBXCTL_UNREACHABLE;
		if (errno == EPIPE || errno == ECONNRESET || errno == 0)
			log_warnx("%s unreachable: %s closed the connection "
			    "without a reply (is uid %u allowed on it?)",
			    daemon, path, (unsigned)getuid());
		else
			log_warnx("%s unreachable: %s: %s", daemon, path,
			    strerror(errno));
		return SBXCTL_UNREACHABLE;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR &&
	    rep->error != NULL) {
		rc = ctl_server_error(daemon, rep->error);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return rc;
	}
	if (rep->body_case != want) {
		log_warnx("%s at %s answered with an unexpected message "
		    "(body %d, expected %d)", daemon, path,
		    (int)rep->body_case, (int)want);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_ERR;
	}
	*reply = rep;
	return SBXCTL_OK;
}

static void
ctl_print_yerrs(struct yerrs *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		fprintf(stderr, "%s\n", errs->msgs[i]);
}

/* ---- keys and hello ---- */

/* policyd's signing keys, as an orchestrator asks for them: one line
 * each, "KEY-ID current|previous ed25519 HEX". */
static int
ctl_keys(int argc)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__KeyRequest	 kr = SBX__V1__KEY_REQUEST__INIT;
	const Sbx__V1__PublicKey *k;
	char			 hex[65];
	int			 rc;

	if (argc != 1)
		return ctl_usage("keys takes no argument");
	req.body_case = SBX__V1__ENVELOPE__BODY_KEY_REQUEST;
	req.key_request = &kr;
	rc = ctl_call("policyd", ctl.orch_sock, &req,
	    SBX__V1__ENVELOPE__BODY_KEYS, &rep);
	if (rc != SBXCTL_OK)
		return rc;
	if (ctl.json)
		printf("{\"keys\":[");
	for (size_t i = 0; i < rep->keys->n_keys; i++) {
		k = rep->keys->keys[i];
		if (k->public_key.len != 32 || !name_ok(k->key_id)) {
			log_warnx("policyd sent a key that is not 32 bytes "
			    "with a key id");
			sbx__v1__envelope__free_unpacked(rep, NULL);
			return SBXCTL_ERR;
		}
		hex_encode(k->public_key.data, 32, hex);
		if (ctl.json)
			printf("%s{\"key_id\":\"%s\",\"current\":%s,"
			    "\"public_key\":\"ed25519 %s\"}", i ? "," : "",
			    k->key_id, k->current ? "true" : "false", hex);
		else
			printf("%s %s ed25519 %s\n", k->key_id,
			    k->current ? "current" : "previous", hex);
	}
	if (ctl.json)
		printf("]}\n");
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}

/* hello on any daemon socket: who answers and what the socket serves. */
static int
ctl_hello(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__Hello		 h = SBX__V1__HELLO__INIT;
	const Sbx__V1__HelloReply *r;
	int			 rc;

	if (argc != 2)
		return ctl_usage("hello takes a socket path");
	h.protocol_version = SBX_PROTO_VERSION;
	h.client_name = "sbxctl/" SBX_VERSION;
	req.body_case = SBX__V1__ENVELOPE__BODY_HELLO;
	req.hello = &h;
	rc = ctl_call(argv[1], argv[1], &req,
	    SBX__V1__ENVELOPE__BODY_HELLO_REPLY, &rep);
	if (rc != SBXCTL_OK)
		return rc;
	r = rep->hello_reply;
	printf("%s %s socket %s protocol %u\n", r->server_name,
	    r->server_version, r->socket, (unsigned)r->protocol_version);
	for (size_t i = 0; i < r->n_requests; i++)
		printf("%u %s\n", (unsigned)r->requests[i]->field,
		    r->requests[i]->name);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}

/* ---- compile ---- */

static int
ctl_compile(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__CompileRequest	 creq = SBX__V1__COMPILE_REQUEST__INIT;
	struct yerrs		 errs = { 0 };
	int			 rc;

	if (argc == 3 && strcmp(argv[1], "--preview") == 0) {
		creq.preview = 1;
		argv++;
		argc--;
	}
	if (argc != 2)
		return ctl_usage("compile takes [--preview] and one task file");
	if ((creq.task = parse_task_file(argv[1], &errs)) == NULL) {
		ctl_print_yerrs(&errs);
		yerrs_free(&errs);
		log_warnx("%s: task file not sent", argv[1]);
		return SBXCTL_ERR;
	}
	yerrs_free(&errs);
	req.body_case = SBX__V1__ENVELOPE__BODY_COMPILE;
	req.compile = &creq;
	rc = ctl_call("policyd", ctl.orch_sock, &req,
	    SBX__V1__ENVELOPE__BODY_COMPILED, &rep);
	sbx__v1__task__free_unpacked(creq.task, NULL);
	if (rc != SBXCTL_OK)
		return rc;
	print_compiled(stdout, rep->compiled, ctl.json);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}

/* ---- run ---- */

/*
 * Compile and run: policyd records the execution, launchd-sbx runs it,
 * and the result comes back as one JSON object.  Exit 0 means it ran,
 * whatever the program's own exit code; refusals map as everywhere else.
 */
/* The public key a receipt is checked with: keyfile, else the state
 * directory's policyd.pub.  0, or -1 (said). */
static int
ctl_pubkey(const char *keyfile, unsigned char pk[32])
{
	char	*path, err[512];
	int	 rc;

	if (keyfile != NULL)
		path = xstrdup(keyfile);
	else
		xasprintf(&path, "%s/etc/policyd.pub", ctl.state);
	rc = sign_pubkey_load(path, pk, err, sizeof(err));
	if (rc == -1)
		log_warnx("%s", err);
	free(path);
	return rc;
}

static void
ctl_print_receipt(FILE *f, const Sbx__V1__Receipt *r)
{
	fprintf(f, "receipt: verified (key %s)\n", r->key_id);
	fprintf(f, "task: %s\nexecution: %s\ntenant: %s\nuser: %s\n",
	    r->task_id, r->execution_id, r->tenant, r->user);
	fprintf(f, "policy: %s\nexit: %d\nsignal: %d\nissued_at: %lld\n",
	    r->policy_hash, r->exit_code, r->signal,
	    (long long)r->issued_at);
	for (size_t i = 0; i < r->n_outputs; i++)
		fprintf(f, "output: %s %s %llu %s\n", r->outputs[i]->name,
		    r->outputs[i]->type,
		    (unsigned long long)r->outputs[i]->bytes,
		    r->outputs[i]->sha256);
}

/*
 * A run's receipt: verified with policyd's public key and matched to the
 * result it came with; what it binds goes to stderr (stdout is the
 * result's JSON); kept in file (an encoded SignedReceipt) if one is named.
 * SBXCTL_OK or SBXCTL_ERR.
 */
static int
ctl_run_receipt(const Sbx__V1__ExecutionResult *res, const char *file)
{
	Sbx__V1__Receipt	*r;
	unsigned char		 pk[32];
	char			 err[768];
	uint8_t			*buf;
	size_t			 len;
	FILE			*f;

	if (res->receipt == NULL) {
		log_warnx("the result carries no receipt");
		return SBXCTL_ERR;
	}
	/* No key here (another state directory, -S alone): said, and the
	 * run still ran; a receipt that fails to verify is an error. */
	if (ctl_pubkey(NULL, pk) == -1) {
		log_warnx("receipt: not verified (no public key)");
		return SBXCTL_OK;
	}
	if ((r = receipt_verify(pk, res->receipt, err, sizeof(err))) ==
	    NULL || receipt_match(r, res, err, sizeof(err)) == -1) {
		log_warnx("receipt: %s", err);
		if (r != NULL)
			sbx__v1__receipt__free_unpacked(r, NULL);
		return SBXCTL_ERR;
	}
	ctl_print_receipt(stderr, r);
	sbx__v1__receipt__free_unpacked(r, NULL);
	if (file == NULL)
		return SBXCTL_OK;
	len = sbx__v1__signed_receipt__get_packed_size(res->receipt);
	buf = xmalloc(len);
	sbx__v1__signed_receipt__pack(res->receipt, buf);
	if ((f = fopen(file, "wbx")) == NULL) {
		log_warn("%s", file);
		free(buf);
		return SBXCTL_ERR;
	}
	if (fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		log_warn("%s", file);
		free(buf);
		return SBXCTL_ERR;
	}
	free(buf);
	return SBXCTL_OK;
}

/* sbxctl receipt verify [--key pubfile] file */
static int
ctl_receipt(int argc, char **argv)
{
	Sbx__V1__SignedReceipt	*sr;
	Sbx__V1__Receipt	*r;
	const char		*keyfile = NULL, *file = NULL;
	unsigned char		 pk[32];
	char			*buf, err[768];
	size_t			 len;

	if (argc == 5 && strcmp(argv[1], "verify") == 0 &&
	    strcmp(argv[2], "--key") == 0) {
		keyfile = argv[3];
		file = argv[4];
	} else if (argc == 3 && strcmp(argv[1], "verify") == 0)
		file = argv[2];
	else
		return ctl_usage("receipt verify takes [--key pubfile] and "
		    "one receipt file");
	if (ctl_pubkey(keyfile, pk) == -1)
		return SBXCTL_ERR;
	if ((buf = read_file(file, 1024 * 1024, &len)) == NULL) {
		log_warn("%s", file);
		return SBXCTL_ERR;
	}
	sr = sbx__v1__signed_receipt__unpack(NULL, len, (uint8_t *)buf);
	free(buf);
	if (sr == NULL) {
		log_warnx("%s: not an encoded SignedReceipt", file);
		return SBXCTL_ERR;
	}
	r = receipt_verify(pk, sr, err, sizeof(err));
	sbx__v1__signed_receipt__free_unpacked(sr, NULL);
	if (r == NULL) {
		log_warnx("%s: %s", file, err);
		return SBXCTL_ERR;
	}
	ctl_print_receipt(stdout, r);
	sbx__v1__receipt__free_unpacked(r, NULL);
	return SBXCTL_OK;
}

static int
ctl_run(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__RunRequest	 rreq = SBX__V1__RUN_REQUEST__INIT;
	struct yerrs		 errs = { 0 };
	const char		*rfile = NULL;
	int			 rc;

	if (argc == 4 && strcmp(argv[1], "--receipt") == 0) {
		rfile = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc != 2)
		return ctl_usage("run takes [--receipt file] and one task "
		    "file");
	if ((rreq.task = parse_task_file(argv[1], &errs)) == NULL) {
		ctl_print_yerrs(&errs);
		yerrs_free(&errs);
		log_warnx("%s: task file not sent", argv[1]);
		return SBXCTL_ERR;
	}
	yerrs_free(&errs);
	if (rreq.task->code.len == 0) {
		sbx__v1__task__free_unpacked(rreq.task, NULL);
		log_warnx("%s: a run needs code (code: FILE)", argv[1]);
		return SBXCTL_ERR;
	}
	req.body_case = SBX__V1__ENVELOPE__BODY_RUN;
	req.run = &rreq;
	rc = ctl_call("policyd", ctl.orch_sock, &req,
	    SBX__V1__ENVELOPE__BODY_RESULT, &rep);
	sbx__v1__task__free_unpacked(rreq.task, NULL);
	if (rc != SBXCTL_OK)
		return rc;
	print_result(stdout, rep->result);
	fflush(stdout);
	rc = ctl_run_receipt(rep->result, rfile);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

/* ---- dataset, image (launchd-sbx's admin socket) ---- */

/* Datasets are spreadsheets and CSVs; launchd-sbx caps its frames. */
#define SBXCTL_DATASET_MAX	(64 * 1024 * 1024)

static int
ctl_dataset(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__DatasetPut	 put = SBX__V1__DATASET_PUT__INIT;
	Sbx__V1__DatasetList	 list = SBX__V1__DATASET_LIST__INIT;
	Sbx__V1__DatasetNames	*dn;
	char			*data;
	size_t			 len;
	int			 rc;

	if (argc >= 2 && strcmp(argv[1], "add") == 0) {
		if (argc != 4)
			return ctl_usage("dataset add takes a name and a file");
		if (!name_ok(argv[2]) || argv[2][0] == '.') {
			log_warnx("\"%s\" is not a dataset name: want 1..128 "
			    "of [A-Za-z0-9._@:-], not starting with a dot",
			    argv[2]);
			return SBXCTL_USAGE;
		}
		if ((data = read_file(argv[3], SBXCTL_DATASET_MAX,
		    &len)) == NULL) {
			log_warn("%s", argv[3]);
			return SBXCTL_ERR;
		}
		put.name = argv[2];
		put.content.data = (uint8_t *)data;
		put.content.len = len;
		req.body_case = SBX__V1__ENVELOPE__BODY_DATASET_PUT;
		req.dataset_put = &put;
		rc = ctl_call("launchd-sbx", ctl.launchd_sock, &req,
		    SBX__V1__ENVELOPE__BODY_ACK, &rep);
		free(data);
		if (rc != SBXCTL_OK)
			return rc;
		printf("%s\n", rep->ack->detail);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_OK;
	}
	if (argc >= 2 && strcmp(argv[1], "list") == 0) {
		if (argc != 2)
			return ctl_usage("dataset list takes no arguments");
		req.body_case = SBX__V1__ENVELOPE__BODY_DATASET_LIST;
		req.dataset_list = &list;
		rc = ctl_call("launchd-sbx", ctl.launchd_sock, &req,
		    SBX__V1__ENVELOPE__BODY_DATASET_NAMES, &rep);
		if (rc != SBXCTL_OK)
			return rc;
		dn = rep->dataset_names;
		if (ctl.json) {
			fputs("{\"datasets\": [", stdout);
			for (size_t i = 0; i < dn->n_names; i++) {
				fputs(i ? ", " : "", stdout);
				print_json_string(stdout, dn->names[i]);
			}
			fputs("]}\n", stdout);
		} else
			for (size_t i = 0; i < dn->n_names; i++) {
				print_yaml_scalar(stdout, dn->names[i]);
				fputc('\n', stdout);
			}
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_OK;
	}
	return ctl_usage("dataset needs add or list");
}

static int
ctl_image(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__ImageList	 list = SBX__V1__IMAGE_LIST__INIT;
	Sbx__V1__ImageInfos	*ii;
	int			 rc;

	if (argc != 2 || strcmp(argv[1], "list") != 0)
		return ctl_usage("image needs list");
	req.body_case = SBX__V1__ENVELOPE__BODY_IMAGE_LIST;
	req.image_list = &list;
	rc = ctl_call("launchd-sbx", ctl.launchd_sock, &req,
	    SBX__V1__ENVELOPE__BODY_IMAGE_INFOS, &rep);
	if (rc != SBXCTL_OK)
		return rc;
	ii = rep->image_infos;
	if (ctl.json)
		fputs("{\"images\": [", stdout);
	for (size_t i = 0; i < ii->n_images; i++) {
		const Sbx__V1__ImageInfo *im = ii->images[i];

		if (ctl.json) {
			fputs(i ? ",\n  {\"digest\": " : "\n  {\"digest\": ",
			    stdout);
			print_json_string(stdout, im->digest);
			printf(", \"verified\": %s, \"unpacked\": %s}",
			    im->verified ? "true" : "false",
			    im->unpacked ? "true" : "false");
		} else {
			print_yaml_scalar(stdout, im->digest);
			printf("  %s  %s\n", im->verified ? "verified" :
			    "not-verified-yet", im->unpacked ? "unpacked" :
			    "packed");
		}
	}
	if (ctl.json)
		fputs(ii->n_images ? "\n]}\n" : "]}\n", stdout);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}

/* ---- entitlement ---- */

static int
ctl_ent_send_add(Sbx__V1__Entitlement *e, int remove, char **detail)
{
	Sbx__V1__Envelope		 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__EntitlementAdd		 add = SBX__V1__ENTITLEMENT_ADD__INIT;
	Sbx__V1__EntitlementRemove	 rm = SBX__V1__ENTITLEMENT_REMOVE__INIT;
	int				 rc;

	if (remove) {
		rm.entitlement = e;
		req.body_case = SBX__V1__ENVELOPE__BODY_ENTITLEMENT_REMOVE;
		req.entitlement_remove = &rm;
	} else {
		add.entitlement = e;
		req.body_case = SBX__V1__ENVELOPE__BODY_ENTITLEMENT_ADD;
		req.entitlement_add = &add;
	}
	rc = ctl_call("policyd", ctl.admin_sock, &req,
	    SBX__V1__ENVELOPE__BODY_ACK, &rep);
	if (rc != SBXCTL_OK)
		return rc;
	if (detail != NULL)
		*detail = xstrdup(rep->ack && rep->ack->detail ?
		    rep->ack->detail : "");
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}

enum { OPT_TENANT = 1, OPT_USER, OPT_DATASET, OPT_HOST, OPT_LIMIT };

static const struct option ent_opts[] = {
	{ "tenant",	required_argument, NULL, OPT_TENANT },
	{ "user",	required_argument, NULL, OPT_USER },
	{ "dataset",	required_argument, NULL, OPT_DATASET },
	{ "host",	required_argument, NULL, OPT_HOST },
	{ "limit",	required_argument, NULL, OPT_LIMIT },
	{ NULL, 0, NULL, 0 }
};

/* Flags of add/remove/list into e; which flags are allowed is `allowed`,
 * a bit per OPT_*. */
static int
ctl_ent_flags(int argc, char **argv, Sbx__V1__Entitlement *e, int allowed)
{
	char	 err[256];
	int	 ch;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "", ent_opts, NULL)) != -1) {
		if (ch == '?' || ch == ':') {
			snprintf(err, sizeof(err), "%s: unknown flag or "
			    "missing value", argv[optind - 1]);
			return ctl_usage(err);
		}
		if (!(allowed & (1 << ch))) {
			snprintf(err, sizeof(err), "entitlement %s does not "
			    "take --%s", argv[0], ent_opts[ch - 1].name);
			return ctl_usage(err);
		}
		switch (ch) {
		case OPT_TENANT:
		case OPT_USER:
			if (!name_ok(optarg) && !(ch == OPT_USER &&
			    strcmp(optarg, "*") == 0)) {
				log_warnx("--%s \"%s\": not a valid name "
				    "(1-128 of A-Z a-z 0-9 . _ - @ :%s)",
				    ent_opts[ch - 1].name, optarg,
				    ch == OPT_USER ? ", or \"*\"" : "");
				return SBXCTL_USAGE;
			}
			if (ch == OPT_TENANT) {
				if (e->tenant[0] != '\0')
					free(e->tenant);
				e->tenant = xstrdup(optarg);
			} else {
				if (e->user[0] != '\0')
					free(e->user);
				e->user = xstrdup(optarg);
			}
			break;
		case OPT_DATASET:
		case OPT_HOST:
			if (!name_ok(optarg)) {
				log_warnx("--%s \"%s\": not a valid name",
				    ent_opts[ch - 1].name, optarg);
				return SBXCTL_USAGE;
			}
			if (ch == OPT_DATASET)
				parse_strv_add(&e->datasets, &e->n_datasets,
				    optarg);
			else
				parse_strv_add(&e->hosts, &e->n_hosts, optarg);
			break;
		case OPT_LIMIT:
			if (parse_limit(optarg, e->max_limits, err,
			    sizeof(err)) == -1) {
				log_warnx("%s", err);
				return SBXCTL_USAGE;
			}
			break;
		}
	}
	if (optind != argc) {
		snprintf(err, sizeof(err), "entitlement %s: unexpected "
		    "argument \"%s\"", argv[0], argv[optind]);
		return ctl_usage(err);
	}
	return SBXCTL_OK;
}

static int
ctl_ent_addremove(int argc, char **argv, int remove)
{
	Sbx__V1__Entitlement	*e = parse_entitlement_new();
	char			*detail = NULL;
	int			 rc, allowed;

	allowed = 1 << OPT_TENANT | 1 << OPT_USER | 1 << OPT_DATASET |
	    1 << OPT_HOST;
	if (!remove)
		allowed |= 1 << OPT_LIMIT;
	if ((rc = ctl_ent_flags(argc, argv, e, allowed)) != SBXCTL_OK)
		goto out;
	if (e->tenant[0] == '\0' || e->user[0] == '\0') {
		rc = ctl_usage("entitlement add/remove need --tenant and "
		    "--user");
		goto out;
	}
	/* policyd's acknowledgement says what changed; echo it. */
	if ((rc = ctl_ent_send_add(e, remove, &detail)) == SBXCTL_OK) {
		if (detail[0] != '\0')
			printf("%s\n", detail);
		else
			printf("%s %s/%s\n", remove ? "removed from" :
			    "added to", e->tenant, e->user);
	}
 out:
	free(detail);
	sbx__v1__entitlement__free_unpacked(e, NULL);
	return rc;
}

static int
ctl_ent_list(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__EntitlementList list = SBX__V1__ENTITLEMENT_LIST__INIT;
	Sbx__V1__Entitlement	*e = parse_entitlement_new();
	int			 rc;

	rc = ctl_ent_flags(argc, argv, e, 1 << OPT_TENANT | 1 << OPT_USER);
	if (rc != SBXCTL_OK)
		goto out;
	list.tenant = e->tenant;
	list.user = e->user;
	req.body_case = SBX__V1__ENVELOPE__BODY_ENTITLEMENT_LIST;
	req.entitlement_list = &list;
	rc = ctl_call("policyd", ctl.admin_sock, &req,
	    SBX__V1__ENVELOPE__BODY_ENTITLEMENTS, &rep);
	if (rc == SBXCTL_OK) {
		print_entitlements(stdout, rep->entitlements, ctl.json);
		sbx__v1__envelope__free_unpacked(rep, NULL);
	}
 out:
	sbx__v1__entitlement__free_unpacked(e, NULL);
	return rc;
}

/* Every entry replaces its (tenant, user) row; the file is checked whole
 * before the first is sent, so a typo never half-applies a file. */
static int
ctl_ent_import(int argc, char **argv)
{
	Sbx__V1__Entitlement	**v;
	struct yerrs		  errs = { 0 };
	size_t			  n;
	int			  rc = SBXCTL_OK;

	if (argc != 2)
		return ctl_usage("entitlement import takes one file");
	if (parse_entitlements_file(argv[1], &v, &n, &errs) == -1) {
		ctl_print_yerrs(&errs);
		yerrs_free(&errs);
		log_warnx("%s: nothing imported", argv[1]);
		return SBXCTL_ERR;
	}
	yerrs_free(&errs);
	for (size_t i = 0; i < n; i++) {
		if ((rc = ctl_ent_send_add(v[i], 0, NULL)) != SBXCTL_OK) {
			log_warnx("%s: stopped at entry %zu (%s/%s); %zu of "
			    "%zu imported", argv[1], i, v[i]->tenant,
			    v[i]->user, i, n);
			break;
		}
	}
	if (rc == SBXCTL_OK)
		printf("imported %zu entitlement%s from %s\n", n,
		    n == 1 ? "" : "s", argv[1]);
	parse_entitlements_free(v, n);
	return rc;
}

static int
ctl_entitlement(int argc, char **argv)
{
	if (argc < 2)
		return ctl_usage("entitlement needs add, remove, list or "
		    "import");
	if (strcmp(argv[1], "add") == 0)
		return ctl_ent_addremove(argc - 1, argv + 1, 0);
	if (strcmp(argv[1], "remove") == 0)
		return ctl_ent_addremove(argc - 1, argv + 1, 1);
	if (strcmp(argv[1], "list") == 0)
		return ctl_ent_list(argc - 1, argv + 1);
	if (strcmp(argv[1], "import") == 0)
		return ctl_ent_import(argc - 1, argv + 1);
	return ctl_usage("entitlement needs add, remove, list or import");
}

/* ---- template ---- */

static int
ctl_template_fetch(const char *name, uint32_t version,
    Sbx__V1__Envelope **rep)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT;
	Sbx__V1__TemplateGet	 get = SBX__V1__TEMPLATE_GET__INIT;

	get.name = (char *)name;
	get.version = version;
	req.body_case = SBX__V1__ENVELOPE__BODY_TEMPLATE_GET;
	req.template_get = &get;
	return ctl_call("policyd", ctl.admin_sock, &req,
	    SBX__V1__ENVELOPE__BODY_TEMPLATE, rep);
}

/* A diff side: a template file parsed here, or NAME@VERSION from policyd.
 * Returns an exit status; *pol is the caller's to policy_free(). */
static int
ctl_template_side(const char *arg, Sbx__V1__Policy **pol)
{
	Sbx__V1__Envelope	*rep;
	struct yerrs		 errs = { 0 };
	char			*name, err[256];
	uint32_t		 version;
	int			 rc;

	*pol = NULL;
	if (parse_is_path(arg)) {
		if ((*pol = policy_parse_file(arg, &errs)) == NULL) {
			ctl_print_yerrs(&errs);
			log_warnx("%s: not a valid template", arg);
		}
		yerrs_free(&errs);
		return *pol == NULL ? SBXCTL_ERR : SBXCTL_OK;
	}
	if (parse_template_ref(arg, &name, &version, err, sizeof(err)) == -1)
		return ctl_usage(err);
	rc = ctl_template_fetch(name, version, &rep);
	free(name);
	if (rc != SBXCTL_OK)
		return rc;
	if (rep->template_ == NULL || rep->template_->policy == NULL) {
		log_warnx("policyd sent template %s without a policy", arg);
		rc = SBXCTL_ERR;
	} else
		*pol = policy_dup(rep->template_->policy);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

static int
ctl_template_diff(const char *a, const char *b)
{
	Sbx__V1__Policy		*pa, *pb;
	struct policy_change	*ch;
	size_t			 n, nwide = 0;
	int			 rc;

	if ((rc = ctl_template_side(a, &pa)) != SBXCTL_OK)
		return rc;
	if ((rc = ctl_template_side(b, &pb)) != SBXCTL_OK) {
		policy_free(pa);
		return rc;
	}
	n = policy_diff(pa, pb, &ch);
	for (size_t i = 0; i < n; i++) {
		printf("%s\n", ch[i].text);
		if (ch[i].widening)
			nwide++;
	}
	if (nwide > 0)
		printf("%s widens %s: %zu of %zu change%s grant%s more\n", b,
		    a, nwide, n, n == 1 ? "" : "s", nwide == 1 ? "s" : "");
	else if (n > 0)
		printf("no widening: %s grants nothing %s does not (%zu "
		    "change%s, none widening)\n", b, a, n, n == 1 ? "" : "s");
	else
		printf("no widening: %s and %s grant the same\n", a, b);
	policy_changes_free(ch, n);
	policy_free(pa);
	policy_free(pb);
	return nwide > 0 ? SBXCTL_ERR : SBXCTL_OK;
}

static int
ctl_template(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__TemplateList	 list = SBX__V1__TEMPLATE_LIST__INIT;
	char			*name, err[256];
	uint32_t		 version;
	int			 rc;

	if (argc >= 2 && strcmp(argv[1], "list") == 0) {
		if (argc != 2)
			return ctl_usage("template list takes no arguments");
		req.body_case = SBX__V1__ENVELOPE__BODY_TEMPLATE_LIST;
		req.template_list = &list;
		rc = ctl_call("policyd", ctl.admin_sock, &req,
		    SBX__V1__ENVELOPE__BODY_TEMPLATES, &rep);
		if (rc != SBXCTL_OK)
			return rc;
		print_templates(stdout, rep->templates, ctl.json);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_OK;
	}
	if (argc >= 2 && strcmp(argv[1], "show") == 0) {
		if (argc != 3)
			return ctl_usage("template show takes one "
			    "name[@version]");
		if (parse_template_ref(argv[2], &name, &version, err,
		    sizeof(err)) == -1)
			return ctl_usage(err);
		rc = ctl_template_fetch(name, version, &rep);
		free(name);
		if (rc != SBXCTL_OK)
			return rc;
		print_template(stdout, rep->template_);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_OK;
	}
	if (argc >= 2 && strcmp(argv[1], "diff") == 0) {
		if (argc != 4)
			return ctl_usage("template diff takes two templates "
			    "(name@version or file)");
		return ctl_template_diff(argv[2], argv[3]);
	}
	return ctl_usage("template needs list, show or diff");
}

/* ---- audit ---- */

static char *
ctl_daemon_socket(const struct ctl_daemon *d)
{
	char	*p;

	if (strcmp(d->name, "policyd") == 0)
		return xstrdup(ctl.orch_sock);
	if (strcmp(d->name, "launchd-sbx") == 0)
		return xstrdup(ctl.launchd_sock);
	xasprintf(&p, "%s/sockets/%s", ctl.state, d->socket);
	return p;
}

static int
ctl_event_cmp(const void *a, const void *b)
{
	const Sbx__V1__AuditEvent	*x = *(Sbx__V1__AuditEvent *const *)a;
	const Sbx__V1__AuditEvent	*y = *(Sbx__V1__AuditEvent *const *)b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	if (strcmp(x->daemon, y->daemon) != 0)
		return strcmp(x->daemon, y->daemon);
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Ask one daemon of the list; CTL_ABSENT for an optional one not here. */
#define CTL_ABSENT	(-2)
static int
ctl_audit_one(const struct ctl_daemon *d, Sbx__V1__Envelope *req,
    Sbx__V1__Envelope__BodyCase want, Sbx__V1__Envelope **repp)
{
	char			*path = ctl_daemon_socket(d);
	Sbx__V1__Envelope	*rep = NULL;
	int			 r;

	*repp = NULL;
	if (d->optional && access(path, F_OK) == -1) {
		free(path);
		return CTL_ABSENT;
	}
	/* Operators may be on policyd's admin socket only: try it when the
	 * orchestrator socket will not have us. */
	if (strcmp(d->name, "policyd") == 0) {
		ctl.quiet = 1;
		r = ctl_call(d->name, path, req, want, &rep);
		ctl.quiet = 0;
		if (r == SBXCTL_UNREACHABLE) {
			ctl.quiet = 1;
			r = ctl_call(d->name, ctl.admin_sock, req, want, &rep);
			ctl.quiet = 0;
		}
		/* Neither: report the orchestrator socket. */
		if (r == SBXCTL_UNREACHABLE)
			r = ctl_call(d->name, path, req, want, &rep);
	} else
		r = ctl_call(d->name, path, req, want, &rep);
	free(path);
	if (r == SBXCTL_OK)
		*repp = rep;
	return r;
}

/* Records a page of audit ship asks a daemon for; the daemon cuts it
 * shorter to fit its max_frame_kb. */
#define CTL_SHIP_PAGE	1000

/*
 * audit ship --host NAME: each daemon's chain in pages (AuditQuery.chain),
 * from the record before the last one the fleet holds, until a daemon has
 * no more.  A page that is not the next records in order (a daemon that
 * ignores after_seq pages from 1 again) is refused, never shipped with a
 * hole.
 */
static int
ctl_audit_ship(const char *conninfo, const char *host)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__AuditQuery	 q = SBX__V1__AUDIT_QUERY__INIT;
	struct fleet_ship	*fs;
	char			 err[256];
	uint64_t		 after;
	int			 rc, r, first;

	if ((fs = fleet_ship_open(conninfo, host, &rc)) == NULL)
		return rc;
	q.task_id = (char *)"";
	q.limit = CTL_SHIP_PAGE;
	q.chain = 1;
	req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
	req.audit_query = &q;
	for (size_t i = 0; i < CTL_NDAEMONS; i++) {
		const struct ctl_daemon	*d = &ctl_audit_daemons[i];

		if (fleet_ship_resume(fs, d->name, &after) == -1)
			break;
		for (first = 1;; first = 0) {
			Sbx__V1__AuditRecords	*recs;

			q.after_seq = after;
			r = ctl_audit_one(d, &req,
			    SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS, &rep);
			if (r == CTL_ABSENT)
				break;
			if (r != SBXCTL_OK) {
				/* What did answer is shipped; a daemon that
				 * did not is an error all the same. */
				fleet_ship_fail(fs, r);
				break;
			}
			recs = rep->audit_records;
			if (fleet_page_check(d->name, after, q.limit,
			    recs->events, recs->n_events, err,
			    sizeof(err)) == -1) {
				log_warnx("host %s: %s: nothing of this page "
				    "shipped", host, err);
				fleet_ship_fail(fs, SBXCTL_ERR);
				r = -1;
			} else if (recs->n_events == 0 && first && after > 0) {
				log_warnx("host %s %s: the fleet holds seq %"
				    PRIu64 " but the daemon has no record %"
				    PRIu64 " (a chain started again, or another "
				    "host shipping as %s): nothing shipped",
				    host, d->name, after + 1, after + 1, host);
				fleet_ship_fail(fs, SBXCTL_ERR);
				r = -1;
			} else if (recs->n_events == 0)
				r = 1;
			else {
				r = fleet_ship_page(fs, d->name, recs->events,
				    recs->n_events);
				after = recs->events[recs->n_events - 1]->seq;
			}
			sbx__v1__envelope__free_unpacked(rep, NULL);
			if (r != 0)
				break;
		}
	}
	return fleet_ship_close(fs);
}

/* Ask every daemon on the list; collect the replies of type want. */
static int
ctl_audit_each(Sbx__V1__Envelope *req, Sbx__V1__Envelope__BodyCase want,
    Sbx__V1__Envelope ***reps, size_t *nreps)
{
	int	 rc = SBXCTL_OK;

	*reps = xcalloc(CTL_NDAEMONS, sizeof(**reps));
	*nreps = 0;
	for (size_t i = 0; i < CTL_NDAEMONS; i++) {
		Sbx__V1__Envelope	*rep;
		int			 r;

		r = ctl_audit_one(&ctl_audit_daemons[i], req, want, &rep);
		if (r == CTL_ABSENT)
			continue;
		if (r != SBXCTL_OK) {
			rc = r;
			continue;
		}
		(*reps)[(*nreps)++] = rep;
	}
	return rc;
}

static int
ctl_audit(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, **reps;
	Sbx__V1__AuditQuery	 q = SBX__V1__AUDIT_QUERY__INIT;
	Sbx__V1__AuditVerify	 v = SBX__V1__AUDIT_VERIFY__INIT;
	Sbx__V1__AuditEvent	**ev = NULL;
	Sbx__V1__AuditVerifyReply **vr;
	size_t			 nreps, nev = 0;
	int			 rc, broken = 0;

	const char		*conninfo = getenv("SBX_STORE_CONNINFO");
	Sbx__V1__AuditEvent	**fev = NULL;
	size_t			 nfev = 0;

	/* A fleet (README "Running a fleet"): the chains shipped to its
	 * database, checked from there; this host's, shipped there. */
	if (argc >= 3 && strcmp(argv[1], "verify") == 0 &&
	    strcmp(argv[2], "--fleet") == 0) {
		long long	 stale = 3600;
		char		*end;

		if (argc == 5 && strcmp(argv[3], "--stale") == 0) {
			stale = strtoll(argv[4], &end, 10);
			if (*end != '\0' || stale < 0)
				return ctl_usage("--stale takes seconds");
		} else if (argc != 3)
			return ctl_usage("audit verify --fleet [--stale "
			    "seconds]");
		return fleet_verify(conninfo, stale);
	}
	if (argc == 4 && strcmp(argv[1], "ship") == 0 &&
	    strcmp(argv[2], "--host") == 0)
		return ctl_audit_ship(conninfo, argv[3]);
	if (argc != 2)
		return ctl_usage("audit takes a task id, verify [--fleet], or "
		    "ship --host name");
	if (strcmp(argv[1], "verify") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY;
		req.audit_verify = &v;
		rc = ctl_audit_each(&req, SBX__V1__ENVELOPE__BODY_AUDIT_VERIFIED,
		    &reps, &nreps);
		vr = xcalloc(nreps, sizeof(*vr));
		for (size_t i = 0; i < nreps; i++) {
			vr[i] = reps[i]->audit_verified;
			if (!vr[i]->ok)
				broken = 1;
		}
		print_verify(stdout, vr, nreps, ctl.json);
		free(vr);
		goto done;
	}
	if (!name_ok(argv[1])) {
		log_warnx("\"%s\" is not a valid task id", argv[1]);
		return SBXCTL_USAGE;
	}
	q.task_id = argv[1];
	req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
	req.audit_query = &q;
	rc = ctl_audit_each(&req, SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS, &reps,
	    &nreps);
	for (size_t i = 0; i < nreps; i++) {
		Sbx__V1__AuditRecords	*r = reps[i]->audit_records;

		ev = xreallocarray(ev, nev + r->n_events + 1, sizeof(*ev));
		for (size_t k = 0; k < r->n_events; k++)
			ev[nev++] = r->events[k];
	}
	/* In a fleet, every host's shipped records of the task, named
	 * host/daemon, in place of this host's own (shipped or not yet). */
	if (conninfo != NULL && *conninfo != '\0') {
		int	 r2 = fleet_task(conninfo, argv[1], &fev, &nfev);

		if (r2 != SBXCTL_OK)
			rc = r2;
		else if (nfev > 0) {
			size_t	 keep = 0;

			/* This host's records that were shipped are there
			 * once, under host/daemon. */
			for (size_t i = 0; i < nev; i++) {
				int	 dup = 0;

				for (size_t k = 0; k < nfev && !dup; k++)
					dup = ev[i]->hash.len ==
					    fev[k]->hash.len &&
					    ev[i]->hash.len > 0 &&
					    memcmp(ev[i]->hash.data,
					    fev[k]->hash.data,
					    ev[i]->hash.len) == 0;
				if (!dup)
					ev[keep++] = ev[i];
			}
			nev = keep;
			ev = xreallocarray(ev, nev + nfev + 1, sizeof(*ev));
			for (size_t k = 0; k < nfev; k++)
				ev[nev++] = fev[k];
		}
	}
	if (nev > 0)
		qsort(ev, nev, sizeof(*ev), ctl_event_cmp);
	if (rc == SBXCTL_OK || nev > 0)
		print_audit(stdout, ev, nev, ctl.json);
	if (rc == SBXCTL_OK && nev == 0)
		log_warnx("no audit records for task %s", argv[1]);
	free(ev);
	fleet_task_free(fev, nfev);
 done:
	for (size_t i = 0; i < nreps; i++)
		sbx__v1__envelope__free_unpacked(reps[i], NULL);
	free(reps);
	if (rc == SBXCTL_OK && broken)
		rc = SBXCTL_ERR;
	return rc;
}

/* ---- metrics ---- */

static int
ctl_metrics(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__MetricsRequest	 m = SBX__V1__METRICS_REQUEST__INIT;
	char			*texts[CTL_NDAEMONS + 1], *up = NULL, *t;
	size_t			 ntexts = 0;
	int			 rc, prom = 0;

	if (argc == 2 && strcmp(argv[1], "--prometheus") == 0)
		prom = 1;
	else if (argc != 1)
		return ctl_usage("metrics takes only --prometheus");
	req.body_case = SBX__V1__ENVELOPE__BODY_METRICS_REQUEST;
	req.metrics_request = &m;
	/*
	 * Every daemon's counters, one after the other: their names carry
	 * the daemon (sbx_policyd_..., sbx_egressd_...).  policyd must
	 * answer; a daemon that is not deployed, or keeps no metrics on the
	 * socket we reach, is noted and skipped.  --prometheus: one
	 * exposition, merged by family (metrics.c), and who answered as
	 * sbx_daemon_up; the notes go to stderr, which no scraper reads.
	 */
	if (prom)
		up = xstrdup("# HELP sbx_daemon_up Whether the daemon answered "
		    "sbxctl's metrics request (1) or not (0).\n"
		    "# TYPE sbx_daemon_up gauge\n");
	for (size_t i = 0; i < CTL_NDAEMONS; i++) {
		const struct ctl_daemon	*d = &ctl_audit_daemons[i];
		char			*path;

		if (strcmp(d->name, "approvald") == 0)
			continue;	/* keeps no metrics */
		if (strcmp(d->name, "policyd") == 0)
			path = xstrdup(ctl.admin_sock);
		else
			path = ctl_daemon_socket(d);
		if (d->optional && access(path, F_OK) == -1) {
			free(path);
			continue;
		}
		ctl.quiet = d->optional;
		rc = ctl_call(d->name, path, &req,
		    SBX__V1__ENVELOPE__BODY_METRICS, &rep);
		ctl.quiet = 0;
		free(path);
		if (rc != SBXCTL_OK) {
			if (!d->optional) {
				for (size_t j = 0; j < ntexts; j++)
					free(texts[j]);
				free(up);
				return rc;
			}
			if (prom) {
				fprintf(stderr, "sbxctl: %s: no metrics\n",
				    d->name);
				xasprintf(&t, "%ssbx_daemon_up{daemon=\"%s\"} "
				    "0\n", up, d->name);
				free(up);
				up = t;
			} else
				printf("# %s: no metrics\n", d->name);
			continue;
		}
		if (prom) {
			texts[ntexts++] = xstrdup(rep->metrics->text);
			xasprintf(&t, "%ssbx_daemon_up{daemon=\"%s\"} 1\n",
			    up, d->name);
			free(up);
			up = t;
		} else {
			fputs(rep->metrics->text, stdout);
			if (rep->metrics->text[0] != '\0' &&
			    rep->metrics->text[strlen(rep->metrics->text) -
			    1] != '\n')
				fputc('\n', stdout);
		}
		sbx__v1__envelope__free_unpacked(rep, NULL);
	}
	if (prom) {
		texts[ntexts++] = up;
		metrics_merge(stdout, texts, ntexts);
		for (size_t j = 0; j < ntexts; j++)
			free(texts[j]);
	}
	return SBXCTL_OK;
}

/* ---- rollout ---- */

static int
ctl_rollout(int argc, char **argv)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep;
	Sbx__V1__RolloutQuery	 q = SBX__V1__ROLLOUT_QUERY__INIT;
	Sbx__V1__RolloutControl	 m = SBX__V1__ROLLOUT_CONTROL__INIT;
	const char		*cmd = argc >= 2 ? argv[1] : "";
	char			*end;
	unsigned long		 pct;
	int			 rc;

	if (strcmp(cmd, "status") == 0) {
		if (argc > 3)
			return ctl_usage("rollout status takes at most a task "
			    "type");
		if (argc == 3 && !name_ok(argv[2])) {
			log_warnx("\"%s\" is not a valid task type", argv[2]);
			return SBXCTL_USAGE;
		}
		q.type = argc == 3 ? argv[2] : (char *)"";
		req.body_case = SBX__V1__ENVELOPE__BODY_ROLLOUT_QUERY;
		req.rollout_query = &q;
	} else if (strcmp(cmd, "promote") == 0 || strcmp(cmd, "halt") == 0 ||
	    strcmp(cmd, "set-percent") == 0) {
		int	 setp = strcmp(cmd, "set-percent") == 0;

		if (argc != (setp ? 4 : 3))
			return ctl_usage(setp ? "rollout set-percent takes a "
			    "task type and a percent (0..100)" : "rollout "
			    "promote and halt take a task type");
		if (!name_ok(argv[2])) {
			log_warnx("\"%s\" is not a valid task type", argv[2]);
			return SBXCTL_USAGE;
		}
		m.type = argv[2];
		if (setp) {
			errno = 0;
			pct = strtoul(argv[3], &end, 10);
			if (argv[3][0] < '0' || argv[3][0] > '9' ||
			    *end != '\0' || errno != 0 || pct > 100) {
				log_warnx("percent \"%s\": want a whole "
				    "number from 0 to 100", argv[3]);
				return SBXCTL_USAGE;
			}
			m.percent = (uint32_t)pct;
			m.action = SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_SET_PERCENT;
		} else if (strcmp(cmd, "promote") == 0)
			m.action = SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_PROMOTE;
		else
			m.action = SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_HALT;
		req.body_case = SBX__V1__ENVELOPE__BODY_ROLLOUT_CONTROL;
		req.rollout_control = &m;
	} else
		return ctl_usage("rollout needs status, promote, halt or "
		    "set-percent");
	rc = ctl_call("policyd", ctl.admin_sock, &req,
	    SBX__V1__ENVELOPE__BODY_ROLLOUTS, &rep);
	if (rc != SBXCTL_OK)
		return rc;
	print_rollouts(stdout, rep->rollouts, ctl.json);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}
static const struct option ctl_longopts[] = {
	{ "help",	no_argument,	NULL,	'h' },
	{ "version",	no_argument,	NULL,	'V' },
	{ NULL,		0,		NULL,	0 }
};

int
main(int argc, char **argv)
{
	const char	*state, *orch = NULL, *admin = NULL, *launchd = NULL;
	const char	*broker = NULL;
	int		 ch, rc;

	log_init("sbxctl", 1, 0);
	if ((state = getenv("SBX_STATE")) == NULL || *state == '\0')
		state = "./run";
	while ((ch = getopt_long(argc, argv, "+hjs:S:A:L:B:", ctl_longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 'j':
			ctl.json = 1;
			break;
		case 's':
			state = optarg;
			break;
		case 'S':
			orch = optarg;
			break;
		case 'A':
			admin = optarg;
			break;
		case 'L':
			launchd = optarg;
			break;
		case 'B':
			broker = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return SBXCTL_OK;
		case 'V':
			printf("sbxctl %s\n", SBX_VERSION);
			return SBXCTL_OK;
		default:
			return ctl_usage(NULL);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1)
		return ctl_usage("no command given");
	/* sbxctl help, and sbxctl CMD --help: the usage, which has every
	 * command's line. */
	if (strcmp(argv[0], "help") == 0 ||
	    (argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0))) {
		fputs(usage_text, stdout);
		return SBXCTL_OK;
	}
	ctl.state = xstrdup(state);
	if (orch != NULL)
		ctl.orch_sock = xstrdup(orch);
	else
		xasprintf(&ctl.orch_sock, "%s/sockets/policyd.sock", state);
	if (admin != NULL)
		ctl.admin_sock = xstrdup(admin);
	else
		xasprintf(&ctl.admin_sock, "%s/sockets/policyd-admin.sock",
		    state);
	if (launchd != NULL)
		ctl.launchd_sock = xstrdup(launchd);
	else
		xasprintf(&ctl.launchd_sock, "%s/sockets/launchd-admin.sock",
		    state);
	if (broker != NULL)
		ctl.broker_sock = xstrdup(broker);
	else
		xasprintf(&ctl.broker_sock, "%s/sockets/brokerd-admin.sock",
		    state);
	ctl.request_id = ((uint64_t)getpid() << 32);

	if (strcmp(argv[0], "compile") == 0)
		rc = ctl_compile(argc, argv);
	else if (strcmp(argv[0], "render") == 0)
		rc = cmd_render(argc, argv, ctl.state, ctl.orch_sock, ctl.json);
	else if (strcmp(argv[0], "run") == 0)
		rc = ctl_run(argc, argv);
	else if (strcmp(argv[0], "receipt") == 0)
		rc = ctl_receipt(argc, argv);
	else if (strcmp(argv[0], "request") == 0)
		rc = cmd_request(argc, argv, ctl.orch_sock);
	else if (strcmp(argv[0], "dataset") == 0)
		rc = ctl_dataset(argc, argv);
	else if (strcmp(argv[0], "image") == 0)
		rc = ctl_image(argc, argv);
	else if (strcmp(argv[0], "secret") == 0)
		rc = cmd_secret(argc, argv, ctl.broker_sock);
	else if (strcmp(argv[0], "entitlement") == 0)
		rc = ctl_entitlement(argc, argv);
	else if (strcmp(argv[0], "template") == 0)
		rc = ctl_template(argc, argv);
	else if (strcmp(argv[0], "audit") == 0)
		rc = ctl_audit(argc, argv);
	else if (strcmp(argv[0], "metrics") == 0)
		rc = ctl_metrics(argc, argv);
	else if (strcmp(argv[0], "rollout") == 0)
		rc = ctl_rollout(argc, argv);
	else if (strcmp(argv[0], "keys") == 0)
		rc = ctl_keys(argc);
	else if (strcmp(argv[0], "hello") == 0)
		rc = ctl_hello(argc, argv);
	else if (strcmp(argv[0], "canary") == 0)
		rc = cmd_canary(argc, argv, ctl.state, ctl.orch_sock);
	else {
		char	 why[160];

		snprintf(why, sizeof(why), "unknown command \"%s\"", argv[0]);
		rc = ctl_usage(why);
	}
	free(ctl.state);
	free(ctl.orch_sock);
	free(ctl.admin_sock);
	free(ctl.launchd_sock);
	free(ctl.broker_sock);
	return rc;
}
