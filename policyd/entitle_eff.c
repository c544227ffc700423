/*
 * entitle_eff.c: what both entitlement stores share (entitle.c on SQLite,
 * fleet.c on the fleet's PostgreSQL): an effective entitlement's release
 * and the spelling hosts are kept in.  A file of its own so that the two
 * stores depend on it and not on each other.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "policyd.h"

/* Hosts are kept the way policy_normalize writes them: lower case, no
 * trailing dot, so a lookup is a plain string compare. */
char *
entitle_host_norm(const char *h)
{
	char	*c = xstrdup(h);
	size_t	 n = strlen(c);

	for (char *p = c; *p != '\0'; p++)
		*p = (char)tolower((unsigned char)*p);
	if (n > 1 && c[n - 1] == '.')
		c[n - 1] = '\0';
	return c;
}

void
entitle_eff_clear(struct entitle_eff *eff)
{
	size_t	 i;

	for (i = 0; i < eff->ndatasets; i++)
		free(eff->datasets[i]);
	free(eff->datasets);
	for (i = 0; i < eff->nhosts; i++)
		free(eff->hosts[i]);
	free(eff->hosts);
	memset(eff, 0, sizeof(*eff));
}
