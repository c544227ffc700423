/*
 * monitor.h: the wire between launchd-sbx's two processes.
 *
 * launchd-sbx is split along the privilege line, the way OpenSSH's
 * privsep monitor works.  sbx-monitor, the only part that keeps root,
 * mounts, spawns the OCI runtime with a fixed argument vector, renders a
 * sandbox's runtime spec from plain parameters, and reads, shares and
 * removes cgroups; it links libc alone and parses no protobuf, YAML, JSON
 * or SQLite.  The launcher (launchd-sbx proper, under its own user) does
 * everything else and asks the monitor, over one SOCK_SEQPACKET socket,
 * for the rest.
 *
 * Every packet is a struct mon_hdr followed by exactly hdr.len bytes of
 * the body its type names; a request's body has a fixed size (each one
 * below), and descriptors ride only on the requests that take them
 * (SCM_RIGHTS).  The monitor answers each request with MON_OK or MON_ERR,
 * in order, and sends MON_EXIT events in between whenever one of its
 * children (a runtime command, or a container's init, which it reaps as
 * a child subreaper) has ended.  Anything else -- an unknown type, a size
 * that is not the type's, a request out of its states, a second one
 * where once is allowed, a name that is not a container id, a gid outside
 * the sandbox groups, descriptors where none belong -- and the monitor
 * kills every container's init it started, and exits 2: a launcher that
 * sends such a thing is broken or compromised, and nothing it asks for
 * is done after that.  On EOF the monitor deletes every container and
 * staging directory it made, and exits 0.
 *
 * Container ids (MON_ID_MAX bytes at most, [A-Za-z0-9_.-], not starting
 * with '.') name run_dir/x-ID, the cgroup cgroup_parent/ID and the
 * runtime's container; every path the monitor touches is one of those,
 * opened by descriptor beneath run_dir (or the image cache), never a
 * path the launcher sent.  run_dir is root's and closed to other users
 * (root:<the launcher's group> 0710; the monitor refuses one that others
 * may search, or its group write): x-ID is 0711 and sealed files are
 * 0444, so run_dir alone keeps them from every execution's in/ and code/.
 */
#ifndef SBX_LAUNCHD_MONITOR_H
#define SBX_LAUNCHD_MONITOR_H

#include <stdint.h>

#define MON_MAGIC		0x73627831u	/* "sbx1" */
#define MON_ID_MAX		63		/* a container id, bytes */
#define MON_TEXT_MAX		256		/* a spec text field, bytes */
#define MON_IMAGE_MAX		128		/* a rootfs name under the cache */
#define MON_OUTPUTS_MAX		64		/* names in one HANDOVER */
#define MON_OUTPUT_MAX		255		/* one output name, bytes */
#define MON_ERR_MAX		200		/* an error's sentence */
#define MON_FDS_MAX		2
#define MON_CMD_SECONDS		30		/* then the command is killed */

struct mon_hdr {
	uint32_t	magic;		/* MON_MAGIC */
	uint32_t	type;		/* enum mon_type */
	uint32_t	len;		/* bytes after the header */
	uint32_t	pad;		/* 0 */
};

enum mon_type {
	/* launcher -> monitor: requests */
	MON_STAGE = 1,	/* struct mon_stage */
	MON_SEAL,	/* struct mon_id */
	MON_SPEC,	/* struct mon_spec */
	MON_CMD,	/* struct mon_cmd, + 0 or 2 descriptors (CREATE) */
	MON_SIGKILL,	/* struct mon_pid */
	MON_RENICE,	/* struct mon_pid */
	MON_HANDOVER,	/* struct mon_handover */
	MON_CG_REMOVE,	/* struct mon_id */
	MON_UNSTAGE,	/* struct mon_id */
	/* monitor -> launcher */
	MON_READY = 100, /* no body: start-up reaping done, serving */
	MON_OK,		/* struct mon_ok (+ 1 descriptor after HANDOVER) */
	MON_ERR,	/* struct mon_err */
	MON_EXIT,	/* struct mon_exit: an event, not an answer */
};

/* A container id, NUL-terminated and NUL-padded. */
struct mon_id {
	char		id[MON_ID_MAX + 1];
};

struct mon_pid {
	int32_t		pid;		/* a live, unreaped child of the
					 * monitor's: a runtime command it
					 * spawned or an init it adopted */
	uint32_t	pad;
};
/* One the monitor has reaped already, its MON_EXIT on the way (the
 * launcher has not read it yet), is answered MON_ERR ESRCH. */

/*
 * STAGE: make run_dir/x-ID (root, 0711) with in/, code/ and run/ in it
 * (the launcher's, 0700, 0700 and 0755) and scratch/, a tmpfs of
 * scratch_mb MiB (nosuid, nodev, noexec; owner the sandbox user, group
 * gid, 0755).  Once per id.  gid must be one of the sandbox groups; one
 * another staged id holds is refused with MON_ERR EBUSY (sbx-monitor: a
 * group is one sandbox's from STAGE to UNSTAGE, ident.c's rule).
 */
struct mon_stage {
	char		id[MON_ID_MAX + 1];
	uint32_t	scratch_mb;	/* 1 .. 1048576 */
	uint32_t	gid;
};

/*
 * SEAL: once; for a launch after STAGE and before SPEC, for a pool entry
 * (its SPEC had MON_SPEC_POOL) after SPEC, when the entry is taken and
 * its in/ and code/ filled.  in/ and code/ become
 * root's (0555 directories, 0444 files; each checked by descriptor: a
 * directory or a regular file with one link, nothing else), so nothing
 * the launcher does after it changes what the sandbox sees.  When
 * run/egress.sock exists (a socket the launcher bound), it becomes
 * root:gid 0660, and run/ca.pem root:gid 0440; for a cold launch (no
 * pool spec) both move up into x-ID itself, which only root writes.
 */

