/*
 * spec_cases.h: the parameter sets whose rendered runtime specs are kept
 * as tests/golden/spec/<name>.json.  tests/probe/specgolden writes the
 * files and tests/unit/spec_golden_test.c checks that launchd-sbx's
 * renderer still produces them byte for byte.  The files were first
 * written by the jansson-based spec.c (json_dumps with JSON_INDENT(1) and
 * JSON_SORT_KEYS, plus "\n"; pool.c's pool_respec for the pool entries),
 * so the table is also the proof that the libc-only renderer that
 * replaced it says the same thing.
 *
 * The data is in a form of its own, which neither renderer's API shows
 * through (the jansson version of specgolden filled its own struct
 * spec_params from it); spec_case_params() fills today's.
 */
#ifndef SBX_TESTS_SPEC_CASES_H
#define SBX_TESTS_SPEC_CASES_H

#include <stdint.h>
#include <string.h>

#include "launchd-sbx/spec.h"

#define GC_HASH		"a1b2c3d4e5f60718293a4b5c6d7e8f90" \
			"a1b2c3d4e5f60718293a4b5c6d7e8f90"
#define GC_ZERO		"00000000000000000000000000000000" \
			"00000000000000000000000000000000"
#define GC_KEY		"5f0c2a9e1d7b3c4a8e6f0d2b9c1a7e3f" \
			"4d6b8a0c2e1f3a5b7c9d0e2f4a6b8c0d"

struct spec_case {
	const char		*name;		/* tests/golden/spec/<name>.json */
	int			 runsc;
	const char		*policy_name;
	uint32_t		 policy_version;
	uint32_t		 cpus_milli, memory_mb, pids, scratch_mb;
	const char		*policy_hash;
	const char		*task_id, *execution_id;
	const char		*rootfs, *in_dir, *code_dir, *scratch_dir;
	const char		*egress_sock, *ca_file;
	const char		*init_path, *cgroups_path;
	unsigned		 gid;
	const char *const	*argv;
	int			 no_annotations;
	/* The pool entry variant (pool.c). */
	int			 pool;
	const char		*pool_run, *pool_entry_id, *pool_key;
	int			 pool_egress, pool_warm_python;
};

static const char *const gc_argv_plain[] = { "python3", "/code/main.py",
	NULL };
static const char *const gc_argv_odd[] = {
	"/usr/bin/env",
	"say \"hi\" to 'them'",
	"back\\slash \\\\ and \\\" mixed",
	"ctl \x01\x02\x1b[0m \x7f \x1f end",
	"\b\f\n\r\t",
	"slash/es // not escaped: </script>",
	"unicode: h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 "
	    "\xe2\x80\xae rtl \xef\xbb\xbf bom \xc2\x85 nel",
	"",
	"--",
	"-c",
	"print(\"a\\tb\")\n",
	NULL
};
static const char *const gc_argv_pool[] = { "pool", NULL };

#define GC_COMMON \
	.policy_hash = GC_HASH, \
	.task_id = "task-7", \
	.execution_id = "exec-7-1", \
	.rootfs = "/var/lib/sbx/images/sha256-abc/rootfs", \
	.in_dir = "/var/lib/sbx/run/exec-7-1/in", \
	.code_dir = "/var/lib/sbx/run/exec-7-1/code", \
	.init_path = "/usr/local/libexec/sbx/sbx-init", \
	.cgroups_path = "/sbx/exec-7-1"

#define GC_LIMITS \
	.policy_name = "analytics-readonly", .policy_version = 3, \
	.cpus_milli = 1500, .memory_mb = 512, .pids = 128, .scratch_mb = 100

