/*
 * spec_test.c: the OCI runtime spec launchd-sbx writes for a policy.  Each
 * test reads the JSON the way a reviewer would: is the root read-only, are
 * capabilities gone, is the network namespace new, are the policy's limits
 * the runtime's limits, is /scratch the sized tmpfs, are the OCI default
 * paths masked, does the seccomp profile refuse what the issue lists, does
 * the annotation carry the policy hash.  tests/probe/run-spec checks the
 * same spec against real runtimes.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "launchd-sbx/jsonw.h"
#include "launchd-sbx/spec.h"

#define HASH	"a1b2c3d4e5f60718293a4b5c6d7e8f90" \
		"a1b2c3d4e5f60718293a4b5c6d7e8f90"

struct fx {
	struct spec_params	 sp;
	char			*argv[3];
	char			 err[256];
};

static void
fx_init(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	f->sp.cpus_milli = 1500;
	f->sp.memory_mb = 512;
	f->sp.pids = 128;
	f->sp.scratch_mb = 100;
	f->sp.policy_name = "analytics-readonly";
	f->sp.policy_version = 3;
	f->argv[0] = "python3";
	f->argv[1] = "/code/main.py";
	f->argv[2] = NULL;
	f->sp.policy_hash = HASH;
	f->sp.task_id = "task-7";
	f->sp.execution_id = "exec-7-1";
	f->sp.rootfs = "/var/lib/sbx/images/sha256-abc/rootfs";
	f->sp.in_dir = "/var/lib/sbx/run/exec-7-1/in";
	f->sp.code_dir = "/var/lib/sbx/run/exec-7-1/code";
	f->sp.egress_sock = "/run/sbx/egress/exec-7-1.sock";
	f->sp.ca_file = "/var/lib/sbx/run/exec-7-1/ca.pem";
	f->sp.init_path = "/usr/local/libexec/sbx/sbx-init";
	f->sp.cgroups_path = "/sbx/exec-7-1";
	f->sp.argv = f->argv;
	f->sp.flavor = SPEC_RUNC;
}

/* The rendered text, parsed back: what a runtime reads. */
static json_t *
parse(const char *text, size_t len)
{
	json_error_t	 je;
	json_t		*j;

	cr_assert_gt(len, 0);
	cr_assert_eq(text[len - 1], '\n', "the text does not end in a newline");
	cr_assert_eq(strlen(text), len);
	j = json_loadb(text, len, 0, &je);
	cr_assert_not_null(j, "the text does not parse: %s (line %d)", je.text,
	    je.line);
	return j;
}

static json_t *
build(struct fx *f)
{
	size_t	 len = 0;
	char	*text = spec_render(&f->sp, &len, f->err, sizeof(f->err));
	json_t	*j;

	cr_assert_not_null(text, "spec_render: %s", f->err);
	j = parse(text, len);
	free(text);
	return j;
}

/* spec_render, expected to refuse: NULL, and err says why. */
static void *
refused(struct fx *f)
{
	return spec_render(&f->sp, NULL, f->err, sizeof(f->err));
}

/* The linux.seccomp object alone, as seccomp_render writes it. */
static json_t *
seccomp_profile(enum spec_flavor fl)
{
	struct jw	 w;
	char		 err[160], *text;
	size_t		 len = 0;
	json_t		*j;

	jw_init(&w);
	seccomp_render(&w, fl);
	text = jw_finish(&w, &len, err, sizeof(err));
	cr_assert_not_null(text, "seccomp_render: %s", err);
	j = parse(text, len);
	free(text);
	return j;
}

/* Walk "a.b.c"; NULL if any step is missing. */
static json_t *
at(json_t *j, const char *path)
{
	char	 buf[128], *p, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = strtok_r(buf, ".", &save); p != NULL && j != NULL;
	    p = strtok_r(NULL, ".", &save))
		j = json_object_get(j, p);
	return j;
}

static json_int_t
int_at(json_t *j, const char *path)
{
	json_t	*v = at(j, path);

	cr_assert(json_is_integer(v), "%s is not an integer", path);
	return json_integer_value(v);
}

static const char *
str_at(json_t *j, const char *path)
{
	json_t	*v = at(j, path);

	cr_assert(json_is_string(v), "%s is not a string", path);
	return json_string_value(v);
}

