/*
 * keyfile.h: a secret key file (policyd's signing key, brokerd's master
 * key) read straight into guarded memory, with the same refusals for both.
 */
#ifndef SBX_KEYFILE_H
#define SBX_KEYFILE_H

#include <sys/types.h>

#include <stddef.h>

struct keyfile {
	const char	*what;		/* "signing key": names it in errors */
	const char	*path;
	size_t		 len;		/* its exact size */
	uid_t		 owner;		/* (uid_t)-1: any owner */
	const char	*owner_name;	/* "brokerd's user", with owner */
	const char	*fix;		/* advice after a mode refusal */
};

/*
 * The key's bytes in sodium_malloc memory, read-write (the caller checks
 * them, then makes them read-only), or NULL with err set.  Refused: a
 * symbolic link, anything but a regular file, a mode with any group or
 * other bit, another owner, another size, a short read.
 */
unsigned char	*keyfile_read(const struct keyfile *, char *err,
		    size_t errlen);

#endif
