/*
 * gated.h: gated's structures and the prototypes of its modules.  gated is
 * the output release gate: once every process of a sandbox is dead,
 * launchd-sbx hands it the scratch directory as a file descriptor with the
 * signed policy, the declared output names and the captured stdout and
 * stderr.  The invariant everything here serves: nothing leaves a sandbox
 * but declared regular files, opened beneath that descriptor without
 * following a link, whose content type is allowed by the policy and agrees
 * with their name, within the policy's caps; archives and images whose
 * expansion stays within caps; text reaches the agent without terminal
 * control sequences or invisible characters, without remote images and
 * links (unless the policy keeps them), and labelled as data; CSV cells a
 * spreadsheet would evaluate are reported or neutralised; every release
 * and every drop is audited before the result is sent.
 *
 * Module prefixes: gparse_, gcontrol_, release_, sniff_, text_, markdown_,
 * csv_, archive_, image_, gstore_ (libgated links beside the other
 * daemons' modules in the unit tests).
 */
#ifndef SBX_GATED_H
#define SBX_GATED_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "peer.h"
#include "sign.h"

#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/gate.pb-c.h"
#include "sbx/v1/policy.pb-c.h"

#define GATED_CONF_DEFAULT	"/etc/sbx/gated.yaml"
#define GATED_DB		"gated.db"	/* the audit log */
#define GATED_TEXT_KB_DEFAULT	64	/* outputs.max_text_kb 0 */
#define GATED_NAME_MAX		1024	/* a declared name, bytes */
#define GATED_OUTPUTS_MAX	256	/* declared names per request */
#define GATED_WALK_MAX		64	/* undeclared entries listed */
#define GATED_WALK_NAME		160	/* bytes of an undeclared name listed */
#define GATED_WALK_DEPTH	16

/* Rule ids of refused requests (Error.rule and the audit record). */
#define RULE_PEER		"peer-not-allowed"
#define RULE_SIGNATURE		"signature-invalid"
#define RULE_EXPIRED		"policy-expired"
#define RULE_BAD_REQUEST	"bad-request"
#define RULE_NO_DIR		"no-scratch-directory"

/* Reasons of dropped outputs (DroppedOutput.reason, audit rule). */
#define DROP_UNDECLARED		"undeclared"
#define DROP_TYPE_NOT_ALLOWED	"type-not-allowed"
#define DROP_TYPE_MISMATCH	"type-mismatch"
#define DROP_TOO_LARGE		"too-large"
#define DROP_TOTAL		"total-too-large"
#define DROP_NOT_REGULAR	"not-regular-file"
#define DROP_SYMLINK		"symlink"
#define DROP_HARDLINK		"hardlink"
#define DROP_MISSING		"missing"
#define DROP_BAD_NAME		"bad-name"
#define DROP_DUPLICATE		"duplicate"
#define DROP_UNREADABLE		"unreadable"
#define DROP_DESTINATION	"destination-failed"
#define DROP_ARCHIVE_ENTRY	"archive-unsafe-entry"
#define DROP_ARCHIVE_LARGE	"archive-too-large"
#define DROP_ARCHIVE_ENTRIES	"archive-too-many-entries"
#define DROP_ARCHIVE_NESTED	"archive-nested"
#define DROP_ARCHIVE_BAD	"archive-unreadable"
#define DROP_IMAGE_LARGE	"image-too-large"
#define DROP_IMAGE_BAD		"image-unreadable"

struct yerrs;
struct frame_conn;
struct ucred;

/* ---- parse.c ---- */

struct gated_conf {
	struct cfg_common	 common;	/* file, user, state_dir, ... */
	char			*store_dir;	/* default state_dir/store */
	char			*policy_public_key;
	char			*policy_public_key_previous;
	char			*archive_reader;	/* NULL: beside gated */
	uint32_t		 archive_timeout;	/* seconds */
	struct cfg_sock		 release;
	struct cfg_sock		 admin;		/* path NULL: none */
};

/* The keys of gated.yaml, for the skeleton (daemon.h) and cfg_parse. */
extern const struct cfg_table gparse_table;

/* ---- text.c (pure) ---- */

/* What text_strip and markdown_neutralise took out (TextReport). */
struct text_counts {
	uint32_t	 controls;	/* escape sequences, C0/C1, DEL */
	uint32_t	 invisible;	/* utf8_hidden() code points */
	uint32_t	 invalid;	/* bytes not UTF-8, as '?' */
	uint32_t	 links;		/* remote links neutralised */
};

/* Remote links: the policy's outputs.remote_links. */
#define TEXT_LINKS_NEUTRALISE	0
#define TEXT_LINKS_KEEP		1

