/*
 * inspect.c: gated's side of an archive's inspection.  gated does not
 * read archives itself: libarchive and the libraries it brings parse
 * what a sandbox wrote, so each archive goes to a fresh gated-unpack
 * (unpack.c), which holds nothing worth taking, under limits set here
 * before its exec: CPU seconds, address space, no files written, no
 * core, no new processes, a few descriptors, an empty environment.  The
 * archive goes as a sealed memfd (the helper cannot change what gated
 * holds), the caps as an ArchiveInspect frame; the answer comes back the
 * same way.  The helper not starting, dying (a signal, its CPU limit),
 * not answering within the timeout (killed then), or answering anything
 * but a well-formed verdict with a reason gated knows is that archive's
 * refusal (archive-unreadable, with what happened): it never releases
 * an archive, and gated goes on serving.  gated waits for the answer
 * as it waited for its own libarchive before: at most the timeout.
 */
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "gated/gated.h"

#define INSPECT_ARCHIVE_FD	3
#define INSPECT_ANSWER_MAX	4096
#define INSPECT_NOFILE		16
/* Address space beyond the archive and twice the expansion cap (the
 * nested copy kept and libarchive's buffers): the libraries' mappings
 * (ICU's data alone is 30 MiB) and the decoders' windows. */
#define INSPECT_AS_BASE		(512ULL * 1024 * 1024)

/* Under AddressSanitizer the address space is not capped: its shadow
 * memory reserves terabytes. */
#if defined(__SANITIZE_ADDRESS__)
#define INSPECT_SANITIZED	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INSPECT_SANITIZED	1
#endif
#endif

static const char *const inspect_reasons[] = {
	DROP_ARCHIVE_ENTRY, DROP_ARCHIVE_LARGE, DROP_ARCHIVE_ENTRIES,
	DROP_ARCHIVE_NESTED, DROP_ARCHIVE_BAD,
};

static const char *
inspect_fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static const char *
inspect_fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return DROP_ARCHIVE_BAD;
}

/* The archive's bytes in a memfd nobody can change any more. */
static int
inspect_memfd(const uint8_t *buf, size_t len)
{
	int	 fd, e;

	if ((fd = memfd_create("gated-archive", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING)) == -1)
		return -1;
	if ((len > 0 && write_all(fd, buf, len) == -1) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_WRITE | F_SEAL_SEAL) == -1) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void
inspect_limit(int res, rlim_t v)
{
	struct rlimit	 rl;

	rl.rlim_cur = rl.rlim_max = v;
	if (setrlimit(res, &rl) == -1)
		_exit(126);
}

/* The child, between fork and exec: only async-signal-safe calls. */
static void __attribute__((noreturn))
inspect_child(const struct inspect *in, int req, int ans, int mfd,
    size_t len, const struct archive_caps *caps)
{
	static char	 arg0[] = "gated-unpack";
	char		*argv[] = { arg0, NULL }, *envp[] = { NULL };
	struct rlimit	 rl;
	uint64_t	 as;

	if (dup2(req, STDIN_FILENO) == -1 || dup2(ans, STDOUT_FILENO) == -1 ||
	    dup2(mfd, INSPECT_ARCHIVE_FD) == -1)
		_exit(126);
	if (close_range(INSPECT_ARCHIVE_FD + 1, ~0U, 0) == -1)
		_exit(126);
	/* CPU: SIGXCPU at the timeout, SIGKILL a second later. */
	rl.rlim_cur = in->timeout;
	rl.rlim_max = (rlim_t)in->timeout + 1;
	if (setrlimit(RLIMIT_CPU, &rl) == -1)
		_exit(126);
	inspect_limit(RLIMIT_FSIZE, 0);
	inspect_limit(RLIMIT_CORE, 0);
	inspect_limit(RLIMIT_NPROC, 0);
	inspect_limit(RLIMIT_NOFILE, INSPECT_NOFILE);
#ifndef INSPECT_SANITIZED
	as = INSPECT_AS_BASE + (uint64_t)len;
	as += caps->max_expanded > (1ULL << 40) ? (1ULL << 41) :
	    2 * caps->max_expanded;
	inspect_limit(RLIMIT_AS, (rlim_t)as);
#else
	(void)as;
	(void)caps;
	(void)len;
#endif
	execve(in->path, argv, envp);
	_exit(127);
}

