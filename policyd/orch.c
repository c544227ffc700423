/*
 * orch.c: orchestrators scoped to tenants.  policyd.yaml's orchestrators:
 * binds each orchestrator identity, a user or a group as the socket's
 * allow list names peers, to the tenants it may act for.  A peer's scope
 * is the union over every entry that names its uid, its primary gid or
 * one of its supplementary gids, as the kernel captured them when it
 * connected (SO_PEERCRED, SO_PEERGROUPS): a group membership changed
 * later counts from the peer's next login and connection.  Without
 * orchestrators: every peer the socket admits acts for every tenant, as
 * before; with it, a peer no entry names acts for none.  control.c
 * applies the scope to each request of the orchestrator socket.
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <stdlib.h>
#include <string.h>

#include "peer.h"
#include "util.h"
#include "policyd.h"

void
orch_scope_of(const struct policyd_conf *pc, int fd, struct orch_scope *s)
{
	memset(s, 0, sizeof(*s));
	if (!pc->orchs_set)
		return;
	s->set = 1;
	if (fd == -1)
		return;
	for (size_t i = 0; i < pc->norchs; i++) {
		const struct policyd_orch	*o = &pc->orchs[i];

		/* -1 (credentials unreadable) matches nothing. */
		if (peer_allowed(fd, &o->who, NULL) != 1)
			continue;
		s->bound = 1;
		if (o->all)
			s->all = 1;
		s->tenants = xreallocarray(s->tenants, s->ntenants +
		    o->ntenants + 1, sizeof(*s->tenants));
		for (size_t j = 0; j < o->ntenants; j++)
			s->tenants[s->ntenants++] = o->tenants[j];
	}
}

void
orch_scope_clear(struct orch_scope *s)
{
	free(s->tenants);
	memset(s, 0, sizeof(*s));
}

int
orch_may(const struct orch_scope *s, const char *tenant)
{
	if (!s->set || s->all)
		return 1;
	if (tenant == NULL || *tenant == '\0')
		return 0;
	for (size_t i = 0; i < s->ntenants; i++)
		if (strcmp(s->tenants[i], tenant) == 0)
			return 1;
	return 0;
}
