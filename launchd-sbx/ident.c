/*
 * ident.c: the sandboxes' own groups.  Every sandbox runs as uid 65534
 * with a group of sandbox_groups that no other sandbox and no host user
 * has, from its creation to its cleanup.  That group is what keeps other
 * host users out of it: the kernel lets a process ptrace another, read its
 * /proc/PID/{root,environ,mem} or set its limits only when their uids
 * *and* gids match, so a host user that happens to be uid 65534 (nobody)
 * can no longer reach into a sandbox; and the execution's egress socket
 * is root's and the group's, mode 0660, so only the sandbox can connect
 * (invariant 11).  A group is handed out again only after every other free
 * one was (a rotating cursor), so a late straggler of a finished sandbox
 * never meets a new one under the same group.
 */
#include <sys/types.h>

#include <stdint.h>
#include <stdlib.h>

#include "log.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

void
ident_init(struct launchd *ld)
{
	ld->gid_used = xcalloc((ld->conf->sandbox_gid_count + 7) / 8, 1);
	ld->gid_next = 0;
	ld->gid_held = 0;
}

void
ident_free(struct launchd *ld)
{
	free(ld->gid_used);
	ld->gid_used = NULL;
}

int
ident_take(struct launchd *ld, gid_t *gid)
{
	uint32_t	 n = ld->conf->sandbox_gid_count, i, k;

	for (i = 0; i < n; i++) {
		k = (ld->gid_next + i) % n;
		if (ld->gid_used[k / 8] & (1u << (k % 8)))
			continue;
		ld->gid_used[k / 8] |= (uint8_t)(1u << (k % 8));
		ld->gid_next = (k + 1) % n;
		ld->gid_held++;
		*gid = ld->conf->sandbox_gid_first + (gid_t)k;
		return 0;
	}
	return -1;
}

void
ident_give(struct launchd *ld, gid_t gid)
{
	uint32_t	 k;

	if (gid < ld->conf->sandbox_gid_first ||
	    gid - ld->conf->sandbox_gid_first >= ld->conf->sandbox_gid_count)
		return;
	k = (uint32_t)(gid - ld->conf->sandbox_gid_first);
	if (!(ld->gid_used[k / 8] & (1u << (k % 8)))) {
		log_warnx("sandbox group %lu released twice", (unsigned long)gid);
		return;
	}
	ld->gid_used[k / 8] &= (uint8_t)~(1u << (k % 8));
	ld->gid_held--;
}

size_t
ident_held(const struct launchd *ld)
{
	return ld->gid_held;
}
