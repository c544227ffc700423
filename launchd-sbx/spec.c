/*
 * spec.c: one execution's OCI runtime spec (config.json), built from the
 * compiled policy and the paths launchd-sbx staged.
 *
 * Invariant: every field of the policy that a runtime can enforce is in the
 * spec, and nothing is in it that the policy did not imply.  The sandbox
 * sees a read-only root, /scratch as its only writable place, read-only
 * copies at /in and /code, sbx-init and (when the policy has egress) the
 * egress socket and CA under /run/sbx, runs as uid 65534 with a group of
 * its own (so that no host user and no other sandbox shares its
 * credentials: launchd-sbx's ident.c), no capabilities and no_new_privs, in fresh pid, network (loopback only),
 * ipc, uts, mount and cgroup namespaces, under pids, memory and cpu limits
 * and the seccomp profile of seccomp.c.  There is no user namespace: the
 * sandbox has no root to map.  Bad parameters are refused, never defaulted.
 *
 * gVisor (SPEC_RUNSC) differs in four places, each explained where it
 * happens: RLIMIT_NPROC carries the pids limit because the host pids
 * cgroup also holds the sentry; /tmp gets an empty read-only tmpfs because
 * runsc would otherwise mount a writable one; /dev/net and /dev/fuse are
 * covered because gVisor adds them to /dev; no mqueue mount.  runsc must
 * be started with --oci-seccomp (or it ignores linux.seccomp),
 * --network=none and --host-uds=open (to reach the egress socket).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errf.h"
#include "name.h"
#include "launchd-sbx/jsonw.h"
#include "launchd-sbx/spec.h"

#define MIB	(1024LL * 1024LL)

/* The paths the OCI reference (runc spec) masks and makes read-only. */
static const char *const spec_masked[] = {
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/sys/firmware", "/proc/scsi",
	/* The host's kernel command line; energy counters, a side channel
	 * (masked by Docker too). */
	"/proc/cmdline", "/sys/devices/virtual/powercap", NULL
};
static const char *const spec_readonly[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
	"/proc/sysrq-trigger", NULL
};

/* A host path we hand to the runtime: absolute, no ".." component, no
 * line break (runtimes log paths line by line). */
static int
spec_path_ok(const char *p)
{
	return p != NULL && p[0] == '/' && strlen(p) < PATH_MAX &&
	    strpbrk(p, "\n\r") == NULL && !path_has_dotdot(p);
}

static int
spec_hash_ok(const char *h)
{
	size_t	i;

	if (h == NULL || strlen(h) != SPEC_HASH_LEN)
		return 0;
	for (i = 0; h[i] != '\0'; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' &&
		    h[i] <= 'f')))
			return 0;
	return 1;
}

/*
 * Every string that reaches the text must be UTF-8: JSON can carry
 * nothing else, and a runtime would refuse the whole spec.  Said here,
 * naming the field; the writer would refuse it too, without the name.
 */
static int
spec_utf8(const char *name, const char *s, char *err, size_t errlen)
{
	if (s == NULL || jw_utf8_ok(s))
		return 0;
	errf(err, errlen, "spec: %s is not valid UTF-8", name);
	return -1;
}

/* The parameters of the execution itself, which a pool entry has none
 * of (sbx-init reads them from its FIFO). */
static int
spec_check_exec(const struct spec_params *sp, char *err, size_t errlen)
{
	char	 name[32];
	size_t	 i;

	if (sp->policy_name == NULL || sp->policy_name[0] == '\0') {
		errf(err, errlen, "spec: policy_name is missing");
		return -1;
	}
	if (spec_utf8("policy_name", sp->policy_name, err, errlen) == -1)
		return -1;
	if (!spec_hash_ok(sp->policy_hash)) {
		errf(err, errlen, "spec: policy_hash is not 64 lower-case "
		    "hex digits");
		return -1;
	}
	if (sp->task_id == NULL || !name_ok(sp->task_id)) {
		errf(err, errlen, "spec: task_id is missing or not a safe "
		    "name");
		return -1;
	}
	if (sp->execution_id == NULL || !name_ok(sp->execution_id)) {
		errf(err, errlen, "spec: execution_id is missing or not a "
		    "safe name");
		return -1;
	}
	if (sp->argv == NULL || sp->argv[0] == NULL || sp->argv[0][0] == '\0') {
		errf(err, errlen, "spec: no program to run");
		return -1;
	}
	for (i = 0; sp->argv[i] != NULL; i++) {
		snprintf(name, sizeof(name), "argv[%zu]", i);
		if (spec_utf8(name, sp->argv[i], err, errlen) == -1)
			return -1;
	}
	return 0;
}

