/*
 * microvm_test.c: the microvm tier's host side (launchd-sbx/microvm.c).
 * The output archive is what a hostile guest writes, so most of this file
 * writes tar streams by hand, byte by byte, the way such a guest would:
 * absolute and ".." paths, a pax header that renames an entry, links,
 * devices, lying and huge sizes, truncation, garbage, a name twice, and a
 * link planted where a file would go.  Each must be refused with a message
 * naming the entry, and leave nothing behind.  QEMU's command line must
 * keep its one NIC restricted to the proxy forward, share no directory
 * with the host, and refuse a path QEMU's option parser would split; an
 * accelerator that is not there or not allowed refuses the tier.
 */
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "launchd-sbx/microvm.h"

static char	 dir[] = "/tmp/microvm_test.XXXXXX";
static char	 outside[] = "/tmp/microvm_outside.XXXXXX";
static int	 dirfd_ = -1;

static void
setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_not_null(mkdtemp(outside));
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_neq(dirfd_, -1);
}

static void
teardown(void)
{
	char	*cmd;

	close(dirfd_);
	xasprintf(&cmd, "rm -rf %s %s", dir, outside);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
}

/* Entries in d, "." and ".." aside. */
static int
count(const char *d)
{
	DIR		*dp = opendir(d);
	struct dirent	*de;
	int		 n = 0;

	cr_assert_not_null(dp);
	while ((de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			n++;
	closedir(dp);
	return n;
}

/* A tar stream being written by hand into a temporary file. */
struct tar {
	int	fd;
};

static void
tar_open(struct tar *t)
{
	char	 p[] = "/tmp/microvm_test_tar.XXXXXX";

	t->fd = mkstemp(p);
	cr_assert_neq(t->fd, -1);
	unlink(p);
}

/* One 512-byte ustar header: name, type flag, size (octal), link. */
static void
tar_header(struct tar *t, const char *name, char type, unsigned long long size,
    const char *link)
{
	unsigned char	 h[512];
	unsigned int	 sum = 0;

	memset(h, 0, sizeof(h));
	strncpy((char *)h, name, 100);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011llo", size);
	memcpy(h + 136, "00000000000", 12);
	h[156] = (unsigned char)type;
	if (link != NULL)
		strncpy((char *)h + 157, link, 100);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	cr_assert_eq(write(t->fd, h, sizeof(h)), 512);
}

static void
tar_data(struct tar *t, const char *data, size_t len)
{
	char	 pad[512] = { 0 };

	cr_assert_eq(write(t->fd, data, len), (ssize_t)len);
	if (len % 512 != 0)
		cr_assert_eq(write(t->fd, pad, 512 - len % 512),
		    (ssize_t)(512 - len % 512));
}

static void
tar_file(struct tar *t, const char *name, const char *data)
{
	tar_header(t, name, '0', strlen(data), NULL);
	tar_data(t, data, strlen(data));
}

/* End of archive, then the rest of the device: zeros. */
static void
tar_end(struct tar *t)
{
	char	 z[4096] = { 0 };

	cr_assert_eq(write(t->fd, z, sizeof(z)), (ssize_t)sizeof(z));
	cr_assert_eq(lseek(t->fd, 0, SEEK_SET), 0);
}

static const struct microvm_caps caps = { 4, 4096, 6000 };

/* Extract t; the return code, err filled. */
static int
extract(struct tar *t, char *err, size_t errlen, size_t *n)
{
	int	 rc;

	err[0] = '\0';
	rc = microvm_extract(t->fd, dirfd_, &caps, n, err, errlen);
	close(t->fd);
	return rc;
}

static void
refused(struct tar *t, const char *needle)
{
	char	 err[512];
	size_t	 n = 99;

	cr_assert_eq(extract(t, err, sizeof(err), &n), -1,
	    "accepted an archive that should fail with \"%s\"", needle);
	cr_assert(strstr(err, needle) != NULL, "error \"%s\" lacks \"%s\"",
	    err, needle);
	cr_assert_eq(n, 0);
	cr_assert_eq(count(dir), 0, "a refused archive left files behind");
	cr_assert_eq(count(outside), 0, "a file landed outside");
}

TestSuite(microvm, .init = setup, .fini = teardown);

Test(microvm, extracts_plain_files)
{
	struct tar	 t;
	char		 err[512], buf[64];
	size_t		 n;
	int		 fd;
	ssize_t		 got;

	tar_open(&t);
	tar_file(&t, "eur_totals.csv", "month,eur\n2026-07,12.50\n");
	tar_file(&t, "monthly.png", "\x89PNG fake");
	tar_end(&t);
	cr_assert_eq(extract(&t, err, sizeof(err), &n), 0, "%s", err);
	cr_assert_eq(n, 2);
	fd = openat(dirfd_, "eur_totals.csv", O_RDONLY);
	cr_assert_neq(fd, -1);
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(got, 0);
	buf[got] = '\0';
	cr_assert_str_eq(buf, "month,eur\n2026-07,12.50\n");
}

/* A guest whose code wrote no output leaves the device all zeros. */
Test(microvm, empty_device_is_no_outputs)
{
	struct tar	 t;
	char		 err[512];
	size_t		 n = 5;

	tar_open(&t);
	tar_end(&t);
	cr_assert_eq(extract(&t, err, sizeof(err), &n), 0, "%s", err);
	cr_assert_eq(n, 0);
}

Test(microvm, refuses_absolute_path)
{
	struct tar	 t;
	char		 target[128];

	snprintf(target, sizeof(target), "%s/owned", outside);
	tar_open(&t);
	tar_file(&t, target, "x");
	tar_end(&t);
	refused(&t, "not a plain file name");
}

Test(microvm, refuses_dotdot)
{
	struct tar	 t;

	tar_open(&t);
	tar_file(&t, "ok.csv", "fine");
	tar_file(&t, "../owned", "x");
	tar_end(&t);
	refused(&t, "\"../owned\" is not a plain file name");
}

Test(microvm, refuses_subdirectory_path)
{
	struct tar	 t;

	tar_open(&t);
	tar_file(&t, "a/b.csv", "x");
	tar_end(&t);
	refused(&t, "not a plain file name");
}

/* The ustar name is harmless; a pax extended header renames it. */
Test(microvm, refuses_pax_rename)
{
	struct tar	 t;
	char		 rec[64];
	int		 len;

	len = snprintf(rec, sizeof(rec), "xx path=/etc/passwd\n");
	/* The record's length counts itself: "20 path=/etc/passwd\n". */
	len = snprintf(rec, sizeof(rec), "%d path=/etc/passwd\n", len);
	tar_open(&t);
	tar_header(&t, "PaxHeader", 'x', (unsigned long long)len, NULL);
	tar_data(&t, rec, (size_t)len);
	tar_file(&t, "harmless.csv", "x");
	tar_end(&t);
	refused(&t, "\"/etc/passwd\" is not a plain file name");
}

Test(microvm, refuses_symlink)
{
	struct tar	 t;

	tar_open(&t);
	tar_header(&t, "link.csv", '2', 0, "/etc/shadow");
	tar_end(&t);
	refused(&t, "link.csv");
	cr_assert_eq(faccessat(dirfd_, "link.csv", F_OK, AT_SYMLINK_NOFOLLOW),
	    -1);
}

Test(microvm, refuses_hardlink)
{
	struct tar	 t;

	tar_open(&t);
	tar_file(&t, "a.csv", "x");
	tar_header(&t, "b.csv", '1', 0, "a.csv");
	tar_end(&t);
	refused(&t, "b.csv: a link");
}

Test(microvm, refuses_device_fifo_and_directory)
{
	static const struct {
		char		 type;
		const char	*what;
	} cases[] = {
		{ '3', "a character device" },
		{ '4', "a block device" },
		{ '5', "a directory" },
		{ '6', "a FIFO" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tar	 t;

		tar_open(&t);
		tar_file(&t, "first.csv", "x");
		tar_header(&t, "node", cases[i].type, 0, NULL);
		tar_end(&t);
		refused(&t, cases[i].what);
	}
}

Test(microvm, refuses_huge_size_header)
{
	struct tar	 t;

	tar_open(&t);
	/* 4 GiB claimed; nothing follows. */
	tar_header(&t, "big.bin", '0', 1ULL << 32, NULL);
	tar_end(&t);
	refused(&t, "big.bin: 4294967296 bytes is over the limit");
}

Test(microvm, refuses_total_over_limit)
{
	struct tar	 t;
	char		*blob = xmalloc(4000);

	memset(blob, 'a', 4000);
	tar_open(&t);
	tar_header(&t, "one.bin", '0', 4000, NULL);
	tar_data(&t, blob, 4000);
	tar_header(&t, "two.bin", '0', 4000, NULL);
	tar_data(&t, blob, 4000);
	tar_end(&t);
	free(blob);
	refused(&t, "two.bin: 4000 bytes is over the limit");
}

Test(microvm, refuses_too_many_files)
{
	struct tar	 t;
	char		 name[32];

	tar_open(&t);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "f%d.txt", i);
		tar_file(&t, name, "x");
	}
	tar_end(&t);
	refused(&t, "more than 4 files");
}

Test(microvm, refuses_truncated)
{
	struct tar	 t;

	tar_open(&t);
	tar_file(&t, "ok.csv", "fine");
	tar_header(&t, "cut.bin", '0', 3000, NULL);
	cr_assert_eq(write(t.fd, "only a little", 13), 13);
	cr_assert_eq(lseek(t.fd, 0, SEEK_SET), 0);
	refused(&t, "cut.bin");
}

Test(microvm, refuses_garbage)
{
	struct tar	 t;
	char		 junk[1024];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 7 + 3);
	tar_open(&t);
	cr_assert_eq(write(t.fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	cr_assert_eq(lseek(t.fd, 0, SEEK_SET), 0);
	refused(&t, "output archive");
}

Test(microvm, refuses_bad_checksum)
{
	struct tar	 t;
	char		 b;

	tar_open(&t);
	tar_file(&t, "a.csv", "x");
	tar_end(&t);
	/* Flip a byte of the name: the header's checksum no longer holds. */
	cr_assert_eq(pread(t.fd, &b, 1, 0), 1);
	b ^= 1;
	cr_assert_eq(pwrite(t.fd, &b, 1, 0), 1);
	refused(&t, "output archive");
}

Test(microvm, refuses_name_twice)
{
	struct tar	 t;

	tar_open(&t);
	tar_file(&t, "a.csv", "first");
	tar_file(&t, "a.csv", "second");
	tar_end(&t);
	refused(&t, "a name given twice");
}

/* Something already in the directory is never written through. */
Test(microvm, never_writes_through_existing_link)
{
	struct tar	 t;
	char		 target[128], err[512];
	size_t		 n;
	struct stat	 st;

	snprintf(target, sizeof(target), "%s/victim", outside);
	cr_assert_eq(symlinkat(target, dirfd_, "a.csv"), 0);
	tar_open(&t);
	tar_file(&t, "a.csv", "owned");
	tar_end(&t);
	cr_assert_eq(extract(&t, err, sizeof(err), &n), -1);
	cr_assert(strstr(err, "a.csv") != NULL, "%s", err);
	cr_assert_eq(stat(target, &st), -1, "wrote through the link");
	cr_assert_eq(count(outside), 0);
	cr_assert_eq(unlinkat(dirfd_, "a.csv", 0), 0);
}

/* ---- QEMU's command line ---- */

static struct microvm_params
params(void)
{
	struct microvm_params	 p = {
		.qemu = "/usr/bin/qemu-system-x86_64",
		.accel = MICROVM_ACCEL_TCG,
		.kernel = "/var/lib/sbx/vm/vmlinuz",
		.initrd = "/var/lib/sbx/vm/initrd.img",
		.cpus_milli = 1500,
		.memory_mb = 512,
		.pids = 64,
		.scratch_mb = 128,
		.root_img = "/var/lib/sbx/vm/root-abc.img",
		.in_img = "/run/sbx/x/in.img",
		.code_img = "/run/sbx/x/code.img",
		.out_img = "/run/sbx/x/out.img",
		.fwd = "/usr/bin/socat",
		.egress_sock = "/run/sbx/x/egress.sock",
		.console_log = "/run/sbx/x/console.log",
		.code_name = "main.py",
	};

	return p;
}

static int
argv_has(char **av, const char *needle)
{
	for (size_t i = 0; av[i] != NULL; i++)
		if (strstr(av[i], needle) != NULL)
			return 1;
	return 0;
}

static size_t
argv_count(char **av, const char *exact)
{
	size_t	 n = 0;

	for (size_t i = 0; av[i] != NULL; i++)
		n += strcmp(av[i], exact) == 0;
	return n;
}

Test(microvm, argv_one_restricted_nic)
{
	struct microvm_params	 p = params();
	char			*av[MICROVM_ARGV_MAX], buf[8192], err[256];

	cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
	    sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(av[0], p.qemu);
	cr_assert_eq(argv_count(av, "-nodefaults"), 1);
	cr_assert_eq(argv_count(av, "-no-user-config"), 1);
	cr_assert_eq(argv_count(av, "-netdev"), 1);
	cr_assert(argv_has(av, "user,id=net0,restrict=on,"));
	cr_assert(argv_has(av, "guestfwd=tcp:10.0.2.100:3128-cmd:"
	    "/usr/bin/socat STDIO UNIX-CONNECT:/run/sbx/x/egress.sock"));
	cr_assert(argv_has(av, "dns=10.0.2.3,"));
	cr_assert(!argv_has(av, "hostfwd"));
	/* No directory shared with the host, no monitor, no stdio. */
	cr_assert(!argv_has(av, "9p"));
	cr_assert(!argv_has(av, "virtfs"));
	cr_assert(!argv_has(av, "virtiofs"));
	cr_assert(!argv_has(av, "fsdev"));
	cr_assert(!argv_has(av, "-monitor"));
	cr_assert(!argv_has(av, "stdio,"));
	cr_assert(argv_has(av, "file:/run/sbx/x/console.log"));
	/* Root, inputs, code read-only; only the output device writable. */
	cr_assert(argv_has(av, "file=/var/lib/sbx/vm/root-abc.img,if=none,"
	    "id=root,format=raw,readonly=on"));
	cr_assert(argv_has(av, "id=in,format=raw,readonly=on"));
	cr_assert(argv_has(av, "id=code,format=raw,readonly=on"));
	cr_assert(argv_has(av, "id=out,format=raw,readonly=off"));
	cr_assert(argv_has(av, "spawn=allow"));
	/* 1.5 CPUs round up to 2 vCPUs. */
	for (size_t i = 0; av[i] != NULL; i++)
		if (strcmp(av[i], "-smp") == 0)
			cr_assert_str_eq(av[i + 1], "2");
	cr_assert(argv_has(av, "sbx.pids=64 sbx.scratch_mb=128 sbx.net=1 "
	    "sbx.code=main.py"));
}

Test(microvm, argv_no_network_no_nic)
{
	struct microvm_params	 p = params();
	char			*av[MICROVM_ARGV_MAX], buf[8192], err[256];

	p.egress_sock = NULL;
	p.fwd = NULL;
	cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
	    sizeof(err)), 0, "%s", err);
	cr_assert_eq(argv_count(av, "-netdev"), 0);
	cr_assert(!argv_has(av, "virtio-net"));
	cr_assert(argv_has(av, "elevateprivileges=deny,spawn=deny"));
	cr_assert(argv_has(av, "sbx.net=0"));
}

