/*
 * keyfile.c: a secret key file read straight into guarded memory, with
 * no stack copy to wipe (keyfile.h).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "keyfile.h"

/* The first reason a key file is unfit, in err; 0 if none. */
static int
keyfile_check(const struct keyfile *kf, const struct stat *st, char *err,
    size_t errlen)
{
	const char	*how;

	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s %s is not a regular file", kf->what,
		    kf->path);
		return -1;
	}
	if ((st->st_mode & 077) != 0) {
		if (st->st_mode & 044)
			how = "readable";
		else if (st->st_mode & 022)
			how = "writable";
		else
			how = "executable";
		snprintf(err, errlen, "%s %s is %s by group or others "
		    "(mode %04o); %s", kf->what, kf->path, how,
		    (unsigned)(st->st_mode & 07777), kf->fix);
		return -1;
	}
	if (kf->owner != (uid_t)-1 && st->st_uid != kf->owner) {
		snprintf(err, errlen, "%s %s is owned by uid %u, not by %s "
		    "(uid %u); refusing to use it", kf->what, kf->path,
		    (unsigned)st->st_uid, kf->owner_name,
		    (unsigned)kf->owner);
		return -1;
	}
	if (st->st_size < 0 || (size_t)st->st_size != kf->len) {
		snprintf(err, errlen, "%s %s is %lld bytes, not %zu", kf->what,
		    kf->path, (long long)st->st_size, kf->len);
		return -1;
	}
	return 0;
}

unsigned char *
keyfile_read(const struct keyfile *kf, char *err, size_t errlen)
{
	struct stat	 st;
	unsigned char	*key;
	size_t		 got = 0;
	ssize_t		 r;
	int		 fd, rerr = 0;

	/*
	 * O_NONBLOCK: a FIFO at the path would otherwise hold the daemon's
	 * start until something wrote to it; it is refused below as not a
	 * regular file, whose reads O_NONBLOCK does not change.
	 */
	if ((fd = open(kf->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
	    O_NOCTTY | O_NONBLOCK)) == -1) {
		if (errno == ELOOP)
			snprintf(err, errlen, "%s %s is a symbolic link; "
			    "refusing to follow it", kf->what, kf->path);
		else
			snprintf(err, errlen, "cannot open %s %s: %s",
			    kf->what, kf->path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == -1) {
		snprintf(err, errlen, "cannot stat %s %s: %s", kf->what,
		    kf->path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (keyfile_check(kf, &st, err, errlen) == -1) {
		close(fd);
		return NULL;
	}
	if ((key = sodium_malloc(kf->len)) == NULL) {
		snprintf(err, errlen, "cannot allocate secure memory for the "
		    "%s", kf->what);
		close(fd);
		return NULL;
	}
	while (got < kf->len) {
		r = read(fd, key + got, kf->len - got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			rerr = errno;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (got != kf->len) {
		snprintf(err, errlen, "cannot read %s %s: %s", kf->what,
		    kf->path, rerr != 0 ? strerror(rerr) : "short read");
		sodium_free(key);
		return NULL;
	}
	return key;
}
