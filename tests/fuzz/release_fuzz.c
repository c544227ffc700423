/*
 * release_fuzz.c: libFuzzer target for gated's output-name and manifest
 * handling (gated/release.c with the name, type and text functions it
 * uses).  A small scratch tree of traps is built once: a CSV, a PNG, a
 * PNG named .csv, a symlink to a host file, a symlinked directory, a
 * hardlink pair, a FIFO, a nested file, a large text file.  Each input is
 * read as: one byte of policy flags, one byte each of max_file_kb and
 * max_total_kb, then declared names separated by '\n' up to a NUL, then
 * stdout.  The invariants checked on every result: release_run never
 * fails on a good directory; every name in the result is clean UTF-8
 * without control bytes; no ESC or BEL reaches stdout or a text output;
 * at most one result entry per declared name; the result encodes; and
 * stdout neutralised for links or CSV formulas gives nothing more to
 * neutralise on a second pass.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "gated/gated.h"

#define FUZZ_NAMES	64

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int		 dirfd_ = -1;
static struct sniff	*sniff_;

static void
put(int dfd, const char *name, const void *buf, size_t len)
{
	int	fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd == -1 || write(fd, buf, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void
setup(void)
{
	static const uint8_t	png[] = { 0x89, 'P', 'N', 'G', '\r', '\n',
	    0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 1, 0, 0, 0,
	    1, 8, 2, 0, 0, 0, 0x90, 0x77, 0x53, 0xde };
	char			 dir[] = "/tmp/release_fuzz.XXXXXX", err[256];
	char			*big;
	int			 dfd;

	log_init("release_fuzz", 1, 0);
	if (mkdtemp(dir) == NULL ||
	    (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		abort();
	put(dfd, "data.csv", "a,b\n1,2\n3,4\n", strlen("a,b\n1,2\n3,4\n"));
	put(dfd, "img.png", png, sizeof(png));
	put(dfd, "img.csv", png, sizeof(png));
	put(dfd, "esc.txt", "x\033[2J\033]52;c;QQ==\007y\n",
	    strlen("x\033[2J\033]52;c;QQ==\007y\n"));
	big = xmalloc(8192);
	memset(big, 'z', 8192);
	big[8191] = '\n';
	put(dfd, "big.txt", big, 8192);
	free(big);
	(void)mkdirat(dfd, "sub", 0755);
	put(dfd, "sub/in.json", "{\"a\": 1}\n", strlen("{\"a\": 1}\n"));
	(void)symlinkat("/etc/passwd", dfd, "pw.csv");
	(void)symlinkat("sub", dfd, "link");
	put(dfd, "one.csv", "x\n", 2);
	(void)linkat(dfd, "one.csv", dfd, "two.csv", 0);
	(void)mkfifoat(dfd, "fifo.csv", 0644);
	if ((sniff_ = sniff_open(err, sizeof(err))) == NULL)
		abort();
	dirfd_ = dfd;
}

/* Clean: valid UTF-8 without control bytes (stripping changes nothing
 * but tabs and newlines, which a clean name has none of either). */
static void
check_name(const char *s)
{
	size_t	 len = strlen(s), n;
	uint8_t	*out = xmalloc(len + 1);

	n = text_strip((const uint8_t *)s, len, out, NULL);
	if (n != len || memcmp(out, s, len) != 0 || strchr(s, '\t') != NULL ||
	    strchr(s, '\n') != NULL)
		abort();
	free(out);
}

static void
check_text(const ProtobufCBinaryData *b)
{
	if (memchr(b->data, 0x1b, b->len) != NULL ||
	    memchr(b->data, 0x07, b->len) != NULL)
		abort();
}

/* What markdown_neutralise and csv_check leave holds nothing they would
 * take out on a second pass. */
static void
check_neutral(const uint8_t *in, size_t len)
{
	struct csv_report	 rep;
	uint8_t			*md, *md2, *cv;
	size_t			 n, n2, cn;
	uint32_t		 count = 0;

	md = markdown_neutralise(in, len, &n, &count);
	count = 0;
	md2 = markdown_neutralise(md, n, &n2, &count);
	if (count != 0 || n2 != n || memcmp(md, md2, n) != 0)
		abort();
	free(md2);
	free(md);
	cv = csv_check(in, len, ',', 1, &cn, &rep);
	free(csv_check(cv, cn, ',', 0, &n, &rep));
	if (rep.cells != 0)
		abort();
	free(cv);
}

/* Archives read in-process here (gated has gated-unpack read them):
 * libarchive is fuzzed the same either way. */