static int
has_string(json_t *arr, const char *s)
{
	size_t	 i;
	json_t	*v;

	json_array_foreach(arr, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return 1;
	return 0;
}

static json_t *
mount_at(json_t *spec, const char *dst)
{
	size_t	 i;
	json_t	*m;

	json_array_foreach(at(spec, "mounts"), i, m)
		if (strcmp(json_string_value(json_object_get(m,
		    "destination")), dst) == 0)
			return m;
	return NULL;
}

static json_t *
rlimit(json_t *spec, const char *type)
{
	size_t	 i;
	json_t	*r;

	json_array_foreach(at(spec, "process.rlimits"), i, r)
		if (strcmp(json_string_value(json_object_get(r, "type")),
		    type) == 0)
			return r;
	return NULL;
}

Test(spec, root_is_read_only_and_identity_is_nobody)
{
	struct fx	 f;
	json_t		*s;

	fx_init(&f);
	s = build(&f);
	cr_assert_str_eq(str_at(s, "ociVersion"), "1.0.2");
	cr_assert(json_is_true(at(s, "root.readonly")));
	cr_assert_str_eq(str_at(s, "root.path"), f.sp.rootfs);
	cr_assert_eq(int_at(s, "process.user.uid"), 65534);
	cr_assert_eq(int_at(s, "process.user.gid"), 65534);
	cr_assert_null(at(s, "process.user.additionalGids"));
	cr_assert(json_is_true(at(s, "process.noNewPrivileges")));
	cr_assert(json_is_false(at(s, "process.terminal")));
	cr_assert_str_eq(str_at(s, "process.cwd"), "/scratch");
	cr_assert_str_eq(str_at(s, "hostname"), "sandbox");
	cr_assert_eq(int_at(s, "process.oomScoreAdj"), 1000);
	json_decref(s);
}

/* A sandbox's own group (launchd-sbx's ident.c): the process's group and
 * its tmpfs scratch's, so that no host user and no other sandbox shares
 * its credentials. */
Test(spec, the_sandbox_has_its_own_group)
{
	struct fx	 f;
	json_t		*s, *o;

	fx_init(&f);
	f.sp.gid = 1879048200;
	s = build(&f);
	cr_assert_eq(int_at(s, "process.user.uid"), 65534);
	cr_assert_eq(int_at(s, "process.user.gid"), 1879048200);
	cr_assert_null(at(s, "process.user.additionalGids"));
	o = json_object_get(mount_at(s, "/scratch"), "options");
	cr_assert(has_string(o, "gid=1879048200"));
	cr_assert(!has_string(o, "gid=65534"));
	json_decref(s);
}

Test(spec, every_capability_set_is_empty)
{
	static const char *const sets[] = { "bounding", "effective",
	    "inheritable", "permitted", "ambient" };
	struct fx	 f;
	json_t		*s, *c;
	size_t		 i;

	fx_init(&f);
	s = build(&f);
	for (i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		c = json_object_get(at(s, "process.capabilities"), sets[i]);
		cr_assert(json_is_array(c), "%s missing", sets[i]);
		cr_assert_eq(json_array_size(c), 0, "%s not empty", sets[i]);
	}
	json_decref(s);
}

Test(spec, args_run_the_program_under_sbx_init)
{
	struct fx	 f;
	json_t		*s, *a;

	fx_init(&f);
	s = build(&f);
	a = at(s, "process.args");
	cr_assert_eq(json_array_size(a), 4);
	cr_assert_str_eq(json_string_value(json_array_get(a, 0)),
	    "/run/sbx/init");
	cr_assert_str_eq(json_string_value(json_array_get(a, 1)), "--");
	cr_assert_str_eq(json_string_value(json_array_get(a, 2)), "python3");
	cr_assert_str_eq(json_string_value(json_array_get(a, 3)),
	    "/code/main.py");
	json_decref(s);
}

Test(spec, environment_is_only_what_the_policy_implies)
{
	struct fx	 f;
	json_t		*s, *e, *v;
	size_t		 i;

	fx_init(&f);
	s = build(&f);
	e = at(s, "process.env");
	cr_assert_eq(json_array_size(e), 7);
	cr_assert(has_string(e, "HOME=/scratch"));
	cr_assert(has_string(e, "TMPDIR=/scratch"));
	cr_assert(has_string(e, "LANG=C.UTF-8"));
	cr_assert(has_string(e, "SBX_TASK_ID=task-7"));
	cr_assert(has_string(e, "SBX_EXECUTION_ID=exec-7-1"));
	cr_assert(has_string(e, "SBX_POLICY_HASH=" HASH));
	json_array_foreach(e, i, v) {
		const char	*kv = json_string_value(v);

		cr_assert(strncmp(kv, "PATH=", 5) == 0 ||
		    strncmp(kv, "HOME=", 5) == 0 ||
		    strncmp(kv, "TMPDIR=", 7) == 0 ||
		    strncmp(kv, "LANG=", 5) == 0 ||
		    strncmp(kv, "SBX_", 4) == 0, "unexpected %s", kv);
	}
	json_decref(s);
}

Test(spec, namespaces_are_new_and_no_user_namespace)
{
	static const char *const want[] = { "pid", "network", "ipc", "uts",
	    "mount", "cgroup" };
	struct fx	 f;
	json_t		*s, *ns, *n;
	size_t		 i, k, found;

	fx_init(&f);
	s = build(&f);
	ns = at(s, "linux.namespaces");
	for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		found = 0;
		json_array_foreach(ns, i, n) {
			/* A path would join an existing namespace. */
			cr_assert_null(json_object_get(n, "path"));
			if (strcmp(json_string_value(json_object_get(n,
			    "type")), want[k]) == 0)
				found = 1;
		}
		cr_assert(found, "no new %s namespace", want[k]);
	}
	json_array_foreach(ns, i, n)
		cr_assert_str_neq(json_string_value(json_object_get(n, "type")),
		    "user");
	json_decref(s);
}

Test(spec, limits_are_the_policy_limits)
{
	struct fx	 f;
	json_t		*s;

	fx_init(&f);
	s = build(&f);
	cr_assert_eq(int_at(s, "linux.resources.pids.limit"), 128);
	cr_assert_eq(int_at(s, "linux.resources.memory.limit"),
	    512LL * 1024 * 1024);
	/* memory+swap equal to memory: no swap at all. */
	cr_assert_eq(int_at(s, "linux.resources.memory.swap"),
	    512LL * 1024 * 1024);
	cr_assert_eq(int_at(s, "linux.resources.cpu.period"), 100000);
	cr_assert_eq(int_at(s, "linux.resources.cpu.quota"), 150000);
	cr_assert_str_eq(str_at(s, "linux.cgroupsPath"), "/sbx/exec-7-1");
	json_decref(s);
}

Test(spec, rlimits)
{
	struct fx	 f;
	json_t		*s, *r;

	fx_init(&f);
	s = build(&f);
	cr_assert_not_null(r = rlimit(s, "RLIMIT_NOFILE"));
	cr_assert_eq(json_integer_value(json_object_get(r, "hard")), 1024);
	cr_assert_not_null(r = rlimit(s, "RLIMIT_CORE"));
	cr_assert_eq(json_integer_value(json_object_get(r, "hard")), 0);
	cr_assert_not_null(r = rlimit(s, "RLIMIT_FSIZE"));
	/* Above the scratch size, so a full scratch says ENOSPC first. */
	cr_assert_gt(json_integer_value(json_object_get(r, "hard")),
	    100LL * 1024 * 1024);
	/* Per host uid under runc: shared by every sandbox, so absent. */
	cr_assert_null(rlimit(s, "RLIMIT_NPROC"));
	/* No POSIX message queues: kernel memory outside every cap. */
	cr_assert_not_null(r = rlimit(s, "RLIMIT_MSGQUEUE"));
	cr_assert_eq(json_integer_value(json_object_get(r, "hard")), 0);
	cr_assert_eq(json_integer_value(json_object_get(r, "soft")), 0);
	json_decref(s);
}

