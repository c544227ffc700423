/*
 * handoff.h: the bridge's descriptor handoff on an egress channel, shared
 * by sbx-init (sender) and egressd (receiver, egressd/proxy_handoff.c).
 *
 * The first connection sbx-init makes to the channel, before the code
 * starts, may open with HANDOFF_HELLO.  egressd answers HANDOFF_YES if
 * it takes descriptors on it (or HANDOFF_NO, or closes), and from then
 * on each HANDOFF_CONN byte carries exactly one descriptor (SCM_RIGHTS):
 * a client TCP connection sbx-init accepted on 127.0.0.1 and no longer
 * holds.  egressd then serves that connection itself, and the bridge
 * drops out of the data path.  No HTTP request begins with a NUL byte,
 * so the hello cannot be mistaken for one.
 */
#ifndef SBX_HANDOFF_H
#define SBX_HANDOFF_H

#define HANDOFF_HELLO	0x00
#define HANDOFF_YES	'Y'
#define HANDOFF_NO	'N'
#define HANDOFF_CONN	0x01

#endif
