/*
 * rpc_bench.c: requests per second over policyd's orchestrator socket, and
 * the latency of each, in one of two modes.
 *
 * compile (-m compile, the default): every request is a new task (a
 * distinct id), so each one costs policyd what a real first compile costs:
 * template copy, entitlement checks, canonical hash, Ed25519 signature, and
 * a durable (synchronous=FULL) task and audit record committed before the
 * reply.  A request counts only when the reply is a signed CompileReply.
 *
 * run (-m run): `sbxctl run` of a trivial Python task (`pass`) through the
 * real stack: RunRequest to policyd, which compiles (durably), launches on
 * launchd-sbx and relays the ExecutionResult.  A request counts only when
 * the reply is a result with exit code 0.
 *
 * Anything else is an error and is reported.
 *
 *	rpc_bench [-m compile|run] [-c clients] [-n requests] [-p pause_ms]
 *	    [-T tenant] [-U user] [-D dataset] [-y type] socket
 *
 * -p: each client waits this long after each reply before its next request
 * (not counted in the latency): a steady trickle rather than back-to-back,
 * e.g. so that launchd-sbx's pool refills between runs.
 *
 * Each client is a thread with its own blocking connection (the
 * frame_client API from common/frame.h), sending one request at a time.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "util.h"

struct bench_client {
	pthread_t	 thread;
	unsigned	 index;
	size_t		 first;		/* index of its first request */
	size_t		 count;
	uint64_t	*lat;		/* ns per request, into the shared array */
	size_t		 errors;
	char		 first_error[256];
};

static struct {
	const char		*socket;
	const char		*tenant;
	const char		*user;
	const char		*dataset;
	const char		*type;
	int			 mode_run;	/* -m run */
	unsigned		 pause_ms;	/* -p */
	char			 run[16];	/* distinguishes runs' task ids */
	pthread_barrier_t	 start;
} bench;

static void
bench_usage(void)
{
	fprintf(stderr, "usage: rpc_bench [-m compile|run] [-c clients] "
	    "[-n requests] [-p pause_ms] [-T tenant] [-U user] [-D dataset] "
	    "[-y type] socket\n");
	exit(2);
}

static void
bench_error(struct bench_client *c, const char *fmt, const char *a,
    const char *b)
{
	if (c->errors++ == 0)
		snprintf(c->first_error, sizeof(c->first_error), fmt, a, b);
}

static void *
bench_client_main(void *arg)
{
	struct bench_client	*c = arg;
	Sbx__V1__Envelope	 req, *rep;
	Sbx__V1__CompileRequest	 creq = SBX__V1__COMPILE_REQUEST__INIT;
	Sbx__V1__RunRequest	 rreq = SBX__V1__RUN_REQUEST__INIT;
	Sbx__V1__Task		 task = SBX__V1__TASK__INIT;
	char			 id[96], *datasets[1];
	uint64_t		 t0;
	int			 fd;

	datasets[0] = (char *)bench.dataset;
	task.type = (char *)bench.type;
	task.tenant = (char *)bench.tenant;
	task.user = (char *)bench.user;
	task.datasets = datasets;
	task.n_datasets = bench.dataset[0] != '\0';
	task.id = id;
	creq.task = &task;
	rreq.task = &task;
	if (bench.mode_run) {
		task.code_name = (char *)"main.py";
		task.code.data = (uint8_t *)"pass\n";
		task.code.len = 5;
	}

	fd = frame_client_connect(bench.socket);
	pthread_barrier_wait(&bench.start);
	if (fd == -1) {
		bench_error(c, "connect %s: %s", bench.socket,
		    strerror(errno));
		c->errors = c->count;
		return NULL;
	}
	for (size_t i = 0; i < c->count; i++) {
		snprintf(id, sizeof(id), "bench-%s-%u-%zu", bench.run,
		    c->index, i);
		sbx__v1__envelope__init(&req);
		frame_env_init(&req, c->first + i + 1);
		if (bench.mode_run) {
			req.body_case = SBX__V1__ENVELOPE__BODY_RUN;
			req.run = &rreq;
		} else {
			req.body_case = SBX__V1__ENVELOPE__BODY_COMPILE;
			req.compile = &creq;
		}
		t0 = mono_ns();
		if (frame_client_call(fd, &req, &rep, 0) != 0) {
			bench_error(c, "%s: %s", id, strerror(errno));
			c->errors += c->count - i - 1;
			break;
		}
		c->lat[i] = mono_ns() - t0;
		if (bench.mode_run ?
		    rep->body_case != SBX__V1__ENVELOPE__BODY_RESULT ||
		    rep->result->exit_code != 0 :
		    rep->body_case != SBX__V1__ENVELOPE__BODY_COMPILED ||
		    rep->compiled->signed_ == NULL ||
		    rep->compiled->signed_->signature.len != 64) {
			bench_error(c, "%s: %s", id,
			    rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR ?
			    rep->error->message : bench.mode_run ?
			    "no result with exit 0" : "not a signed compile reply");
			c->lat[i] = 0;
		}
		sbx__v1__envelope__free_unpacked(rep, NULL);
		if (bench.pause_ms > 0 && i + 1 < c->count)
			usleep(bench.pause_ms * 1000);
	}
	close(fd);
	return NULL;
}