Test(spec, scratch_is_a_sized_noexec_tmpfs)
{
	struct fx	 f;
	json_t		*s, *m, *o;

	fx_init(&f);
	s = build(&f);
	cr_assert_not_null(m = mount_at(s, "/scratch"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "type")),
	    "tmpfs");
	o = json_object_get(m, "options");
	cr_assert(has_string(o, "size=100m"));
	/* One inode per 4 KiB page. */
	cr_assert(has_string(o, "nr_inodes=25600"));
	cr_assert(has_string(o, "noexec"));
	cr_assert(has_string(o, "nosuid"));
	cr_assert(has_string(o, "nodev"));
	cr_assert(has_string(o, "uid=65534"));
	json_decref(s);
}

Test(spec, dev_shm_has_a_fixed_size_and_inode_cap)
{
	struct fx	 f;
	json_t		*s, *m, *o;

	fx_init(&f);
	s = build(&f);
	cr_assert_not_null(m = mount_at(s, "/dev/shm"));
	o = json_object_get(m, "options");
	cr_assert(has_string(o, "size=16m"));
	cr_assert(has_string(o, "nr_inodes=1024"));
	cr_assert(has_string(o, "noexec"));
	json_decref(s);
}

Test(spec, scratch_dir_is_a_writable_noexec_bind_of_the_host_tmpfs)
{
	struct fx	 f;
	json_t		*s, *m, *o;

	fx_init(&f);
	f.sp.scratch_dir = "/run/sbx/launchd/x-e1/scratch";
	s = build(&f);
	cr_assert_not_null(m = mount_at(s, "/scratch"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "type")),
	    "bind");
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
	    f.sp.scratch_dir);
	o = json_object_get(m, "options");
	cr_assert_not(has_string(o, "ro"));
	cr_assert(has_string(o, "noexec"));
	cr_assert(has_string(o, "nosuid"));
	cr_assert(has_string(o, "nodev"));
	json_decref(s);
	f.sp.scratch_dir = "/run/../etc";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "scratch_dir") != NULL);
}

