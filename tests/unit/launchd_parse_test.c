/*
 * launchd_parse_test.c: launchd-sbx.yaml.  A good file parses to what it
 * says (relative paths joined to its directory, tiers in their slots, an
 * absent tier left absent); every error names file:line:col and the key,
 * and every error in a file is reported, not only the first.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "yaml.h"
#include "launchd-sbx/launchd.h"
#include "launchd-sbx/microvm.h"

static char	 dir[] = "/tmp/launchd_parse_test.XXXXXX";

static void
setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void
teardown(void)
{
	char	*cmd;

	xasprintf(&cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
}

static struct launchd_conf *
load(const char *text, struct yerrs *e)
{
	char	*path;
	FILE	*f;
	struct launchd_conf *c;

	xasprintf(&path, "%s/launchd-sbx.yaml", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	c = parse_launchd(path, e);
	free(path);
	return c;
}

static int
has(const struct yerrs *e, const char *needle)
{
	for (size_t i = 0; i < e->n; i++)
		if (strstr(e->msgs[i], needle) != NULL)
			return 1;
	return 0;
}

#define GOOD \
	"state_dir: state\n" \
	"run_dir: /run/sbx/launchd\n" \
	"policy_public_key: /run/sbx/policyd.pub\n" \
	"init: /usr/libexec/sbx/sbx-init\n" \
	"runtimes:\n" \
	"  container: {path: /usr/sbin/runc}\n" \
	"  gvisor: {path: /usr/bin/runsc, args: [--platform=ptrace, " \
	"--network=none]}\n" \
	"sockets:\n" \
	"  launch: {path: /run/sbx/launchd.sock, mode: \"0660\", " \
	"allow: {users: [root]}}\n" \
	"  admin: {path: admin.sock, allow: {users: [\"0\"], " \
	"groups: [root]}}\n"

TestSuite(launchd_parse, .init = setup, .fini = teardown);

Test(launchd_parse, good_file)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c = load(GOOD, &e);
	char			*want;

	cr_assert_not_null(c, "%s", e.n ? e.msgs[0] : "");
	xasprintf(&want, "%s/state", dir);
	cr_assert_str_eq(c->common.state_dir, want);
	free(want);
	xasprintf(&want, "%s/admin.sock", dir);
	cr_assert_str_eq(c->admin.path, want);
	free(want);
	cr_assert_str_eq(c->runtimes[SBX__V1__ISOLATION__ISOLATION_CONTAINER]
	    .path, "/usr/sbin/runc");
	cr_assert_eq(c->runtimes[SBX__V1__ISOLATION__ISOLATION_CONTAINER]
	    .flavor, SPEC_RUNC);
	cr_assert_eq(c->runtimes[SBX__V1__ISOLATION__ISOLATION_GVISOR]
	    .flavor, SPEC_RUNSC);
	cr_assert_eq(c->runtimes[SBX__V1__ISOLATION__ISOLATION_GVISOR].nargs,
	    2);
	cr_assert_null(c->runtimes[SBX__V1__ISOLATION__ISOLATION_MICROVM]
	    .path, "an absent tier stays absent");
	cr_assert_str_eq(c->cgroup_parent, "sbx");
	cr_assert_eq(c->launch.mode, 0660);
	cr_assert_eq(c->pool_size, 0);
	cr_assert_null(c->egress_socket);
	parse_launchd_free(c);
	yerrs_free(&e);
}

Test(launchd_parse, every_error_reported_with_position)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c;

	c = load("state_dir: /var/lib/sbx\n"
	    "run_dir: /var/lib/sbx\n"
	    "policy_public_key: /k.pub\n"
	    "init: /init\n"
	    "runtimes:\n"
	    "  kvm: {path: /usr/bin/qemu}\n"
	    "  container: {path: /usr/sbin/runc, args: [run]}\n"
	    "cgroup_parent: a/b\n"
	    "pool: {size: 5000}\n"
	    "colour: blue\n"
	    "sockets:\n"
	    "  launch: {path: /l.sock, mode: \"0999\", "
	    "allow: {users: [no-such-user-xyz]}}\n"
	    "  admin: {path: /l.sock, allow: {}}\n", &e);
	cr_assert_null(c);
	cr_assert(has(&e, "launchd-sbx.yaml:2:"), "position of run_dir");
	cr_assert(has(&e, "run_dir: same directory as state_dir"));
	cr_assert(has(&e, "unknown tier \"kvm\""));
	cr_assert(has(&e, "runtimes.container.args"));
	cr_assert(has(&e, "cgroup_parent: bad cgroup name"));
	cr_assert(has(&e, "pool.size"));
	cr_assert(has(&e, "colour"));
	cr_assert(has(&e, "sockets.launch.mode: bad mode"));
	cr_assert(has(&e, "no such user \"no-such-user-xyz\""));
	cr_assert(has(&e, "sockets.admin.allow"));
	cr_assert(has(&e, "same path as the launch socket"));
	cr_assert_geq(e.n, 10, "%zu errors", e.n);
	yerrs_free(&e);
}

Test(launchd_parse, required_keys)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c;

	c = load("state_dir: /s\n", &e);
	cr_assert_null(c);
	cr_assert(has(&e, "run_dir"));
	cr_assert(has(&e, "policy_public_key"));
	cr_assert(has(&e, "init"));
	cr_assert(has(&e, "runtimes"));
	cr_assert(has(&e, "sockets"));
	yerrs_free(&e);
}

Test(launchd_parse, runtime_needs_a_path)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c;

	c = load("state_dir: /s\nrun_dir: /r\npolicy_public_key: /k\n"
	    "init: /i\nruntimes:\n  microvm: {args: [--x]}\n"
	    "sockets:\n  launch: {path: /a, allow: {users: [root]}}\n"
	    "  admin: {path: /b, allow: {users: [root]}}\n", &e);
	cr_assert_null(c);
	cr_assert(has(&e, "runtimes.microvm"));
	cr_assert(has(&e, "path"));
	yerrs_free(&e);
}

Test(launchd_parse, tier_names)
{
	cr_assert_str_eq(parse_tier_name(1), "container");
	cr_assert_str_eq(parse_tier_name(2), "gvisor");
	cr_assert_str_eq(parse_tier_name(3), "microvm");
	cr_assert_null(parse_tier_name(0));
	cr_assert_null(parse_tier_name(4));
}

/* sandbox_groups: every sandbox gets a group of its own from this range;
 * the default is used when absent, and a range that is malformed or that
 * a user or group of the system already has is refused by name. */
