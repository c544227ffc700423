/*
 * handover.h: handover.c's one entry point, alone so that sbx-monitor,
 * which links libc alone, includes it without launchd.h (protobuf-c,
 * libevent).  The root side calls it once every process of a sandbox is
 * dead, before the scratch goes to gated.
 */
#ifndef SBX_LAUNCHD_HANDOVER_H
#define SBX_LAUNCHD_HANDOVER_H

#include <sys/types.h>

#include <stddef.h>

/* Give the declared outputs (names relative to the scratch directory
 * scratch, a descriptor) and the directories on their way to uid. */
void	 handover_outputs(int scratch, char *const *names, size_t n,
	    uid_t uid);

#endif