Test(spec, in_and_code_are_read_only_binds_of_the_staged_copies)
{
	struct fx	 f;
	json_t		*s, *m;

	fx_init(&f);
	s = build(&f);
	cr_assert_not_null(m = mount_at(s, "/in"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
	    f.sp.in_dir);
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	cr_assert(has_string(json_object_get(m, "options"), "noexec"));
	cr_assert_not_null(m = mount_at(s, "/code"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
	    f.sp.code_dir);
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	cr_assert_not_null(m = mount_at(s, "/run/sbx/init"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
	    f.sp.init_path);
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	cr_assert_not_null(m = mount_at(s, "/run/sbx/egress.sock"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
	    f.sp.egress_sock);
	cr_assert_not_null(m = mount_at(s, "/run/sbx/ca.pem"));
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	/* No mount makes /tmp or anything else writable. */
	cr_assert_null(mount_at(s, "/tmp"));
	json_decref(s);
}

Test(spec, no_egress_means_no_socket_and_no_ca)
{
	struct fx	 f;
	json_t		*s;

	fx_init(&f);
	f.sp.egress_sock = NULL;
	f.sp.ca_file = NULL;
	s = build(&f);
	cr_assert_null(mount_at(s, "/run/sbx/egress.sock"));
	cr_assert_null(mount_at(s, "/run/sbx/ca.pem"));
	json_decref(s);
}

Test(spec, oci_default_masked_and_read_only_paths)
{
	static const char *const masked[] = { "/proc/acpi", "/proc/asound",
	    "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
	    "/sys/firmware", "/proc/scsi", "/proc/cmdline",
	    "/sys/devices/virtual/powercap" };
	static const char *const ro[] = { "/proc/bus", "/proc/fs",
	    "/proc/irq", "/proc/sys", "/proc/sysrq-trigger" };
	struct fx	 f;
	json_t		*s;
	size_t		 i;

	fx_init(&f);
	s = build(&f);
	for (i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
		cr_assert(has_string(at(s, "linux.maskedPaths"), masked[i]),
		    "%s not masked", masked[i]);
	for (i = 0; i < sizeof(ro) / sizeof(ro[0]); i++)
		cr_assert(has_string(at(s, "linux.readonlyPaths"), ro[i]),
		    "%s not read-only", ro[i]);
	json_decref(s);
}

Test(spec, annotations_carry_the_policy_hash)
{
	struct fx	 f;
	json_t		*s, *a;

	fx_init(&f);
	s = build(&f);
	a = at(s, "annotations");
	cr_assert_str_eq(json_string_value(json_object_get(a,
	    "sbx.policy_hash")), HASH);
	cr_assert_str_eq(json_string_value(json_object_get(a,
	    "sbx.task_id")), "task-7");
	cr_assert_str_eq(json_string_value(json_object_get(a,
	    "sbx.execution_id")), "exec-7-1");
	cr_assert_str_eq(json_string_value(json_object_get(a, "sbx.policy")),
	    "analytics-readonly@3");
	json_decref(s);
}

/* ---- seccomp ---- */

/*
 * What the profile does with a syscall regardless of its arguments: the
 * action of a rule naming it without conditions, "conditional" if only
 * rules with conditions name it, else the default action.
 */
static const char *
verdict(json_t *sc, const char *name)
{
	size_t		 i;
	json_t		*r;
	const char	*cond = NULL;

	json_array_foreach(json_object_get(sc, "syscalls"), i, r) {
		if (!has_string(json_object_get(r, "names"), name))
			continue;
		if (json_array_size(json_object_get(r, "args")) == 0)
			return json_string_value(json_object_get(r, "action"));
		cond = "conditional";
	}
	return cond ? cond : json_string_value(json_object_get(sc,
	    "defaultAction"));
}

Test(seccomp, default_refuses_and_only_the_native_arch)
{
	json_t	*sc = seccomp_profile(SPEC_RUNC);

	cr_assert_str_eq(json_string_value(json_object_get(sc,
	    "defaultAction")), "SCMP_ACT_ERRNO");
	cr_assert_eq(json_array_size(json_object_get(sc, "architectures")),
	    1);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(sc,
	    "architectures"), 0)), "SCMP_ARCH_X86_64");
	/* Ordinary calls stay allowed. */
	cr_assert_str_eq(verdict(sc, "read"), "SCMP_ACT_ALLOW");
	cr_assert_str_eq(verdict(sc, "execve"), "SCMP_ACT_ALLOW");
	cr_assert_str_eq(verdict(sc, "futex"), "SCMP_ACT_ALLOW");
	json_decref(sc);
}

Test(seccomp, refuses_every_listed_call_in_both_flavors)
{
	json_t	*sc;
	size_t	 i;
	int	 fl;

	for (fl = SPEC_RUNC; fl <= SPEC_RUNSC; fl++) {
		sc = seccomp_profile((enum spec_flavor)fl);
		for (i = 0; seccomp_must_deny[i] != NULL; i++) {
			const char	*v = verdict(sc, seccomp_must_deny[i]);

			if (fl == SPEC_RUNSC &&
			    strcmp(seccomp_must_deny[i], "clone3") == 0)
				continue;	/* seccomp.c: gVisor's own ENOSYS */
			cr_assert_str_neq(v, "SCMP_ACT_ALLOW", "%s allowed",
			    seccomp_must_deny[i]);
			cr_assert_str_neq(v, "conditional",
			    "%s allowed under conditions",
			    seccomp_must_deny[i]);
		}
		json_decref(sc);
	}
	/* The issue's list, checked by name so the list cannot shrink. */
	{
		static const char *const issue[] = { "unshare", "setns",
		    "clone3", "mount", "umount2", "pivot_root", "move_mount",
		    "fsopen", "keyctl", "add_key", "request_key", "bpf",
		    "perf_event_open", "userfaultfd", "io_uring_setup",
		    "io_uring_enter", "io_uring_register", "ptrace",
		    "process_vm_readv", "process_vm_writev", "init_module",
		    "finit_module", "delete_module", "kexec_load",
		    "kexec_file_load" };
		size_t		 k, j;

		for (k = 0; k < sizeof(issue) / sizeof(issue[0]); k++) {
			for (j = 0; seccomp_must_deny[j] != NULL; j++)
				if (strcmp(seccomp_must_deny[j], issue[k]) == 0)
					break;
			cr_assert_not_null(seccomp_must_deny[j],
			    "%s missing from seccomp_must_deny", issue[k]);
		}
	}
}

Test(seccomp, clone3_says_enosys_under_runc)
{
	json_t	*sc = seccomp_profile(SPEC_RUNC), *r;
	size_t	 i;
	int	 seen = 0;

	json_array_foreach(json_object_get(sc, "syscalls"), i, r) {
		if (!has_string(json_object_get(r, "names"), "clone3"))
			continue;
		seen = 1;
		cr_assert_str_eq(json_string_value(json_object_get(r,
		    "action")), "SCMP_ACT_ERRNO");
		cr_assert_eq(json_integer_value(json_object_get(r,
		    "errnoRet")), ENOSYS);
	}
	cr_assert(seen);
	json_decref(sc);
}

Test(seccomp, clone_only_without_namespace_flags)
{
	json_t		*sc = seccomp_profile(SPEC_RUNC), *r, *a;
	size_t		 i;
	int		 rules = 0;
	json_int_t	 need = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
	    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | 0x02000000;

	cr_assert_str_eq(verdict(sc, "clone"), "conditional");
	json_array_foreach(json_object_get(sc, "syscalls"), i, r) {
		if (!has_string(json_object_get(r, "names"), "clone"))
			continue;
		rules++;
		a = json_array_get(json_object_get(r, "args"), 0);
		cr_assert_eq(json_integer_value(json_object_get(a, "index")), 0);
		cr_assert_str_eq(json_string_value(json_object_get(a, "op")),
		    "SCMP_CMP_MASKED_EQ");
		cr_assert_eq(json_integer_value(json_object_get(a, "value")) &
		    need, need, "mask misses a namespace flag");
		cr_assert_eq(json_integer_value(json_object_get(a,
		    "valueTwo")), 0);
	}
	cr_assert_eq(rules, 1);
	json_decref(sc);
}

Test(seccomp, socket_never_raw_packet_or_netlink)
{
	json_t		*sc = seccomp_profile(SPEC_RUNC), *r, *a, *c;
	size_t		 i, k;

	cr_assert_str_eq(verdict(sc, "socket"), "conditional");
	json_array_foreach(json_object_get(sc, "syscalls"), i, r) {
		json_int_t	 dom = -1, tmask = 0, tval = 0;

		if (!has_string(json_object_get(r, "names"), "socket"))
			continue;
		cr_assert_str_eq(json_string_value(json_object_get(r,
		    "action")), "SCMP_ACT_ALLOW");
		a = json_object_get(r, "args");
		json_array_foreach(a, k, c) {
			json_int_t	 idx = json_integer_value(
			    json_object_get(c, "index"));
			const char	*op = json_string_value(
			    json_object_get(c, "op"));

			if (idx == 0) {
				cr_assert_str_eq(op, "SCMP_CMP_EQ");
				dom = json_integer_value(json_object_get(c,
				    "value"));
			} else if (idx == 1) {
				cr_assert_str_eq(op, "SCMP_CMP_MASKED_EQ");
				tmask = json_integer_value(json_object_get(c,
				    "value"));
				tval = json_integer_value(json_object_get(c,
				    "valueTwo"));
			}
		}
		cr_assert(dom == AF_UNIX || dom == AF_INET || dom == AF_INET6,
		    "socket allowed for domain %lld", (long long)dom);
		if (dom != AF_UNIX) {
			cr_assert_eq(tmask, 0xf);
			cr_assert(tval == SOCK_STREAM || tval == SOCK_DGRAM,
			    "socket type %lld allowed", (long long)tval);
		}
	}
	json_decref(sc);
}

/*
 * Whether the profile lets name(args) through: some ALLOW rule naming it
 * whose every condition holds, as libseccomp reads them (MASKED_EQ:
 * value is the mask, valueTwo the datum).
 */
static int
allows(json_t *sc, const char *name, const uint64_t *args)
{
	json_t		*r, *c;
	size_t		 i, k;

	json_array_foreach(json_object_get(sc, "syscalls"), i, r) {
		int	 ok = 1;

		if (!has_string(json_object_get(r, "names"), name) ||
		    strcmp(json_string_value(json_object_get(r, "action")),
		    "SCMP_ACT_ALLOW") != 0)
			continue;
		json_array_foreach(json_object_get(r, "args"), k, c) {
			uint64_t	 a = args[json_integer_value(
			    json_object_get(c, "index"))];
			uint64_t	 v = (uint64_t)json_integer_value(
			    json_object_get(c, "value"));
			uint64_t	 v2 = (uint64_t)json_integer_value(
			    json_object_get(c, "valueTwo"));
			const char	*op = json_string_value(
			    json_object_get(c, "op"));

			if (strcmp(op, "SCMP_CMP_EQ") == 0)
				ok = ok && a == v;
			else if (strcmp(op, "SCMP_CMP_MASKED_EQ") == 0)
				ok = ok && (a & v) == v2;
			else
				cr_assert_fail("unexpected op %s for %s", op,
				    name);
		}
		if (ok)
			return 1;
	}
	return 0;
}

Test(seccomp, socket_only_tcp_udp_and_unix)
{
	static const struct {
		uint64_t	 a[3];
		int		 ok;
	} c[] = {
		{ { AF_INET, SOCK_STREAM, 0 }, 1 },
		{ { AF_INET, SOCK_STREAM | SOCK_NONBLOCK, IPPROTO_TCP }, 1 },
		{ { AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0 }, 1 },
		{ { AF_INET, SOCK_DGRAM, IPPROTO_UDP }, 1 },
		{ { AF_INET6, SOCK_STREAM, IPPROTO_TCP }, 1 },
		{ { AF_INET6, SOCK_DGRAM, IPPROTO_UDP }, 1 },
		{ { AF_UNIX, SOCK_SEQPACKET, 0 }, 1 },
		{ { AF_INET, SOCK_STREAM, IPPROTO_SCTP }, 0 },
		{ { AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP }, 0 },
		{ { AF_INET6, SOCK_STREAM, IPPROTO_SCTP }, 0 },
		{ { AF_INET, SOCK_STREAM, 262 /* MPTCP */ }, 0 },
		{ { AF_INET6, SOCK_STREAM, 262 }, 0 },
		{ { AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE }, 0 },
		{ { AF_INET, SOCK_STREAM, IPPROTO_UDP }, 0 },
		{ { AF_INET, SOCK_DGRAM, IPPROTO_ICMP }, 0 },
		{ { AF_INET, SOCK_STREAM, (1ULL << 32) | IPPROTO_TCP }, 0 },
	};
	uint64_t	 a[6] = { 0 };
	json_t		*sc;
	size_t		 i;
	int		 fl;

	for (fl = SPEC_RUNC; fl <= SPEC_RUNSC; fl++) {
		sc = seccomp_profile((enum spec_flavor)fl);
		for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
			memcpy(a, c[i].a, sizeof(c[i].a));
			cr_assert_eq(allows(sc, "socket", a), c[i].ok,
			    "flavor %d: socket(%llu, %llu, %llu)", fl,
			    (unsigned long long)a[0],
			    (unsigned long long)a[1],
			    (unsigned long long)a[2]);
		}
		/* socketpair creates sockets too: AF_UNIX only. */
		a[0] = AF_UNIX; a[1] = SOCK_STREAM; a[2] = 0;
		cr_assert(allows(sc, "socketpair", a));
		a[0] = AF_INET; a[1] = SOCK_STREAM; a[2] = IPPROTO_SCTP;
		cr_assert_not(allows(sc, "socketpair", a));
		json_decref(sc);
	}
}

Test(seccomp, no_signal_or_pidfd_reaches_pid1)
{
	static const char *const names[] = { "kill", "tkill", "tgkill",
	    "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open" };
	static const uint64_t	 yes[] = { 0, 2, 3, 7, 100, 65535, 0x7fffffff,
	    (uint64_t)-1, (uint64_t)-2, (uint64_t)-100, 0xffffffffULL };
	static const uint64_t	 no[] = { 1, 0x100000001ULL,
	    0xffffffff00000001ULL, 0x8000000000000001ULL };
	uint64_t		 a[6] = { 0, 9, 9, 0, 0, 0 };
	json_t			*sc;
	size_t			 i, k;
	int			 fl;

	for (fl = SPEC_RUNC; fl <= SPEC_RUNSC; fl++) {
		sc = seccomp_profile((enum spec_flavor)fl);
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			cr_assert_str_eq(verdict(sc, names[i]), "conditional",
			    "%s", names[i]);
			for (k = 0; k < sizeof(yes) / sizeof(yes[0]); k++) {
				a[0] = yes[k];
				cr_assert(allows(sc, names[i], a), "%s(%#llx) "
				    "refused", names[i],
				    (unsigned long long)yes[k]);
			}
			for (k = 0; k < sizeof(no) / sizeof(no[0]); k++) {
				a[0] = no[k];
				cr_assert_not(allows(sc, names[i], a), "%s(%#llx)"
				    " allowed", names[i],
				    (unsigned long long)no[k]);
			}
		}
		/* No POSIX message queues. */
		cr_assert_str_eq(verdict(sc, "mq_open"), "SCMP_ACT_ERRNO");
		json_decref(sc);
	}
}

