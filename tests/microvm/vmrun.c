/*
 * vmrun.c: one microvm execution the way launchd-sbx's microvm tier
 * makes it (launchd-sbx/microvm.c), for tests/microvm/run and
 * bench/run_microvm: reproducible erofs images of the inputs and the code,
 * QEMU's command line from microvm_argv, QEMU run unprivileged (uid
 * 65534, no_new_privs) in an empty network namespace when root, the wall
 * clock enforced by killing QEMU, and the output archive extracted by
 * microvm_extract.  Prints one JSON object.
 *
 * usage: vmrun -q QEMU -k KERNEL -i INITRD -r ROOT.img -I INDIR -C CODEDIR
 *          -o OUTDIR [-e EGRESS.sock -f FORWARDER] [-a kvm|tcg] [-m MB]
 *          [-c CPUS_MILLI] [-p PIDS] [-s SCRATCH_MB] [-w SECONDS] CODE
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "launchd-sbx/microvm.h"

#define VMRUN_NOBODY	65534

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: vmrun -q QEMU -k KERNEL -i INITRD -r ROOT.img "
	    "-I INDIR -C CODEDIR -o OUTDIR [-e SOCK -f FORWARDER] [-a accel] "
	    "[-m MB] [-c CPUS_MILLI] [-p PIDS] [-s SCRATCH_MB] [-w SECONDS] "
	    "CODE\n");
	exit(2);
}

static uint64_t
now_ms(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* s as a JSON string (the error may quote what the guest wrote). */
static void
json_str(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

int
main(int argc, char *argv[])
{
	struct microvm_params	 p = { 0 };
	struct microvm_caps	 caps = { MICROVM_OUT_FILES,
	    MICROVM_OUT_FILE_MAX, MICROVM_OUT_TOTAL_MAX };
	char			 work[] = "/tmp/vmrun.XXXXXX";
	struct microvm_files	 f;
	char			*av[MICROVM_ARGV_MAX], buf[16384], err[512];
	const char		*indir = NULL, *codedir = NULL, *outdir = NULL;
	uint64_t		 t0, t1;
	unsigned long		 wall = 300;
	size_t			 nfiles = 0;
	pid_t			 pid;
	uid_t			 owner;
	int			 ch, st, killed = 0, fd, dfd, rc;

	p.accel = MICROVM_ACCEL_TCG;
	p.memory_mb = 512;
	p.cpus_milli = 1000;
	p.pids = 64;
	p.scratch_mb = 64;
	while ((ch = getopt(argc, argv, "q:k:i:r:I:C:o:e:f:a:m:c:p:s:w:")) !=
	    -1) {
		switch (ch) {
		case 'q': p.qemu = optarg; break;
		case 'k': p.kernel = optarg; break;
		case 'i': p.initrd = optarg; break;
		case 'r': p.root_img = optarg; break;
		case 'I': indir = optarg; break;
		case 'C': codedir = optarg; break;
		case 'o': outdir = optarg; break;
		case 'e': p.egress_sock = optarg; break;
		case 'f': p.fwd = optarg; break;
		case 'a':
			if ((p.accel = microvm_accel_parse(optarg)) == -1)
				usage();
			break;
		case 'm': p.memory_mb = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'c': p.cpus_milli = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'p': p.pids = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 's': p.scratch_mb = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'w': wall = strtoul(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (argc - optind != 1 || indir == NULL || codedir == NULL ||
	    outdir == NULL)
		usage();
	p.code_name = argv[optind];
	if (microvm_accel_check(p.accel, "/dev/kvm", err, sizeof(err)) == -1) {
		printf("{\"error\": ");
		json_str(err);
		printf("}\n");
		return 4;
	}
	if (mkdtemp(work) == NULL || chmod(work, 0711) == -1 ||
	    microvm_files(&f, work, &p) == -1)
		return 1;
	/* Root: the files QEMU writes are nobody's, as QEMU is. */
	owner = geteuid() == 0 ? VMRUN_NOBODY : (uid_t)-1;
	if (microvm_mkfs(indir, f.in_img) == -1 ||
	    microvm_mkfs(codedir, f.code_img) == -1) {
		printf("{\"error\": \"mkfs.erofs failed\"}\n");
		return 1;
	}
	/* The output device: zeros, written only by the guest. */
	if (microvm_file(f.out_img, (off_t)MICROVM_OUT_MB << 20, owner,
	    (gid_t)owner) == -1 || microvm_file(f.console_log, 0, owner,
	    (gid_t)owner) == -1)
		return 1;
	chmod(f.in_img, 0444);
	chmod(f.code_img, 0444);
	if (microvm_argv(&p, av, buf, sizeof(buf), err, sizeof(err)) == -1) {
		printf("{\"error\": ");
		json_str(err);
		printf("}\n");
		return 4;
	}
	t0 = now_ms();
	if ((pid = fork()) == -1)
		return 1;
	if (pid == 0) {
		int	 null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		setpgid(0, 0);
		/* Root: QEMU gets no network of the host's at all (slirp
		 * needs none: its one forward is a Unix socket), and runs
		 * as nobody. */
		if (geteuid() == 0 && (microvm_netns() == -1 ||
		    setgroups(0, NULL) == -1 || setgid(VMRUN_NOBODY) == -1 ||
		    setuid(VMRUN_NOBODY) == -1))
			_exit(126);
		if (microvm_fsize_cap() == -1 ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
			_exit(126);
		execv(av[0], av);
		_exit(127);
	}
	for (;;) {
		pid_t	 r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (now_ms() - t0 > wall * 1000) {
			/* The wall clock, from outside: the whole VM. */
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			killed = 1;
			break;
		}
		usleep(20000);
	}
	t1 = now_ms();
	if ((fd = open(f.out_img, O_RDONLY | O_CLOEXEC)) == -1 ||
	    (dfd = open(outdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return 1;
	err[0] = '\0';
	rc = killed ? 0 : microvm_extract(fd, dfd, &caps, &nfiles, err,
	    sizeof(err));
	printf("{\"qemu_status\": %d, \"killed\": %s, \"wall_ms\": %llu, "
	    "\"files\": %zu, \"work\": \"%s\", \"extract\": ",
	    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
	    killed ? "true" : "false", (unsigned long long)(t1 - t0), nfiles,
	    work);
	json_str(rc == 0 ? "ok" : err);
	printf("}\n");
	close(fd);
	close(dfd);
	/* VMRUN_KEEP=1 keeps the images and the console log. */
	if (getenv("VMRUN_KEEP") == NULL) {
		microvm_files_unlink(&f);
		rmdir(work);
	}
	return rc == 0 ? 0 : 3;
}
