/*
 * archive.c: what an allowed archive holds, read through before it is
 * released.  An archive is a promise about other files: the person or
 * program that extracts it gets entries gated never saw, so a 1 MiB zip
 * that expands to 1 GiB, a "../../.bashrc" entry, a symbolic link to
 * write through, or zips nested to the sky all leave as "one small file
 * of an allowed type".  This file keeps "nothing leaves but what the
 * policy allows" true of what is inside as well.
 *
 * libarchive reads the bytes gated already holds (never a path), with
 * every filter and format it knows, from memory.  Each entry's header is
 * checked (path, type, links, set-id bits); its data is decompressed and
 * counted -- the sizes headers claim are not believed, and entries that
 * overlap in a zip are each counted as the extractor would write them --
 * against the total and the ratio to the archive's size; an entry that is
 * itself an archive is read the same way, one level deeper, up to the
 * nesting cap, with everything counted against the same totals.  The
 * first cap passed stops the reading.
 */
#include <sys/stat.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "util.h"
#include "gated/gated.h"

#define ARCHIVE_BLOCK		65536
/* Below this much expanded data the ratio is not held against anyone: a
 * small CSV compresses 100:1 without being a bomb. */
#define ARCHIVE_RATIO_FLOOR	(1024 * 1024)
/* How much of an entry is looked at to tell an archive inside. */
#define ARCHIVE_SNIFF		512

struct archive_walk {
	const struct archive_caps *caps;
	size_t		 outer;		/* bytes of the released archive */
	uint64_t	 expanded;	/* every level */
	uint64_t	 entries;
	const char	*reason;
	char		*why;
	size_t		 whylen;
};