Test(seccomp, personality_only_the_ordinary_personas)
{
	json_t	*sc = seccomp_profile(SPEC_RUNC), *r, *a;
	size_t	 i;

	cr_assert_str_eq(verdict(sc, "personality"), "conditional");
	json_array_foreach(json_object_get(sc, "syscalls"), i, r) {
		json_int_t	 v;

		if (!has_string(json_object_get(r, "names"), "personality"))
			continue;
		a = json_array_get(json_object_get(r, "args"), 0);
		v = json_integer_value(json_object_get(a, "value"));
		/* Never READ_IMPLIES_EXEC (0x400000) or ADDR_NO_RANDOMIZE
		 * (0x40000) unless it is the 0xffffffff query. */
		cr_assert(v == 0xffffffff || (v & 0x440000) == 0,
		    "persona %#llx allowed", (long long)v);
	}
	json_decref(sc);
}

Test(seccomp, spec_embeds_the_profile)
{
	struct fx	 f;
	json_t		*s;

	fx_init(&f);
	s = build(&f);
	cr_assert_str_eq(str_at(s, "linux.seccomp.defaultAction"),
	    "SCMP_ACT_ERRNO");
	cr_assert_str_eq(verdict(at(s, "linux.seccomp"), "mount"),
	    "SCMP_ACT_ERRNO");
	json_decref(s);
}

