/*
 * handover.c: the declared outputs made readable to gated, and nothing
 * else.  Code that runs with umask 077 (many programs do) writes its
 * outputs 0600 and its directories 0700, as the sandbox user; gated runs
 * as its own user and could only drop them as unreadable.  Once every
 * process of the sandbox is dead, and before the scratch goes to gated,
 * the root side gives each declared name -- the file and the directories
 * on its way, and the scratch root itself -- to gated's user, adding
 * the owner's read (and, for a directory, search) bit.  Nothing else
 * changes hands: an undeclared file, a directory off every declared path
 * and anything outside the scratch keep their owner and mode, so gated
 * can read no more than the outputs it is asked to release.
 *
 * Names come from the signed policy's request, but what they point at
 * was made by the sandbox: each component is opened on its own beneath
 * the one before it with openat2(RESOLVE_BENEATH | NO_SYMLINKS |
 * NO_MAGICLINKS | NO_XDEV) and O_NOFOLLOW | O_NONBLOCK, and changed
 * through that descriptor only (fchown, fchmod), so no symbolic link is
 * ever followed by root, a FIFO cannot block, and only a directory or a
 * regular file with one link is touched.  A name that cannot be handed
 * over is left as it is: gated then drops it with its own reason.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "log.h"
#include "launchd-sbx/handover.h"

/* A name deeper than this is not an output gated releases anyway. */
#define HANDOVER_DEPTH		32

static int
handover_openat(int dirfd, const char *comp)
{
	struct open_how	 how;

	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	return (int)syscall(SYS_openat2, dirfd, comp, &how, sizeof(how));
}

/*
 * Give one open directory or file to uid, with the owner bits gated needs
 * (r for a file, r and x for a directory); the set-id bits go (the scratch
 * is nosuid and noexec, but a mode is never widened past what is needed).
 * 0, or -1 when it is neither, or is a file with more than one link.
 */
static int
handover_one(int fd, int dir, uid_t uid)
{
	struct stat	 st;
	mode_t		 need, mode;

	if (fstat(fd, &st) == -1)
		return -1;
	if (dir ? !S_ISDIR(st.st_mode) :
	    !S_ISREG(st.st_mode) || st.st_nlink != 1)
		return -1;
	need = dir ? S_IRUSR | S_IXUSR : S_IRUSR;
	mode = st.st_mode & (S_IRWXU | S_IRWXG | S_IRWXO);
	if (st.st_uid != uid && fchown(fd, uid, (gid_t)-1) == -1)
		return -1;
	/* fchown cleared any set-id bit; the mode is set again regardless,
	 * without them. */
	if ((st.st_mode & 07777) != (mode | need) &&
	    fchmod(fd, mode | need) == -1)
		return -1;
	return 0;
}

/* One declared name, component by component beneath the scratch. */
static void
handover_name(int scratch, const char *name, uid_t uid)
{
	char		 buf[PATH_MAX], *comp, *next;
	int		 fd, sub, depth = 0;

	if (snprintf(buf, sizeof(buf), "%s", name) >= (int)sizeof(buf) ||
	    buf[0] == '/')
		return;
	if ((fd = dup(scratch)) == -1)
		return;
	for (comp = buf; comp != NULL; comp = next) {
		if ((next = strchr(comp, '/')) != NULL)
			*next++ = '\0';
		if (*comp == '\0' || strcmp(comp, ".") == 0 ||
		    strcmp(comp, "..") == 0 || ++depth > HANDOVER_DEPTH)
			break;
		if ((sub = handover_openat(fd, comp)) == -1)
			break;
		close(fd);
		fd = sub;
		if (handover_one(fd, next != NULL, uid) == -1) {
			log_debug("output %.64s: left as the sandbox wrote "
			    "it", name);
			break;
		}
	}
	close(fd);
}

void
handover_outputs(int scratch, char *const *names, size_t n, uid_t uid)
{
	if (n == 0)
		return;
	/* The root first: the sandbox may have made it 0700 too. */
	if (handover_one(scratch, 1, uid) == -1) {
		log_warnx("scratch: cannot hand it to the gate");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (names[i] != NULL)
			handover_name(scratch, names[i], uid);
}