Test(microvm, argv_refuses_paths_qemu_would_split)
{
	static const char *const bad[] = {
		"/run/sbx/x/egress.sock,guestfwd=tcp:10.0.2.2:22-cmd:/bin/sh",
		"/run/sbx/x/e gress.sock",
		"relative/egress.sock",
		"/run/sbx/../etc/egress.sock",
		"",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct microvm_params	 p = params();
		char			*av[MICROVM_ARGV_MAX], buf[8192];
		char			 err[512];

		p.egress_sock = bad[i];
		cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
		    sizeof(err)), -1, "accepted \"%s\"", bad[i]);
		cr_assert(strstr(err, "egress socket") != NULL, "%s", err);
	}
	{
		struct microvm_params	 p = params();
		char			*av[MICROVM_ARGV_MAX], buf[8192];
		char			 err[512];

		p.in_img = "/run/sbx/x/in.img,readonly=off";
		cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
		    sizeof(err)), -1);
		cr_assert(strstr(err, "input image") != NULL, "%s", err);
		p = params();
		p.code_name = "../main.py";
		cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
		    sizeof(err)), -1);
		p = params();
		p.code_name = "main.py sbx.net=0 init=/bin/sh";
		cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
		    sizeof(err)), -1);
		p = params();
		p.scratch_mb = 512;
		cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
		    sizeof(err)), -1);
		cr_assert(strstr(err, "scratch_mb") != NULL, "%s", err);
		p = params();
		p.accel = MICROVM_ACCEL_NONE;
		cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
		    sizeof(err)), -1);
	}
}

