/*
 * unpack.c: gated-unpack, the one program of gated's that reads archives.
 * gated runs it once per archive it inspects (inspect.c): libarchive and
 * what it brings (libxml2, ICU, libstdc++, nettle, the decompressors)
 * parse bytes a sandbox wrote, so they run here, in a process of their
 * own that holds nothing (no socket, no key, no store, no descriptor but
 * its three pipes and the archive), with no new privileges, a seccomp
 * filter that leaves it reading its memory and writing its answer, and
 * the CPU, memory and file limits gated set before the exec.  Whatever a
 * hostile archive does to libarchive, gated sees at worst a helper that
 * died or did not answer in time, and refuses that archive.
 *
 * Descriptors: 0 the request (one frame: ArchiveInspect with the caps),
 * 1 the answer (the same message, answer set), 2 gated's log, 3 the
 * archive (a sealed memfd).  It reads nothing else and exits 0 after the
 * answer; any other exit is a failure gated reports.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "version.h"
#include "gated/gated.h"

#define UNPACK_ARCHIVE_FD	3
#define UNPACK_REQUEST_MAX	1024

/*
 * Under AddressSanitizer (SAN=1 builds) the filter is not loaded: the
 * leak check at exit stops the process with a tracer thread (clone,
 * ptrace), which the filter refuses.  The release builds always load it.
 */
#if defined(__SANITIZE_ADDRESS__)
#define UNPACK_SANITIZED	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNPACK_SANITIZED	1
#endif
#endif

/* Only what reading memory and writing the answer take; anything else
 * fails with EPERM (an open(), a socket(), an exec, a fork). */
static void
unpack_seccomp(void)
{
	static const int	 allow[] = {
		SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(close),
		SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(brk),
		SCMP_SYS(madvise), SCMP_SYS(lseek), SCMP_SYS(fstat),
		SCMP_SYS(newfstatat), SCMP_SYS(futex), SCMP_SYS(getpid),
		SCMP_SYS(gettid), SCMP_SYS(rt_sigreturn),
		SCMP_SYS(rt_sigprocmask), SCMP_SYS(clock_gettime),
		SCMP_SYS(exit), SCMP_SYS(exit_group),
	};
	scmp_filter_ctx		 ctx;
	size_t			 i;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		fatal("no_new_privs");
#ifndef UNPACK_SANITIZED
	if ((ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM))) == NULL)
		fatalx("seccomp_init failed");
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS) != 0)
		fatalx("seccomp: bad-architecture action");
	for (i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allow[i], 0) != 0)
			fatalx("seccomp: rule %zu", i);
	/* Memory, never executable memory. */
	if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
	    SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) != 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
	    SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) != 0)
		fatalx("seccomp: mmap rule");
	if (seccomp_load(ctx) != 0)
		fatalx("seccomp: the filter cannot be loaded");
	seccomp_release(ctx);
#else
	(void)ctx;
	(void)i;
	(void)allow;
#endif
}

static void __attribute__((noreturn))
unpack_usage(FILE *f, int status)
{
	fprintf(f, "usage: gated-unpack (run by gated for each archive: the "
	    "request on standard\n"
	    "\tinput, the archive on descriptor %d; see gated(8))\n"
	    "       gated-unpack --help | --version\n", UNPACK_ARCHIVE_FD);
	exit(status);
}

int
main(int argc, char *argv[])
{
	Sbx__V1__Envelope	*req, ans;
	Sbx__V1__ArchiveInspect	*in, out;
	struct archive_caps	 caps;
	struct stat		 st;
	const char		*reason;
	void			*buf;
	uint8_t			*frame;
	size_t			 flen;
	char			 why[512];

	log_init("gated-unpack", 1, 0);
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("gated-unpack %s\n", SBX_VERSION);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--help") == 0)
		unpack_usage(stdout, 0);
	if (argc != 1)
		unpack_usage(stderr, 2);
	if (frame_read(STDIN_FILENO, UNPACK_REQUEST_MAX, &req) != 0 ||
	    req->body_case != SBX__V1__ENVELOPE__BODY_ARCHIVE_INSPECT ||
	    req->archive_inspect->answer)
		fatalx("no archive_inspect request on standard input");
	in = req->archive_inspect;
	caps.max_expanded = in->max_expanded;
	caps.max_ratio = in->max_ratio;
	caps.max_entries = in->max_entries;
	caps.max_nesting = in->max_nesting;
	if (fstat(UNPACK_ARCHIVE_FD, &st) == -1 || !S_ISREG(st.st_mode))
		fatalx("descriptor %d is not the archive", UNPACK_ARCHIVE_FD);
	buf = NULL;
	if (st.st_size > 0 && (buf = mmap(NULL, (size_t)st.st_size,
	    PROT_READ, MAP_PRIVATE, UNPACK_ARCHIVE_FD, 0)) == MAP_FAILED)
		fatal("mmap of the archive");
	(void)close(UNPACK_ARCHIVE_FD);

	unpack_seccomp();
	reason = archive_check(buf, (size_t)st.st_size, &caps, why,
	    sizeof(why));

	sbx__v1__archive_inspect__init(&out);
	out.answer = 1;
	out.reason = (char *)(reason != NULL ? reason : "");
	out.why = reason != NULL ? why : "";
	frame_env_init(&ans, req->request_id);
	ans.body_case = SBX__V1__ENVELOPE__BODY_ARCHIVE_INSPECT;
	ans.archive_inspect = &out;
	/* write(2), not frame_write's send(2): the filter allows no more. */
	if ((frame = frame_pack(&ans, &flen)) == NULL ||
	    write_all(STDOUT_FILENO, frame, flen) == -1)
		fatal("answer");
	free(frame);
	if (buf != NULL)
		munmap(buf, (size_t)st.st_size);
	sbx__v1__envelope__free_unpacked(req, NULL);
	return 0;
}
