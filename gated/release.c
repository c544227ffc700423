/*
 * release.c: the release decision for one finished execution.  Given the
 * scratch directory as a descriptor, it opens only the declared names,
 * beneath that descriptor, with openat2(RESOLVE_BENEATH | NO_SYMLINKS |
 * NO_MAGICLINKS | NO_XDEV) and O_NONBLOCK | O_NOFOLLOW (so no link is
 * followed anywhere in the path and a FIFO cannot make gated wait), keeps
 * regular files with one link only, reads at most the cap plus one byte,
 * and decides from the bytes it read: the content type (libmagic) must
 * agree with the name and be allowed, each file and the total are capped
 * by bytes actually read, and text over the cap is truncated only when the
 * policy says so.  An archive is read through and an image's dimensions
 * checked (archive.c, image.c) against the policy's caps.  A CSV or TSV
 * is searched for cells a spreadsheet would evaluate (csv.c): reported,
 * or neutralised when the policy says so, whatever the destination.
 * Everything else in the directory is listed as dropped, never opened: at
 * most GATED_WALK_MAX names, each cut to GATED_WALK_NAME bytes, the rest
 * counted.  stdout, stderr and text outputs for the agent are cleaned of
 * terminal control and invisible characters, their remote images and
 * links neutralised unless the policy keeps them, truncated visibly and
 * labelled, and what was removed is counted in the result.
 *
 * Names come from the sandbox: they are cleaned (text_name_clean) before
 * they appear in a result, a log or the audit log.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sodium.h>

#include "log.h"
#include "policy.h"
#include "util.h"
#include "gated/gated.h"

struct release_acc {
	Sbx__V1__ReleaseResult	*res;
	int			 links;		/* TEXT_LINKS_ */
	size_t			 listed;	/* undeclared entries */
	uint64_t		 unlisted;
	uint64_t		 unlisted_names;	/* bytes */
	uint64_t		 unlisted_bytes;
};

static uint32_t
release_dflt(uint32_t v, uint32_t dflt)
{
	return v != 0 ? v : dflt;
}

static int
release_links(const Sbx__V1__Outputs *o)
{
	return o != NULL &&
	    o->remote_links == SBX__V1__REMOTE_LINKS__REMOTE_LINKS_KEEP ?
	    TEXT_LINKS_KEEP : TEXT_LINKS_NEUTRALISE;
}

/* A TextReport when anything was taken out, else NULL. */
static Sbx__V1__TextReport *
release_text_report(const struct text_counts *tc)
{
	Sbx__V1__TextReport	*t;

	if (tc->controls == 0 && tc->invisible == 0 && tc->invalid == 0 &&
	    tc->links == 0)
		return NULL;
	t = xmalloc(sizeof(*t));
	sbx__v1__text_report__init(t);
	t->controls_removed = tc->controls;
	t->invisible_removed = tc->invisible;
	t->invalid_replaced = tc->invalid;
	t->links_neutralised = tc->links;
	return t;
}

/* The separator of a type a spreadsheet opens, or 0. */
static int
release_csv_sep(const char *type)
{
	if (strcmp(type, "text/csv") == 0)
		return ',';
	if (strcmp(type, "text/tab-separated-values") == 0)
		return '\t';
	return 0;
}

/*
 * Look for formula cells in a CSV or TSV; neutralise them when the
 * policy says so (*buf, *len replaced).  Fills r->csv when there are any.
 */
static void
release_csv(const Sbx__V1__Outputs *o, const char *type, uint8_t **buf,
    size_t *len, Sbx__V1__ReleasedOutput *r)
{
	struct csv_report	 rep;
	uint8_t			*nb;
	size_t			 nlen;
	int			 sep, neut;

	if ((sep = release_csv_sep(type)) == 0)
		return;
	neut = o != NULL &&
	    o->csv_formulas == SBX__V1__CSV_FORMULAS__CSV_FORMULAS_NEUTRALISE;
	nb = csv_check(*buf, *len, sep, neut, &nlen, &rep);
	if (rep.cells > 0) {
		r->csv = xmalloc(sizeof(*r->csv));
		sbx__v1__csv_report__init(r->csv);
		r->csv->formula_cells = rep.cells;
		r->csv->first_row = rep.row;
		r->csv->first_column = rep.col;
		r->csv->neutralised = neut;
	}
	if (nb == NULL)
		return;
	if (rep.cells > 0) {
		free(*buf);
		*buf = nb;
		*len = nlen;
	} else
		free(nb);
}