/* What sbx-init -m takes (its init_mods_ok): module names only, so that
 * nothing but an import reaches the warm interpreter. */
int
spec_mods_ok(const char *s)
{
	int	 start = 1;

	if (*s == '\0' || strnlen(s, 256) > 255)
		return 0;
	for (; *s != '\0'; s++) {
		if (*s == ',' || *s == '.') {
			if (start)
				return 0;
			start = 1;
			continue;
		}
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') ||
		    (*s >= 'A' && *s <= 'Z') || (!start && *s >= '0' &&
		    *s <= '9')))
			return 0;
		start = 0;
	}
	return !start;
}

static int
spec_check_pool(const struct spec_params *sp, char *err, size_t errlen)
{
	if (sp->pool_warm_imports != NULL && sp->pool_warm_imports[0] !=
	    '\0' && (!sp->pool_warm_python ||
	    !spec_mods_ok(sp->pool_warm_imports))) {
		errf(err, errlen, "spec: pool_warm_imports is not a list "
		    "of module names for a warm python");
		return -1;
	}
	if (!spec_path_ok(sp->pool_run)) {
		errf(err, errlen, "spec: pool_run \"%s\" is not an absolute "
		    "path without \"..\"", sp->pool_run ? sp->pool_run :
		    "(none)");
		return -1;
	}
	if (spec_utf8("pool_run", sp->pool_run, err, errlen) == -1)
		return -1;
	if (sp->pool_entry_id == NULL || !name_ok(sp->pool_entry_id)) {
		errf(err, errlen, "spec: pool_entry_id is missing or not a "
		    "safe name");
		return -1;
	}
	if (!spec_hash_ok(sp->pool_key)) {
		errf(err, errlen, "spec: pool_key is not 64 lower-case hex "
		    "digits");
		return -1;
	}
	return 0;
}

static int
spec_check(const struct spec_params *sp, char *err, size_t errlen)
{
	struct {
		const char	*name;
		const char	*path;
		int		 optional;
	} paths[] = {
		{ "rootfs", sp->rootfs, 0 },
		{ "in_dir", sp->in_dir, 0 },
		{ "code_dir", sp->code_dir, 0 },
		{ "scratch_dir", sp->scratch_dir, 1 },
		{ "init_path", sp->init_path, 0 },
		{ "cgroups_path", sp->cgroups_path, 0 },
		{ "egress_sock", sp->egress_sock, 1 },
		{ "ca_file", sp->ca_file, 1 },
	};
	size_t			 i;

	if (sp->pool ? spec_check_pool(sp, err, errlen) == -1 :
	    spec_check_exec(sp, err, errlen) == -1)
		return -1;
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (paths[i].path == NULL && paths[i].optional)
			continue;
		if (!spec_path_ok(paths[i].path)) {
			errf(err, errlen, "spec: %s \"%s\" is not an "
			    "absolute path without \"..\"", paths[i].name,
			    paths[i].path ? paths[i].path : "(none)");
			return -1;
		}
		if (spec_utf8(paths[i].name, paths[i].path, err, errlen) == -1)
			return -1;
	}
	if (sp->ca_file != NULL && sp->egress_sock == NULL) {
		errf(err, errlen, "spec: ca_file without egress_sock: the "
		    "CA serves only the egress proxy");
		return -1;
	}
	/* No sandbox group is above it (launchd-sbx's parse.c), and the
	 * runtimes read the field as an int32 before they cast it. */
	if (sp->gid > INT32_MAX) {
		errf(err, errlen, "spec: gid %lu is above %d",
		    (unsigned long)sp->gid, INT32_MAX);
		return -1;
	}
	if (sp->flavor != SPEC_RUNC && sp->flavor != SPEC_RUNSC) {
		errf(err, errlen, "spec: unknown runtime flavor %d",
		    (int)sp->flavor);
		return -1;
	}
	/* Zero would mean "unlimited" to a runtime: refuse, never widen. */
	if (sp->cpus_milli == 0 || sp->memory_mb == 0 || sp->pids == 0 ||
	    sp->scratch_mb == 0) {
		errf(err, errlen, "spec: limits.%s is 0; every limit must "
		    "be set", sp->cpus_milli == 0 ? "cpus" : sp->memory_mb == 0 ?
		    "memory_mb" : sp->pids == 0 ? "pids" : "scratch_mb");
		return -1;
	}
	/* CFS refuses a quota under 1 ms of a 100 ms period. */
	if (sp->cpus_milli < 10) {
		errf(err, errlen, "spec: limits.cpus %u milli-cpus is under "
		    "the kernel's minimum of 10", sp->cpus_milli);
		return -1;
	}
	return 0;
}

