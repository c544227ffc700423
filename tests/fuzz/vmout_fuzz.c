/*
 * vmout_fuzz.c: libFuzzer target for the microvm tier's output archive
 * (launchd-sbx/microvm.c, microvm_extract): what a guest writes to its
 * output device, extracted into a directory by descriptor.  Each input is
 * the device's bytes.  Checked on every input: the extraction returns 0
 * or -1 with a message; after a refusal the directory is empty; after a
 * success it holds exactly the counted entries, each a regular file with
 * a plain name, within the caps; nothing appears beside the directory.
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "name.h"
#include "launchd-sbx/microvm.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static char	 top[] = "/tmp/vmout_fuzz.XXXXXX";
static char	 dir[sizeof(top) + 8];
static int	 dirfd_ = -1;

static size_t
entries(const char *d, int check, uint64_t *total)
{
	DIR		*dp = opendir(d);
	struct dirent	*de;
	struct stat	 st;
	size_t		 n = 0;

	if (dp == NULL)
		abort();
	while ((de = readdir(dp)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		n++;
		if (!check)
			continue;
		if (!name_ok(de->d_name) || fstatat(dirfd(dp), de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) == -1 || !S_ISREG(st.st_mode))
			abort();
		*total += (uint64_t)st.st_size;
		if ((uint64_t)st.st_size > 4096)
			abort();
	}
	closedir(dp);
	return n;
}

static void
empty(void)
{
	DIR		*dp = opendir(dir);
	struct dirent	*de;

	while ((de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			(void)unlinkat(dirfd_, de->d_name, 0);
	closedir(dp);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	const struct microvm_caps caps = { 8, 4096, 12000 };
	char		 err[512];
	uint64_t	 total = 0;
	size_t		 n = 0;
	int		 fd, rc;

	if (dirfd_ == -1) {
		if (mkdtemp(top) == NULL)
			abort();
		snprintf(dir, sizeof(dir), "%s/out", top);
		if (mkdir(dir, 0700) == -1 ||
		    (dirfd_ = open(dir, O_RDONLY | O_DIRECTORY)) == -1)
			abort();
	}
	if ((fd = memfd_create("vmout", MFD_CLOEXEC)) == -1)
		abort();
	if (len > 0 && write(fd, data, len) != (ssize_t)len)
		abort();
	lseek(fd, 0, SEEK_SET);
	err[0] = '\0';
	rc = microvm_extract(fd, dirfd_, &caps, &n, err, sizeof(err));
	close(fd);
	if (rc == -1) {
		if (err[0] == '\0' || n != 0 || entries(dir, 0, &total) != 0)
			abort();
	} else {
		if (rc != 0 || entries(dir, 1, &total) != n || n > caps.files ||
		    total > caps.total_max)
			abort();
	}
	/* Nothing beside the directory: only "out" in top. */
	if (entries(top, 0, &total) != 1)
		abort();
	empty();
	return 0;
}