/* Write the request and close req, then read the answer until the helper
 * has closed it and exited, or the deadline passed.  0, or -1 with why
 * set. */
static int
inspect_talk(const struct inspect *in, pid_t pid, int pfd, int req, int ans,
    const struct archive_caps *caps, uint8_t *abuf, size_t *alen,
    int *status, char *why, size_t whylen)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__ArchiveInspect	 ai;
	struct pollfd		 pf[2];
	struct timespec		 now;
	int64_t			 deadline, left;
	int			 eof = 0, done = 0, n;
	ssize_t			 r;

	sbx__v1__archive_inspect__init(&ai);
	ai.max_expanded = caps->max_expanded;
	ai.max_ratio = caps->max_ratio;
	ai.max_entries = caps->max_entries;
	ai.max_nesting = caps->max_nesting;
	frame_env_init(&env, 1);
	env.body_case = SBX__V1__ENVELOPE__BODY_ARCHIVE_INSPECT;
	env.archive_inspect = &ai;
	/* A few dozen bytes: the pipe takes them whatever the helper does
	 * (EPIPE if it has died already: its status says why).  Closed
	 * then: the helper reads to the end of its input. */
	(void)frame_write(req, &env);
	close(req);

	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 +
	    (int64_t)in->timeout * 1000;
	*alen = 0;
	while (!eof || !done) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = deadline - ((int64_t)now.tv_sec * 1000 +
		    now.tv_nsec / 1000000);
		if (left <= 0) {
			snprintf(why, whylen, "the archive reader gave no "
			    "answer within %u s (killed)", in->timeout);
			return -1;
		}
		n = 0;
		if (!eof) {
			pf[n].fd = ans;
			pf[n++].events = POLLIN;
		}
		if (!done) {
			pf[n].fd = pfd;
			pf[n++].events = POLLIN;
		}
		if (poll(pf, (nfds_t)n, (int)left) == -1) {
			if (errno == EINTR)
				continue;
			snprintf(why, whylen, "poll: %s", strerror(errno));
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (pf[i].revents == 0)
				continue;
			if (pf[i].fd == pfd) {
				if (waitpid(pid, status, WNOHANG) == pid)
					done = 1;
				continue;
			}
			if (*alen == INSPECT_ANSWER_MAX) {
				snprintf(why, whylen, "the archive reader's "
				    "answer is longer than %d bytes",
				    INSPECT_ANSWER_MAX);
				return -1;
			}
			r = read(ans, abuf + *alen, INSPECT_ANSWER_MAX - *alen);
			if (r == -1 && errno != EINTR && errno != EAGAIN) {
				snprintf(why, whylen, "reading the archive "
				    "reader's answer: %s", strerror(errno));
				return -1;
			}
			if (r == 0)
				eof = 1;
			else if (r > 0)
				*alen += (size_t)r;
		}
	}
	return 0;
}