/*
 * SPEC: render config.json into x-ID from these parameters (spec.h's
 * struct spec_params; the monitor fills every path itself), once, after
 * SEAL for a launch, after STAGE for a pool entry.  Text fields are
 * NUL-terminated within their arrays; spec_render() checks them.
 */
enum mon_spec_flags {
	MON_SPEC_EGRESS = 1 << 0,	/* bind the egress socket */
	MON_SPEC_CA = 1 << 1,		/* bind the per-task CA */
	MON_SPEC_POOL = 1 << 2,		/* a pool entry's spec */
	MON_SPEC_WARM_PYTHON = 1 << 3,	/* sbx-init -w python3 */
	MON_SPEC_NO_ANNOTATIONS = 1 << 4,
};

struct mon_spec {
	char		id[MON_ID_MAX + 1];
	uint32_t	tier;		/* 1 .. LAUNCHD_NTIERS-1, configured */
	uint32_t	flags;		/* enum mon_spec_flags */
	uint32_t	policy_version;
	uint32_t	cpus_milli, memory_mb, pids, scratch_mb;
	uint32_t	gid;		/* as at STAGE */
	char		image[MON_IMAGE_MAX];	/* the rootfs dir under the
						 * cache, e.g. <hex>/rootfs */
	char		policy_name[MON_TEXT_MAX];
	char		policy_hash[MON_TEXT_MAX];
	char		task_id[MON_TEXT_MAX];
	char		execution_id[MON_TEXT_MAX];
	char		interp[MON_TEXT_MAX];	/* argv[0] */
	char		prog[MON_TEXT_MAX];	/* argv[1], e.g. /code/x.py */
	char		pool_key[MON_TEXT_MAX];
	char		warm_imports[MON_TEXT_MAX];	/* sbx-init -m, with
							 * WARM_PYTHON; ""
							 * for none */
};

/*
 * CMD: run the tier's runtime, "--root run_dir/runtime/<tier>" and one
 * fixed verb on the id:
 *   CREATE  create --bundle x-ID --pid-file x-ID/pid ID   (after SPEC,
 *           once; the two descriptors, when given, become the command's
 *           and so the init's stdout and stderr; its exit with 0 shares
 *           the container's cgroups with readers first -- 0755 in every
 *           hierarchy, memory and cpuacct too: the launcher reads the
 *           usage there -- and leaves x-ID/pid, the init's pid, which
 *           the launcher reads, readable (0644))
 *   START   start ID            (after CREATE, once)
 *   RUN     run --detach --bundle x-ID --pid-file x-ID/pid ID   (a
 *           launch's CREATE and START in one runtime process: after
 *           SPEC, once, instead of both; the launcher sends it for a
 *           cold launch under the runc flavor.  The init runs the code
 *           before the command exits, so the container's cgroup
 *           directories are made 0755 in the shared hierarchies, and the
 *           parent's opened, before the runtime starts: egressd can read
 *           cgroup.procs when the code's first connection comes; the
 *           runtime still writes every limit into them before the init
 *           runs the code.  Its exit is handled as CREATE's, and the
 *           init may exit first)
 *   KILL    kill --all ID KILL  (after CREATE or RUN)
 *   DELETE  delete --force ID   (after CREATE or RUN)
 * MON_OK carries the command's pid; its MON_EXIT follows.  A command that
 * runs over MON_CMD_SECONDS is killed.  tier must be the one the id's
 * SPEC named; nice is 0 .. 19 for every verb (sbx-monitor).
 */
enum mon_verb {
	MON_CREATE = 1,
	MON_START,
	MON_KILL,
	MON_DELETE,
	MON_RUN,
};

struct mon_cmd {
	char		id[MON_ID_MAX + 1];
	uint32_t	tier;
	uint32_t	verb;		/* enum mon_verb */
	int32_t		nice;		/* CREATE, RUN: 0 .. 19, the
					 * command's and the init's niceness */
	uint32_t	pad;
};

/*
 * HANDOVER: once every process of the container is dead (after CREATE,
 * and after the MON_EXIT of its init -- the pid in x-ID/pid -- or of a
 * CREATE that left none; sbx-monitor), once: give the declared outputs
 * in scratch/ to gated's user (handover.c) and answer with a read-only
 * descriptor of scratch/.  A process still in one of the container's
 * cgroups (an init whose CREATE was killed before the runtime wrote the
 * pid file) is answered MON_ERR EBUSY, and HANDOVER may come again.
 */
struct mon_handover {
	char		id[MON_ID_MAX + 1];
	uint32_t	n;		/* names used, 0 .. MON_OUTPUTS_MAX */
	uint32_t	pad;
	char		names[MON_OUTPUTS_MAX][MON_OUTPUT_MAX + 1];
};

/*
 * CG_REMOVE: rmdir cgroup_parent/ID in every controller.  UNSTAGE: kill
 * the id's runtime commands still running (their MON_EXIT follows), delete
 * a container created and not deleted, kill every process in its
 * cgroups, remove them (a busy one is retried for half a second, then
 * logged and left to the next start's reaping: a create killed before
 * the runtime wrote its state leaves cgroups its delete knows nothing
 * of), then unmount and remove x-ID and free the id and its group
 * (it may be staged again after it).  A container that cannot be emptied
 * is answered MON_ERR EBUSY and keeps both; UNSTAGE may come again.
 */

struct mon_ok {
	int64_t		value;		/* CMD: the pid; otherwise 0 */
};

struct mon_err {
	int32_t		err;		/* an errno */
	char		msg[MON_ERR_MAX];
};

struct mon_exit {
	int32_t		pid;
	int32_t		status;		/* as waitpid() gives it */
};

#endif