/* ---- the gVisor flavour ---- */

Test(spec, runsc_limits_pids_inside_and_keeps_tmp_read_only)
{
	struct fx	 f;
	json_t		*s, *r, *m;

	fx_init(&f);
	f.sp.flavor = SPEC_RUNSC;
	s = build(&f);
	cr_assert_not_null(r = rlimit(s, "RLIMIT_NPROC"));
	cr_assert_eq(json_integer_value(json_object_get(r, "hard")), 128);
	/* The host cgroup bounds the sentry too, so it sits above. */
	cr_assert_gt(int_at(s, "linux.resources.pids.limit"), 128);
	cr_assert_not_null(m = mount_at(s, "/tmp"));
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	cr_assert_null(mount_at(s, "/dev/mqueue"));
	json_decref(s);
}

/*
 * runsc looks each name up in gVisor's own table and skips, silently, those
 * it does not know: pselect6 is "pselect" there (issue 11: Python's
 * select.select failed with EPERM).  And gVisor adds /dev/fuse and
 * /dev/net/tun to /dev, which the spec must cover.
 */
Test(spec, runsc_allows_pselect6_by_gvisor_name_and_covers_its_devices)
{
	struct fx	 f;
	json_t		*s, *m, *sc;

	sc = seccomp_profile(SPEC_RUNSC);
	cr_assert_str_eq(verdict(sc, "pselect6"), "SCMP_ACT_ALLOW");
	cr_assert_str_eq(verdict(sc, "pselect"), "SCMP_ACT_ALLOW");
	json_decref(sc);
	/* runc's libseccomp knows no "pselect": the runc profile keeps to
	 * the kernel's names. */
	sc = seccomp_profile(SPEC_RUNC);
	cr_assert_str_eq(verdict(sc, "pselect"), "SCMP_ACT_ERRNO");
	json_decref(sc);

	fx_init(&f);
	f.sp.flavor = SPEC_RUNSC;
	s = build(&f);
	cr_assert_not_null(m = mount_at(s, "/dev/net"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "type")),
	    "tmpfs");
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	cr_assert_not_null(m = mount_at(s, "/dev/fuse"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
	    "/dev/null");
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	json_decref(s);
	fx_init(&f);
	s = build(&f);
	cr_assert_null(mount_at(s, "/dev/fuse"));
	cr_assert_null(mount_at(s, "/dev/net"));
	json_decref(s);
}

/* ---- refusals ---- */

Test(spec, refuses_a_zero_limit)
{
	struct fx	f;

	fx_init(&f);
	f.sp.pids = 0;
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "pids") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.memory_mb = 0;
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "memory_mb") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.cpus_milli = 5;
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "cpus") != NULL, "%s", f.err);
}

Test(spec, refuses_bad_paths_and_ids)
{
	struct fx	f;

	fx_init(&f);
	f.sp.in_dir = "relative/in";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "in_dir") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.code_dir = "/var/lib/sbx/../../etc";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "code_dir") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.rootfs = "/images/x/..";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "rootfs") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.policy_hash = "ABC";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "policy_hash") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.execution_id = "exec/../x";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "execution_id") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.egress_sock = NULL;	/* a CA with no proxy to serve */
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "ca_file") != NULL, "%s", f.err);
	fx_init(&f);
	f.argv[0] = NULL;
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "program") != NULL, "%s", f.err);
}