static const char *
archive_fail(struct archive_walk *w, const char *reason, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

static const char *
archive_fail(struct archive_walk *w, const char *reason, const char *fmt,
    ...)
{
	va_list	ap;

	if (w->reason == NULL) {
		w->reason = reason;
		va_start(ap, fmt);
		vsnprintf(w->why, w->whylen, fmt, ap);
		va_end(ap);
	}
	return w->reason;
}

/* 1 if the first bytes of an entry are those of an archive or a
 * compressed stream libarchive would open. */
static int
archive_looks_nested(const uint8_t *b, size_t n)
{
	static const struct {
		size_t		 off;
		size_t		 len;
		const char	*magic;
	} sig[] = {
		{ 0, 4, "PK\003\004" }, { 0, 4, "PK\005\006" },
		{ 0, 4, "PK\007\010" }, { 0, 2, "\037\213" },
		{ 0, 3, "BZh" }, { 0, 6, "\3757zXZ\0" },
		{ 0, 4, "\050\265\057\375" }, { 0, 6, "7z\274\257\047\034" },
		{ 0, 4, "Rar!" }, { 0, 4, "\004\042\115\030" },
		{ 0, 2, "\037\235" }, { 0, 6, "070701" }, { 0, 6, "070707" },
		{ 0, 8, "!<arch>\n" }, { 0, 4, "xar!" }, { 0, 4, "MSCF" },
		{ 257, 5, "ustar" },
	};

	for (size_t i = 0; i < sizeof(sig) / sizeof(sig[0]); i++)
		if (n >= sig[i].off + sig[i].len &&
		    memcmp(b + sig[i].off, sig[i].magic, sig[i].len) == 0)
			return 1;
	return 0;
}

/* 1 if an extractor would write this path where it was meant to go. */
static int
archive_path_ok(const char *p)
{
	const char	*c;
	size_t		 n;

	if (p == NULL || *p == '\0' || *p == '/' || strchr(p, '\\') != NULL)
		return 0;
	if (((p[0] >= 'A' && p[0] <= 'Z') || (p[0] >= 'a' && p[0] <= 'z')) &&
	    p[1] == ':')
		return 0;			/* C:foo, a drive */
	for (c = p; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return 0;
	for (c = p;;) {
		n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return 0;
		if (c[n] == '\0')
			return 1;
		c += n + 1;
	}
}

static void archive_level(struct archive_walk *, const uint8_t *, size_t,
    uint32_t);

/* Count the data of the current entry, keeping it when it is an archive
 * that may be read one level down. */
static void
archive_data(struct archive_walk *w, struct archive *a, const char *path,
    uint32_t depth)
{
	const struct archive_caps	*c = w->caps;
	uint8_t				*block, *keep = NULL;
	size_t				 kept = 0, cap = 0;
	la_ssize_t			 r;
	int				 first = 1, nested = 0;

	block = xmalloc(ARCHIVE_BLOCK);
	for (;;) {
		if ((r = archive_read_data(a, block, ARCHIVE_BLOCK)) == 0)
			break;
		if (r < 0) {
			archive_fail(w, DROP_ARCHIVE_BAD, "entry %.128s cannot "
			    "be read: %s", path, archive_error_string(a) !=
			    NULL ? archive_error_string(a) : "?");
			break;
		}
		w->expanded += (uint64_t)r;
		if (w->expanded > c->max_expanded) {
			archive_fail(w, DROP_ARCHIVE_LARGE, "expands to more "
			    "than %llu bytes", (unsigned long long)
			    c->max_expanded);
			break;
		}
		if (w->expanded > ARCHIVE_RATIO_FLOOR && w->expanded >
		    (uint64_t)c->max_ratio * w->outer) {
			archive_fail(w, DROP_ARCHIVE_LARGE, "expands more "
			    "than %u times its %zu bytes", c->max_ratio,
			    w->outer);
			break;
		}
		if (first) {
			first = 0;
			if (archive_looks_nested(block, (size_t)r <
			    ARCHIVE_SNIFF ? (size_t)r : ARCHIVE_SNIFF)) {
				if (depth >= c->max_nesting) {
					archive_fail(w, DROP_ARCHIVE_NESTED,
					    "entry %.128s is an archive inside "
					    "an archive (%u levels allowed)",
					    path, c->max_nesting);
					break;
				}
				nested = 1;
			}
		}
		if (nested) {
			if (kept + (size_t)r > cap) {
				while (kept + (size_t)r > cap)
					cap = cap == 0 ? ARCHIVE_BLOCK : 2 * cap;
				keep = xreallocarray(keep, cap, 1);
			}
			memcpy(keep + kept, block, (size_t)r);
			kept += (size_t)r;
		}
	}
	free(block);
	if (nested && w->reason == NULL)
		archive_level(w, keep, kept, depth + 1);
	free(keep);
}

/* One archive, at a nesting depth (0: the released file). */
static void
archive_level(struct archive_walk *w, const uint8_t *buf, size_t len,
    uint32_t depth)
{
	struct archive		*a;
	struct archive_entry	*e;
	const char		*path;
	mode_t			 type;
	int			 r;

	if ((a = archive_read_new()) == NULL) {
		archive_fail(w, DROP_ARCHIVE_BAD, "libarchive: out of memory");
		return;
	}
	archive_read_support_filter_all(a);
	archive_read_support_format_all(a);
	/* A lone compressed stream (data.csv.gz) is one entry. */
	archive_read_support_format_raw(a);
	if (archive_read_open_memory(a, buf, len) != ARCHIVE_OK) {
		archive_fail(w, DROP_ARCHIVE_BAD, "not an archive libarchive "
		    "reads: %s", archive_error_string(a) != NULL ?
		    archive_error_string(a) : "?");
		archive_read_free(a);
		return;
	}
	while (w->reason == NULL) {
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			archive_fail(w, DROP_ARCHIVE_BAD, "entry %llu: %s",
			    (unsigned long long)w->entries + 1,
			    archive_error_string(a) != NULL ?
			    archive_error_string(a) : "?");
			break;
		}
		if (++w->entries > w->caps->max_entries) {
			archive_fail(w, DROP_ARCHIVE_ENTRIES, "more than %u "
			    "entries", w->caps->max_entries);
			break;
		}
		path = archive_entry_pathname(e);
		if (!archive_path_ok(path)) {
			archive_fail(w, DROP_ARCHIVE_ENTRY, "entry %llu: path "
			    "%.128s leaves the directory it is extracted in",
			    (unsigned long long)w->entries, path != NULL ?
			    path : "(none)");
			break;
		}
		type = archive_entry_filetype(e);
		if (archive_entry_symlink(e) != NULL || type == AE_IFLNK) {
			archive_fail(w, DROP_ARCHIVE_ENTRY, "entry %.128s is a "
			    "symbolic link", path);
			break;
		}
		if (archive_entry_hardlink(e) != NULL) {
			archive_fail(w, DROP_ARCHIVE_ENTRY, "entry %.128s is a "
			    "hard link", path);
			break;
		}
		if (type != AE_IFREG && type != AE_IFDIR) {
			archive_fail(w, DROP_ARCHIVE_ENTRY, "entry %.128s is "
			    "not a file or a directory", path);
			break;
		}
		if ((archive_entry_mode(e) & (S_ISUID | S_ISGID)) != 0) {
			archive_fail(w, DROP_ARCHIVE_ENTRY, "entry %.128s is "
			    "set-user-id or set-group-id", path);
			break;
		}
		if (archive_entry_is_encrypted(e)) {
			archive_fail(w, DROP_ARCHIVE_BAD, "entry %.128s is "
			    "encrypted", path);
			break;
		}
		if (type == AE_IFREG)
			archive_data(w, a, path, depth);
	}
	archive_read_free(a);
}

const char *
archive_check(const uint8_t *buf, size_t len, const struct archive_caps *caps,
    char *why, size_t whylen)
{
	struct archive_walk	w;

	memset(&w, 0, sizeof(w));
	w.caps = caps;
	w.outer = len;
	w.why = why;
	w.whylen = whylen;
	if (whylen > 0)
		why[0] = '\0';
	archive_level(&w, buf, len, 0);
	return w.reason;
}