/*
 * Remove terminal control: CSI (ESC [ and 8-bit U+009B), OSC (ESC ], up
 * to BEL or ST), DCS, SOS, PM and APC strings, other two- and three-byte
 * ESC sequences, C0 controls but \n and \t, DEL and C1 controls; and the
 * code points utf8_hidden() lists.  A byte that is not part of valid
 * UTF-8 becomes '?'.  out holds at least len bytes; returns the length
 * written (never more than len).  tc (may be NULL) counts what went.
 */
size_t		 text_strip(const uint8_t *in, size_t len, uint8_t *out,
		    struct text_counts *tc);
/*
 * Cut to at most max bytes at a UTF-8 character boundary and append
 * "\n[sbx: truncated N bytes]" when anything was cut.  Returns malloc'd
 * bytes (NUL-terminated, *outlen without the NUL).
 */
uint8_t		*text_truncate(const uint8_t *in, size_t len, size_t max,
		    size_t *outlen, int *truncated);
/* The same for the first len bytes of something whole bytes long (a file
 * read only up to its cap): the marker counts from whole. */
uint8_t		*text_truncate_of(const uint8_t *in, size_t len, size_t whole,
		    size_t max, size_t *outlen, int *truncated);
/* text_strip, markdown_neutralise unless links is TEXT_LINKS_KEEP, then
 * text_truncate. */
uint8_t		*text_clean(const uint8_t *in, size_t len, size_t max,
		    int links, size_t *outlen, int *truncated,
		    struct text_counts *tc);
/*
 * Wrap as labelled tool output: <tool-output source="sbx" execution="ID"
 * stream="S">\n ... </tool-output>, the
 * closing tag on a line of its own.  Inside the body, any "<tool-output"
 * or "</tool-output" (any case) has its '<' written as "&lt;", so the data
 * cannot close the label and speak outside it.  Attribute values keep only
 * [A-Za-z0-9._:@-].  Malloc'd, NUL-terminated.
 */
char		*text_label(const char *execution, const char *stream,
		    const uint8_t *body, size_t len, size_t *outlen);
/* A name as it may appear in a result, a log or the audit log: control
 * bytes, invalid UTF-8 and hidden code points as '?', remote links
 * neutralised unless links is TEXT_LINKS_KEEP, at most max bytes (never
 * more than GATED_NAME_MAX read), cut at a character; *cut (may be NULL)
 * says whether it was. */
char		*text_name_clean(const char *name, size_t max, int links,
		    int *cut);

/* ---- markdown.c (pure) ---- */

/*
 * Neutralise what a Markdown or HTML renderer would fetch or link from
 * another host: inline images and links, reference definitions,
 * autolinks (URL and e-mail) and HTML tags with attributes, each replaced
 * by a visible marker such as " (sbx: remote image removed)".  Local
 * destinations ("#part", "dir/file.png", "/path") stay.  Returns malloc'd
 * NUL-terminated bytes; *count (may be NULL) adds what was neutralised.
 */
uint8_t		*markdown_neutralise(const uint8_t *in, size_t len,
		    size_t *outlen, uint32_t *count);

/* ---- csv.c (pure) ---- */

struct csv_report {
	uint32_t	 cells;		/* cells a spreadsheet would evaluate */
	uint32_t	 row;		/* the first one's, 1-based */
	uint32_t	 col;
};

/*
 * Find the cells of a CSV (sep ',') or TSV (sep '\t') that begin with =,
 * +, -, @, TAB or CR and are not plain numbers, parsing quoted fields
 * (embedded separators, newlines, "" quotes) as spreadsheets do.  With
 * neutralise, returns a malloc'd copy in which each such cell is written
 * quoted with a ' before its text (OWASP), everything else byte for
 * byte; otherwise NULL.
 */
uint8_t		*csv_check(const uint8_t *in, size_t len, int sep,
		    int neutralise, size_t *outlen, struct csv_report *);

/* ---- archive.c ---- */

struct archive_caps {
	uint64_t	 max_expanded;	/* bytes, every entry of every level */
	uint32_t	 max_ratio;	/* expanded / archive bytes */
	uint32_t	 max_entries;	/* every level */
	uint32_t	 max_nesting;	/* archive levels inside the archive */
};

/*
 * Read a zip or gzip through with libarchive: every entry's path (no
 * absolute path, "..", backslash, drive or control byte), its type (no
 * symbolic or hard link, device, FIFO or socket, no set-id bits), the
 * bytes it really expands to (counted, not taken from headers), the entry
 * count, and archives inside it up to the nesting cap.  NULL if it may be
 * released, else the DROP_ARCHIVE_ reason with a sentence in why.
 */
const char	*archive_check(const uint8_t *buf, size_t len,
		    const struct archive_caps *, char *why, size_t whylen);

/* ---- inspect.c: archive_check in gated-unpack (unpack.c) ---- */

#define GATED_UNPACK		"gated-unpack"
#define INSPECT_TIMEOUT_DEFAULT	30

struct inspect {
	const char	*path;		/* gated-unpack */
	unsigned	 timeout;	/* seconds: wall, and CPU */
};

