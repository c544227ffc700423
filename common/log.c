/*
 * log.c: stderr in the foreground, syslog otherwise.  log_warn() appends
 * strerror(errno) the way OpenBSD's daemons do, so a caller never formats
 * errno by hand.  Nothing here allocates: logging works when memory is short.
 *
 * Under systemd a line goes to journald through its native protocol
 * (systemd's "Native Journal Protocol": one datagram of KEY=value lines
 * to /run/systemd/journal/socket) with MESSAGE, PRIORITY,
 * SYSLOG_IDENTIFIER and the SBX_* fields of the execution it is about
 * (log_ctx_set), so an operator can ask `journalctl SBX_TRACEPARENT=...`.
 * "Under systemd" is decided as systemd documents it: in the foreground,
 * when $JOURNAL_STREAM names the device and inode of our stderr (a unit's
 * output is the journal); daemonised, when the socket exists.  A line the
 * journal does not take goes where it would have gone without it.
 *
 * The entry goes through libsystemd's sd_journal_sendv, which a program
 * hands over with log_journal_sender() (the daemon skeleton does, before
 * log_init).  launchd-sbx's root monitor links this file and plain libc
 * only: it never sets a sender, so its lines go to stderr or syslog.  Every
 * value is bounded and holds no newline (a line is at most LOG_LINE_MAX
 * bytes, control characters made '?', the context's values fixed
 * buffers), so an entry is small.
 */
#include <sys/stat.h>
#include <sys/uio.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_LINE_MAX	2048
#define LOG_JOURNAL_SOCKET	"/run/systemd/journal/socket"

static int	 log_fg = 1;
static int	 log_verbose;
static int	 log_to_journal;
static int	(*log_sendv)(const struct iovec *, int);
static char	 log_name[32] = "sbx";

/* The execution of the lines being written; "" where not known. */
static struct {
	char	 task_id[129];
	char	 execution_id[64];
	char	 policy_hash[65];
	char	 traceparent[56];
	char	 rule[64];
} log_ctx;