Test(spec, write_is_0600_and_parses_back)
{
	struct fx	 f;
	json_t		*s, *back;
	json_error_t	 je;
	char		 dir[] = "/tmp/spec_test.XXXXXX", path[64], *text;
	char		*got;
	size_t		 len;
	struct stat	 st;
	FILE		*fp;

	fx_init(&f);
	s = build(&f);
	text = spec_render(&f.sp, &len, f.err, sizeof(f.err));
	cr_assert_not_null(text, "%s", f.err);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(spec_write(dir, text, len, f.err, sizeof(f.err)), 0, "%s",
	    f.err);
	snprintf(path, sizeof(path), "%s/config.json", dir);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	back = json_load_file(path, 0, &je);
	cr_assert_not_null(back, "%s", je.text);
	cr_assert(json_equal(back, s));
	/* The file holds the text, byte for byte. */
	got = calloc(1, len + 2);
	cr_assert_not_null(fp = fopen(path, "r"));
	cr_assert_eq(fread(got, 1, len + 1, fp), len);
	fclose(fp);
	cr_assert_eq(memcmp(got, text, len), 0);
	free(got);
	/* Rewriting replaces the file, it does not fail or append. */
	cr_assert_eq(spec_write(dir, text, len, f.err, sizeof(f.err)), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq((size_t)st.st_size, len);
	json_decref(back);
	unlink(path);
	rmdir(dir);
	cr_assert_eq(spec_write(dir, text, len, f.err, sizeof(f.err)), -1);
	cr_assert(strstr(f.err, dir) != NULL, "%s", f.err);
	free(text);
	json_decref(s);
}

/* By descriptor, following no symlink: one at config.json is replaced,
 * never written through. */
Test(spec, write_at_replaces_a_symlink_and_never_follows_it)
{
	char		 dir[] = "/tmp/spec_test.XXXXXX", path[96], victim[96];
	struct stat	 st;
	int		 dfd;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/config.json", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	cr_assert_eq(close(open(victim, O_WRONLY | O_CREAT, 0644)), 0);
	cr_assert_eq(symlink(victim, path), 0);
	cr_assert_neq(dfd = open(dir, O_RDONLY | O_DIRECTORY), -1);
	cr_assert_eq(spec_write_at(dfd, "{}\n", 3, NULL, 0), 0);
	cr_assert_eq(lstat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode), "config.json is still a symlink");
	cr_assert_eq(st.st_size, 3);
	cr_assert_eq(stat(victim, &st), 0);
	cr_assert_eq(st.st_size, 0, "the symlink's target was written");
	/* A directory gone from under its descriptor: an error, no file. */
	unlink(path);
	unlink(victim);
	rmdir(dir);
	errno = 0;
	cr_assert_eq(spec_write_at(dfd, "{}\n", 3, NULL, 0), -1);
	cr_assert_neq(errno, 0);
	close(dfd);
}

/* ---- what jansson refused ---- */

/* JSON carries only UTF-8: a byte that is not is refused, naming the
 * field, as jansson's json_string refused it. */
Test(spec, refuses_invalid_utf8_naming_the_field)
{
	static char	 bad1[] = "caf\xe9";		/* Latin-1 */
	static char	 bad2[] = "\xc0\xaf";		/* overlong '/' */
	static char	 bad3[] = "\xed\xa0\x80";	/* a surrogate */
	static char	 bad4[] = "cut \xe6\x97";	/* cut short */
	char		*bads[] = { bad1, bad2, bad3, bad4 };
	struct fx	 f;
	size_t		 i;

	for (i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		fx_init(&f);
		f.argv[1] = bads[i];
		cr_assert_null(refused(&f));
		cr_assert(strstr(f.err, "argv[1]") != NULL, "%s", f.err);
		cr_assert(strstr(f.err, "UTF-8") != NULL, "%s", f.err);
	}
	fx_init(&f);
	f.sp.policy_name = bad1;
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "policy_name") != NULL, "%s", f.err);
	fx_init(&f);
	f.sp.rootfs = "/images/caf\xe9";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "rootfs") != NULL, "%s", f.err);
	/* Well-formed non-ASCII passes through as it is. */
	fx_init(&f);
	f.argv[1] = "h\xc3\xa9llo \xf0\x9f\x98\x80";
	{
		json_t	*s = build(&f);

		cr_assert_str_eq(json_string_value(json_array_get(at(s,
		    "process.args"), 3)), f.argv[1]);
		json_decref(s);
	}
}

Test(spec, refuses_a_gid_above_int32)
{
	struct fx	 f;

	fx_init(&f);
	f.sp.gid = 2147483648u;
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "gid") != NULL, "%s", f.err);
}

/* ---- the writer ---- */

Test(jsonw, escapes_as_jansson_and_refuses_keys_out_of_order)
{
	struct jw	 w;
	char		 err[160], *t;
	size_t		 len;

	jw_init(&w);
	jw_obj(&w);
	jw_key(&w, "a");
	jw_str(&w, "\"\\/\x01\x1f\x7f\b\f\n\r\t\xc3\xa9");
	jw_key(&w, "b");
	jw_arr(&w);
	jw_arr_end(&w);
	jw_key(&w, "c");
	jw_obj(&w);
	jw_obj_end(&w);
	jw_key(&w, "d");
	jw_int(&w, -5);
	jw_obj_end(&w);
	t = jw_finish(&w, &len, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_str_eq(t, "{\n \"a\": \"\\\"\\\\/\\u0001\\u001F\x7f\\b\\f\\n"
	    "\\r\\t\xc3\xa9\",\n \"b\": [],\n \"c\": {},\n \"d\": -5\n}\n");
	cr_assert_eq(len, strlen(t));
	free(t);

	jw_init(&w);
	jw_obj(&w);
	jw_key(&w, "b");
	jw_int(&w, 1);
	jw_key(&w, "a");
	jw_int(&w, 2);
	jw_obj_end(&w);
	cr_assert_null(jw_finish(&w, &len, err, sizeof(err)));
	cr_assert(strstr(err, "\"a\" after \"b\"") != NULL, "%s", err);

	jw_init(&w);
	jw_arr(&w);
	jw_str(&w, "\xff");
	jw_arr_end(&w);
	cr_assert_null(jw_finish(&w, &len, err, sizeof(err)));
	cr_assert(strstr(err, "UTF-8") != NULL, "%s", err);
}

/* ---- the pool entry variant and pool_key's spec ---- */

static void
fx_pool(struct fx *f)
{
	fx_init(f);
	f->sp.pool = 1;
	f->sp.pool_run = "/run/sbx/launchd/x-pool-1-1/run";
	f->sp.pool_entry_id = "pool-1-1";
	f->sp.pool_key = HASH;
}

/* pool.warm_imports: sbx-init -m after -w python3; names only, and only
 * for a warm python. */
Test(spec, pool_warm_imports_go_to_sbx_init_as_module_names_only)
{
	struct fx	 f;
	json_t		*s, *a;
	char		 long_[300];
	const char	*bad[] = { "os;print(1)", "json,", ",json", "a..b",
	    "1abc", "json, csv", "x.", "json\n", "m\xc3\xa9", long_ };

	/* 299 bytes of a name: refused, reading 256 at most (the
	 * monitor's field). */
	memset(long_, 'a', sizeof(long_) - 1);
	long_[sizeof(long_) - 1] = '\0';
	fx_pool(&f);
	f.sp.pool_warm_python = 1;
	f.sp.pool_warm_imports = "json,matplotlib.pyplot,_x1";
	s = build(&f);
	a = at(s, "process.args");
	cr_assert_eq(json_array_size(a), 7);
	cr_assert_str_eq(json_string_value(json_array_get(a, 1)), "-w");
	cr_assert_str_eq(json_string_value(json_array_get(a, 3)), "-m");
	cr_assert_str_eq(json_string_value(json_array_get(a, 4)),
	    "json,matplotlib.pyplot,_x1");
	json_decref(s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fx_pool(&f);
		f.sp.pool_warm_python = 1;
		f.sp.pool_warm_imports = bad[i];
		cr_assert_null(refused(&f), "imports \"%s\" accepted", bad[i]);
		cr_assert(strstr(f.err, "pool_warm_imports") != NULL, "%s",
		    f.err);
	}
	/* "" is none. */
	fx_pool(&f);
	f.sp.pool_warm_python = 1;
	f.sp.pool_warm_imports = "";
	s = build(&f);
	cr_assert_eq(json_array_size(at(s, "process.args")), 5);
	json_decref(s);
	/* Not without the warm interpreter it is for. */
	fx_pool(&f);
	f.sp.pool_warm_imports = "json";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "warm python") != NULL, "%s", f.err);
}

