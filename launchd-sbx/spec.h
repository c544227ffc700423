/*
 * spec.h: the pure half of launchd-sbx's launch: plain parameters in, an
 * OCI runtime spec (config.json) and its seccomp profile out, as text.
 * Nothing here touches the system except spec_write_at(), and nothing
 * here needs more than libc (with common/utf8.c and common/name.c), so
 * that the root monitor renders a sandbox's spec from a fixed binary
 * request without linking a JSON or protobuf library; the daemon's
 * launchd.h includes this header.
 *
 * The rootfs is shared and must stay unwritten: it must already hold the
 * directories /scratch, /in, /code and /run/sbx and the empty files
 * /run/sbx/init, /run/sbx/egress.sock and /run/sbx/ca.pem, and /dev/fuse
 * for runsc (the image store creates them when it unpacks an image),
 * because a runtime creates a
 * missing mount point inside the rootfs directory itself: runc for the
 * directories, runsc's gofer for the files too (it ignores the tmpfs at
 * /run/sbx that keeps runc from doing so).
 */
#ifndef SBX_LAUNCHD_SPEC_H
#define SBX_LAUNCHD_SPEC_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#define SPEC_UID		65534
#define SPEC_GID		65534
#define SPEC_HOSTNAME		"sandbox"
#define SPEC_RUN_DIR		"/run/sbx"
#define SPEC_INIT		"/run/sbx/init"
#define SPEC_EGRESS_SOCK	"/run/sbx/egress.sock"
#define SPEC_CA_FILE		"/run/sbx/ca.pem"
#define SPEC_SCRATCH		"/scratch"
#define SPEC_PATH_ENV \
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define SPEC_CPU_PERIOD		100000	/* microseconds */
#define SPEC_NOFILE		1024
/*
 * The scratch tmpfs's inode cap: one inode per 4 KiB page of its size, so
 * a scratch filled with files of at least a page each never meets it, and
 * empty files, directories and symlinks (which take no page) stop there.
 */
#define SPEC_SCRATCH_INODES_PER_MB	256
#define SPEC_SCRATCH_INODES(mb)	((unsigned long long)(mb) * \
				    SPEC_SCRATCH_INODES_PER_MB)
/* /dev/shm, outside the scratch: a small fixed size and inode cap. */
#define SPEC_SHM_SIZE		"size=16m"
#define SPEC_SHM_INODES		"nr_inodes=1024"
/* runsc: the host pids cgroup bounds the sentry, not the sandbox. */
#define SPEC_RUNSC_PIDS_BASE	256
#define SPEC_RUNSC_PIDS_PER_PROC	16
#define SPEC_HASH_LEN		64	/* policy_hash, pool_key: hex digits */

/*
 * A pool entry (launchd-sbx's pool.c) binds its run/ directory at
 * POOL_RUN_DIR: the FIFO its sbx-init reads its assignment from, the
 * egress channel's socket (bound there at the launch) and its CA.
 */
#define POOL_RUN_DIR		"/run/sbx/pool"
#define POOL_ARGV		"argv"
#define POOL_EGRESS_SOCK	"egress.sock"
#define POOL_CA			"ca.pem"

/* Which runtime reads the spec: a few fields differ (spec.c says which). */
enum spec_flavor {
	SPEC_RUNC = 0,		/* runc or crun: the OCI reference semantics */
	SPEC_RUNSC,		/* gVisor */
};

struct spec_params {
	const char		*policy_name;	/* in sbx.policy, with */
	uint32_t		 policy_version;
	/* The policy's limits; none may be 0 (unlimited, to a runtime). */
	uint32_t		 cpus_milli, memory_mb, pids, scratch_mb;
	const char		*policy_hash;	/* 64 lower-case hex digits */
	const char		*task_id;
	const char		*execution_id;
	const char		*rootfs;	/* absolute; mounted read-only */
	const char		*in_dir;	/* staged copy, bound at /in */
	const char		*code_dir;	/* staged copy, bound at /code */
	const char		*scratch_dir;	/* host tmpfs bound at /scratch
						 * (it outlives the container,
						 * for gated); NULL: a tmpfs of
						 * the sandbox's own */
	const char		*egress_sock;	/* NULL: no egress channel */
	const char		*ca_file;	/* NULL: no per-task CA */
	const char		*init_path;	/* host path of sbx-init */
	const char		*cgroups_path;	/* e.g. /sbx/<container id> */
	gid_t			 gid;		/* the sandbox's own group;
						 * 0: SPEC_GID */
	char *const		*argv;		/* the program, after "--" */
	enum spec_flavor	 flavor;
	/*
	 * Nonzero: a pool entry's spec (pool.c).  sbx-init takes the
	 * program and the per-execution environment from the FIFO in
	 * pool_run, bound at POOL_RUN_DIR, and the egress socket and CA
	 * from there too (pool_egress), so argv, the SBX_ variables and
	 * the egress_sock and ca_file mounts are left out; the
	 * annotations name the entry and its key instead of the policy,
	 * and policy_name, policy_hash, task_id, execution_id and argv
	 * need not be set.
	 */
	int			 pool;
	const char		*pool_run;	/* host dir at POOL_RUN_DIR */
	const char		*pool_entry_id;	/* sbx.pool_entry */
	const char		*pool_key;	/* sbx.pool_key: 64 hex */
	int			 pool_egress;	/* sbx-init -s and -c */
	int			 pool_warm_python; /* sbx-init -w python3 */
	/* sbx-init -m: NULL or "" for none, else spec_mods_ok()'s, which
	 * reads no more than 256 bytes (struct mon_spec's field). */
	const char		*pool_warm_imports;
	/* Nonzero: no annotations at all (pool_key: what the sandbox is,
	 * not whose it is). */
	int			 no_annotations;
};

struct jw;

/* ---- spec.c ---- */

/*
 * The runtime spec as text (what config.json holds, ending in "\n"),
 * malloc'd, its length in *len; or NULL with a sentence naming the
 * offending parameter in err.  The same bytes, for the same parameters,
 * as json_dumps(JSON_INDENT(1) | JSON_SORT_KEYS) of the spec jansson
 * built before (tests/golden/spec).
 */
/* Dotted Python module names, comma-separated, 255 bytes at most (and
 * no more than 256 bytes read). */
int	 spec_mods_ok(const char *);
char	*spec_render(const struct spec_params *, size_t *len, char *err,
	    size_t errlen);
/*
 * Write text as dirfd/config.json, mode 0600, atomically (a temporary
 * file renamed into place), following no symlink.  0, or -1 with errno
 * set and err filled.
 */
int	 spec_write_at(int dirfd, const char *text, size_t len, char *err,
	    size_t errlen);
/* spec_write_at() in the directory bundle_dir (itself no symlink). */
int	 spec_write(const char *bundle_dir, const char *text, size_t len,
	    char *err, size_t errlen);

/* ---- seccomp.c ---- */

/*
 * The OCI linux.seccomp object, written as the next value of w: default
 * EPERM, an allowlist of ordinary syscalls for the native architecture
 * only, clone without namespace flags, socket only for unix, TCP and UDP,
 * clone3 ENOSYS so libc falls back to clone (under gVisor, see
 * seccomp.c).
 */
void	 seccomp_render(struct jw *w, enum spec_flavor);
/* The syscalls the profile must never allow unconditionally: what the
 * tests check the profile against.  NULL-terminated. */
extern const char *const seccomp_must_deny[];

#endif