/* The sandbox's group: its own (launchd-sbx's ident.c), or 65534 for a
 * spec built without one (tools and tests). */
static gid_t
spec_gid(const struct spec_params *sp)
{
	return sp->gid != 0 ? sp->gid : SPEC_GID;
}

/*
 * Every object below is written with its keys in strcmp order, as
 * jansson's JSON_SORT_KEYS wrote them (the writer checks); arrays keep
 * the order they are given in.
 */

static void
spec_rlimit(struct jw *w, const char *type, long long v)
{
	jw_obj(w);
	jw_key(w, "hard");
	jw_int(w, v);
	jw_key(w, "soft");
	jw_int(w, v);
	jw_key(w, "type");
	jw_str(w, type);
	jw_obj_end(w);
}

/* sbx-init is PID 1 and takes the program after "--" -- or, in a pool
 * entry, from the FIFO in its run/, with the egress socket and CA. */
static void
spec_args(struct jw *w, const struct spec_params *sp)
{
	size_t	 i;

	jw_arr(w);
	jw_str(w, SPEC_INIT);
	if (!sp->pool) {
		jw_str(w, "--");
		for (i = 0; sp->argv[i] != NULL; i++)
			jw_str(w, sp->argv[i]);
		jw_arr_end(w);
		return;
	}
	if (sp->pool_egress) {
		jw_str(w, "-s");
		jw_str(w, POOL_RUN_DIR "/" POOL_EGRESS_SOCK);
		jw_str(w, "-c");
		jw_str(w, POOL_RUN_DIR "/" POOL_CA);
	}
	if (sp->pool_warm_python) {
		jw_str(w, "-w");
		jw_str(w, "python3");
		if (sp->pool_warm_imports != NULL &&
		    sp->pool_warm_imports[0] != '\0') {
			jw_str(w, "-m");
			jw_str(w, sp->pool_warm_imports);
		}
	}
	jw_str(w, "-a");
	jw_str(w, POOL_RUN_DIR "/" POOL_ARGV);
	jw_arr_end(w);
}

