/*
 * log.c: stderr in the foreground, syslog otherwise.  log_warn() appends
 * strerror(errno) the way OpenBSD's daemons do, so a caller never formats
 * errno by hand.  Nothing here allocates: logging works when memory is short.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "log.h"

static int	 log_fg = 1;
static int	 log_verbose;
static char	 log_name[32] = "sbx";

void
log_init(const char *progname, int foreground, int verbose)
{
	if (progname != NULL)
		snprintf(log_name, sizeof(log_name), "%s", progname);
	log_fg = foreground;
	log_verbose = verbose;
	if (!foreground)
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
	if (log_fg && !foreground)
		openlog(log_name, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_fg = foreground;
}

static void
log_vwrite(int pri, const char *fmt, va_list ap, const char *err)
{
	char	 msg[2048];
	int	 n;

	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	/* Neutralise control characters so a peer cannot forge log lines. */
	for (char *p = msg; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (log_fg) {
		if (err != NULL)
			fprintf(stderr, "%s: %s: %s\n", log_name, msg, err);
		else
			fprintf(stderr, "%s: %s\n", log_name, msg);
		fflush(stderr);
	} else {
		if (err != NULL)
			syslog(pri, "%s: %s", msg, err);
		else
			syslog(pri, "%s", msg);
	}
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