Test(microvm, argv_buffer_too_small_fails)
{
	struct microvm_params	 p = params();
	char			*av[MICROVM_ARGV_MAX], buf[200], err[256];

	cr_assert_eq(microvm_argv(&p, av, buf, sizeof(buf), err,
	    sizeof(err)), -1);
}

/* ---- accelerators ---- */

Test(microvm, accel_none_refused)
{
	char	 err[256];

	cr_assert_eq(microvm_accel_check(MICROVM_ACCEL_NONE, "/dev/kvm", err,
	    sizeof(err)), -1);
	cr_assert(strstr(err, "no accelerator configured") != NULL, "%s",
	    err);
}

Test(microvm, accel_kvm_absent_refused_not_downgraded)
{
	char	 err[256];

	cr_assert_eq(microvm_accel_check(MICROVM_ACCEL_KVM,
	    "/nonexistent/kvm", err, sizeof(err)), -1);
	cr_assert(strstr(err, "accel kvm: /nonexistent/kvm") != NULL, "%s",
	    err);
	/* Not a KVM device at all. */
	cr_assert_eq(microvm_accel_check(MICROVM_ACCEL_KVM, "/dev/null", err,
	    sizeof(err)), -1);
	cr_assert(strstr(err, "accel kvm: /dev/null") != NULL, "%s", err);
}

