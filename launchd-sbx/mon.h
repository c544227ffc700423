/*
 * mon.h: sbx-monitor's own structures, shared by its loop (monitor.c)
 * and its operations (mon_ops.c) and by nothing else; the wire itself is
 * monitor.h.  monitor.c reads, checks and dispatches; mon_ops.c acts and
 * fills an answer, and never calls back up.
 */
#ifndef SBX_LAUNCHD_MON_H
#define SBX_LAUNCHD_MON_H

#include <sys/types.h>

#include <stdint.h>

#include "launchd-sbx/monitor.h"

#define MON_NTIERS		4	/* tiers 1..3, as launchd.h's */
#define MON_ARGS_MAX		16	/* a runtime's global args */
/* Runtime commands running at once: at least the executions one launch
 * socket admits (FRAME_CONNS_DEFAULT), each with one command at a time,
 * so 200 in flight are not refused (128 refused 33 of 200). */
#define MON_CMDS_MAX		1024
#define MON_SLOTS_MAX		65536	/* = the sandbox groups at most */
#define MON_SCRATCH		"scratch"	/* launchd.h's LAUNCHD_SCRATCH */

/* A slot's state bits: what has been done to the id. */
#define ST_STAGED	0x01
#define ST_SEALED	0x02
#define ST_SPEC		0x04
#define ST_POOL		0x08	/* its SPEC had MON_SPEC_POOL */
#define ST_CREATE	0x10
#define ST_START	0x20
#define ST_HANDOVER	0x40
#define ST_DELETED	0x80	/* a DELETE of it exited 0 */
#define ST_DEAD		0x100	/* created, and its init reaped (or none);
				 * HANDOVER wants its cgroups empty too */

struct mon_tier {
	const char	*path;		/* NULL: not configured */
	const char	*name;		/* its state dir under run_dir/runtime */
	int		 flavor;	/* enum spec_flavor */
	const char	*args[MON_ARGS_MAX];
	size_t		 nargs;
};

struct mon_slot {
	char		 id[MON_ID_MAX + 1];
	uint32_t	 state;		/* 0: free */
	uint32_t	 gid, tier, scratch_mb;
	pid_t		 init;		/* from its pid file, until reaped */
	uint64_t	 gen;		/* tells a reused slot from its past */
};

/* A runtime command the launcher asked for, until it is reaped. */
struct mon_run {
	pid_t		 pid;		/* 0: free */
	uint32_t	 verb;
	size_t		 slot;
	uint64_t	 gen;
	uint64_t	 deadline;	/* monotonic ns; then SIGKILL */
	int		 killed;
};

struct mon {
	int		 sock, sigfd, runfd, cachefd;
	char		 rundir[1024];	/* canonical, from the descriptor */
	const char	*init, *cgparent;
	uid_t		 uid, gate_uid;
	gid_t		 gid, gid_first;
	uint32_t	 gid_count;
	struct mon_tier	 tiers[MON_NTIERS];
	struct mon_slot	*slots;		/* gid_count of them */
	struct mon_run	 runs[MON_CMDS_MAX];
	uint64_t	 gen;
};

/*
 * One request as an operation sees it (its body, checked for size, and
 * its descriptors, which the loop closes after), and its answer: MON_OK
 * {value} (with fd, which the loop sends and closes) when err is 0,
 * else MON_ERR {err, msg}.
 */
struct mon_req {
	uint32_t	 type;
	const void	*body;
	const int	*fds;
	int		 nfds;
	int32_t		 err;
	char		 msg[MON_ERR_MAX];
	int64_t		 value;
	int		 fd;
};

/* An operation returns MON_ANSWERED (the answer is in the request) or
 * MON_VIOLATION (the reason in msg: the monitor dies). */
#define MON_ANSWERED	0
#define MON_VIOLATION	(-1)
typedef int mon_op(struct mon *, struct mon_slot *, struct mon_req *);

/* mon_ops.c */
mon_op	 mon_stage, mon_seal, mon_spec, mon_cmd, mon_pid, mon_handover;
mon_op	 mon_cg_remove, mon_unstage;
int	 mon_id_ok(const char id[MON_ID_MAX + 1]);
void	 mon_reap_leftovers(struct mon *);
void	 mon_reaped(struct mon *, pid_t, int);
int	 mon_timeout(const struct mon *);
void	 mon_expire(struct mon *);
int	 mon_kill_all(const struct mon *, const char *);
void	 mon_teardown(struct mon *);

#endif
