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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "log.h"
#include "policy.h"
#include "spec.h"
#include "util.h"

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

static void
spec_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
spec_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list	ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Jansson reports allocation failure as NULL; like xmalloc, we stop. */
static json_t *
spec_must(json_t *j)
{
	if (j == NULL)
		fatalx("spec: out of memory building the runtime spec");
	return j;
}

static void
spec_push(json_t *arr, json_t *val)
{
	if (val == NULL || json_array_append_new(arr, val) == -1)
		fatalx("spec: out of memory building the runtime spec");
}

static json_t *
spec_strings(const char *const *v)
{
	json_t	*a = spec_must(json_array());
	size_t	 i;

	for (i = 0; v[i] != NULL; i++)
		spec_push(a, json_string(v[i]));
	return a;
}

static json_t *
spec_stringf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static json_t *
spec_stringf(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;
	json_t	*j;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		fatalx("spec: out of memory building the runtime spec");
	va_end(ap);
	j = spec_must(json_string(s));
	free(s);
	return j;
}

/* A host path we hand to the runtime: absolute, no ".." component, no
 * line break (runtimes log paths line by line). */
static int
spec_path_ok(const char *p)
{
	const char	*c;
	size_t		 n;

	if (p == NULL || p[0] != '/' || strlen(p) >= PATH_MAX ||
	    strpbrk(p, "\n\r") != NULL)
		return 0;
	for (c = p; *c != '\0'; c += n) {
		c += strspn(c, "/");
		n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return 0;
	}
	return 1;
}

static int
spec_hash_ok(const char *h)
{
	size_t	i;

	if (h == NULL || strlen(h) != POLICY_HASH_HEX - 1)
		return 0;
	for (i = 0; h[i] != '\0'; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' &&
		    h[i] <= 'f')))
			return 0;
	return 1;
}

