/*
 * dataset.c: the dataset store, state_dir/datasets/<name>, one file per
 * dataset reference, root-owned and administered only through the admin
 * socket.  An execution gets a copy of each dataset its policy names in
 * its own staging directory: never a bind of a path a task named, so no
 * sandbox can see, change or keep a file another execution uses.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

static void
dataset_dir(struct launchd *ld, char out[PATH_MAX])
{
	bufprintf(out, PATH_MAX, "%s/datasets", ld->conf->common.state_dir);
}

int
dataset_put(struct launchd *ld, const char *name, const uint8_t *content,
    size_t len, char *err, size_t errlen)
{
	char	 dir[PATH_MAX], tmp[PATH_MAX], dst[PATH_MAX];
	int	 fd;

	if (name == NULL || !name_ok(name)) {
		bufprintf(err, errlen, "bad dataset name \"%.128s\": want "
		    "1..128 of [A-Za-z0-9._@:-]", name != NULL ? name : "");
		return -1;
	}
	if (len > LAUNCHD_DATASET_MAX) {
		bufprintf(err, errlen, "dataset %s: %zu bytes is over the %d "
		    "byte limit", name, len, LAUNCHD_DATASET_MAX);
		return -1;
	}
	dataset_dir(ld, dir);
	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		bufprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
		return -1;
	}
	bufprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	bufprintf(dst, sizeof(dst), "%s/%s", dir, name);
	(void)unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0400)) == -1) {
		bufprintf(err, errlen, "create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (write_all(fd, content, len) == -1 || fsync(fd) == -1) {
		bufprintf(err, errlen, "write %s: %s", tmp, strerror(errno));
		close(fd);
		(void)unlink(tmp);
		return -1;
	}
	close(fd);
	if (rename(tmp, dst) == -1) {
		bufprintf(err, errlen, "rename %s: %s", dst, strerror(errno));
		(void)unlink(tmp);
		return -1;
	}
	return 0;
}

static int
dataset_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
dataset_names(struct launchd *ld, char ***names, size_t *n)
{
	char		 dir[PATH_MAX];
	DIR		*d;
	struct dirent	*de;

	*names = NULL;
	*n = 0;
	dataset_dir(ld, dir);
	if ((d = opendir(dir)) == NULL)
		return errno == ENOENT ? 0 : -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || !name_ok(de->d_name))
			continue;
		*names = xreallocarray(*names, *n + 1, sizeof(**names));
		(*names)[(*n)++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (*n > 1)
		qsort(*names, *n, sizeof(**names), dataset_cmp);
	return 0;
}

int
dataset_stage(struct launchd *ld, const char *name, const char *dir,
    char *err, size_t errlen)
{
	char		 src[PATH_MAX], dst[PATH_MAX], buf[65536];
	struct stat	 st;
	ssize_t		 r;
	int		 in, out, saved;

	if (!name_ok(name) || name[0] == '.') {
		bufprintf(err, errlen, "bad dataset reference \"%.128s\"",
		    name);
		errno = EINVAL;
		return -1;
	}
	dataset_dir(ld, src);
	bufprintf(src + strlen(src), sizeof(src) - strlen(src), "/%s", name);
	bufprintf(dst, sizeof(dst), "%s/%s", dir, name);
	if ((in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		saved = errno;
		bufprintf(err, errlen, saved == ENOENT ? "dataset %s is not in "
		    "the dataset store" : "dataset %s: %s", name,
		    strerror(saved));
		errno = saved;
		return -1;
	}
	if (fstat(in, &st) == -1 || !S_ISREG(st.st_mode)) {
		bufprintf(err, errlen, "dataset %s: not a regular file", name);
		close(in);
		errno = EINVAL;
		return -1;
	}
	if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0444)) == -1) {
		saved = errno;
		bufprintf(err, errlen, "stage %s: %s", dst, strerror(saved));
		close(in);
		errno = saved;
		return -1;
	}
	while ((r = read(in, buf, sizeof(buf))) > 0)
		if (write_all(out, (uint8_t *)buf, (size_t)r) == -1) {
			r = -1;
			break;
		}
	saved = errno;
	close(in);
	if (r == -1 || fchmod(out, 0444) == -1) {
		bufprintf(err, errlen, "stage %s: %s", dst, strerror(saved));
		close(out);
		errno = EIO;
		return -1;
	}
	close(out);
	return 0;
}
