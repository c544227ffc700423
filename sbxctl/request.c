/*
 * request.c: `sbxctl request TASK (--dataset D | --host H [--method M]...
 * [--path P]...) --why TEXT [--source FILE]`, a capability request on
 * policyd's orchestrator socket.  sbxctl decides nothing: policyd grants
 * inside the user's entitlements, forwards the rest to approvald, and
 * denies when no approver is there; this prints what it said.  Exit 0 when
 * granted or pending, 3 when denied (DESIGN.md: policy refused).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "policy.h"
#include "util.h"
#include "sbxctl/sbxctl.h"

#define REQUEST_SOURCE_MAX	(256 * 1024)	/* policyd's cap */
#define REQUEST_REPLY_MAX	(1024 * 1024)

static int
request_usage(const char *why)
{
	if (why != NULL)
		fprintf(stderr, "sbxctl: %s\n", why);
	fprintf(stderr, "usage: sbxctl request task-id (--dataset D | "
	    "--host H [--method M]... [--path P]...)\n"
	    "              --why TEXT [--source FILE]\n");
	return SBXCTL_USAGE;
}

static int
request_error(const Sbx__V1__Error *e)
{
	int	 rc = SBXCTL_ERR;

	if (e->code == SBX__V1__ERROR_CODE__ERROR_POLICY ||
	    e->code == SBX__V1__ERROR_CODE__ERROR_LIMIT)
		rc = SBXCTL_POLICY;
	else if (e->code == SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE)
		rc = SBXCTL_UNREACHABLE;
	if (e->rule != NULL && e->rule[0] != '\0')
		log_warnx("policyd: %s (%s)", e->message, e->rule);
	else
		log_warnx("policyd: %s", e->message);
	return rc;
}

static void
request_print(FILE *f, const Sbx__V1__CapabilityDecision *d)
{
	fprintf(f, "request: %s\n", d->request_id);
	fprintf(f, "status: %s\n", capability_status_name(d->status));
	if (d->policy_hash[0] != '\0')
		fprintf(f, "hash: %s\n", d->policy_hash);
	if (d->reason[0] != '\0') {
		fputs("reason: ", f);
		print_yaml_scalar(f, d->reason);
		fputc('\n', f);
	}
	if (d->approver[0] != '\0')
		fprintf(f, "approver: %s\n", d->approver);
}

int
cmd_request(int argc, char **argv, const char *orch_sock)
{
	static const struct option opts[] = {
		{ "dataset", required_argument, NULL, 'd' },
		{ "host", required_argument, NULL, 'H' },
		{ "method", required_argument, NULL, 'm' },
		{ "path", required_argument, NULL, 'p' },
		{ "why", required_argument, NULL, 'w' },
		{ "source", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 }
	};
	Sbx__V1__Envelope		 req = SBX__V1__ENVELOPE__INIT, *rep = NULL;
	Sbx__V1__CapabilityRequest	 cr = SBX__V1__CAPABILITY_REQUEST__INIT;
	Sbx__V1__AllowRule		 rule = SBX__V1__ALLOW_RULE__INIT;
	const char			*dataset = NULL, *host = NULL;
	const char			*why = NULL, *source = NULL;
	char				**methods = NULL, **paths = NULL;
	char				*src = NULL;
	size_t				 nmethods = 0, npaths = 0, srclen = 0;
	int				 ch, fd, r, rc = SBXCTL_ERR;

	/* 0, not 1: glibc then forgets main's "+" (stop at the first
	 * operand), so options may follow the task id. */
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			dataset = optarg;
			break;
		case 'H':
			host = optarg;
			break;
		case 'm':
			parse_strv_add(&methods, &nmethods, optarg);
			break;
		case 'p':
			parse_strv_add(&paths, &npaths, optarg);
			break;
		case 'w':
			why = optarg;
			break;
		case 's':
			source = optarg;
			break;
		case ':':
			rc = request_usage("an option is missing its value");
			goto done;
		default:
			rc = request_usage("unknown option");
			goto done;
		}
	}
	if (optind != argc - 1) {
		rc = request_usage("request takes one task id");
		goto done;
	}
	if ((dataset == NULL) == (host == NULL)) {
		rc = request_usage("name either --dataset or --host");
		goto done;
	}
	if (dataset != NULL && (nmethods > 0 || npaths > 0)) {
		rc = request_usage("--method and --path go with --host");
		goto done;
	}
	if (why == NULL || why[0] == '\0') {
		rc = request_usage("--why is required: say why the task needs "
		    "it");
		goto done;
	}
	if (source != NULL && (src = read_file(source, REQUEST_SOURCE_MAX,
	    &srclen)) == NULL) {
		log_warn("--source %s (at most %d bytes)", source,
		    REQUEST_SOURCE_MAX);
		goto done;
	}

	cr.task_id = argv[optind];
	cr.why = (char *)why;
	cr.source.data = (uint8_t *)src;
	cr.source.len = srclen;
	if (dataset != NULL) {
		cr.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET;
		cr.dataset = (char *)dataset;
	} else {
		rule.host = (char *)host;
		rule.methods = methods;
		rule.n_methods = nmethods;
		rule.paths = paths;
		rule.n_paths = npaths;
		cr.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_HOST;
		cr.host = &rule;
	}
	frame_env_init(&req, ((uint64_t)getpid() << 32) | 1);
	req.body_case = SBX__V1__ENVELOPE__BODY_CAPABILITY;
	req.capability = &cr;

	if ((fd = frame_client_connect(orch_sock)) == -1) {
		log_warnx("policyd unreachable: cannot connect to %s: %s",
		    orch_sock, strerror(errno));
		rc = SBXCTL_UNREACHABLE;
		goto done;
	}
	r = frame_client_call(fd, &req, &rep, REQUEST_REPLY_MAX);
	close(fd);
	if (r == -2) {
		log_warnx("policyd at %s sent a reply that does not decode",
		    orch_sock);
		goto done;
	}
	if (r == -1) {
		log_warnx("policyd unreachable: %s closed the connection "
		    "without a reply (is uid %u allowed on it?)", orch_sock,
		    (unsigned)getuid());
		rc = SBXCTL_UNREACHABLE;
		goto done;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR) {
		rc = request_error(rep->error);
		goto done;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_DECISION) {
		log_warnx("policyd answered with an unexpected message (body "
		    "%d, expected a decision)", (int)rep->body_case);
		goto done;
	}
	request_print(stdout, rep->decision);
	rc = rep->decision->status ==
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED ? SBXCTL_POLICY :
	    SBXCTL_OK;
done:
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	for (size_t i = 0; i < nmethods; i++)
		free(methods[i]);
	free(methods);
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	free(src);
	return rc;
}