static int
spec_check(const struct spec_params *sp, char *err, size_t errlen)
{
	const Sbx__V1__Limits	*l;
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

	if (sp->policy == NULL || (l = sp->policy->limits) == NULL) {
		spec_err(err, errlen, "spec: the policy has no limits");
		return -1;
	}
	if (sp->policy->name == NULL || sp->policy->name[0] == '\0') {
		spec_err(err, errlen, "spec: the policy has no name");
		return -1;
	}
	if (!spec_hash_ok(sp->policy_hash)) {
		spec_err(err, errlen, "spec: policy_hash is not 64 lower-case "
		    "hex digits");
		return -1;
	}
	if (sp->task_id == NULL || !name_ok(sp->task_id)) {
		spec_err(err, errlen, "spec: task_id is missing or not a safe "
		    "name");
		return -1;
	}
	if (sp->execution_id == NULL || !name_ok(sp->execution_id)) {
		spec_err(err, errlen, "spec: execution_id is missing or not a "
		    "safe name");
		return -1;
	}
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (paths[i].path == NULL && paths[i].optional)
			continue;
		if (!spec_path_ok(paths[i].path)) {
			spec_err(err, errlen, "spec: %s \"%s\" is not an "
			    "absolute path without \"..\"", paths[i].name,
			    paths[i].path ? paths[i].path : "(none)");
			return -1;
		}
	}
	if (sp->ca_file != NULL && sp->egress_sock == NULL) {
		spec_err(err, errlen, "spec: ca_file without egress_sock: the "
		    "CA serves only the egress proxy");
		return -1;
	}
	if (sp->argv == NULL || sp->argv[0] == NULL || sp->argv[0][0] == '\0') {
		spec_err(err, errlen, "spec: no program to run");
		return -1;
	}
	if (sp->flavor != SPEC_RUNC && sp->flavor != SPEC_RUNSC) {
		spec_err(err, errlen, "spec: unknown runtime flavor %d",
		    (int)sp->flavor);
		return -1;
	}
	/* Zero would mean "unlimited" to a runtime: refuse, never widen. */
	if (l->cpus_milli == 0 || l->memory_mb == 0 || l->pids == 0 ||
	    l->scratch_mb == 0) {
		spec_err(err, errlen, "spec: limits.%s is 0; every limit must "
		    "be set", l->cpus_milli == 0 ? "cpus" : l->memory_mb == 0 ?
		    "memory_mb" : l->pids == 0 ? "pids" : "scratch_mb");
		return -1;
	}
	/* CFS refuses a quota under 1 ms of a 100 ms period. */
	if (l->cpus_milli < 10) {
		spec_err(err, errlen, "spec: limits.cpus %u milli-cpus is under "
		    "the kernel's minimum of 10", l->cpus_milli);
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

static json_t *
spec_rlimit(const char *type, json_int_t v)
{
	return json_pack("{s:s, s:I, s:I}", "type", type, "hard", v, "soft",
	    v);
}

static json_t *
spec_process(const struct spec_params *sp)
{
	const Sbx__V1__Limits	*l = sp->policy->limits;
	json_t			*args, *env, *caps, *rl;
	size_t			 i;

	/* sbx-init is PID 1 and takes the program after "--". */
	args = spec_must(json_pack("[s, s]", SPEC_INIT, "--"));
	for (i = 0; sp->argv[i] != NULL; i++)
		spec_push(args, json_string(sp->argv[i]));

	/* Only what the policy implies; sbx-init adds the proxy variables. */
	env = spec_must(json_array());
	spec_push(env, json_string(SPEC_PATH_ENV));
	spec_push(env, json_string("HOME=" SPEC_SCRATCH));
	spec_push(env, json_string("TMPDIR=" SPEC_SCRATCH));
	spec_push(env, json_string("LANG=C.UTF-8"));
	spec_push(env, spec_stringf("SBX_TASK_ID=%s", sp->task_id));
	spec_push(env, spec_stringf("SBX_EXECUTION_ID=%s", sp->execution_id));
	spec_push(env, spec_stringf("SBX_POLICY_HASH=%s", sp->policy_hash));

	caps = spec_must(json_pack("{s:[], s:[], s:[], s:[], s:[]}",
	    "bounding", "effective", "inheritable", "permitted", "ambient"));

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
	rl = spec_must(json_array());
	spec_push(rl, spec_rlimit("RLIMIT_NOFILE", SPEC_NOFILE));
	spec_push(rl, spec_rlimit("RLIMIT_CORE", 0));
	spec_push(rl, spec_rlimit("RLIMIT_FSIZE",
	    ((json_int_t)l->scratch_mb + 1) * MIB));
	/*
	 * POSIX message queues are kernel memory outside every file system
	 * cap, and RLIMIT_MSGQUEUE counts per host uid, which every runc
	 * sandbox shares: any cap above 0 is one sandbox's to exhaust for
	 * the others.  0: a queue created in /dev/mqueue fails (EMFILE);
	 * mq_open(3) meets the seccomp profile first (seccomp.c).
	 */
	spec_push(rl, spec_rlimit("RLIMIT_MSGQUEUE", 0));
	if (sp->flavor == SPEC_RUNSC)
		spec_push(rl, spec_rlimit("RLIMIT_NPROC", l->pids));

	return spec_must(json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o,"
	    " s:b, s:o, s:i}",
	    "terminal", 0,
	    "user", "uid", SPEC_UID, "gid", (json_int_t)spec_gid(sp),
	    "args", args,
	    "env", env,
	    "cwd", SPEC_SCRATCH,
	    "capabilities", caps,
	    "noNewPrivileges", 1,
	    "rlimits", rl,
	    "oomScoreAdj", 1000));
}

static json_t *
spec_mount(const char *dst, const char *type, const char *src,
    const char *const *opts)
{
	return json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type",
	    type, "source", src, "options", spec_strings(opts));
}

