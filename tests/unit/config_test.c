/*
 * config_test.c: the declarative configuration table every daemon's
 * parse.c is (common/config.c, issue 12 item 3).  What a table promises a
 * daemon, tried the way a bad file would: defaults when a key is absent,
 * a default path built from another key, numbers outside min..max,
 * unknown and missing keys, two sockets on one path, a nested map -- each
 * reported with its file, line and key, every one of them rather than the
 * first, and nothing returned when any was.
 */
#include <sys/types.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "frame.h"
#include "util.h"
#include "yaml.h"

struct tconf {
	struct cfg_common	 c;		/* first, as the table wants */
	uint32_t		 ttl;
	char			*store;
	struct cfg_sock		 main;
	struct cfg_sock		 admin;
	uint32_t		 depth;
};

static const struct cfg_key sockets_keys[] = {
	CFG_SOCK("main", 0, struct tconf, main),
	CFG_SOCK("admin", CFG_OPTIONAL, struct tconf, admin),
	CFG_END
};

static const struct cfg_key limits_keys[] = {
	CFG_U32("depth", 0, struct tconf, depth, 3, 1, 8),
	CFG_END
};

static const struct cfg_key top_keys[] = {
	CFG_COMMON_USER,
	CFG_COMMON_STATE_DIR,
	CFG_COMMON_MAX_FRAME_KB(64, 1, 1024),
	CFG_U32("ttl", 0, struct tconf, ttl, 300, 30, 86400),
	CFG_PATHKEY("store", 0, struct tconf, store, "$state_dir/store"),
	CFG_SUBMAP("limits", 0, limits_keys),
	CFG_SUBMAP("sockets", CFG_REQUIRED, sockets_keys),
	CFG_END
};

static const struct cfg_table table = {
	"test.yaml", sizeof(struct tconf), top_keys, NULL
};

static char	dir[64], file[128];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/config_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/test.yaml", dir);
}

static void
teardown(void)
{
	unlink(file);
	rmdir(dir);
}

TestSuite(config, .init = setup, .fini = teardown);

