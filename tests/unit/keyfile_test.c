/*
 * keyfile_test.c: the one reader of secret key files (common/keyfile.c),
 * which policyd's signing key and brokerd's store key go through.  A key
 * file is read only when it is a regular file of the exact size, not a
 * link, readable by its owner alone and owned by whom it must be; anything
 * else is refused with an error that names the file, and never hangs the
 * daemon's start (a FIFO or a device at the key's path).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "keyfile.h"

#define KEYLEN	32

static char	dir[64];
static char	path[128];

static void
setup(void)
{
	cr_assert_geq(sodium_init(), 0);
	snprintf(dir, sizeof(dir), "/tmp/keyfile_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/store.key", dir);
}

static void
teardown(void)
{
	unlink(path);
	rmdir(dir);
}

static struct keyfile
kf_for(uid_t owner)
{
	struct keyfile	 kf = {
		.what = "store key",
		.path = path,
		.len = KEYLEN,
		.owner = owner,
		.owner_name = "brokerd's user",
		.fix = "chmod 0600 it",
	};

	return kf;
}

static void
write_key(size_t len, mode_t mode)
{
	unsigned char	 buf[64];
	int		 fd;

	memset(buf, 0xa5, sizeof(buf));
	cr_assert_leq(len, sizeof(buf));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_neq(fd, -1);
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
	cr_assert_eq(chmod(path, mode), 0);
}

TestSuite(keyfile, .init = setup, .fini = teardown);

Test(keyfile, reads_a_good_key)
{
	struct keyfile	 kf = kf_for(getuid());
	unsigned char	*key;
	char		 err[256] = "";

	write_key(KEYLEN, 0600);
	key = keyfile_read(&kf, err, sizeof(err));
	cr_assert_not_null(key, "refused a good key: %s", err);
	cr_assert_eq(key[0], 0xa5);
	cr_assert_eq(key[KEYLEN - 1], 0xa5);
	sodium_free(key);
}

/* A FIFO at the key's path: open() would wait for a writer for ever. */
Test(keyfile, refuses_a_fifo_without_waiting, .timeout = 5)
{
	struct keyfile	 kf = kf_for((uid_t)-1);
	char		 err[256] = "";

	cr_assert_eq(mkfifo(path, 0600), 0);
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "is not a regular file"), "%s", err);
	cr_assert_not_null(strstr(err, path), "%s", err);
}

Test(keyfile, refuses_a_device, .timeout = 5)
{
	struct keyfile	 kf = kf_for((uid_t)-1);
	char		 err[256] = "";

	kf.path = "/dev/zero";
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "is not a regular file"), "%s", err);
}

Test(keyfile, refuses_a_symlink)
{
	struct keyfile	 kf = kf_for((uid_t)-1);
	char		 target[160], err[256] = "";

	write_key(KEYLEN, 0600);
	snprintf(target, sizeof(target), "%s.real", path);
	cr_assert_eq(rename(path, target), 0);
	cr_assert_eq(symlink(target, path), 0);
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "symbolic link"), "%s", err);
	unlink(target);
}

Test(keyfile, refuses_group_or_other_access)
{
	struct keyfile	 kf = kf_for((uid_t)-1);
	char		 err[256] = "";

	write_key(KEYLEN, 0640);
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "readable by group or others"),
	    "%s", err);
	cr_assert_not_null(strstr(err, "chmod 0600 it"), "%s", err);
	write_key(KEYLEN, 0620);
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "writable"), "%s", err);
}

Test(keyfile, refuses_the_wrong_size)
{
	struct keyfile	 kf = kf_for((uid_t)-1);
	char		 err[256] = "";

	write_key(KEYLEN - 1, 0600);
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "31 bytes, not 32"), "%s", err);
	write_key(KEYLEN + 1, 0600);
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
}

Test(keyfile, refuses_the_wrong_owner)
{
	struct keyfile	 kf = kf_for(getuid() + 1);
	char		 err[256] = "";

	write_key(KEYLEN, 0600);
	cr_assert_null(keyfile_read(&kf, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "brokerd's user"), "%s", err);
}