/* The verdict in an answer, or a failure naming what was wrong. */
static const char *
inspect_verdict(const uint8_t *abuf, size_t alen, char *why, size_t whylen)
{
	Sbx__V1__Envelope	*env;
	Sbx__V1__ArchiveInspect	*ai;
	Sbx__V1__ErrorCode	 code;
	const char		*e, *reason = NULL;
	size_t			 len, i;

	if (alen < FRAME_HDR || frame_parse_header(abuf, INSPECT_ANSWER_MAX,
	    &len, &code, &e) == -1 || len != alen - FRAME_HDR)
		return inspect_fail(why, whylen, "the archive reader's answer "
		    "is not one frame (%zu bytes)", alen);
	if ((env = frame_decode(abuf + FRAME_HDR, len, INSPECT_ANSWER_MAX,
	    &code, &e)) == NULL)
		return inspect_fail(why, whylen, "the archive reader's answer "
		    "does not decode: %s", e);
	if (env->body_case != SBX__V1__ENVELOPE__BODY_ARCHIVE_INSPECT ||
	    !env->archive_inspect->answer) {
		sbx__v1__envelope__free_unpacked(env, NULL);
		return inspect_fail(why, whylen, "the archive reader's answer "
		    "is not a verdict");
	}
	ai = env->archive_inspect;
	if (ai->reason[0] != '\0') {
		for (i = 0; i < sizeof(inspect_reasons) /
		    sizeof(inspect_reasons[0]); i++)
			if (strcmp(ai->reason, inspect_reasons[i]) == 0)
				reason = inspect_reasons[i];
		if (reason == NULL)
			reason = inspect_fail(why, whylen, "the archive "
			    "reader's answer has an unknown reason %.64s",
			    ai->reason);
		else
			snprintf(why, whylen, "%s", ai->why);
	}
	sbx__v1__envelope__free_unpacked(env, NULL);
	return reason;
}

const char *
inspect_archive(const struct inspect *in, const uint8_t *buf, size_t len,
    const struct archive_caps *caps, char *why, size_t whylen)
{
	uint8_t		 abuf[INSPECT_ANSWER_MAX];
	size_t		 alen = 0;
	const char	*reason;
	int		 req[2] = { -1, -1 }, ans[2] = { -1, -1 };
	int		 mfd, pfd = -1, status = 0, rc;
	pid_t		 pid;

	if (whylen > 0)
		why[0] = '\0';
	if ((mfd = inspect_memfd(buf, len)) == -1)
		return inspect_fail(why, whylen, "the archive cannot be "
		    "handed to its reader: memfd: %s", strerror(errno));
	if (pipe2(req, O_CLOEXEC) == -1 || pipe2(ans, O_CLOEXEC) == -1) {
		reason = inspect_fail(why, whylen, "the archive cannot be "
		    "handed to its reader: pipe: %s", strerror(errno));
		goto out;
	}
	if ((pid = fork()) == -1) {
		reason = inspect_fail(why, whylen, "the archive reader cannot "
		    "start: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		inspect_child(in, req[0], ans[1], mfd, len, caps);
	close(req[0]);
	close(ans[1]);
	req[0] = ans[1] = -1;
	if ((pfd = pidfd_open(pid, 0)) == -1) {
		reason = inspect_fail(why, whylen, "pidfd_open: %s",
		    strerror(errno));
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		goto out;
	}
	rc = inspect_talk(in, pid, pfd, req[1], ans[0], caps, abuf, &alen,
	    &status, why, whylen);
	req[1] = -1;		/* closed by inspect_talk */
	if (rc == -1) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		reason = DROP_ARCHIVE_BAD;
	} else if (WIFSIGNALED(status))
		reason = inspect_fail(why, whylen, "the archive reader was "
		    "killed by signal %d (%s)%s", WTERMSIG(status),
		    strsignal(WTERMSIG(status)), WTERMSIG(status) == SIGXCPU ?
		    ": it used its CPU seconds" : "");
	else if (WEXITSTATUS(status) == 127)
		reason = inspect_fail(why, whylen, "the archive reader %s "
		    "cannot be run", in->path);
	else if (WEXITSTATUS(status) != 0)
		reason = inspect_fail(why, whylen, "the archive reader "
		    "exited with status %d", WEXITSTATUS(status));
	else
		reason = inspect_verdict(abuf, alen, why, whylen);
 out:
	if (pfd != -1)
		close(pfd);
	for (int i = 0; i < 2; i++) {
		if (req[i] != -1)
			close(req[i]);
		if (ans[i] != -1)
			close(ans[i]);
	}
	close(mfd);
	return reason;
}