static json_t *
spec_mounts(const struct spec_params *sp)
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
	const Sbx__V1__Limits	*l = sp->policy->limits;
	char			 size[32];
	/*
	 * Owned by the sandbox user rather than mode 1777: runc copies the
	 * mode of an existing mount point onto a tmpfs, so only the owner
	 * is certain to survive whatever the image's /scratch looks like.
	 */
	char			 gid[32], inodes[48];
	const char		*o_scratch[] = { "nosuid", "noexec", "nodev",
	    "mode=0755", "uid=65534", gid, size, inodes, NULL };
	json_t			*m;

	snprintf(size, sizeof(size), "size=%um", l->scratch_mb);
	snprintf(inodes, sizeof(inodes), "nr_inodes=%llu",
	    SPEC_SCRATCH_INODES(l->scratch_mb));
	snprintf(gid, sizeof(gid), "gid=%lu", (unsigned long)spec_gid(sp));
	m = spec_must(json_array());
	spec_push(m, spec_mount("/proc", "proc", "proc", o_proc));
	spec_push(m, spec_mount("/dev", "tmpfs", "tmpfs", o_dev));
	spec_push(m, spec_mount("/dev/pts", "devpts", "devpts", o_pts));
	spec_push(m, spec_mount("/dev/shm", "tmpfs", "shm", o_shm));
	/* gVisor (Debian 12's) silently skips an mqueue mount. */
	if (sp->flavor == SPEC_RUNC)
		spec_push(m, spec_mount("/dev/mqueue", "mqueue", "mqueue",
		    o_mq));
	/*
	 * gVisor mounts a writable, unsized tmpfs at /tmp when the spec has
	 * none and the image's /tmp is empty: an empty read-only one keeps
	 * /scratch the only writable place.
	 */
	if (sp->flavor == SPEC_RUNSC)
		spec_push(m, spec_mount("/tmp", "tmpfs", "tmpfs", o_tmp));
	/*
	 * gVisor fills /dev with its own devices, whatever the spec says:
	 * besides runc's set it adds /dev/fuse and /dev/net/tun, which open
	 * for anyone.  An empty read-only tmpfs hides /dev/net, and the
	 * host's /dev/null, read-only, covers /dev/fuse (a file: nothing
	 * can be mounted over it to make it vanish, and runsc ignores
	 * maskedPaths).
	 */
	if (sp->flavor == SPEC_RUNSC) {
		spec_push(m, spec_mount("/dev/net", "tmpfs", "tmpfs", o_tmp));
		spec_push(m, spec_mount("/dev/fuse", "bind", "/dev/null",
		    o_null));
	}
	spec_push(m, spec_mount("/sys", "sysfs", "sysfs", o_sys));
	/*
	 * A host tmpfs (launchd-sbx mounted it with the size and owner
	 * above) when given: it survives the container, so gated reads the
	 * outputs only once every process of the sandbox is dead.
	 */
	if (sp->scratch_dir != NULL)
		spec_push(m, spec_mount(SPEC_SCRATCH, "bind", sp->scratch_dir,
		    o_bindrw));
	else
		spec_push(m, spec_mount(SPEC_SCRATCH, "tmpfs", "tmpfs",
		    o_scratch));
	spec_push(m, spec_mount("/in", "bind", sp->in_dir, o_in));
	spec_push(m, spec_mount("/code", "bind", sp->code_dir, o_code));
	/*
	 * A small tmpfs holds the mount points of the files below, so the
	 * runtime creates them there and not in the shared read-only image.
	 * It stays writable by root only, and the sandbox has no root.
	 */
	spec_push(m, spec_mount(SPEC_RUN_DIR, "tmpfs", "tmpfs", o_run));
	spec_push(m, spec_mount(SPEC_INIT, "bind", sp->init_path, o_init));
	/* A socket on a read-only mount still accepts connect(2). */
	if (sp->egress_sock != NULL)
		spec_push(m, spec_mount(SPEC_EGRESS_SOCK, "bind",
		    sp->egress_sock, o_file));
	if (sp->ca_file != NULL)
		spec_push(m, spec_mount(SPEC_CA_FILE, "bind", sp->ca_file,
		    o_file));
	return m;
}