/* What pool.c fills for an entry (pool_create) and a key (pool_key). */
#define GC_POOL \
	.policy_name = "pool", .policy_version = 1, \
	.policy_hash = GC_ZERO, .task_id = "pool", .execution_id = "pool", \
	.argv = gc_argv_pool, \
	.rootfs = "/var/lib/sbx/images/sha256-abc/rootfs", \
	.in_dir = "/run/sbx/launchd/x-pool-41-7/in", \
	.code_dir = "/run/sbx/launchd/x-pool-41-7/code", \
	.scratch_dir = "/run/sbx/launchd/x-pool-41-7/scratch", \
	.init_path = "/usr/local/libexec/sbx/sbx-init", \
	.cgroups_path = "/sbx/pool-41-7", \
	.gid = 1879048201, \
	.cpus_milli = 1000, .memory_mb = 256, .pids = 64, .scratch_mb = 32, \
	.pool = 1, .pool_run = "/run/sbx/launchd/x-pool-41-7/run", \
	.pool_entry_id = "pool-41-7", .pool_key = GC_KEY

/* What pool_key puts in for every per-execution value. */
#define GC_KEYSPEC \
	.policy_hash = GC_ZERO, .task_id = "pool", .execution_id = "pool", \
	.in_dir = "/pool/in", .code_dir = "/pool/code", \
	.cgroups_path = "/pool", .argv = gc_argv_pool, \
	.rootfs = "/var/lib/sbx/images/sha256-abc/rootfs", \
	.init_path = "/usr/local/libexec/sbx/sbx-init", \
	.no_annotations = 1

static const struct spec_case spec_cases[] = {
	{ .name = "runc-egress-ca", GC_COMMON, GC_LIMITS,
	  .argv = gc_argv_plain,
	  .egress_sock = "/run/sbx/egress/exec-7-1.sock",
	  .ca_file = "/var/lib/sbx/run/exec-7-1/ca.pem" },
	{ .name = "runc-plain", GC_COMMON, GC_LIMITS, .argv = gc_argv_plain },
	{ .name = "runc-egress-no-ca", GC_COMMON, GC_LIMITS,
	  .argv = gc_argv_plain,
	  .egress_sock = "/run/sbx/egress/exec-7-1.sock" },
	{ .name = "runc-scratch-dir-gid", GC_COMMON, GC_LIMITS,
	  .argv = gc_argv_plain,
	  .scratch_dir = "/run/sbx/launchd/x-e1/scratch",
	  .gid = 1879048200,
	  .egress_sock = "/run/sbx/launchd/x-e1/egress.sock",
	  .ca_file = "/run/sbx/launchd/x-e1/ca.pem" },
	{ .name = "runc-tmpfs-scratch-gid", GC_COMMON, GC_LIMITS,
	  .argv = gc_argv_plain, .gid = 2147483647 },
	{ .name = "runsc-egress-ca", GC_COMMON, GC_LIMITS, .runsc = 1,
	  .argv = gc_argv_plain,
	  .egress_sock = "/run/sbx/egress/exec-7-1.sock",
	  .ca_file = "/var/lib/sbx/run/exec-7-1/ca.pem" },
	{ .name = "runsc-plain", GC_COMMON, GC_LIMITS, .runsc = 1,
	  .argv = gc_argv_plain },
	{ .name = "runsc-scratch-dir", GC_COMMON, GC_LIMITS, .runsc = 1,
	  .argv = gc_argv_plain, .gid = 1879048200,
	  .scratch_dir = "/run/sbx/launchd/x-e1/scratch" },
	{ .name = "runc-odd-argv", GC_COMMON, GC_LIMITS, .argv = gc_argv_odd,
	  .egress_sock = "/run/sbx/egress/exec-7-1.sock" },
	{ .name = "runsc-odd-argv", GC_COMMON, GC_LIMITS, .runsc = 1,
	  .argv = gc_argv_odd },
	/* Odd, but legal, paths and a policy name a reader would not
	 * expect: quotes, a tab, non-ASCII. */
	{ .name = "runc-odd-paths", .argv = gc_argv_plain,
	  .cpus_milli = 250, .memory_mb = 64, .pids = 8, .scratch_mb = 3,
	  .policy_name = "na\"me \\ \xc3\xa9t\xc3\xa9", .policy_version = 0,
	  .policy_hash = GC_HASH, .task_id = "T.a_s-k@1:2",
	  .execution_id = "E-1",
	  .rootfs = "/var/lib/\"q\"/\xc3\xa9/root\tfs",
	  .in_dir = "/x/in dir/ \\ /in", .code_dir = "/x/\x01" "code",
	  .scratch_dir = "/x/scr\xe2\x80\x8b" "atch",
	  .init_path = "/i/n/i/t", .cgroups_path = "/sbx/E-1",
	  .egress_sock = "/s o/ck", .ca_file = "/c a" },
	{ .name = "runc-large-limits", GC_COMMON, .argv = gc_argv_plain,
	  .policy_name = "big", .policy_version = 4294967295u,
	  .cpus_milli = 4294967295u, .memory_mb = 4294967295u,
	  .pids = 4294967295u, .scratch_mb = 4294967295u,
	  .gid = 2147483647 },
	{ .name = "runsc-large-limits", GC_COMMON, .argv = gc_argv_plain,
	  .runsc = 1, .policy_name = "big", .policy_version = 4294967295u,
	  .cpus_milli = 4294967295u, .memory_mb = 4294967295u,
	  .pids = 4294967295u, .scratch_mb = 4294967295u },
	{ .name = "runc-small-limits", GC_COMMON, .argv = gc_argv_plain,
	  .policy_name = "p", .policy_version = 1,
	  .cpus_milli = 10, .memory_mb = 1, .pids = 1, .scratch_mb = 1 },
	/* pool_key's placeholder specs: no annotations. */
	{ .name = "key-runc-egress", GC_KEYSPEC, GC_LIMITS,
	  .scratch_dir = "/pool/scratch",
	  .egress_sock = "/pool/egress.sock", .ca_file = "/pool/ca.pem" },
	{ .name = "key-runc-plain", GC_KEYSPEC, GC_LIMITS,
	  .scratch_dir = "/pool/scratch" },
	{ .name = "key-runsc-tmpfs", GC_KEYSPEC, GC_LIMITS, .runsc = 1,
	  .egress_sock = "/pool/egress.sock" },
	/* Pool entries (pool_create). */
	{ .name = "pool-egress-warm", GC_POOL, .pool_egress = 1,
	  .pool_warm_python = 1,
	  .egress_sock = "/pool/egress.sock", .ca_file = "/pool/ca.pem" },
	{ .name = "pool-egress", GC_POOL, .pool_egress = 1,
	  .egress_sock = "/pool/egress.sock", .ca_file = "/pool/ca.pem" },
	{ .name = "pool-warm", GC_POOL, .pool_warm_python = 1 },
	{ .name = "pool-plain", GC_POOL },
	{ .name = "pool-runsc-egress-warm", GC_POOL, .runsc = 1,
	  .pool_egress = 1, .pool_warm_python = 1,
	  .egress_sock = "/pool/egress.sock", .ca_file = "/pool/ca.pem" },
};

