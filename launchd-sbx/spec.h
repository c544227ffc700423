/*
 * spec.h: the pure half of launchd-sbx's launch: a compiled policy in, an
 * OCI runtime spec (config.json) and its seccomp profile out.  Nothing here
 * touches the system except spec_write(); the daemon's launchd.h includes
 * this header.
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

#include <jansson.h>

#include "sbx/v1/policy.pb-c.h"

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

/* Which runtime reads the spec: a few fields differ (spec.c says which). */
enum spec_flavor {
	SPEC_RUNC = 0,		/* runc or crun: the OCI reference semantics */
	SPEC_RUNSC,		/* gVisor */
};

struct spec_params {
	const Sbx__V1__Policy	*policy;
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
};

/* ---- spec.c ---- */

/*
 * The runtime spec for one execution, or NULL with a sentence naming the
 * offending parameter or policy field in err.  Every reference the result
 * holds is its own: free it with json_decref().
 */
json_t	*spec_build(const struct spec_params *, char *err, size_t errlen);
/*
 * Write spec as bundle_dir/config.json, mode 0600, atomically (a temporary
 * file renamed into place).  0, or -1 with errno set and err filled.
 */
int	 spec_write(const char *bundle_dir, json_t *spec, char *err,
	    size_t errlen);

/* ---- seccomp.c ---- */

/*
 * The OCI linux.seccomp object: default EPERM, an allowlist of ordinary
 * syscalls for the native architecture only, clone without namespace flags,
 * socket only for unix, TCP and UDP, clone3 ENOSYS so libc falls back to
 * clone (under gVisor, see seccomp.c).  A new reference.
 */
json_t	*seccomp_profile(enum spec_flavor);
/* The syscalls the profile must never allow unconditionally: what the
 * tests check the profile against.  NULL-terminated. */
extern const char *const seccomp_must_deny[];

#endif
