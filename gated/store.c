/*
 * store.c: where released outputs go when they do not go to the agent.
 * The embedded default of a storage bucket is a local content-addressed
 * store, STORE/blobs/sha256/<hex>: a blob is written to a temporary name,
 * synced and linked into place, so a reader never sees half of one, and
 * the same content is stored once.  A user's outputs go to
 * STORE/tasks/<task>/<execution>/<name>.  Every directory is opened
 * beneath the store without following links, and no file is ever
 * replaced: a name that exists already is an error, not an overwrite.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "gated/gated.h"

/* mkdir (if missing) and open one directory beneath dfd, no links. */
static int
gstore_subdir(int dfd, const char *name)
{
	int	fd;

	if (mkdirat(dfd, name, 0750) == -1 && errno != EEXIST)
		return -1;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	return fd;
}

/* Open STORE/a/b/c... creating each level; -1 with errno. */
static int
gstore_path(const char *store, const char *const parts[], size_t n)
{
	int	dfd, next;

	if (mkdir(store, 0750) == -1 && errno != EEXIST)
		return -1;
	if ((dfd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return -1;
	for (size_t i = 0; i < n; i++) {
		next = gstore_subdir(dfd, parts[i]);
		close(dfd);
		if (next == -1)
			return -1;
		dfd = next;
	}
	return dfd;
}

int
gstore_blob(const char *store, const uint8_t *buf, size_t len,
    const char *hex, char **where, char *err, size_t errlen)
{
	static const char *const parts[] = { "blobs", "sha256" };
	char	 tmp[64];
	int	 dfd, fd;

	if ((dfd = gstore_path(store, parts, 2)) == -1) {
		snprintf(err, errlen, "%s/blobs/sha256: %s", store,
		    strerror(errno));
		return -1;
	}
	if (faccessat(dfd, hex, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		goto done;	/* content-addressed: already there */
	random_id("tmp", tmp, sizeof(tmp));
	if ((fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0440)) == -1) {
		snprintf(err, errlen, "%s/blobs/sha256/%s: %s", store, tmp,
		    strerror(errno));
		close(dfd);
		return -1;
	}
	if (write_all(fd, buf, len) == -1 || fsync(fd) == -1) {
		snprintf(err, errlen, "writing blob %s: %s", hex,
		    strerror(errno));
		close(fd);
		unlinkat(dfd, tmp, 0);
		close(dfd);
		return -1;
	}
	close(fd);
	/* link, not rename: never replaces a blob another release wrote. */
	if (linkat(dfd, tmp, dfd, hex, 0) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "storing blob %s: %s", hex,
		    strerror(errno));
		unlinkat(dfd, tmp, 0);
		close(dfd);
		return -1;
	}
	unlinkat(dfd, tmp, 0);
	(void)fsync(dfd);
done:
	close(dfd);
	xasprintf(where, "sha256:%s", hex);
	return 0;
}

int
gstore_user(const char *store, const char *task, const char *execution,
    const char *name, const uint8_t *buf, size_t len, char **where,
    char *err, size_t errlen)
{
	const char	*parts[3] = { "tasks", task, execution };
	char		*flat, *p;
	int		 dfd, fd;

	if (!name_ok(task) || !name_ok(execution)) {
		snprintf(err, errlen, "task or execution id is not usable as "
		    "a directory name");
		return -1;
	}
	if ((dfd = gstore_path(store, parts, 3)) == -1) {
		snprintf(err, errlen, "%s/tasks/%s/%s: %s", store, task,
		    execution, strerror(errno));
		return -1;
	}
	flat = xstrdup(name);
	for (p = flat; *p != '\0'; p++)
		if (*p == '/')
			*p = '_';
	if ((fd = openat(dfd, flat, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0640)) == -1) {
		snprintf(err, errlen, "%s/tasks/%s/%s/%s: %s", store, task,
		    execution, flat, strerror(errno));
		goto fail;
	}
	if (write_all(fd, buf, len) == -1 || fsync(fd) == -1) {
		snprintf(err, errlen, "writing %s: %s", flat, strerror(errno));
		close(fd);
		unlinkat(dfd, flat, 0);
		goto fail;
	}
	close(fd);
	close(dfd);
	xasprintf(where, "%s/tasks/%s/%s/%s", store, task, execution, flat);
	free(flat);
	return 0;
fail:
	close(dfd);
	free(flat);
	return -1;
}