static json_t *
spec_linux(const struct spec_params *sp)
{
	const Sbx__V1__Limits	*l = sp->policy->limits;
	json_t			*ns, *res;
	static const char *const nstypes[] = { "pid", "network", "ipc", "uts",
	    "mount", "cgroup", NULL };
	size_t			 i;
	json_int_t		 mem = (json_int_t)l->memory_mb * MIB, pids;

	ns = spec_must(json_array());
	for (i = 0; nstypes[i] != NULL; i++)
		spec_push(ns, json_pack("{s:s}", "type", nstypes[i]));

	/*
	 * gVisor's sentry and its ptrace stubs live in the host cgroup too,
	 * about eight host tasks per sandbox process: at the policy's number
	 * the sentry itself cannot start a thread and the whole sandbox
	 * dies.  There the host limit is only a backstop against the
	 * sentry, and RLIMIT_NPROC (spec_process) is the policy's limit.
	 */
	if (sp->flavor == SPEC_RUNSC)
		pids = SPEC_RUNSC_PIDS_BASE +
		    SPEC_RUNSC_PIDS_PER_PROC * (json_int_t)l->pids;
	else
		pids = l->pids;

	/* swap equal to memory: memory plus swap may not exceed memory, so
	 * the sandbox never swaps and a balloon meets the OOM killer. */
	res = spec_must(json_pack("{s:[{s:b, s:s}], s:{s:I, s:I},"
	    " s:{s:I, s:I}, s:{s:I}}",
	    "devices", "allow", 0, "access", "rwm",
	    "memory", "limit", mem, "swap", mem,
	    "cpu", "quota", (json_int_t)l->cpus_milli * SPEC_CPU_PERIOD / 1000,
	    "period", (json_int_t)SPEC_CPU_PERIOD,
	    "pids", "limit", pids));

	return spec_must(json_pack("{s:o, s:o, s:s, s:o, s:o, s:o}",
	    "namespaces", ns,
	    "resources", res,
	    "cgroupsPath", sp->cgroups_path,
	    "maskedPaths", spec_strings(spec_masked),
	    "readonlyPaths", spec_strings(spec_readonly),
	    "seccomp", seccomp_profile(sp->flavor)));
}

json_t *
spec_build(const struct spec_params *sp, char *err, size_t errlen)
{
	json_t	*ann;

	if (sp == NULL) {
		spec_err(err, errlen, "spec: no parameters");
		return NULL;
	}
	if (spec_check(sp, err, errlen) == -1)
		return NULL;

	ann = spec_must(json_pack("{s:s, s:s, s:s, s:o}",
	    "sbx.policy_hash", sp->policy_hash,
	    "sbx.task_id", sp->task_id,
	    "sbx.execution_id", sp->execution_id,
	    "sbx.policy", spec_stringf("%s@%u", sp->policy->name,
	    sp->policy->version)));

	return spec_must(json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o,"
	    " s:o}",
	    "ociVersion", "1.0.2",
	    "process", spec_process(sp),
	    "root", "path", sp->rootfs, "readonly", 1,
	    "hostname", SPEC_HOSTNAME,
	    "mounts", spec_mounts(sp),
	    "linux", spec_linux(sp),
	    "annotations", ann));
}

int
spec_write(const char *bundle_dir, json_t *spec, char *err, size_t errlen)
{
	char	 tmp[PATH_MAX], dst[PATH_MAX], *text = NULL;
	int	 fd, saved;

	if (snprintf(tmp, sizeof(tmp), "%s/.config.json.tmp", bundle_dir) >=
	    (int)sizeof(tmp) || snprintf(dst, sizeof(dst), "%s/config.json",
	    bundle_dir) >= (int)sizeof(dst)) {
		spec_err(err, errlen, "spec: bundle path %s is too long",
		    bundle_dir);
		errno = ENAMETOOLONG;
		return -1;
	}
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd == -1) {
		saved = errno;
		spec_err(err, errlen, "spec: create %s: %s", tmp,
		    strerror(saved));
		errno = saved;
		return -1;
	}
	/*
	 * Encoded in memory and written at once: jansson's json_dumpfd makes
	 * a write(2) for every token (thousands for a spec).  No fsync: a
	 * staging file, which a crash leaves to the start-up reaping, never
	 * to a runtime.
	 */
	errno = 0;
	if ((text = json_dumps(spec, JSON_INDENT(1) | JSON_SORT_KEYS)) == NULL ||
	    write_all(fd, text, strlen(text)) == -1 ||
	    write_all(fd, "\n", 1) == -1) {
		saved = errno ? errno : EIO;
		free(text);
		spec_err(err, errlen, "spec: write %s: %s", tmp,
		    strerror(saved));
		(void)close(fd);
		(void)unlink(tmp);
		errno = saved;
		return -1;
	}
	free(text);
	if (close(fd) == -1 || rename(tmp, dst) == -1) {
		saved = errno;
		spec_err(err, errlen, "spec: install %s: %s", dst,
		    strerror(saved));
		(void)unlink(tmp);
		errno = saved;
		return -1;
	}
	return 0;
}