static void
spec_process(struct jw *w, const struct spec_params *sp)
{
	static const char *const caps[] = { "ambient", "bounding",
	    "effective", "inheritable", "permitted" };
	size_t			 i;

	jw_obj(w);
	jw_key(w, "args");
	spec_args(w, sp);

	jw_key(w, "capabilities");
	jw_obj(w);
	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		jw_key(w, caps[i]);
		jw_arr(w);
		jw_arr_end(w);
	}
	jw_obj_end(w);

	jw_key(w, "cwd");
	jw_str(w, SPEC_SCRATCH);

	/* Only what the policy implies; sbx-init adds the proxy variables
	 * (and a pool entry's the SBX_ ones, from its FIFO). */
	jw_key(w, "env");
	jw_arr(w);
	jw_str(w, SPEC_PATH_ENV);
	jw_str(w, "HOME=" SPEC_SCRATCH);
	jw_str(w, "TMPDIR=" SPEC_SCRATCH);
	jw_str(w, "LANG=C.UTF-8");
	if (!sp->pool) {
		jw_strf(w, "SBX_TASK_ID=%s", sp->task_id);
		jw_strf(w, "SBX_EXECUTION_ID=%s", sp->execution_id);
		jw_strf(w, "SBX_POLICY_HASH=%s", sp->policy_hash);
	}
	jw_arr_end(w);

	jw_key(w, "noNewPrivileges");
	jw_bool(w, 1);
	jw_key(w, "oomScoreAdj");
	jw_int(w, 1000);

	/*
	 * RLIMIT_FSIZE sits one MiB above the scratch size so that filling
	 * /scratch ends in ENOSPC, as a user expects, rather than SIGXFSZ.
	 *
	 * RLIMIT_NPROC: under runc it would count every process of uid 65534
	 * on the host, so concurrent sandboxes would share it, and the pids
	 * cgroup is the per-sandbox limit.  gVisor counts it inside the
	 * sandbox's own kernel, and there it is the pids limit (see
	 * spec_linux for why the host cgroup cannot be).
	 */
	jw_key(w, "rlimits");
	jw_arr(w);
	spec_rlimit(w, "RLIMIT_NOFILE", SPEC_NOFILE);
	spec_rlimit(w, "RLIMIT_CORE", 0);
	spec_rlimit(w, "RLIMIT_FSIZE", ((long long)sp->scratch_mb + 1) * MIB);
	/*
	 * POSIX message queues are kernel memory outside every file system
	 * cap, and RLIMIT_MSGQUEUE counts per host uid, which every runc
	 * sandbox shares: any cap above 0 is one sandbox's to exhaust for
	 * the others.  0: a queue created in /dev/mqueue fails (EMFILE);
	 * mq_open(3) meets the seccomp profile first (seccomp.c).
	 */
	spec_rlimit(w, "RLIMIT_MSGQUEUE", 0);
	if (sp->flavor == SPEC_RUNSC)
		spec_rlimit(w, "RLIMIT_NPROC", sp->pids);
	jw_arr_end(w);

	jw_key(w, "terminal");
	jw_bool(w, 0);
	jw_key(w, "user");
	jw_obj(w);
	jw_key(w, "gid");
	jw_int(w, (long long)spec_gid(sp));
	jw_key(w, "uid");
	jw_int(w, SPEC_UID);
	jw_obj_end(w);
	jw_obj_end(w);
}

static void
spec_mount(struct jw *w, const char *dst, const char *type, const char *src,
    const char *const *opts)
{
	jw_obj(w);
	jw_key(w, "destination");
	jw_str(w, dst);
	jw_key(w, "options");
	jw_strings(w, opts);
	jw_key(w, "source");
	jw_str(w, src);
	jw_key(w, "type");
	jw_str(w, type);
	jw_obj_end(w);
}