static const char *
fuzz_archive(void *arg, const uint8_t *buf, size_t len,
    const struct archive_caps *caps, char *why, size_t whylen)
{
	(void)arg;
	return archive_check(buf, len, caps, why, whylen);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Sbx__V1__Outputs	 o = SBX__V1__OUTPUTS__INIT;
	Sbx__V1__ReleaseRequest	 rq = SBX__V1__RELEASE_REQUEST__INIT;
	Sbx__V1__ReleaseResult	 res;
	Sbx__V1__Envelope	 env;
	struct release_ctx	 ctx;
	char			*types[] = { "application/json", "image/png",
				    "text/csv", "text/plain" };
	char			*names[FUZZ_NAMES], *copy, *p, *nl, err[256];
	const uint8_t		*nul;
	uint8_t			*packed;
	size_t			 n = 0, i, plen, namelen;

	if (dirfd_ == -1)
		setup();
	if (size < 3)
		return 0;
	o.oversize = (data[0] & 1) ? SBX__V1__OVERSIZE__OVERSIZE_TRUNCATE :
	    SBX__V1__OVERSIZE__OVERSIZE_REFUSE;
	/* Only the agent: no store is written while fuzzing. */
	o.destination = SBX__V1__DESTINATION__DESTINATION_AGENT;
	o.allowed_types = types;
	o.n_allowed_types = (data[0] >> 1) & 1 ? 4 : 3;
	o.max_text_kb = (data[0] >> 2) & 3;
	o.remote_links = (data[0] >> 4) & 1 ?
	    SBX__V1__REMOTE_LINKS__REMOTE_LINKS_KEEP :
	    SBX__V1__REMOTE_LINKS__REMOTE_LINKS_NEUTRALISE;
	o.csv_formulas = (data[0] >> 5) & 1 ?
	    SBX__V1__CSV_FORMULAS__CSV_FORMULAS_NEUTRALISE :
	    SBX__V1__CSV_FORMULAS__CSV_FORMULAS_FLAG;
	o.max_file_kb = data[1] % 16;
	o.max_total_kb = data[2] % 32;
	data += 3;
	size -= 3;

	nul = memchr(data, '\0', size);
	namelen = nul != NULL ? (size_t)(nul - data) : size;
	copy = xmalloc(namelen + 1);
	memcpy(copy, data, namelen);
	copy[namelen] = '\0';
	for (p = copy; n < FUZZ_NAMES; p = nl + 1) {
		names[n++] = p;
		if ((nl = strchr(p, '\n')) == NULL)
			break;
		*nl = '\0';
	}
	rq.outputs = names;
	rq.n_outputs = n;
	if (nul != NULL) {
		rq.stdout.data = (uint8_t *)(uintptr_t)(nul + 1);
		rq.stdout.len = size - namelen - 1;
		rq.stderr = rq.stdout;
	}

	memset(&ctx, 0, sizeof(ctx));
	ctx.outputs = &o;
	ctx.task_id = "task-fuzz";
	ctx.execution_id = "exec-fuzz";
	ctx.sniff = sniff_;
	ctx.archive = fuzz_archive;
	if (release_run(&ctx, dirfd_, &rq, &res, err, sizeof(err)) == -1)
		abort();
	for (i = 0; i < res.n_outputs; i++) {
		check_name(res.outputs[i]->name);
		if (sniff_is_text(res.outputs[i]->type))
			check_text(&res.outputs[i]->content);
		if (res.outputs[i]->bytes > (uint64_t)o.max_total_kb * 1024 +
		    64)
			abort();
	}
	for (i = 0; i < res.n_dropped; i++)
		check_name(res.dropped[i]->name);
	/* A declared name is released at most once. */
	for (i = 0; i < res.n_outputs; i++)
		for (size_t j = i + 1; j < res.n_outputs; j++)
			if (strcmp(res.outputs[i]->name,
			    res.outputs[j]->name) == 0)
				abort();
	check_text(&res.stdout);
	check_text(&res.stderr);
	if (rq.stdout.len > 0)
		check_neutral(rq.stdout.data, rq.stdout.len);
	frame_env_init(&env, 1);
	env.body_case = SBX__V1__ENVELOPE__BODY_RELEASED;
	env.released = &res;
	if ((packed = frame_pack(&env, &plen)) == NULL)
		abort();
	free(packed);
	release_result_clear(&res);

	/* The name functions on their own, on the raw input. */
	for (i = 0; i < n; i++) {
		char	*c = text_name_clean(names[i], GATED_WALK_NAME,
			    TEXT_LINKS_NEUTRALISE, NULL);

		check_name(c);
		free(c);
		(void)release_name_ok(names[i]);
		(void)sniff_agree(names[i], "text/plain");
	}
	free(copy);
	return 0;
}