Test(launchd_parse, sandbox_groups_default)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c = load(GOOD, &e);

	cr_assert_not_null(c);
	cr_assert_eq(c->sandbox_gid_first, LAUNCHD_GID_FIRST);
	cr_assert_eq(c->sandbox_gid_count, LAUNCHD_GID_COUNT);
	parse_launchd_free(c);
	yerrs_free(&e);
}

Test(launchd_parse, sandbox_groups_set)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c = load(GOOD
	    "sandbox_groups: {first: 2000000000, count: 64}\n", &e);

	cr_assert_not_null(c);
	cr_assert_eq(c->sandbox_gid_first, 2000000000);
	cr_assert_eq(c->sandbox_gid_count, 64);
	parse_launchd_free(c);
	yerrs_free(&e);
}

Test(launchd_parse, sandbox_groups_refused)
{
	static const struct {
		const char	*yaml;
		const char	*want;
	} bad[] = {
		/* nogroup (65534) and every system id are below 65536. */
		{ "sandbox_groups: {first: 65534, count: 16}\n",
		    "sandbox_groups.first" },
		{ "sandbox_groups: {first: 2147483600, count: 64}\n",
		    "goes past" },
		{ "sandbox_groups: {first: 2000000000, count: 4}\n",
		    "sandbox_groups.count" },
		{ "sandbox_groups: {first: 2000000000}\n", "count" },
		{ "sandbox_groups: {first: 2000000000, count: 64, x: 1}\n",
		    "unknown key" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct yerrs	 e = { 0 };
		char		*text;

		xasprintf(&text, "%s%s", GOOD, bad[i].yaml);
		cr_assert_null(load(text, &e), "accepted: %s", bad[i].yaml);
		cr_assert(has(&e, bad[i].want), "%s: no \"%s\" in: %s",
		    bad[i].yaml, bad[i].want, e.n > 0 ? e.msgs[0] : "");
		cr_assert(has(&e, "launchd-sbx.yaml:"), "no file:line");
		free(text);
		yerrs_free(&e);
	}
}

/* Issue 16: the microvm tier's keys, and its accelerator only as named. */
#define VM_HEAD	"state_dir: /s\nrun_dir: /r\npolicy_public_key: /k\n" \
	"init: /i\nsockets:\n  launch: {path: /a, allow: {users: [root]}}\n" \
	"  admin: {path: /b, allow: {users: [root]}}\nruntimes:\n"

Test(launchd_parse, microvm_keys)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c;
	const struct launchd_runtime *rt;

	c = load(VM_HEAD "  microvm: {path: /usr/bin/qemu-system-x86_64, "
	    "accel: tcg, kernel: vm/vmlinuz, initrd: /v/initrd.img, "
	    "forwarder: /usr/bin/socat}\n", &e);
	cr_assert_not_null(c, "%s", e.n > 0 ? e.msgs[0] : "");
	rt = &c->runtimes[SBX__V1__ISOLATION__ISOLATION_MICROVM];
	cr_assert_eq(rt->accel, MICROVM_ACCEL_TCG);
	cr_assert(strstr(rt->kernel, "/vm/vmlinuz") != NULL, "%s",
	    rt->kernel);
	cr_assert_eq(rt->kernel[0], '/', "relative to the config's dir");
	cr_assert_str_eq(rt->initrd, "/v/initrd.img");
	cr_assert_str_eq(rt->fwd, "/usr/bin/socat");
	parse_launchd_free(c);
	yerrs_free(&e);
}

/* Without accel the tier parses but stays unusable: NONE, refused later. */
Test(launchd_parse, microvm_no_accel_is_none)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c;

	c = load(VM_HEAD "  microvm: {path: /q, kernel: /k, initrd: /i, "
	    "forwarder: /f}\n", &e);
	cr_assert_not_null(c);
	cr_assert_eq(c->runtimes[SBX__V1__ISOLATION__ISOLATION_MICROVM].accel,
	    MICROVM_ACCEL_NONE);
	parse_launchd_free(c);
	yerrs_free(&e);
}

Test(launchd_parse, microvm_bad_accel_and_misplaced_keys)
{
	struct yerrs		 e = { 0 };
	struct launchd_conf	*c;

	c = load(VM_HEAD "  microvm: {path: /q, accel: hvf, kernel: /k, "
	    "initrd: /i, forwarder: /f}\n"
	    "  container: {path: /usr/sbin/runc, accel: tcg}\n", &e);
	cr_assert_null(c);
	cr_assert(has(&e, "accel \"hvf\": want kvm, or tcg"));
	cr_assert(has(&e, "runtimes.container"));
	yerrs_free(&e);
}