Test(microvm, accel_tcg_only_when_configured)
{
	char	 err[256];

	cr_assert_eq(microvm_accel_check(MICROVM_ACCEL_TCG, "/nonexistent",
	    err, sizeof(err)), 0);
	cr_assert_eq(microvm_accel_parse("tcg"), MICROVM_ACCEL_TCG);
	cr_assert_eq(microvm_accel_parse("kvm"), MICROVM_ACCEL_KVM);
	cr_assert_eq(microvm_accel_parse("TCG"), -1);
	cr_assert_eq(microvm_accel_parse("hvf"), -1);
	cr_assert_eq(microvm_accel_parse(""), -1);
}

Test(microvm, mkfs_argv_reproducible)
{
	char	*av[MICROVM_ARGV_MAX], buf[2048];

	cr_assert_eq(microvm_mkfs_argv("/usr/bin/mkfs.erofs", "/run/x/in",
	    "/run/x/in.img", av, buf, sizeof(buf)), 0);
	cr_assert_eq(argv_count(av, "-T"), 1);
	cr_assert_eq(argv_count(av, "--all-root"), 1);
	cr_assert_eq(argv_count(av, "-U"), 1);
	/* The image, then the tree. */
	for (size_t i = 0; av[i] != NULL; i++)
		if (strcmp(av[i], "/run/x/in.img") == 0)
			cr_assert_str_eq(av[i + 1], "/run/x/in");
	cr_assert_eq(microvm_mkfs_argv("/usr/bin/mkfs.erofs", NULL,
	    "/run/x/in.img", av, buf, sizeof(buf)), -1);
}