static void
spec_mounts(struct jw *w, const struct spec_params *sp)
{
	static const char *const o_proc[] = { "nosuid", "noexec", "nodev",
	    NULL };
	static const char *const o_dev[] = { "nosuid", "noexec",
	    "strictatime", "mode=755", "size=64k", NULL };
	static const char *const o_pts[] = { "nosuid", "noexec",
	    "newinstance", "ptmxmode=0666", "mode=0620", NULL };
	static const char *const o_shm[] = { "nosuid", "noexec", "nodev",
	    "mode=1777", SPEC_SHM_SIZE, SPEC_SHM_INODES, NULL };
	static const char *const o_mq[] = { "nosuid", "noexec", "nodev",
	    NULL };
	static const char *const o_tmp[] = { "ro", "nosuid", "noexec",
	    "nodev", "mode=755", "size=4k", NULL };
	static const char *const o_null[] = { "bind", "ro", "nosuid",
	    "noexec", NULL };
	static const char *const o_sys[] = { "nosuid", "noexec", "nodev",
	    "ro", NULL };
	static const char *const o_run[] = { "nosuid", "noexec", "nodev",
	    "mode=755", "size=64k", "nr_inodes=16", NULL };
	static const char *const o_in[] = { "bind", "ro", "nosuid", "nodev",
	    "noexec", NULL };
	static const char *const o_code[] = { "bind", "ro", "nosuid",
	    "nodev", NULL };
	static const char *const o_init[] = { "bind", "ro", "nosuid",
	    "nodev", NULL };
	static const char *const o_file[] = { "bind", "ro", "nosuid",
	    "nodev", "noexec", NULL };
	static const char *const o_bindrw[] = { "bind", "nosuid", "nodev",
	    "noexec", NULL };
	char			 size[32];
	/*
	 * Owned by the sandbox user rather than mode 1777: runc copies the
	 * mode of an existing mount point onto a tmpfs, so only the owner
	 * is certain to survive whatever the image's /scratch looks like.
	 */
	char			 gid[32], inodes[48];
	const char		*o_scratch[] = { "nosuid", "noexec", "nodev",
	    "mode=0755", "uid=65534", gid, size, inodes, NULL };

	snprintf(size, sizeof(size), "size=%um", sp->scratch_mb);
	snprintf(inodes, sizeof(inodes), "nr_inodes=%llu",
	    SPEC_SCRATCH_INODES(sp->scratch_mb));
	snprintf(gid, sizeof(gid), "gid=%lu", (unsigned long)spec_gid(sp));
	jw_arr(w);
	spec_mount(w, "/proc", "proc", "proc", o_proc);
	spec_mount(w, "/dev", "tmpfs", "tmpfs", o_dev);
	spec_mount(w, "/dev/pts", "devpts", "devpts", o_pts);
	spec_mount(w, "/dev/shm", "tmpfs", "shm", o_shm);
	/* gVisor (Debian 12's) silently skips an mqueue mount. */
	if (sp->flavor == SPEC_RUNC)
		spec_mount(w, "/dev/mqueue", "mqueue", "mqueue", o_mq);
	/*
	 * gVisor mounts a writable, unsized tmpfs at /tmp when the spec has
	 * none and the image's /tmp is empty: an empty read-only one keeps
	 * /scratch the only writable place.
	 */
	if (sp->flavor == SPEC_RUNSC)
		spec_mount(w, "/tmp", "tmpfs", "tmpfs", o_tmp);
	/*
	 * gVisor fills /dev with its own devices, whatever the spec says:
	 * besides runc's set it adds /dev/fuse and /dev/net/tun, which open
	 * for anyone.  An empty read-only tmpfs hides /dev/net, and the
	 * host's /dev/null, read-only, covers /dev/fuse (a file: nothing
	 * can be mounted over it to make it vanish, and runsc ignores
	 * maskedPaths).
	 */
	if (sp->flavor == SPEC_RUNSC) {
		spec_mount(w, "/dev/net", "tmpfs", "tmpfs", o_tmp);
		spec_mount(w, "/dev/fuse", "bind", "/dev/null", o_null);
	}
	spec_mount(w, "/sys", "sysfs", "sysfs", o_sys);
	/*
	 * A host tmpfs (launchd-sbx mounted it with the size and owner
	 * above) when given: it survives the container, so gated reads the
	 * outputs only once every process of the sandbox is dead.
	 */
	if (sp->scratch_dir != NULL)
		spec_mount(w, SPEC_SCRATCH, "bind", sp->scratch_dir, o_bindrw);
	else
		spec_mount(w, SPEC_SCRATCH, "tmpfs", "tmpfs", o_scratch);
	spec_mount(w, "/in", "bind", sp->in_dir, o_in);
	spec_mount(w, "/code", "bind", sp->code_dir, o_code);
	/*
	 * A small tmpfs holds the mount points of the files below, so the
	 * runtime creates them there and not in the shared read-only image.
	 * It stays writable by root only, and the sandbox has no root.
	 */
	spec_mount(w, SPEC_RUN_DIR, "tmpfs", "tmpfs", o_run);
	spec_mount(w, SPEC_INIT, "bind", sp->init_path, o_init);
	if (sp->pool) {
		/* The entry's run/: its FIFO, and the egress socket and CA
		 * once a launch puts them there (they do not exist yet, so
		 * they cannot be bound one by one). */
		spec_mount(w, POOL_RUN_DIR, "bind", sp->pool_run, o_file);
		jw_arr_end(w);
		return;
	}
	/* A socket on a read-only mount still accepts connect(2). */
	if (sp->egress_sock != NULL)
		spec_mount(w, SPEC_EGRESS_SOCK, "bind", sp->egress_sock, o_file);
	if (sp->ca_file != NULL)
		spec_mount(w, SPEC_CA_FILE, "bind", sp->ca_file, o_file);
	jw_arr_end(w);
}