Test(spec, pool_entry_takes_its_program_from_the_fifo)
{
	struct fx	 f;
	json_t		*s, *a, *m, *v;
	size_t		 i;

	fx_pool(&f);
	f.sp.pool_egress = 1;
	f.sp.pool_warm_python = 1;
	s = build(&f);
	a = at(s, "process.args");
	cr_assert_eq(json_array_size(a), 9);
	cr_assert_str_eq(json_string_value(json_array_get(a, 0)),
	    "/run/sbx/init");
	cr_assert_str_eq(json_string_value(json_array_get(a, 1)), "-s");
	cr_assert_str_eq(json_string_value(json_array_get(a, 2)),
	    "/run/sbx/pool/egress.sock");
	cr_assert_str_eq(json_string_value(json_array_get(a, 3)), "-c");
	cr_assert_str_eq(json_string_value(json_array_get(a, 4)),
	    "/run/sbx/pool/ca.pem");
	cr_assert_str_eq(json_string_value(json_array_get(a, 5)), "-w");
	cr_assert_str_eq(json_string_value(json_array_get(a, 6)), "python3");
	cr_assert_str_eq(json_string_value(json_array_get(a, 7)), "-a");
	cr_assert_str_eq(json_string_value(json_array_get(a, 8)),
	    "/run/sbx/pool/argv");
	/* The program's identity comes through the FIFO. */
	json_array_foreach(at(s, "process.env"), i, v)
		cr_assert(strncmp(json_string_value(v), "SBX_", 4) != 0,
		    "%s in a pool entry", json_string_value(v));
	/* Its run/, not the socket and CA one by one. */
	cr_assert_null(mount_at(s, "/run/sbx/egress.sock"));
	cr_assert_null(mount_at(s, "/run/sbx/ca.pem"));
	cr_assert_not_null(m = mount_at(s, "/run/sbx/pool"));
	cr_assert_str_eq(json_string_value(json_object_get(m, "source")),
	    f.sp.pool_run);
	cr_assert(has_string(json_object_get(m, "options"), "ro"));
	cr_assert(has_string(json_object_get(m, "options"), "noexec"));
	/* Named by entry and key, not by policy. */
	cr_assert_str_eq(json_string_value(json_object_get(at(s,
	    "annotations"), "sbx.pool_entry")), "pool-1-1");
	cr_assert_str_eq(json_string_value(json_object_get(at(s,
	    "annotations"), "sbx.pool_key")), HASH);
	cr_assert_null(json_object_get(at(s, "annotations"), "sbx.policy"));
	json_decref(s);

	fx_pool(&f);
	s = build(&f);
	a = at(s, "process.args");
	cr_assert_eq(json_array_size(a), 3);
	cr_assert_str_eq(json_string_value(json_array_get(a, 1)), "-a");
	json_decref(s);
}

Test(spec, pool_entry_needs_its_run_dir_id_and_key)
{
	struct fx	 f;

	fx_pool(&f);
	f.sp.pool_run = "run";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "pool_run") != NULL, "%s", f.err);
	fx_pool(&f);
	f.sp.pool_entry_id = "../x";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "pool_entry_id") != NULL, "%s", f.err);
	fx_pool(&f);
	f.sp.pool_key = "abc";
	cr_assert_null(refused(&f));
	cr_assert(strstr(f.err, "pool_key") != NULL, "%s", f.err);
	/* What the FIFO brings need not be there. */
	fx_pool(&f);
	f.sp.policy_name = NULL;
	f.sp.policy_hash = NULL;
	f.sp.task_id = NULL;
	f.sp.execution_id = NULL;
	f.sp.argv = NULL;
	json_decref(build(&f));
}

Test(spec, no_annotations_leaves_only_what_the_sandbox_is)
{
	struct fx	 f;
	json_t		*s;

	fx_init(&f);
	f.sp.no_annotations = 1;
	s = build(&f);
	cr_assert_null(at(s, "annotations"));
	cr_assert_not_null(at(s, "process"));
	json_decref(s);
}