#define SPEC_NCASES	(sizeof(spec_cases) / sizeof(spec_cases[0]))

static inline void
spec_case_params(const struct spec_case *c, struct spec_params *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->policy_name = c->policy_name;
	sp->policy_version = c->policy_version;
	sp->cpus_milli = c->cpus_milli;
	sp->memory_mb = c->memory_mb;
	sp->pids = c->pids;
	sp->scratch_mb = c->scratch_mb;
	sp->policy_hash = c->policy_hash;
	sp->task_id = c->task_id;
	sp->execution_id = c->execution_id;
	sp->rootfs = c->rootfs;
	sp->in_dir = c->in_dir;
	sp->code_dir = c->code_dir;
	sp->scratch_dir = c->scratch_dir;
	sp->egress_sock = c->egress_sock;
	sp->ca_file = c->ca_file;
	sp->init_path = c->init_path;
	sp->cgroups_path = c->cgroups_path;
	sp->gid = (gid_t)c->gid;
	sp->argv = (char *const *)c->argv;
	sp->flavor = c->runsc ? SPEC_RUNSC : SPEC_RUNC;
	sp->no_annotations = c->no_annotations;
	sp->pool = c->pool;
	sp->pool_run = c->pool_run;
	sp->pool_entry_id = c->pool_entry_id;
	sp->pool_key = c->pool_key;
	sp->pool_egress = c->pool_egress;
	sp->pool_warm_python = c->pool_warm_python;
}

#endif