/*
 * The host-side steps launchd-sbx's runtime (vmrt.c) and the test
 * harness (tests/microvm/vmrun.c) share.  A VM file is made new: a file
 * or a link planted at its path is refused, and nothing is written
 * through the link.
 */
Test(microvm, vm_file_new_only)
{
	char		 path[128], link[128], target[128];
	struct stat	 st;

	snprintf(path, sizeof(path), "%s/out.img", dir);
	cr_assert_eq(microvm_file(path, 1 << 20, (uid_t)-1, (gid_t)-1), 0,
	    "%s", strerror(errno));
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_size, 1 << 20);
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(st.st_uid, geteuid());
	errno = 0;
	cr_assert_eq(microvm_file(path, 0, (uid_t)-1, (gid_t)-1), -1);
	cr_assert_eq(errno, EEXIST);
	snprintf(target, sizeof(target), "%s/target", outside);
	snprintf(link, sizeof(link), "%s/console.log", dir);
	cr_assert_eq(symlink(target, link), 0);
	errno = 0;
	cr_assert_eq(microvm_file(link, 4096, (uid_t)-1, (gid_t)-1), -1);
	cr_assert_eq(errno, EEXIST);
	cr_assert_eq(access(target, F_OK), -1, "written through the link");
}

Test(microvm, run_quiet_is_the_exit_status)
{
	char *const	 ok[] = { "/bin/sh", "-c", "echo out; echo err >&2",
	    NULL };
	char *const	 bad[] = { "/bin/sh", "-c", "exit 3", NULL };
	char *const	 none[] = { "/nonexistent/program", NULL };

	cr_assert_eq(microvm_run_quiet(ok), 0);
	cr_assert_eq(microvm_run_quiet(bad), -1);
	cr_assert_eq(microvm_run_quiet(none), -1);
}