/*
 * archive_check's verdict, read in a fresh gated-unpack under limits: the
 * same NULL or DROP_ARCHIVE_ reason with why.  The helper failing in any
 * way (not starting, a signal, the timeout, a bad answer) is
 * DROP_ARCHIVE_BAD with what happened in why: never a release.
 */
const char	*inspect_archive(const struct inspect *, const uint8_t *buf,
		    size_t len, const struct archive_caps *, char *why,
		    size_t whylen);

/* ---- image.c ---- */

/*
 * The dimensions a decoder would allocate for: PNG (libpng), JPEG
 * (libjpeg), GIF (giflib: the screen and every frame).  NULL if within
 * max_side (width and height) and max_pixels (width x height, summed over
 * a GIF's frames), else DROP_IMAGE_LARGE or DROP_IMAGE_BAD with why.
 * Types other than these three are not images to it: NULL.
 */
const char	*image_check(const char *type, const uint8_t *buf, size_t len,
		    uint32_t max_side, uint64_t max_pixels, char *why,
		    size_t whylen);

/* ---- sniff.c ---- */

struct sniff;

struct sniff	*sniff_open(char *err, size_t errlen);
void		 sniff_close(struct sniff *);
/* The MIME type of the bytes, from their content (libmagic);
 * "application/octet-stream" when it cannot tell.  Valid until the next
 * call. */
const char	*sniff_type(struct sniff *, const void *, size_t);
/* The type a file of this name is released as, when content_type agrees
 * with the name's extension (the table in sniff.c); NULL when the
 * extension is unknown or the content disagrees. */
const char	*sniff_agree(const char *name, const char *content_type);
/* 1 if the name has an extension in the table. */
int		 sniff_known_ext(const char *name);
/* 1 for types released as text (truncatable, cleaned for the agent). */
int		 sniff_is_text(const char *type);

/* ---- store.c ---- */

/* Content-addressed blob: STORE/blobs/sha256/HEX, written once, 0444;
 * *where = "sha256:HEX".  0 or -1 with err. */
int		 gstore_blob(const char *store, const uint8_t *, size_t,
		    const char *hex, char **where, char *err, size_t errlen);
/* A file for the user: STORE/tasks/TASK/EXECUTION/NAME ('/' in the name
 * as '_'), never replacing a file; *where = its path. */
int		 gstore_user(const char *store, const char *task,
		    const char *execution, const char *name, const uint8_t *,
		    size_t, char **where, char *err, size_t errlen);

/* ---- release.c ---- */

/* How an archive is read: gated's inspect_archive (arg: its struct
 * inspect), or archive_check in-process (the fuzz target).  NULL: every
 * archive is refused. */
typedef const char *(*release_archive_fn)(void *, const uint8_t *, size_t,
		    const struct archive_caps *, char *, size_t);

struct release_ctx {
	const Sbx__V1__Outputs	*outputs;	/* from the verified policy */
	release_archive_fn	 archive;
	void			*archive_arg;
	const char		*task_id;
	const char		*execution_id;
	struct sniff		*sniff;
	const char		*store_dir;	/* user, storage-bucket */
};

/*
 * Decide and deliver every declared output beneath dirfd, list every
 * undeclared file, clean and label stdout and stderr.  res is filled with
 * malloc'd memory (free with release_result_clear).  Returns 0, or -1 with
 * err when the directory itself cannot be read (res then empty).
 */
int		 release_run(const struct release_ctx *, int dirfd,
		    const Sbx__V1__ReleaseRequest *, Sbx__V1__ReleaseResult *,
		    char *err, size_t errlen);
void		 release_result_clear(Sbx__V1__ReleaseResult *);
/* 1 if a declared name may be opened at all: relative, no "." or ".."
 * component, no empty component, printable, at most GATED_NAME_MAX. */
int		 release_name_ok(const char *);
/* Open a declared name beneath dirfd the only way gated does.  The fd, or
 * -1 with *reason one of the DROP_ reasons. */
int		 release_open(int dirfd, const char *name, const char **reason);

/* ---- control.c ---- */

struct gated_metrics {
	uint64_t	 requests;
	uint64_t	 refused;
	uint64_t	 released;
	uint64_t	 dropped;
	uint64_t	 peers_refused;
};

struct gated {
	struct gated_conf	*conf;
	struct sign_trust	 trust;		/* policyd's public keys */
	struct audit		*audit;
	struct sniff		*sniff;
	struct inspect		 inspect;	/* gated-unpack */
	struct event_base	*base;
	struct gated_metrics	 metrics;
};

/* The frame handlers of the release and admin sockets (arg: the struct
 * gated), and the audit of a peer refused at either. */
void		 gcontrol_release_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
void		 gcontrol_admin_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
void		 gcontrol_refused_peer(void *, const char *sock,
		    const struct ucred *, const char *why);
char		*gcontrol_metrics(const struct gated *);

#endif
