/*
 * microvm_extract.c: the microvm tier's outputs, read from the archive a
 * guest wrote on its output device (tar alone, by descriptor, never a
 * file system the guest made), into the execution's scratch as plain
 * regular files within the caps; anything else refuses the whole
 * archive and removes what it created (invariant 9: nothing leaves
 * except through gated, which gets these files like every other tier's).
 * Its own file because it alone needs libarchive: sbx-vmrt, which runs
 * it, links libarchive (and libxml2, ICU, libstdc++ behind it); the
 * launcher, which does not, maps none of them (about 2.3 MiB of its idle
 * RSS).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "name.h"
#include "util.h"
#include "launchd-sbx/microvm.h"

/* Remove what this extraction created: nothing of a refused archive
 * stays. */
static void
microvm_undo(int dirfd, char (*names)[NAME_MAX + 1], size_t n)
{
	for (size_t i = 0; i < n; i++)
		(void)unlinkat(dirfd, names[i], 0);
}

static const char *
microvm_type_name(mode_t t)
{
	switch (t) {
	case AE_IFLNK:
		return "a symbolic link";
	case AE_IFDIR:
		return "a directory";
	case AE_IFCHR:
		return "a character device";
	case AE_IFBLK:
		return "a block device";
	case AE_IFIFO:
		return "a FIFO";
	case AE_IFSOCK:
		return "a socket";
	default:
		return "not a regular file";
	}
}

int
microvm_extract(int fd, int dirfd, const struct microvm_caps *caps,
    size_t *out_files, char *err, size_t errlen)
{
	struct archive		*ar;
	struct archive_entry	*e;
	char			(*names)[NAME_MAX + 1];
	char			 chunk[65536];
	uint64_t		 total = 0;
	size_t			 n = 0;
	int			 r, rc = -1, out = -1;

	*out_files = 0;
	names = xcalloc(caps->files > 0 ? caps->files : 1, sizeof(*names));
	if ((ar = archive_read_new()) == NULL)
		fatalx("archive_read_new");
	/* tar alone, no compression filter: nothing expands beyond the
	 * bytes counted below, and no other format's parser is reachable
	 * from the guest. */
	archive_read_support_format_tar(ar);
	if (archive_read_open_fd(ar, fd, sizeof(chunk)) != ARCHIVE_OK) {
		bufprintf(err, errlen, "output archive: %s",
		    archive_error_string(ar));
		goto done;
	}
	for (;;) {
		const char	*name;
		uint64_t	 bytes = 0;
		la_ssize_t	 got;

		r = archive_read_next_header(ar, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			bufprintf(err, errlen, "output archive: entry %zu: %s",
			    n + 1, archive_error_string(ar) != NULL ?
			    archive_error_string(ar) : "unreadable header");
			goto done;
		}
		name = archive_entry_pathname(e);
		if (name == NULL || !name_ok(name) ||
		    strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
		    strlen(name) > NAME_MAX) {
			bufprintf(err, errlen, "output archive: entry %zu: "
			    "\"%.64s\" is not a plain file name (no '/', "
			    "no \"..\", no absolute path)", n + 1,
			    name != NULL ? name : "");
			goto done;
		}
		if (archive_entry_hardlink(e) != NULL ||
		    archive_entry_symlink(e) != NULL) {
			bufprintf(err, errlen, "output archive: %s: a link",
			    name);
			goto done;
		}
		if (archive_entry_filetype(e) != AE_IFREG) {
			bufprintf(err, errlen, "output archive: %s: %s",
			    name, microvm_type_name(archive_entry_filetype(e)));
			goto done;
		}
		if (n >= caps->files) {
			bufprintf(err, errlen, "output archive: more than %zu "
			    "files", caps->files);
			goto done;
		}
		if (archive_entry_size_is_set(e) &&
		    (archive_entry_size(e) < 0 ||
		    (uint64_t)archive_entry_size(e) > caps->file_max ||
		    total + (uint64_t)archive_entry_size(e) >
		    caps->total_max)) {
			bufprintf(err, errlen, "output archive: %s: %lld "
			    "bytes is over the limit (%llu a file, %llu in "
			    "all)", name, (long long)archive_entry_size(e),
			    (unsigned long long)caps->file_max,
			    (unsigned long long)caps->total_max);
			goto done;
		}
		/* New files only, never through a link already there. */
		out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out == -1) {
			bufprintf(err, errlen, "output archive: %s: %s%s",
			    name, strerror(errno), errno == EEXIST ?
			    " (a name given twice)" : "");
			goto done;
		}
		memcpy(names[n++], name, strlen(name) + 1);
		while ((got = archive_read_data(ar, chunk, sizeof(chunk))) >
		    0) {
			bytes += (uint64_t)got;
			total += (uint64_t)got;
			if (bytes > caps->file_max || total > caps->total_max) {
				bufprintf(err, errlen, "output archive: %s: "
				    "over the size limit", name);
				goto done;
			}
			if (write_all(out, chunk, (size_t)got) == -1) {
				bufprintf(err, errlen, "output archive: %s: "
				    "write: %s", name, strerror(errno));
				goto done;
			}
		}
		if (got < 0) {
			bufprintf(err, errlen, "output archive: %s: %s", name,
			    archive_error_string(ar) != NULL ?
			    archive_error_string(ar) : "truncated");
			goto done;
		}
		if (close(out) == -1) {
			out = -1;
			bufprintf(err, errlen, "output archive: %s: close: %s",
			    name, strerror(errno));
			goto done;
		}
		out = -1;
	}
	*out_files = n;
	rc = 0;
done:
	if (out != -1)
		close(out);
	if (rc == -1)
		microvm_undo(dirfd, names, n);
	archive_read_free(ar);
	free(names);
	return rc;
}
