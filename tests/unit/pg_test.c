/*
 * pg_test.c: the fleet connection's deadline and back-off (common/pg.c)
 * against a "server" that never answers: a Unix socket whose listener
 * never accepts, so libpq's connection lands in the backlog, sends its
 * startup packet and waits -- a hung postmaster, as seen from a client.
 * No PostgreSQL needed (tests/fleet/run freezes a real one).
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "pg.h"

static char	 dir[] = "/tmp/sbx-pgtest.XXXXXX";
static char	 path[sizeof(dir) + 32];
static int	 lfd = -1;

static int64_t
now_ms(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
hung_open(void)
{
	struct sockaddr_un	 sun;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/.s.PGSQL.5432", dir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	cr_assert_neq(lfd = socket(AF_UNIX, SOCK_STREAM, 0), -1);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(listen(lfd, 16), 0);
}

static void
hung_close(void)
{
	if (lfd != -1)
		close(lfd);
	unlink(path);
	rmdir(dir);
}

TestSuite(pg, .init = hung_open, .fini = hung_close);

static struct pg *
hung_pg(int timeout_ms, int retry_ms)
{
	char		 ci[256];
	struct pg	*p;

	snprintf(ci, sizeof(ci), "host=%s dbname=sbx user=sbx", dir);
	p = pg_new(ci, NULL);
	pg_limits(p, timeout_ms, retry_ms);
	return p;
}

/* Not asked again for N ms: N, or -1. */
static long
backoff_left(const char *err)
{
	const char	*s;

	if ((s = strstr(err, "not asked again for ")) == NULL)
		return -1;
	return strtol(s + strlen("not asked again for "), NULL, 10);
}

Test(pg, a_hung_server_fails_within_the_deadline)
{
	struct pg	*p = hung_pg(200, 300);
	char		 err[512];
	int64_t		 t0, dt;

	t0 = now_ms();
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	dt = now_ms() - t0;
	cr_expect(dt >= 190 && dt < 2000, "refused after %lld ms",
	    (long long)dt);
	cr_expect(strstr(err, "no answer within 200 ms (connecting)") !=
	    NULL, "%s", err);
	cr_expect(strstr(err, dir) != NULL, "the message names the host: %s",
	    err);
	pg_free(p);
}

/*
 * The windows are wide (a probe waits 600 ms, the back-off is 1 s) so a
 * loaded machine does not blur a refusal at once into a probe.
 */
Test(pg, the_back_off_refuses_at_once_then_one_probe_doubles_it)
{
	struct pg	*p = hung_pg(600, 1000);
	char		 err[512];
	int64_t		 t0, dt;
	long		 left;

	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	/* In the back-off: no round trip, no wait. */
	t0 = now_ms();
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	cr_assert_eq(pg_begin(p, err, sizeof(err)), -1);
	dt = now_ms() - t0;
	cr_expect(dt < 500, "refused after %lld ms", (long long)dt);
	left = backoff_left(err);
	cr_expect(left > 0 && left <= 1000, "%s", err);
	cr_expect(strstr(err, "no answer within 600 ms") != NULL, "%s", err);
	/* Past it, one call probes (and waits its deadline)... */
	usleep(1020 * 1000);
	t0 = now_ms();
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	dt = now_ms() - t0;
	cr_expect(dt >= 590, "the probe did not try: %lld ms, %s",
	    (long long)dt, err);
	cr_expect(backoff_left(err) == -1, "%s", err);
	/* ...and, failing, doubles the back-off. */
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	left = backoff_left(err);
	cr_expect(left > 1000 && left <= 2000, "%s", err);
	pg_free(p);
}

Test(pg, the_back_off_stops_growing)
{
	struct pg	*p = hung_pg(50, 100);
	char		 err[512];
	long		 left = -1;
	int		 i, j;

	/* 100, 200, 400, 800, 1600, then 1600 again (16 times 100).  A
	 * call that comes late probes instead: it doubles too. */
	for (i = 0; i < 6; i++) {
		for (j = 0; j < 4; j++) {
			cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
			if ((left = backoff_left(err)) > 0)
				break;
		}
		cr_assert(left > 0, "%s", err);
		usleep((useconds_t)(left + 10) * 1000);
	}
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	left = backoff_left(err);
	cr_expect(left > 800 && left <= 1600, "back-off %ld ms: %s", left,
	    err);
	pg_free(p);
}

Test(pg, a_refused_connection_opens_no_back_off)
{
	struct pg	*p = hung_pg(200, 1000);
	char		 err[512];

	/* No one listens: refused at once, and the next call tries. */
	close(lfd);
	lfd = -1;
	unlink(path);
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	cr_expect(strstr(err, "unreachable") != NULL, "%s", err);
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	cr_expect(backoff_left(err) == -1, "%s", err);
	cr_expect(strstr(err, "unreachable") != NULL, "%s", err);
	pg_free(p);
}

Test(pg, no_back_off_when_retry_is_zero)
{
	struct pg	*p = hung_pg(80, 0);
	char		 err[512];
	int64_t		 t0, dt;

	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	t0 = now_ms();
	cr_assert_eq(pg_ready(p, err, sizeof(err)), -1);
	dt = now_ms() - t0;
	cr_expect(dt >= 70, "the second call did not try: %s", err);
	cr_expect(strstr(err, "no answer within 80 ms") != NULL, "%s", err);
	pg_free(p);
}

/*
 * libpq is loaded, not linked (common/pg.c): this test program does not
 * link it either, so what it maps is what pg_load mapped.
 */
static int
libpq_mapped(void)
{
	FILE	*f;
	char	 line[512];
	int	 found = 0;

	cr_assert_not_null(f = fopen("/proc/self/maps", "r"));
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "/libpq.so.5") != NULL)
			found = 1;
	fclose(f);
	return found;
}

Test(pglib, not_mapped_until_a_store_needs_it)
{
	char	 err[512];

	cr_assert_eq(libpq_mapped(), 0, "libpq mapped before any store");
	cr_assert_eq(pg_loaded(), 0);
	cr_assert_eq(pg_conninfo_ok("host=/tmp dbname=sbx", err,
	    sizeof(err)), 0, "%s", err);
	cr_expect_eq(pg_loaded(), 1);
	cr_expect_eq(libpq_mapped(), 1, "libpq not mapped after use");
	/* Loaded once: a second call finds it there. */
	cr_expect_eq(pg_load(err, sizeof(err)), 0, "%s", err);
}

Test(pglib, a_missing_library_is_named)
{
	char		 err[512];

	cr_assert_eq(pg_load_soname("libpq-sbx-absent.so.5", err,
	    sizeof(err)), -1);
	cr_expect(strstr(err, "cannot load libpq-sbx-absent.so.5") != NULL &&
	    strstr(err, "libpq5") != NULL, "%s", err);
	cr_expect_eq(pg_loaded(), 0);
	cr_expect_eq(libpq_mapped(), 0);
}

Test(pglib, a_library_without_libpq_calls_is_refused)
{
	char	 err[512];

	/* A real library, not libpq: every call is looked up at load. */
	cr_assert_eq(pg_load_soname("libsodium.so.23", err, sizeof(err)),
	    -1);
	cr_expect(strstr(err, "libsodium.so.23 has no PQclear") != NULL,
	    "%s", err);
	cr_expect_eq(pg_loaded(), 0);
}