/* stderr is the journal stream systemd gave this process. */
static int
log_stream_is_journal(void)
{
	const char		*js;
	struct stat		 st;
	unsigned long long	 dev, ino;
	char			 end;

	if ((js = getenv("JOURNAL_STREAM")) == NULL ||
	    sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2)
		return 0;
	if (fstat(STDERR_FILENO, &st) == -1)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

static void
log_choose(void)
{
	if (log_sendv == NULL)
		log_to_journal = 0;
	else if (log_fg)
		log_to_journal = log_stream_is_journal();
	else
		log_to_journal = access(LOG_JOURNAL_SOCKET, F_OK) == 0;
}

/* Copy v into a context buffer, control characters made '?'. */
static void
log_ctx_copy(char *dst, size_t len, const char *v)
{
	size_t	 i;

	if (v == NULL)
		v = "";
	for (i = 0; i + 1 < len && v[i] != '\0'; i++)
		dst[i] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f ||
		    v[i] == ' ' || v[i] == ']' ? '?' : v[i];
	dst[i] = '\0';
}

void
log_ctx_set(const char *task_id, const char *execution_id,
    const char *policy_hash, const char *traceparent)
{
	log_ctx_copy(log_ctx.task_id, sizeof(log_ctx.task_id), task_id);
	log_ctx_copy(log_ctx.execution_id, sizeof(log_ctx.execution_id),
	    execution_id);
	log_ctx_copy(log_ctx.policy_hash, sizeof(log_ctx.policy_hash),
	    policy_hash);
	log_ctx_copy(log_ctx.traceparent, sizeof(log_ctx.traceparent),
	    traceparent);
}

void
log_ctx_rule(const char *rule)
{
	log_ctx_copy(log_ctx.rule, sizeof(log_ctx.rule), rule);
}

void
log_ctx_clear(void)
{
	memset(&log_ctx, 0, sizeof(log_ctx));
}

const char *
log_ctx_traceparent(const char *task_id)
{
	if (task_id == NULL || task_id[0] == '\0' ||
	    strcmp(task_id, log_ctx.task_id) != 0)
		return "";
	return log_ctx.traceparent;
}

void
log_init(const char *progname, int foreground, int verbose)
{
	if (progname != NULL)
		snprintf(log_name, sizeof(log_name), "%s", progname);
	log_fg = foreground;
	log_verbose = verbose;
	log_choose();
	if (!foreground && !log_to_journal)
		openlog(log_name, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	tzset();
}

void
log_setverbose(int verbose)
{
	log_verbose = verbose;
}

int
log_getverbose(void)
{
	return log_verbose;
}

void
log_foreground(int foreground)
{
	int	 was = log_fg;

	log_fg = foreground;
	log_choose();
	if (was && !foreground && !log_to_journal)
		openlog(log_name, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Add "key=value" at buf + *off (of len) as iov[*n]: 0, or -1 if full. */
static int
log_journal_field(struct iovec *iov, int *n, char *buf, size_t len,
    size_t *off, const char *key, const char *v)
{
	int	 k;

	if (v[0] == '\0')
		return 0;
	k = snprintf(buf + *off, len - *off, "%s=%s", key, v);
	if (k < 0 || (size_t)k >= len - *off)
		return -1;
	iov[*n].iov_base = buf + *off;
	iov[*n].iov_len = (size_t)k;
	(*n)++;
	*off += (size_t)k + 1;
	return 0;
}

/* One entry to journald: 0, or -1 if it did not take it. */
static int
log_journal_send(int pri, const char *line)
{
	struct iovec	 iov[8];
	char		 buf[LOG_LINE_MAX + 1024], p[4];
	size_t		 off = 0;
	int		 n = 0, rc, saved = errno;

	snprintf(p, sizeof(p), "%d", pri & 7);
	if (log_journal_field(iov, &n, buf, sizeof(buf), &off, "MESSAGE",
	    line) ||
	    log_journal_field(iov, &n, buf, sizeof(buf), &off, "PRIORITY", p) ||
	    log_journal_field(iov, &n, buf, sizeof(buf), &off,
	    "SYSLOG_IDENTIFIER", log_name) ||
	    log_journal_field(iov, &n, buf, sizeof(buf), &off, "SBX_TASK_ID",
	    log_ctx.task_id) ||
	    log_journal_field(iov, &n, buf, sizeof(buf), &off,
	    "SBX_EXECUTION_ID", log_ctx.execution_id) ||
	    log_journal_field(iov, &n, buf, sizeof(buf), &off,
	    "SBX_POLICY_HASH", log_ctx.policy_hash) ||
	    log_journal_field(iov, &n, buf, sizeof(buf), &off, "SBX_RULE",
	    log_ctx.rule) ||
	    log_journal_field(iov, &n, buf, sizeof(buf), &off,
	    "SBX_TRACEPARENT", log_ctx.traceparent))
		return -1;
	rc = log_sendv(iov, n);
	errno = saved;
	return rc < 0 ? -1 : 0;
}

void
log_journal_sender(int (*sendv)(const struct iovec *, int))
{
	log_sendv = sendv;
	log_choose();
}

static void
log_vwrite(int pri, const char *fmt, va_list ap, const char *err)
{
	char	 msg[LOG_LINE_MAX], line[LOG_LINE_MAX + 512];
	int	 n;

	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	/* Neutralise control characters so a peer cannot forge log lines. */
	for (char *p = msg; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	snprintf(line, sizeof(line), "%s%s%s", msg, err != NULL ? ": " : "",
	    err != NULL ? err : "");
	if (log_ctx.task_id[0] != '\0' || log_ctx.execution_id[0] != '\0' ||
	    log_ctx.rule[0] != '\0') {
		/* The context's values hold no space, ']' or control. */
		n = (int)strlen(line);
		snprintf(line + n, sizeof(line) - (size_t)n,
		    " [%s%s%s%s%s%s%s%s%s%s]",
		    log_ctx.task_id[0] != '\0' ? "task=" : "", log_ctx.task_id,
		    log_ctx.execution_id[0] != '\0' ? " execution=" : "",
		    log_ctx.execution_id,
		    log_ctx.policy_hash[0] != '\0' ? " policy=" : "",
		    log_ctx.policy_hash,
		    log_ctx.rule[0] != '\0' ? " rule=" : "", log_ctx.rule,
		    log_ctx.traceparent[0] != '\0' ? " traceparent=" : "",
		    log_ctx.traceparent);
	}
	if (!log_to_journal || log_journal_send(pri, line) == -1) {
		if (log_fg) {
			fprintf(stderr, "%s: %s\n", log_name, line);
			fflush(stderr);
		} else
			syslog(pri, "%s", line);
	}
	/* A rule names one line. */
	log_ctx.rule[0] = '\0';
}

void
log_warn(const char *fmt, ...)
{
	va_list	 ap;
	int	 saved = errno;

	va_start(ap, fmt);
	log_vwrite(LOG_WARNING, fmt, ap, strerror(saved));
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_vwrite(LOG_WARNING, fmt, ap, NULL);
	va_end(ap);
}

void
log_info(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_vwrite(LOG_INFO, fmt, ap, NULL);
	va_end(ap);
}

void
log_debug(const char *fmt, ...)
{
	va_list	 ap;

	if (log_verbose < 1)
		return;
	va_start(ap, fmt);
	log_vwrite(LOG_DEBUG, fmt, ap, NULL);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	va_list	 ap;
	int	 saved = errno;

	va_start(ap, fmt);
	log_vwrite(LOG_CRIT, fmt, ap, strerror(saved));
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	log_vwrite(LOG_CRIT, fmt, ap, NULL);
	va_end(ap);
	exit(1);
}