/* The same tree gives the same image, byte for byte; no tree, no image. */
Test(microvm, mkfs_reproducible_image)
{
	char	 tree[128], a[128], b[128], f[160], *x, *y;
	size_t	 nx, ny;
	FILE	*fp;

	if (access("/usr/bin/mkfs.erofs", X_OK) == -1)
		cr_skip_test("no /usr/bin/mkfs.erofs (erofs-utils)");
	snprintf(tree, sizeof(tree), "%s/tree", dir);
	snprintf(a, sizeof(a), "%s/a.img", dir);
	snprintf(b, sizeof(b), "%s/b.img", dir);
	snprintf(f, sizeof(f), "%s/main.py", tree);
	cr_assert_eq(mkdir(tree, 0755), 0);
	cr_assert_not_null(fp = fopen(f, "w"));
	fputs("print(1)\n", fp);
	fclose(fp);
	cr_assert_eq(microvm_mkfs(tree, a), 0);
	sleep(1);	/* a clock that leaked into the image would differ */
	cr_assert_eq(microvm_mkfs(tree, b), 0);
	cr_assert_not_null(x = read_file(a, 64 << 20, &nx));
	cr_assert_not_null(y = read_file(b, 64 << 20, &ny));
	cr_assert_gt(nx, 0);
	cr_assert_eq(nx, ny);
	cr_assert_eq(memcmp(x, y, nx), 0);
	free(x);
	free(y);
	snprintf(f, sizeof(f), "%s/none", dir);
	snprintf(a, sizeof(a), "%s/c.img", dir);
	cr_assert_eq(microvm_mkfs(f, a), -1);
}

/* QEMU's cap: a write past MICROVM_OUT_MB fails with EFBIG, and the
 * process lives on (no SIGXFSZ). */
Test(microvm, fsize_cap_fails_the_write_not_the_process)
{
	char	 path[128];
	pid_t	 pid;
	int	 st;

	snprintf(path, sizeof(path), "%s/console.log", dir);
	if ((pid = fork()) == 0) {
		int	 fd;

		if (microvm_fsize_cap() == -1 ||
		    (fd = open(path, O_WRONLY | O_CREAT, 0600)) == -1)
			_exit(2);
		if (pwrite(fd, "x", 1, ((off_t)MICROVM_OUT_MB << 20) - 1) != 1)
			_exit(3);
		if (pwrite(fd, "x", 1, (off_t)MICROVM_OUT_MB << 20) != -1 ||
		    errno != EFBIG)
			_exit(4);
		_exit(0);
	}
	cr_assert_neq(pid, -1);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "killed by signal %d", WTERMSIG(st));
	cr_assert_eq(WEXITSTATUS(st), 0);
}

/* The VM's file names, one place for the runtime and the harness: under
 * dir, pointed at by the params, removed by microvm_files_unlink; a dir
 * too long for them is refused, not cut short. */
Test(microvm, files_named_once)
{
	struct microvm_params	 p = { 0 };
	struct microvm_files	 f;
	char			 longdir[PATH_MAX];

	cr_assert_eq(microvm_files(&f, dir, &p), 0);
	cr_assert_eq(p.in_img, f.in_img);
	cr_assert_eq(p.code_img, f.code_img);
	cr_assert_eq(p.out_img, f.out_img);
	cr_assert_eq(p.console_log, f.console_log);
	cr_assert(strncmp(f.console_log, dir, strlen(dir)) == 0 &&
	    strcmp(f.console_log + strlen(dir), "/console.log") == 0);
	cr_assert_eq(microvm_file(f.in_img, 0, (uid_t)-1, (gid_t)-1), 0);
	cr_assert_eq(microvm_file(f.console_log, 0, (uid_t)-1, (gid_t)-1), 0);
	cr_assert_eq(count(dir), 2);
	microvm_files_unlink(&f);
	cr_assert_eq(count(dir), 0);
	memset(longdir, 'a', sizeof(longdir) - 8);
	longdir[0] = '/';
	longdir[sizeof(longdir) - 8] = '\0';
	cr_assert_eq(microvm_files(&f, longdir, NULL), -1);
}