int
release_name_ok(const char *name)
{
	const char	*p, *comp;
	size_t		 len;

	if (name == NULL || (len = strlen(name)) == 0 || len > GATED_NAME_MAX ||
	    name[0] == '/')
		return 0;
	for (p = name; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return 0;
	comp = name;
	for (;;) {
		p = strchr(comp, '/');
		len = p != NULL ? (size_t)(p - comp) : strlen(comp);
		if (len == 0 || (len == 1 && comp[0] == '.') ||
		    (len == 2 && comp[0] == '.' && comp[1] == '.'))
			return 0;
		if (p == NULL)
			return 1;
		comp = p + 1;
	}
}

int
release_open(int dirfd, const char *name, const char **reason)
{
	struct open_how	 how;
	struct stat	 st;
	int		 fd;

	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	if ((fd = (int)syscall(SYS_openat2, dirfd, name, &how,
	    sizeof(how))) == -1) {
		switch (errno) {
		case ENOENT:
		case ENOTDIR:
			*reason = DROP_MISSING;
			break;
		case ELOOP:
			*reason = DROP_SYMLINK;
			break;
		case EXDEV:
			/* Beneath is enforced; this is a mount point. */
			*reason = DROP_NOT_REGULAR;
			break;
		case ENXIO:		/* a socket */
		case EWOULDBLOCK:
			*reason = DROP_NOT_REGULAR;
			break;
		default:
			*reason = DROP_UNREADABLE;
			break;
		}
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		*reason = DROP_UNREADABLE;
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		*reason = DROP_NOT_REGULAR;
		close(fd);
		return -1;
	}
	if (st.st_nlink != 1) {
		/* Another name for the same bytes may lie outside. */
		*reason = DROP_HARDLINK;
		close(fd);
		return -1;
	}
	return fd;
}

/* Read up to max bytes: *n read.  0 or -1. */
static int
release_read(int fd, uint8_t *buf, size_t max, size_t *n)
{
	ssize_t	r;

	*n = 0;
	while (*n < max) {
		if ((r = read(fd, buf + *n, max - *n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		*n += (size_t)r;
	}
	return 0;
}

static void
release_drop_as(struct release_acc *a, const char *name, size_t max,
    const char *reason)
{
	Sbx__V1__ReleaseResult	*res = a->res;
	Sbx__V1__DroppedOutput	*d;
	int			 cut;

	d = xmalloc(sizeof(*d));
	sbx__v1__dropped_output__init(d);
	d->name = text_name_clean(name, max, a->links, &cut);
	d->name_truncated = cut;
	d->reason = xstrdup(reason);
	res->dropped = xreallocarray(res->dropped, res->n_dropped + 1,
	    sizeof(*res->dropped));
	res->dropped[res->n_dropped++] = d;
}

static void
release_drop(struct release_acc *a, const char *name, const char *reason)
{
	release_drop_as(a, name, GATED_NAME_MAX, reason);
}

static int
release_allowed(const Sbx__V1__Outputs *o, const char *type)
{
	for (size_t i = 0; o != NULL && i < o->n_allowed_types; i++)
		if (o->allowed_types[i] != NULL &&
		    strcmp(o->allowed_types[i], type) == 0)
			return 1;
	return 0;
}

static int
release_declared(const Sbx__V1__ReleaseRequest *req, size_t upto,
    const char *name)
{
	for (size_t i = 0; i < upto && i < GATED_OUTPUTS_MAX; i++)
		if (req->outputs[i] != NULL &&
		    strcmp(req->outputs[i], name) == 0)
			return 1;
	return 0;
}

/*
 * The bytes of one file to their destination; fills r->where/content and,
 * for the agent, r->text and r->csv.  A CSV for the user or a bucket has
 * been through release_csv already.
 */
static int
release_deliver(const struct release_ctx *ctx, Sbx__V1__Destination dest,
    const char *name, const char *type, const uint8_t *buf, size_t len,
    const char *hex, Sbx__V1__ReleasedOutput *r)
{
	struct text_counts	 tc;
	char			 err[512], stream[GATED_NAME_MAX + 16], *lab;
	uint8_t			*clean, *md;
	size_t			 n, lablen;

	switch (dest) {
	case SBX__V1__DESTINATION__DESTINATION_USER:
		if (ctx->store_dir == NULL ||
		    gstore_user(ctx->store_dir, ctx->task_id, ctx->execution_id,
		    name, buf, len, &r->where, err, sizeof(err)) == -1) {
			log_warnx("output %s: %s", r->name, ctx->store_dir ==
			    NULL ? "no store" : err);
			return -1;
		}
		return 0;
	case SBX__V1__DESTINATION__DESTINATION_STORAGE_BUCKET:
		if (ctx->store_dir == NULL ||
		    gstore_blob(ctx->store_dir, buf, len, hex, &r->where, err,
		    sizeof(err)) == -1) {
			log_warnx("output %s: %s", r->name, ctx->store_dir ==
			    NULL ? "no store" : err);
			return -1;
		}
		return 0;
	default:
		break;
	}
	r->where = xstrdup("result");
	if (!sniff_is_text(type)) {
		r->content.data = xmalloc(len > 0 ? len : 1);
		if (len > 0)
			memcpy(r->content.data, buf, len);
		r->content.len = len;
		return 0;
	}
	/* Text for the agent: data, never terminal control, hidden
	 * characters, a remote image or a way out of its label. */
	memset(&tc, 0, sizeof(tc));
	clean = xmalloc(len + 1);
	n = text_strip(buf, len, clean, &tc);
	if (release_links(ctx->outputs) == TEXT_LINKS_NEUTRALISE) {
		md = markdown_neutralise(clean, n, &n, &tc.links);
		free(clean);
		clean = md;
	}
	/* Cells as the agent will read them, after the strip. */
	release_csv(ctx->outputs, type, &clean, &n, r);
	r->text = release_text_report(&tc);
	snprintf(stream, sizeof(stream), "output:%s", name);
	lab = text_label(ctx->execution_id, stream, clean, n, &lablen);
	free(clean);
	r->content.data = (uint8_t *)lab;
	r->content.len = lablen;
	return 0;
}

/* An archive or an image within the policy's caps?  NULL or a reason. */
static const char *
release_contents(const struct release_ctx *ctx, const char *name,
    const char *type, const uint8_t *buf, size_t len)
{
	const Sbx__V1__Outputs	*o = ctx->outputs;
	struct archive_caps	 caps;
	const char		*reason = NULL;
	char			 why[512];

	if (strcmp(type, "application/zip") == 0 ||
	    strcmp(type, "application/gzip") == 0) {
		caps.max_expanded = (uint64_t)release_dflt(o != NULL ?
		    o->archive_max_expanded_mb : 0,
		    POLICY_DEFAULT_ARCHIVE_EXPANDED_MB) * 1024 * 1024;
		caps.max_ratio = release_dflt(o != NULL ? o->archive_max_ratio :
		    0, POLICY_DEFAULT_ARCHIVE_RATIO);
		caps.max_entries = release_dflt(o != NULL ?
		    o->archive_max_entries : 0, POLICY_DEFAULT_ARCHIVE_ENTRIES);
		caps.max_nesting = o != NULL ? o->archive_max_nesting :
		    POLICY_DEFAULT_ARCHIVE_NESTING;
		if (ctx->archive == NULL) {
			reason = DROP_ARCHIVE_BAD;
			snprintf(why, sizeof(why), "no archive reader");
		} else
			reason = ctx->archive(ctx->archive_arg, buf, len,
			    &caps, why, sizeof(why));
	} else
		reason = image_check(type, buf, len, release_dflt(o != NULL ?
		    o->image_max_side : 0, POLICY_DEFAULT_IMAGE_SIDE),
		    release_dflt(o != NULL ? o->image_max_pixels : 0,
		    POLICY_DEFAULT_IMAGE_PIXELS), why, sizeof(why));
	if (reason != NULL)
		log_info("output %.64s: %s: %s", name, reason, why);
	return reason;
}

static void
release_one(const struct release_ctx *ctx, struct release_acc *a,
    int dirfd, const char *name, size_t *used)
{
	const Sbx__V1__Outputs	*o = ctx->outputs;
	Sbx__V1__ReleaseResult	*res = a->res;
	Sbx__V1__ReleasedOutput	*r;
	Sbx__V1__Destination	 dest;
	const char		*reason, *ctype, *type;
	unsigned char		 sum[crypto_hash_sha256_BYTES];
	char			 hex[2 * crypto_hash_sha256_BYTES + 1];
	uint8_t			*buf, *kept = NULL;
	size_t			 max_total, max_file, n, room, keptlen;
	size_t			 limit, whole;
	struct stat		 st;
	int			 fd, text, truncate, truncated = 0;

	max_total = o != NULL ? (size_t)o->max_total_kb * 1024 : 0;
	max_file = o != NULL && o->max_file_kb != 0 ?
	    (size_t)o->max_file_kb * 1024 : max_total;
	if (max_file > max_total)
		max_file = max_total;
	truncate = o != NULL &&
	    o->oversize == SBX__V1__OVERSIZE__OVERSIZE_TRUNCATE;
	dest = o != NULL ? o->destination :
	    SBX__V1__DESTINATION__DESTINATION_AGENT;

	if ((fd = release_open(dirfd, name, &reason)) == -1) {
		release_drop(a, name, reason);
		return;
	}
	/* One byte over the cap tells "over" from "exactly at". */
	buf = xmalloc(max_file + 1);
	if (release_read(fd, buf, max_file + 1, &n) == -1) {
		close(fd);
		free(buf);
		release_drop(a, name, DROP_UNREADABLE);
		return;
	}
	/* For the truncation marker only; the caps go by bytes read. */
	whole = fstat(fd, &st) == 0 && st.st_size > 0 ? (size_t)st.st_size : n;
	close(fd);
	ctype = sniff_type(ctx->sniff, buf, n);
	if ((type = sniff_agree(name, ctype)) == NULL) {
		log_info("output %.64s: content is %s, the name says "
		    "otherwise", name, ctype);
		release_drop(a, name, DROP_TYPE_MISMATCH);
		goto out;
	}
	if (!release_allowed(o, type)) {
		release_drop(a, name, DROP_TYPE_NOT_ALLOWED);
		goto out;
	}
	text = sniff_is_text(type);
	if (!text && n <= max_file && (reason = release_contents(ctx, name,
	    type, buf, n)) != NULL) {
		release_drop(a, name, reason);
		goto out;
	}
	room = max_total - *used;
	limit = n;
	if (limit > max_file)
		limit = max_file;
	if (limit > room)
		limit = room;
	if (limit < n) {
		if (!truncate || !text || limit == 0) {
			release_drop(a, name, n > max_file ? DROP_TOO_LARGE :
			    DROP_TOTAL);
			goto out;
		}
		kept = text_truncate_of(buf, n, whole, limit, &keptlen,
		    &truncated);
	} else {
		kept = xmalloc(n + 1);
		memcpy(kept, buf, n);
		keptlen = n;
	}
	/* The total counts bytes read and kept, not the marker. */
	*used += limit;
	r = xmalloc(sizeof(*r));
	sbx__v1__released_output__init(r);
	/* A file for a person: the cells as they will open them.  For the
	 * agent, release_deliver looks after the strip. */
	if (dest != SBX__V1__DESTINATION__DESTINATION_AGENT)
		release_csv(o, type, &kept, &keptlen, r);
	crypto_hash_sha256(sum, kept, keptlen);
	hex_encode(sum, sizeof(sum), hex);

	r->name = text_name_clean(name, GATED_NAME_MAX, a->links, NULL);
	r->type = xstrdup(type);
	r->bytes = keptlen;
	r->truncated = truncated;
	r->sha256 = xstrdup(hex);
	if (release_deliver(ctx, dest, name, type, kept, keptlen, hex,
	    r) == -1) {
		sbx__v1__released_output__free_unpacked(r, NULL);
		release_drop(a, name, DROP_DESTINATION);
		goto out;
	}
	if (r->where == NULL)
		r->where = xstrdup("");
	res->outputs = xreallocarray(res->outputs, res->n_outputs + 1,
	    sizeof(*res->outputs));
	res->outputs[res->n_outputs++] = r;
out:
	free(kept);
	free(buf);
}

/* List what nobody declared, without opening a file or following a link. */
static void
release_walk(const Sbx__V1__ReleaseRequest *req, struct release_acc *a,
    int dfd, const char *prefix, int depth)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	char		*rel;
	int		 fd, sub, isdir;

	if ((fd = dup(dfd)) == -1)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (prefix[0] != '\0')
			xasprintf(&rel, "%s/%s", prefix, de->d_name);
		else
			rel = xstrdup(de->d_name);
		if (de->d_type == DT_UNKNOWN)
			isdir = fstatat(dirfd(d), de->d_name, &st,
			    AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
		else
			isdir = de->d_type == DT_DIR;
		/* Into every directory, declared or not: what it holds is
		 * listed either way. */
		if (isdir && depth < GATED_WALK_DEPTH &&
		    (sub = openat(dirfd(d), de->d_name, O_RDONLY |
		    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
			release_walk(req, a, sub, rel, depth + 1);
			close(sub);
			free(rel);
			continue;
		}
		if (release_declared(req, req->n_outputs, rel)) {
			free(rel);
			continue;	/* decided above, with its reason */
		}
		/* Names the sandbox chose, outside any label: a few, cut
		 * short; the rest only counted. */
		if (a->listed < GATED_WALK_MAX) {
			release_drop_as(a, rel, GATED_WALK_NAME,
			    DROP_UNDECLARED);
			a->listed++;
		} else {
			a->unlisted++;
			a->unlisted_names += strlen(rel);
			if (fstatat(dirfd(d), de->d_name, &st,
			    AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > 0)
				a->unlisted_bytes += (uint64_t)st.st_size;
		}
		free(rel);
	}
	closedir(d);
}

/* stdout or stderr for the agent. */
static void
release_stream(const struct release_ctx *ctx, const ProtobufCBinaryData *in,
    const char *stream, size_t max, ProtobufCBinaryData *out,
    protobuf_c_boolean *truncated, Sbx__V1__TextReport **report)
{
	struct text_counts	 tc;
	uint8_t			*clean;
	size_t			 n, lablen;
	int			 t;

	memset(&tc, 0, sizeof(tc));
	clean = text_clean(in->data, in->len, max, release_links(ctx->outputs),
	    &n, &t, &tc);
	out->data = (uint8_t *)text_label(ctx->execution_id, stream, clean, n,
	    &lablen);
	out->len = lablen;
	*truncated = t;
	*report = release_text_report(&tc);
	free(clean);
}

int
release_run(const struct release_ctx *ctx, int dirfd,
    const Sbx__V1__ReleaseRequest *req, Sbx__V1__ReleaseResult *res,
    char *err, size_t errlen)
{
	const Sbx__V1__Outputs	*o = ctx->outputs;
	struct release_acc	 a;
	struct stat		 st;
	size_t			 used = 0, max_text, i, nout;
	Sbx__V1__DroppedSummary	*sum;

	sbx__v1__release_result__init(res);
	if (fstat(dirfd, &st) == -1 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "the descriptor passed is not a "
		    "directory");
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.res = res;
	a.links = release_links(o);
	nout = req->n_outputs < GATED_OUTPUTS_MAX ? req->n_outputs :
	    GATED_OUTPUTS_MAX;
	for (i = 0; i < nout; i++) {
		const char	*name = req->outputs[i];

		if (!release_name_ok(name))
			release_drop(&a, name != NULL ? name : "",
			    DROP_BAD_NAME);
		else if (release_declared(req, i, name))
			release_drop(&a, name, DROP_DUPLICATE);
		else
			release_one(ctx, &a, dirfd, name, &used);
	}
	release_walk(req, &a, dirfd, "", 0);
	if (a.unlisted > 0) {
		sum = xmalloc(sizeof(*sum));
		sbx__v1__dropped_summary__init(sum);
		sum->entries = a.unlisted > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)a.unlisted;
		sum->name_bytes = a.unlisted_names;
		sum->bytes = a.unlisted_bytes;
		res->dropped_unlisted = sum;
	}
	max_text = (size_t)(o != NULL && o->max_text_kb != 0 ? o->max_text_kb :
	    GATED_TEXT_KB_DEFAULT) * 1024;
	release_stream(ctx, &req->stdout, "stdout", max_text, &res->stdout,
	    &res->stdout_truncated, &res->stdout_report);
	release_stream(ctx, &req->stderr, "stderr", max_text, &res->stderr,
	    &res->stderr_truncated, &res->stderr_report);
	return 0;
}

void
release_result_clear(Sbx__V1__ReleaseResult *res)
{
	for (size_t i = 0; i < res->n_outputs; i++)
		sbx__v1__released_output__free_unpacked(res->outputs[i], NULL);
	for (size_t i = 0; i < res->n_dropped; i++)
		sbx__v1__dropped_output__free_unpacked(res->dropped[i], NULL);
	free(res->outputs);
	free(res->dropped);
	free(res->stdout.data);
	free(res->stderr.data);
	if (res->stdout_report != NULL)
		sbx__v1__text_report__free_unpacked(res->stdout_report, NULL);
	if (res->stderr_report != NULL)
		sbx__v1__text_report__free_unpacked(res->stderr_report, NULL);
	if (res->dropped_unlisted != NULL)
		sbx__v1__dropped_summary__free_unpacked(res->dropped_unlisted,
		    NULL);
	sbx__v1__release_result__init(res);
}