static int
bench_cmp(const void *a, const void *b)
{
	uint64_t	 x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double
bench_pct_ms(const uint64_t *v, size_t n, double p)
{
	size_t	 k;

	if (n == 0)
		return 0;
	k = (size_t)(p / 100.0 * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return (double)v[k - 1] / 1e6;
}

int
main(int argc, char **argv)
{
	struct bench_client	*cl;
	uint64_t		*lat, t0, wall;
	unsigned char		 rnd[4];
	size_t			 n = 10000, ok = 0, errors = 0;
	unsigned		 nc = 1;
	int			 ch;
	const char		*what;

	log_init("rpc_bench", 1, 0);
	bench.tenant = "acme";
	bench.user = "bench";
	bench.dataset = NULL;
	bench.type = NULL;
	while ((ch = getopt(argc, argv, "m:c:n:p:T:U:D:y:")) != -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "run") == 0)
				bench.mode_run = 1;
			else if (strcmp(optarg, "compile") != 0)
				bench_usage();
			break;
		case 'c':
			nc = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'n':
			n = (size_t)strtoull(optarg, NULL, 10);
			break;
		case 'p':
			bench.pause_ms = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'T':
			bench.tenant = optarg;
			break;
		case 'U':
			bench.user = optarg;
			break;
		case 'D':
			bench.dataset = optarg;
			break;
		case 'y':
			bench.type = optarg;
			break;
		default:
			bench_usage();
		}
	}
	if (argc - optind != 1 || nc < 1 || nc > 1024 || n < nc)
		bench_usage();
	bench.socket = argv[optind];
	/* Each mode's defaults: the example analytics task to compile, the
	 * container-tier bench template (no dataset) to run. */
	if (bench.type == NULL)
		bench.type = bench.mode_run ? "bench" : "analytics";
	if (bench.dataset == NULL)
		bench.dataset = bench.mode_run ? "" : "supplier-2026-q3";
	what = bench.mode_run ? "runs" : "compiles";
	getentropy(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), bench.run);

	cl = xcalloc(nc, sizeof(*cl));
	lat = xcalloc(n, sizeof(*lat));
	pthread_barrier_init(&bench.start, NULL, nc + 1);
	for (unsigned i = 0; i < nc; i++) {
		cl[i].index = i;
		cl[i].first = n / nc * i + (i < n % nc ? i : n % nc);
		cl[i].count = n / nc + (i < n % nc);
		cl[i].lat = lat + cl[i].first;
		if (pthread_create(&cl[i].thread, NULL, bench_client_main,
		    &cl[i]) != 0)
			fatalx("pthread_create");
	}
	pthread_barrier_wait(&bench.start);
	t0 = mono_ns();
	for (unsigned i = 0; i < nc; i++)
		pthread_join(cl[i].thread, NULL);
	wall = mono_ns() - t0;
	pthread_barrier_destroy(&bench.start);

	for (unsigned i = 0; i < nc; i++) {
		errors += cl[i].errors;
		if (cl[i].errors > 0)
			fprintf(stderr, "rpc_bench: client %u: %zu "
			    "errors, first: %s\n", i, cl[i].errors,
			    cl[i].first_error);
	}
	/* Failed requests hold 0 and sort first: skip them. */
	qsort(lat, n, sizeof(*lat), bench_cmp);
	while (ok < n && lat[ok] == 0)
		ok++;
	ok = n - ok;
	printf("concurrency %2u: %zu %s in %.2f s = %.1f %s/s, "
	    "p50 %.3f ms, p99 %.3f ms, errors %zu\n", nc, ok, what,
	    (double)wall / 1e9, (double)ok / ((double)wall / 1e9), what,
	    bench_pct_ms(lat + (n - ok), ok, 50),
	    bench_pct_ms(lat + (n - ok), ok, 99), errors);
	free(lat);
	free(cl);
	return errors > 0 ? 1 : 0;
}
