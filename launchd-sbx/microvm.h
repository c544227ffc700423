/*
 * microvm.h: the microvm tier's host side (microvm.c): which accelerator
 * may run guests, QEMU's command line for one execution, the file systems
 * given to the guest as read-only block devices, and the output archive
 * the guest hands back, extracted without mounting anything it wrote.
 */
#ifndef LAUNCHD_MICROVM_H
#define LAUNCHD_MICROVM_H

#include <sys/types.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

enum microvm_accel {
	MICROVM_ACCEL_NONE = 0,		/* not configured: tier refused */
	MICROVM_ACCEL_KVM,
	MICROVM_ACCEL_TCG		/* emulation: only when configured */
};

/* The guest's fixed addresses (QEMU user networking, restrict=on). */
#define MICROVM_NET		"10.0.2.0/24"
#define MICROVM_HOST		"10.0.2.2"
#define MICROVM_DNS		"10.0.2.3"	/* unanswered: restrict=on */
#define MICROVM_GUEST		"10.0.2.15"
#define MICROVM_PROXY		"10.0.2.100"
#define MICROVM_PROXY_PORT	3128

/* Output archive caps, whatever the guest's archive headers say. */
#define MICROVM_OUT_FILES	64
#define MICROVM_OUT_FILE_MAX	(64ULL << 20)
#define MICROVM_OUT_TOTAL_MAX	(256ULL << 20)

#define MICROVM_ARGV_MAX	64

/* The output device's size, and the cap on any file QEMU writes (the
 * console log). */
#define MICROVM_OUT_MB		96

struct microvm_params {
	const char	*qemu;		/* qemu-system-x86_64 */
	int		 accel;		/* enum microvm_accel */
	const char	*kernel;
	const char	*initrd;
	uint32_t	 cpus_milli;	/* vCPUs: rounded up, 1 at least */
	uint32_t	 memory_mb;
	uint32_t	 pids;		/* sbx-init's guest cgroup */
	uint32_t	 scratch_mb;	/* guest tmpfs at /scratch */
	const char	*root_img;	/* read-only: the image's root fs */
	const char	*in_img;	/* read-only: /in */
	const char	*code_img;	/* read-only: /code */
	const char	*out_img;	/* written by the guest: an archive */
	const char	*fwd;		/* the per-connection forwarder */
	const char	*egress_sock;	/* NULL: no network device at all */
	const char	*console_log;	/* the guest's serial console */
	const char	*code_name;	/* main.py */
};

/* The files of one VM, in its directory: the images and the console log
 * (microvm_files). */
struct microvm_files {
	char		 in_img[PATH_MAX];
	char		 code_img[PATH_MAX];
	char		 out_img[PATH_MAX];
	char		 console_log[PATH_MAX];
};

struct microvm_caps {
	size_t		 files;
	uint64_t	 file_max;
	uint64_t	 total_max;
};

/* "kvm", "tcg" -> enum; -1 for anything else. */
int	 microvm_accel_parse(const char *);
/* A new network namespace with only loopback, up (QEMU's). */
int	 microvm_netns(void);
const char *microvm_accel_name(int);
/*
 * Whether guests may run under accel: KVM needs kvm_dev to open and
 * answer its API version and create a VM; TCG must have been allowed by
 * the configuration (the caller passes what it says); NONE never runs.
 * 0, or -1 with err naming why the tier is refused (never downgraded).
 */
int	 microvm_accel_check(int accel, const char *kvm_dev, char *err,
	    size_t errlen);
/*
 * QEMU's argument vector for one execution into av (MICROVM_ARGV_MAX
 * entries, strings in buf); 0, or -1 with err naming the parameter that
 * cannot be passed safely (a path QEMU's option parser would split).
 */
int	 microvm_argv(const struct microvm_params *, char **av, char *buf,
	    size_t buflen, char *err, size_t errlen);
/*
 * mkfs.erofs's argument vector for a read-only erofs image of dir at img
 * (the inputs' or the code's): fixed times, owner and UUID, so the same
 * tree gives the same bytes.  The host never mounts it; the guest mounts
 * it read-only.
 */
int	 microvm_mkfs_argv(const char *mkfs, const char *dir,
	    const char *img, char **av, char *buf, size_t buflen);
/*
 * The VM's files under dir into f (in.img, code.img, out.img,
 * console.log), and, with p, p's names for them pointed there: 0, or -1
 * when dir is too long for them.  microvm_files_unlink removes them.
 */
int	 microvm_files(struct microvm_files *f, const char *dir,
	    struct microvm_params *p);
void	 microvm_files_unlink(const struct microvm_files *);
/* /usr/bin/mkfs.erofs with microvm_mkfs_argv's arguments, through
 * microvm_run_quiet: 0 when it made img, else -1. */
int	 microvm_mkfs(const char *dir, const char *img);
/* av run to its end, its stdout and stderr to /dev/null: 0 when it
 * exited 0, else -1. */
int	 microvm_run_quiet(char *const av[]);
/* A new file of the VM's at path (never one that exists, nor a link),
 * mode 0600, size bytes of zeros, owned by uid:gid ((uid_t)-1 and
 * (gid_t)-1 leave the caller's).  0, or -1 with errno. */
int	 microvm_file(const char *path, off_t size, uid_t uid, gid_t gid);
/* In QEMU's process, before exec: no file it writes grows past
 * MICROVM_OUT_MB (a guest that is root in its kernel can write to its
 * serial console without end); a write past it fails with EFBIG instead
 * of killing QEMU with SIGXFSZ.  0, or -1 with errno. */
int	 microvm_fsize_cap(void);
/*
 * Extract the guest's output archive (a ustar/pax stream at the start of
 * the output device, fd) into the directory dirfd: plain names only (no
 * '/', no "..", no absolute paths), regular files only (no links, no
 * devices, no directories), new files only, at most caps' count and
 * sizes counted on the bytes written, not the headers.  On any refusal
 * nothing extracted stays: 0, or -1 with err naming the entry and why.
 * out_files counts what was extracted.
 */
int	 microvm_extract(int fd, int dirfd, const struct microvm_caps *,
	    size_t *out_files, char *err, size_t errlen);

#endif