static struct tconf *
parse(const char *text, struct yerrs *errs)
{
	FILE	*f = fopen(file, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	return cfg_parse(file, &table, errs);
}

/* Whether some error holds every one of the words (NULL-terminated). */
static int
has_error(const struct yerrs *e, const char *a, const char *b)
{
	for (size_t i = 0; i < e->n; i++)
		if (strstr(e->msgs[i], a) != NULL &&
		    (b == NULL || strstr(e->msgs[i], b) != NULL))
			return 1;
	return 0;
}

static void
show(const struct yerrs *e)
{
	for (size_t i = 0; i < e->n; i++)
		fprintf(stderr, "  %s\n", e->msgs[i]);
}

Test(config, defaults_and_a_path_from_another_key)
{
	struct yerrs	 e = { NULL, 0 };
	struct tconf	*c;

	c = parse("state_dir: st\nsockets:\n  main: {path: m.sock, allow: {users: [root]}}\n", &e);
	show(&e);
	cr_assert_not_null(c);
	cr_assert_eq(c->ttl, 300);
	cr_assert_eq(c->c.max_frame_kb, 64);
	cr_assert_eq(c->depth, 3, "a map left out keeps its keys' defaults");
	/* Relative paths are the file's directory's. */
	cr_assert_not_null(strstr(c->c.state_dir, dir));
	cr_assert_not_null(strstr(c->store, "/st/store"), "%s", c->store);
	cr_assert_not_null(strstr(c->main.path, "/m.sock"));
	cr_assert_null(c->admin.path, "an optional socket left out");
	cr_assert_null(c->c.user);
	cfg_free(&table, c);
	yerrs_free(&e);
}

Test(config, values_are_read)
{
	struct yerrs	 e = { NULL, 0 };
	struct tconf	*c;

	c = parse("state_dir: /var/x\nttl: 60\nmax_frame_kb: 128\n"
	    "store: /srv/s\nlimits: {depth: 8}\nsockets:\n"
	    "  main: {path: /run/m.sock, mode: \"0600\", allow: {users: [root]}}\n"
	    "  admin: {path: /run/a.sock, allow: {users: [root]}}\n", &e);
	show(&e);
	cr_assert_not_null(c);
	cr_assert_eq(c->ttl, 60);
	cr_assert_eq(c->c.max_frame_kb, 128);
	cr_assert_str_eq(c->store, "/srv/s");
	cr_assert_eq(c->depth, 8);
	cr_assert_eq(c->main.mode, 0600);
	cr_assert_str_eq(c->admin.path, "/run/a.sock");
	cfg_free(&table, c);
	yerrs_free(&e);
}

/* Every problem is reported, each with the key (and a line). */
Test(config, every_error_named_and_nothing_returned)
{
	struct yerrs	 e = { NULL, 0 };

	cr_assert_null(parse("ttl: 5\nmax_frame_kb: 4096\nbogus: 1\n"
	    "limits: {extra: 2}\nsockets:\n"
	    "  main: {path: /run/x.sock, allow: {users: [root]}}\n"
	    "  admin: {path: /run/x.sock, allow: {users: [root]}}\n", &e));
	show(&e);
	cr_assert(has_error(&e, "1:6: ttl", "from 30 to 86400"),
	    "ttl below its minimum, with its line and column");
	cr_assert(has_error(&e, "max_frame_kb", "from 1 to 1024"));
	cr_assert(has_error(&e, "bogus", "unknown key"));
	cr_assert(has_error(&e, "limits.extra", "unknown key"),
	    "an unknown nested key");
	cr_assert(has_error(&e, "state_dir", "required"),
	    "a missing required key");
	cr_assert(has_error(&e, "same path", NULL),
	    "two sockets on one path");
	cr_assert(has_error(&e, file, NULL), "errors name the file");
	cr_assert_geq(e.n, 6);
	yerrs_free(&e);

	/* A nested key's range. */
	cr_assert_null(parse("state_dir: /s\nlimits: {depth: 9}\nsockets:\n"
	    "  main: {path: /run/x.sock, allow: {users: [root]}}\n", &e));
	show(&e);
	cr_assert(has_error(&e, "depth", "from 1 to 8"));
	yerrs_free(&e);
}

Test(config, a_missing_required_map_and_an_unknown_user)
{
	struct yerrs	 e = { NULL, 0 };

	cr_assert_null(parse("state_dir: /s\nuser: no-such-user-sbx-test\n",
	    &e));
	show(&e);
	cr_assert(has_error(&e, "sockets", NULL));
	cr_assert(has_error(&e, "no-such-user-sbx-test", NULL));
	yerrs_free(&e);
}

Test(config, an_empty_or_broken_file)
{
	struct yerrs	 e = { NULL, 0 };

	cr_assert_null(parse("", &e));
	cr_assert_geq(e.n, 1);
	yerrs_free(&e);
	cr_assert_null(parse("state_dir: [unclosed\n", &e));
	cr_assert_geq(e.n, 1);
	yerrs_free(&e);
	cr_assert_null(parse("- a list\n- not a map\n", &e));
	cr_assert_geq(e.n, 1);
	yerrs_free(&e);
}

/* metrics.listen (the scrape listener): loopback addresses and a port
 * only, so the peer's user can be asked of this host's kernel. */
Test(config, metrics_listen_loopback_only)
{
	static const struct {
		const char	*s;
		int		 ok;
		int		 family;
		unsigned	 port;
	} cases[] = {
		{ "127.0.0.1:9417", 1, AF_INET, 9417 },
		{ "127.1.2.3:1", 1, AF_INET, 1 },
		{ "[::1]:65535", 1, AF_INET6, 65535 },
		{ "0.0.0.0:9417", 0, 0, 0 },
		{ "128.0.0.1:9417", 0, 0, 0 },
		{ "192.168.1.1:9417", 0, 0, 0 },
		{ "[::]:9417", 0, 0, 0 },
		{ "[::ffff:127.0.0.1]:9417", 0, 0, 0 },
		{ "::1:9417", 0, 0, 0 },
		{ "localhost:9417", 0, 0, 0 },
		{ "127.0.0.1", 0, 0, 0 },
		{ "127.0.0.1:", 0, 0, 0 },
		{ "127.0.0.1:0", 0, 0, 0 },
		{ "127.0.0.1:65536", 0, 0, 0 },
		{ "127.0.0.1:+80", 0, 0, 0 },
		{ "127.0.0.1:80x", 0, 0, 0 },
		{ ":9417", 0, 0, 0 },
		{ "[::1:9417", 0, 0, 0 },
		{ "", 0, 0, 0 },
	};
	struct sockaddr_storage	 ss;
	socklen_t		 len;
	const char		*why;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int	 rc = cfg_metrics_addr(cases[i].s, &ss, &len, &why);

		cr_expect_eq(rc, cases[i].ok ? 0 : -1, "%s: rc %d", cases[i].s,
		    rc);
		if (rc != 0 || !cases[i].ok)
			continue;
		cr_expect_eq(ss.ss_family, cases[i].family, "%s", cases[i].s);
		cr_expect_eq(ntohs(ss.ss_family == AF_INET ?
		    ((struct sockaddr_in *)&ss)->sin_port :
		    ((struct sockaddr_in6 *)&ss)->sin6_port), cases[i].port,
		    "%s", cases[i].s);
	}
}

/*
 * sockets.NAME.max_conns_per_peer: read, bounded (0, above the socket's
 * own cap, negative, quoted, not a number), and carried into the frame
 * server's configuration; absent, 0 there (the frame layer's 64).
 */
Test(config, max_conns_per_peer)
{
	struct yerrs			 e = { NULL, 0 };
	struct frame_server_config	 fc;
	struct tconf			*c;
	static const char *const bad[] = { "0", "1025", "-1", "\"200\"",
	    "many", "99999999999999999999", "[1]", NULL };
	char				 text[256];

	c = parse("state_dir: /s\nsockets:\n"
	    "  main: {path: /run/m.sock, allow: {users: [root]}, "
	    "max_conns_per_peer: 208}\n"
	    "  admin: {path: /run/a.sock, allow: {users: [root]}}\n", &e);
	show(&e);
	cr_assert_not_null(c);
	cr_assert_eq(c->main.max_conns_per_peer, 208);
	cr_assert_eq(c->admin.max_conns_per_peer, 0, "absent: the default");
	cfg_socket_server(&c->main, "main", &fc);
	cr_assert_eq(fc.max_conns_per_peer, 208);
	cfg_socket_server(&c->admin, "admin", &fc);
	cr_assert_eq(fc.max_conns_per_peer, 0);
	cfg_free(&table, c);
	yerrs_free(&e);

	for (size_t i = 0; bad[i] != NULL; i++) {
		snprintf(text, sizeof(text), "state_dir: /s\nsockets:\n"
		    "  main: {path: /run/m.sock, allow: {users: [root]}, "
		    "max_conns_per_peer: %s}\n", bad[i]);
		cr_assert_null(parse(text, &e), "%s accepted", bad[i]);
		show(&e);
		cr_assert(has_error(&e, "sockets.main.max_conns_per_peer",
		    "from 1 to 1024"), "%s: the key and its range", bad[i]);
		yerrs_free(&e);
	}
}