static void
spec_linux(struct jw *w, const struct spec_params *sp)
{
	static const char *const nstypes[] = { "pid", "network", "ipc", "uts",
	    "mount", "cgroup", NULL };
	long long		 mem = (long long)sp->memory_mb * MIB, pids;
	size_t			 i;

	/*
	 * gVisor's sentry and its ptrace stubs live in the host cgroup too,
	 * about eight host tasks per sandbox process: at the policy's number
	 * the sentry itself cannot start a thread and the whole sandbox
	 * dies.  There the host limit is only a backstop against the
	 * sentry, and RLIMIT_NPROC (spec_process) is the policy's limit.
	 */
	if (sp->flavor == SPEC_RUNSC)
		pids = SPEC_RUNSC_PIDS_BASE +
		    SPEC_RUNSC_PIDS_PER_PROC * (long long)sp->pids;
	else
		pids = sp->pids;

	jw_obj(w);
	jw_key(w, "cgroupsPath");
	jw_str(w, sp->cgroups_path);
	jw_key(w, "maskedPaths");
	jw_strings(w, spec_masked);
	jw_key(w, "namespaces");
	jw_arr(w);
	for (i = 0; nstypes[i] != NULL; i++) {
		jw_obj(w);
		jw_key(w, "type");
		jw_str(w, nstypes[i]);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_key(w, "readonlyPaths");
	jw_strings(w, spec_readonly);

	jw_key(w, "resources");
	jw_obj(w);
	jw_key(w, "cpu");
	jw_obj(w);
	jw_key(w, "period");
	jw_int(w, SPEC_CPU_PERIOD);
	jw_key(w, "quota");
	jw_int(w, (long long)sp->cpus_milli * SPEC_CPU_PERIOD / 1000);
	jw_obj_end(w);
	jw_key(w, "devices");
	jw_arr(w);
	jw_obj(w);
	jw_key(w, "access");
	jw_str(w, "rwm");
	jw_key(w, "allow");
	jw_bool(w, 0);
	jw_obj_end(w);
	jw_arr_end(w);
	/* swap equal to memory: memory plus swap may not exceed memory, so
	 * the sandbox never swaps and a balloon meets the OOM killer. */
	jw_key(w, "memory");
	jw_obj(w);
	jw_key(w, "limit");
	jw_int(w, mem);
	jw_key(w, "swap");
	jw_int(w, mem);
	jw_obj_end(w);
	jw_key(w, "pids");
	jw_obj(w);
	jw_key(w, "limit");
	jw_int(w, pids);
	jw_obj_end(w);
	jw_obj_end(w);

	jw_key(w, "seccomp");
	seccomp_render(w, sp->flavor);
	jw_obj_end(w);
}

static void
spec_annotations(struct jw *w, const struct spec_params *sp)
{
	jw_obj(w);
	if (sp->pool) {
		/* The audit record of the launch ties the execution and its
		 * policy hash to this entry (pool.c). */
		jw_key(w, "sbx.pool_entry");
		jw_str(w, sp->pool_entry_id);
		jw_key(w, "sbx.pool_key");
		jw_str(w, sp->pool_key);
	} else {
		jw_key(w, "sbx.execution_id");
		jw_str(w, sp->execution_id);
		jw_key(w, "sbx.policy");
		jw_strf(w, "%s@%u", sp->policy_name, sp->policy_version);
		jw_key(w, "sbx.policy_hash");
		jw_str(w, sp->policy_hash);
		jw_key(w, "sbx.task_id");
		jw_str(w, sp->task_id);
	}
	jw_obj_end(w);
}

char *
spec_render(const struct spec_params *sp, size_t *len, char *err,
    size_t errlen)
{
	struct jw	 w;
	char		 why[sizeof(w.error)], *text;

	if (sp == NULL) {
		errf(err, errlen, "spec: no parameters");
		return NULL;
	}
	if (spec_check(sp, err, errlen) == -1)
		return NULL;

	jw_init(&w);
	jw_obj(&w);
	if (!sp->no_annotations) {
		jw_key(&w, "annotations");
		spec_annotations(&w, sp);
	}
	jw_key(&w, "hostname");
	jw_str(&w, SPEC_HOSTNAME);
	jw_key(&w, "linux");
	spec_linux(&w, sp);
	jw_key(&w, "mounts");
	spec_mounts(&w, sp);
	jw_key(&w, "ociVersion");
	jw_str(&w, "1.0.2");
	jw_key(&w, "process");
	spec_process(&w, sp);
	jw_key(&w, "root");
	jw_obj(&w);
	jw_key(&w, "path");
	jw_str(&w, sp->rootfs);
	jw_key(&w, "readonly");
	jw_bool(&w, 1);
	jw_obj_end(&w);
	jw_obj_end(&w);
	if ((text = jw_finish(&w, len, why, sizeof(why))) == NULL)
		errf(err, errlen, "spec: %s", why);
	return text;
}

static int
spec_write_full(int fd, const char *p, size_t n)
{
	ssize_t	 k;

	while (n > 0) {
		if ((k = write(fd, p, n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int
spec_write_at(int dirfd, const char *text, size_t len, char *err,
    size_t errlen)
{
	static const char	 tmp[] = ".config.json.tmp";
	int			 fd, saved;

	(void)unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd == -1) {
		saved = errno;
		errf(err, errlen, "spec: create %s: %s", tmp,
		    strerror(saved));
		errno = saved;
		return -1;
	}
	/* No fsync: a staging file, which a crash leaves to the start-up
	 * reaping, never to a runtime. */
	if (spec_write_full(fd, text, len) == -1) {
		saved = errno;
		errf(err, errlen, "spec: write %s: %s", tmp,
		    strerror(saved));
		(void)close(fd);
		(void)unlinkat(dirfd, tmp, 0);
		errno = saved;
		return -1;
	}
	/* renameat replaces a symlink at config.json, never follows it. */
	if (close(fd) == -1 || renameat(dirfd, tmp, dirfd, "config.json") ==
	    -1) {
		saved = errno;
		errf(err, errlen, "spec: install config.json: %s",
		    strerror(saved));
		(void)unlinkat(dirfd, tmp, 0);
		errno = saved;
		return -1;
	}
	return 0;
}

int
spec_write(const char *bundle_dir, const char *text, size_t len, char *err,
    size_t errlen)
{
	char	 why[256];
	int	 dfd, saved, rc;

	dfd = open(bundle_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (dfd == -1) {
		saved = errno;
		errf(err, errlen, "spec: open %s: %s", bundle_dir,
		    strerror(saved));
		errno = saved;
		return -1;
	}
	rc = spec_write_at(dfd, text, len, why, sizeof(why));
	saved = errno;
	if (rc == -1)
		errf(err, errlen, "%s (in %s)", why, bundle_dir);
	(void)close(dfd);
	errno = saved;
	return rc;
}
