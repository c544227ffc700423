/*
 * name.c: the safe-name rule (name.h).  A name that passes is safe as a
 * path component and in a log line, whoever reads it.
 */
#include <string.h>

#include "name.h"

int
name_ok(const char *s)
{
	size_t	 n;

	if (s == NULL)
		return 0;
	n = strlen(s);
	if (n == 0 || n > 128 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	for (const char *p = s; *p != '\0'; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		    *p == '-' || *p == '@' || *p == ':')
			continue;
		return 0;
	}
	return 1;
}

int
path_has_dotdot(const char *p)
{
	size_t	 n;

	for (const char *c = p; *c != '\0'; c += n) {
		c += strspn(c, "/");
		n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return 1;
	}
	return 0;
}
