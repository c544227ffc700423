/*
 * pool.c: pre-started sandboxes.  For each configured key (image, tier and
 * limits) launchd-sbx keeps `size` containers ready: created with the
 * runtime's create step and started, so that the namespaces, cgroups,
 * mounts and seccomp filter exist and sbx-init is PID 1 -- but no task's
 * program: sbx-init waits, blocked in open(2), on a FIFO in the entry's
 * run/ directory (sbx-init -a /run/sbx/pool/argv).  A launch whose spec
 * would differ from the entry's only in per-execution data takes an
 * entry, fills its staging (the entry's own in/, code/ and run/, bound into
 * the container when it was created: the egress channel's socket is bound
 * in run/ and its CA written there), records the launch, and
 * then writes the program, its arguments and the per-execution
 * environment (SBX_TASK_ID, SBX_EXECUTION_ID, SBX_POLICY_HASH) into the
 * FIFO, keeping its write end until sbx-init has read all of it: that is
 * the start (run.c: runsc's gofer opens the FIFO before sbx-init does).
 * The entry serves exactly that one execution and is deleted after it
 * like any other container, and a
 * replacement is made at once.  An entry is never handed to a second
 * execution, so nothing crosses between tasks or tenants: each has a fresh
 * /scratch, /in, /code and run/.  The FIFO is the launcher's and mode
 * 0644: the sandbox can read it (sbx-init runs as the sandbox user), never
 * write it, and once sbx-init has read its assignment nothing is written
 * again.  Everything root does for an entry is the monitor's: STAGE
 * (staging, scratch), SPEC (a pool entry's spec), CMD create and start
 * (at LAUNCHD_BG_NICE, or 0 when the key runs low: pool_nice), RENICE of
 * its init once it is ready, and at the
 * launch SEAL (run.c); their exits come back as MON_EXIT (pool_reaped).
 *
 * The key is the sha256 of the spec a launch would have with every
 * per-execution value replaced by a placeholder (pool_key), so everything
 * in the spec that depends on the policy -- limits, rlimits, mounts,
 * image, tier, whether there is an egress channel -- must match exactly;
 * the policy's identity (name, version, hash) is not in a pooled spec: its
 * annotations name the pool entry and key instead, and the audit record
 * of the launch ties the execution and its policy hash to that entry.
 * Entries exist for runc and runsc.  Under runsc the staging is served
 * by its gofer, which revalidates bind mounts (--file-access-mounts's
 * default, shared), so what a launch stages after the create is what
 * the sandbox sees; but the gofer refuses to open a host FIFO (EPERM)
 * unless runsc runs with --host-fifo=open, which the monitor adds to a
 * pool entry's create alone (mon_ops.c says why that opens nothing
 * else).
 *
 * Keys are configured (pool.keys), or, with only a global pool.size,
 * learned: a launch that finds no key teaches its own (image, tier and
 * limits copied from its policy), up to POOL_MAX_LEARNED keys, and the
 * launches after it with the same limits are served from the pool.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

#define POOL_MAX_FAILURES	3	/* then the key waits for a take */
#define POOL_MAX_LEARNED	16	/* keys learned from launches */

enum pool_state {
	POOL_CREATING,		/* <runtime> create running */
	POOL_STARTING,		/* <runtime> start running */
	POOL_READY,		/* sbx-init waits on its FIFO */
};

struct pool_entry {
	struct pool_entry	*next;
	size_t			 k;		/* its key */
	enum pool_state		 state;
	char			 id[64];
	char			 dir[PATH_MAX];
	pid_t			 cmd_pid;	/* create, while creating */
	pid_t			 init_pid;
	int			 fd[2];		/* stdout, stderr read ends */
	gid_t			 gid;		/* its own group (ident.c) */
	int			 staged;	/* the monitor staged it */
	int			 created;	/* CREATE was accepted */
	uint64_t		 ready_ns;	/* when it became ready */
};

struct pool_keyrt {
	const struct launchd_pool_key	*conf;
	char				 key[65];	/* "" until known */
	int				 failures;
	int				 refused;	/* image refused: logged */
	int				 disabled;	/* no pool for the tier */
	struct launchd_pool_key		*own;		/* a learned key */
};

struct pool {
	struct event		*fill_ev;	/* pool_fill_soon */
	struct pool_keyrt	*keys;
	size_t			 nkeys;
	struct pool_entry	*entries;
	uint64_t		 seq;
	size_t			 nlearned;
};

/* The policy hash a placeholder spec carries. */
static const char pool_zero[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

int
pool_key(const struct spec_params *in, int tier, char key[65])
{
	char			*argv[] = { (char *)"pool", NULL };
	struct spec_params	 sp = *in;
	unsigned char		 md[32];
	char			 err[256], *s, t[32];
	size_t			 len;
	struct sha256		*ctx;
	int			 rc = -1;

	sp.policy_hash = pool_zero;
	sp.task_id = "pool";
	sp.execution_id = "pool";
	sp.in_dir = "/pool/in";
	sp.code_dir = "/pool/code";
	if (sp.scratch_dir != NULL)
		sp.scratch_dir = "/pool/scratch";
	if (sp.egress_sock != NULL)
		sp.egress_sock = "/pool/egress.sock";
	if (sp.ca_file != NULL)
		sp.ca_file = "/pool/ca.pem";
	sp.cgroups_path = "/pool";
	sp.gid = 0;
	sp.argv = argv;
	sp.pool = 0;
	/* The policy's identity: not part of what the sandbox is. */
	sp.no_annotations = 1;
	if ((s = spec_render(&sp, &len, err, sizeof(err))) == NULL)
		return -1;
	/* The tier too: two tiers' runtimes may read the same spec, and an
	 * entry of one must never serve the other. */
	bufprintf(t, sizeof(t), "sbx.tier %d\n", tier);
	if ((ctx = sha256_new()) != NULL) {
		if (sha256_update(ctx, s, len) == 0 &&
		    sha256_update(ctx, t, strlen(t)) == 0)
			rc = sha256_final(ctx, md);	/* frees ctx */
		else
			sha256_free(ctx);
		if (rc == 0)
			hex_encode(md, 32, key);
	}
	free(s);
	return rc;
}

static void
pool_entry_destroy(struct launchd *ld, struct pool_entry *e)
{
	char	 err[MON_ERR_MAX];
	pid_t	 pid;

	if (e->cmd_pid > 0) {
		(void)mon_client_sigkill(ld, e->cmd_pid);
		(void)mon_wait_exit(ld, e->cmd_pid, LAUNCHD_CMD_SECONDS);
	}
	/* Rare (a failed create, shutdown): done synchronously.  Its
	 * init's exit, if it comes after, belongs to no one. */
	if (e->created) {
		if ((pid = mon_client_cmd(ld, e->id,
		    ld->pool->keys[e->k].conf->tier, MON_DELETE, 0, -1, -1, err,
		    sizeof(err))) == -1)
			log_warnx("pool entry %s: delete: %s", e->id, err);
		else if (mon_wait_exit(ld, pid, LAUNCHD_CMD_SECONDS) != 0)
			log_debug("pool entry %s: delete did not succeed",
			    e->id);
	}
	/* Its cgroups go with the UNSTAGE, once the monitor has killed
	 * what ran in them: a create killed before the runtime wrote its
	 * state leaves an init there that the delete knows nothing of. */
	if (e->staged)
		(void)mon_client_unstage(ld, e->id);
	for (int i = 0; i < 2; i++)
		if (e->fd[i] != -1)
			close(e->fd[i]);
	if (e->gid != 0)
		ident_give(ld, e->gid);
	free(e);
}

static void
pool_unlink(struct pool *p, struct pool_entry *e)
{
	struct pool_entry	**pp;

	for (pp = &p->entries; *pp != NULL; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	e->next = NULL;
}

/* A text field of a MON_SPEC: 0, or -1 when it does not fit. */
static int
pool_text(char dst[MON_TEXT_MAX], const char *src)
{
	return bufprintf(dst, MON_TEXT_MAX, "%s", src) >= MON_TEXT_MAX ? -1 : 0;
}

/* What the monitor renders the entry's spec from: the key's limits and
 * pool_key's placeholders, as sp has them. */
static int
pool_mon_spec(struct launchd *ld, const struct pool_entry *e,
    const struct spec_params *sp, int tier, const char *hex,
    struct mon_spec *ms)
{
	memset(ms, 0, sizeof(*ms));
	bufprintf(ms->id, sizeof(ms->id), "%s", e->id);
	ms->tier = (uint32_t)tier;
	ms->flags = MON_SPEC_POOL |
	    (sp->pool_egress ? MON_SPEC_EGRESS | MON_SPEC_CA : 0) |
	    (ld->conf->pool_warm_python ? MON_SPEC_WARM_PYTHON : 0);
	ms->policy_version = sp->policy_version;
	ms->cpus_milli = sp->cpus_milli;
	ms->memory_mb = sp->memory_mb;
	ms->pids = sp->pids;
	ms->scratch_mb = sp->scratch_mb;
	ms->gid = (uint32_t)e->gid;
	if (bufprintf(ms->image, sizeof(ms->image), "%s/rootfs", hex) >=
	    (int)sizeof(ms->image) ||
	    pool_text(ms->policy_name, sp->policy_name) == -1 ||
	    pool_text(ms->policy_hash, sp->policy_hash) == -1 ||
	    pool_text(ms->task_id, sp->task_id) == -1 ||
	    pool_text(ms->execution_id, sp->execution_id) == -1 ||
	    pool_text(ms->interp, sp->argv[0]) == -1 ||
	    pool_text(ms->pool_key, sp->pool_key) == -1 ||
	    (sp->pool_warm_imports != NULL &&
	    pool_text(ms->warm_imports, sp->pool_warm_imports) == -1))
		return -1;
	return 0;
}

/*
 * The niceness of a refill's create and start: LAUNCHD_BG_NICE while a
 * quarter of the key's size or more is ready, so that refills yield to
 * the runs; 0 below that, because a launch that finds the key empty is
 * a cold launch, a whole create at niceness 0 on its own path (at
 * concurrency 20 those misses made p99: bench/README).  Either way the
 * entry's init is at 0 before any program runs in it (pool_reaped).
 * Always 0 under runsc, whose sandbox one RENICE cannot bring back.
 */
static int
pool_nice(const struct launchd *ld, size_t k)
{
	const struct pool	*p = ld->pool;
	size_t			 ready = 0;

	/* Under runsc the RENICE of the sandbox's pid reaches one thread
	 * of many, and not the gofer: the rest, and the task with them,
	 * would stay at LAUNCHD_BG_NICE.  Its entries start at 0. */
	if (ld->conf->runtimes[p->keys[k].conf->tier].flavor == SPEC_RUNSC)
		return 0;
	for (const struct pool_entry *e = p->entries; e != NULL; e = e->next)
		ready += e->k == k && e->state == POOL_READY;
	return ready * 4 < p->keys[k].conf->size ? 0 : LAUNCHD_BG_NICE;
}

static int
pool_create(struct launchd *ld, size_t k, const char *rootfs, const char *hex)
{
	struct pool			*p = ld->pool;
	struct pool_keyrt		*kr = &p->keys[k];
	const struct launchd_pool_key	*kc = kr->conf;
	const struct launchd_runtime	*rt = &ld->conf->runtimes[kc->tier];
	struct spec_params		 sp;
	struct mon_spec			 ms;
	struct pool_entry		*e;
	char				 in[PATH_MAX], code[PATH_MAX];
	char				 run[PATH_MAX], cg[PATH_MAX];
	char				 scratch[PATH_MAX], fifo[PATH_MAX];
	char				 err[1024];
	int				 egress = ld->conf->egress_socket != NULL;
	char				*argv[] = { (char *)"pool", NULL };
	int				 p1[2], p2[2];

	e = xcalloc(1, sizeof(*e));
	e->k = k;
	e->fd[0] = e->fd[1] = -1;
	bufprintf(e->id, sizeof(e->id), "pool-%ld-%llu", (long)getpid(),
	    (unsigned long long)++p->seq);
	bufprintf(e->dir, sizeof(e->dir), "%s/x-%s", ld->conf->run_dir, e->id);
	bufprintf(in, sizeof(in), "%s/in", e->dir);
	bufprintf(code, sizeof(code), "%s/code", e->dir);
	bufprintf(run, sizeof(run), "%s/run", e->dir);
	bufprintf(scratch, sizeof(scratch), "%s/%s", e->dir, LAUNCHD_SCRATCH);
	bufprintf(cg, sizeof(cg), "/%s/%s", ld->conf->cgroup_parent, e->id);
	bufprintf(fifo, sizeof(fifo), "%s/%s", run, POOL_ARGV);
	e->next = p->entries;
	p->entries = e;
	if (ident_take(ld, &e->gid) == -1) {
		e->gid = 0;
		log_warnx("pool entry %s: all %u sandbox groups are in use",
		    e->id, ld->conf->sandbox_gid_count);
		goto bad;
	}
	/* The staging and the entry's /scratch, a host tmpfs, as for a
	 * cold launch: the monitor's. */
	if (mon_client_stage(ld, e->id, kc->scratch_mb, e->gid, err,
	    sizeof(err)) == -1) {
		log_warnx("pool entry %s: staging: %s", e->id, err);
		goto bad;
	}
	e->staged = 1;
	/* run/ is ours: the sandbox may read the FIFO, never write it. */
	if (mkfifo(fifo, 0644) == -1 || chmod(fifo, 0644) == -1) {
		log_warn("pool entry %s: %s", e->id, fifo);
		goto bad;
	}

	/* The limits the key describes, as a policy would carry them, and
	 * the placeholders of pool_key for the rest. */
	memset(&sp, 0, sizeof(sp));
	sp.policy_name = "pool";
	sp.policy_version = 1;
	sp.cpus_milli = kc->cpus_milli;
	sp.memory_mb = kc->memory_mb;
	sp.pids = kc->pids;
	sp.scratch_mb = kc->scratch_mb;
	sp.policy_hash = pool_zero;
	sp.task_id = "pool";
	sp.execution_id = "pool";
	sp.rootfs = rootfs;
	sp.in_dir = in;
	sp.code_dir = code;
	sp.scratch_dir = scratch;
	sp.init_path = ld->conf->init;
	sp.cgroups_path = cg;
	sp.gid = e->gid;
	sp.argv = argv;
	sp.flavor = rt->flavor;
	if (egress) {
		sp.egress_sock = "/pool/egress.sock";
		sp.ca_file = "/pool/ca.pem";
	}
	{
		char	 got[65];

		if (pool_key(&sp, kc->tier, got) == -1) {
			log_warnx("pool key %zu: no spec for its limits", k);
			kr->disabled = 1;
			goto bad;
		}
		if (kr->key[0] == '\0')
			memcpy(kr->key, got, sizeof(kr->key));
		else if (strcmp(kr->key, got) != 0) {
			/* A learned key the pool cannot reproduce. */
			log_warnx("pool key %zu: entries would not match the "
			    "launches that taught it", k);
			kr->disabled = 1;
			goto bad;
		}
	}
	/*
	 * The entry's own spec: the program and the per-execution
	 * environment come through the FIFO at start, the egress socket and
	 * CA from its run/ (not bound one by one: they do not exist yet).
	 */
	sp.pool = 1;
	sp.pool_run = run;
	sp.pool_entry_id = e->id;
	sp.pool_key = kr->key;
	sp.pool_egress = egress;
	sp.pool_warm_python = ld->conf->pool_warm_python;
	sp.pool_warm_imports = ld->conf->pool_warm_imports;
	if (pool_mon_spec(ld, e, &sp, kc->tier, hex, &ms) == -1) {
		log_warnx("pool key %zu: its spec's fields do not fit", k);
		kr->disabled = 1;
		goto bad;
	}
	if (mon_client_spec(ld, &ms, err, sizeof(err)) == -1) {
		log_warnx("pool entry %s: %s", e->id, err);
		goto bad;
	}

	if (pipe2(p1, O_CLOEXEC) == -1)
		goto bad;
	if (pipe2(p2, O_CLOEXEC) == -1) {
		close(p1[0]);
		close(p1[1]);
		goto bad;
	}
	e->fd[0] = p1[0];
	e->fd[1] = p2[0];
	/* At LAUNCHD_BG_NICE, unless the key runs low: no launch waits
	 * for it. */
	e->cmd_pid = mon_client_cmd(ld, e->id, kc->tier, MON_CREATE,
	    pool_nice(ld, k), p1[1], p2[1], err, sizeof(err));
	close(p1[1]);
	close(p2[1]);
	if (e->cmd_pid == -1) {
		log_warnx("pool entry %s: create: %s", e->id, err);
		e->cmd_pid = 0;
		goto bad;
	}
	e->created = 1;
	e->state = POOL_CREATING;
	return 0;
bad:
	kr->failures++;
	pool_unlink(p, e);
	pool_entry_destroy(ld, e);
	return -1;
}

/*
 * Make what is missing, one entry a call: each is three synchronous
 * calls to sbx-monitor (STAGE, SPEC, CMD), a few milliseconds, and the
 * next waits for the fill event at LAUNCHD_PRIO_BG, after whatever else
 * the loop has ready (a burst of twenty refills made at once held the
 * executions' starts and results behind them: bench/README, item 3).
 * Without the event, all at once.
 */
void
pool_fill(struct launchd *ld)
{
	static const struct timeval	 now = { 0, 0 };
	struct pool	*p = ld->pool;
	char		 rootfs[PATH_MAX], hex[65], err[1024];
	const char	*rule;
	int		 made = 0;

	if (p == NULL)
		return;
	for (size_t k = 0; k < p->nkeys; k++) {
		struct pool_keyrt	*kr = &p->keys[k];
		size_t			 n = 0;
		int			 rc;

		if (kr->conf->size == 0 || kr->disabled ||
		    kr->failures >= POOL_MAX_FAILURES)
			continue;
		for (struct pool_entry *e = p->entries; e != NULL; e = e->next)
			if (e->k == k)
				n++;
		if (n >= kr->conf->size)
			continue;
		rc = image_rootfs(ld, kr->conf->image, rootfs, hex, &rule, err,
		    sizeof(err));
		if (rc == 1)
			continue;	/* called again when it is ready */
		if (rc == -1) {
			if (!kr->refused)
				log_warnx("pool key %zu: %s", k, err);
			kr->refused = 1;
			continue;
		}
		while (n < kr->conf->size &&
		    kr->failures < POOL_MAX_FAILURES) {
			if (made && p->fill_ev != NULL) {
				evtimer_add(p->fill_ev, &now);
				return;
			}
			made = 1;
			if (pool_create(ld, k, rootfs, hex) == 0)
				n++;
		}
	}
}

/* Pool entries only for an available runc or runsc runtime. */
static int
pool_tier_ok(const struct launchd *ld, int tier)
{
	const struct launchd_runtime	*rt;

	if (tier <= 0 || tier >= LAUNCHD_NTIERS)
		return 0;
	rt = &ld->conf->runtimes[tier];
	return rt->path != NULL && rt->available &&
	    (rt->flavor == SPEC_RUNC || rt->flavor == SPEC_RUNSC) &&
	    tier != SBX__V1__ISOLATION__ISOLATION_MICROVM;
}

void
pool_learn(struct launchd *ld, const Sbx__V1__Policy *pol, const char *key)
{
	struct pool		*p = ld->pool;
	struct launchd_pool_key	*kc;
	struct pool_keyrt	*kr;

	/* Configured keys say exactly what to keep: nothing is learned. */
	if (p == NULL || ld->conf->pool_size == 0 ||
	    ld->conf->npool_keys > 0 || pol->limits == NULL ||
	    !pool_tier_ok(ld, (int)pol->isolation))
		return;
	for (size_t k = 0; k < p->nkeys; k++)
		if (strcmp(p->keys[k].key, key) == 0)
			return;
	if (p->nlearned >= POOL_MAX_LEARNED)
		return;
	kc = xcalloc(1, sizeof(*kc));
	kc->image = xstrdup(pol->image);
	kc->tier = (int)pol->isolation;
	kc->cpus_milli = pol->limits->cpus_milli;
	kc->memory_mb = pol->limits->memory_mb;
	kc->pids = pol->limits->pids;
	kc->scratch_mb = pol->limits->scratch_mb;
	kc->size = ld->conf->pool_size;
	p->keys = xreallocarray(p->keys, p->nkeys + 1, sizeof(*p->keys));
	kr = &p->keys[p->nkeys++];
	memset(kr, 0, sizeof(*kr));
	kr->conf = kr->own = kc;
	/* The key the entries will have: it must be this launch's. */
	memcpy(kr->key, key, sizeof(kr->key));
	p->nlearned++;
	log_info("pool: learned key %.12s (%s, tier %s), %u entr%s", key,
	    kc->image, parse_tier_name(kc->tier), kc->size,
	    kc->size == 1 ? "y" : "ies");
	pool_fill(ld);
}

static void	pool_fill_cb(evutil_socket_t, short, void *);

void
pool_start(struct launchd *ld)
{
	const struct launchd_conf	*c = ld->conf;
	struct pool			*p;

	if (c->npool_keys == 0 && c->pool_size == 0)
		return;
	p = xcalloc(1, sizeof(*p));
	p->keys = xcalloc(c->npool_keys > 0 ? c->npool_keys : 1,
	    sizeof(*p->keys));
	for (size_t k = 0; k < c->npool_keys; k++) {
		const struct launchd_pool_key *kc = &c->pool_keys[k];

		p->keys[k].conf = kc;
		if (!pool_tier_ok(ld, kc->tier)) {
			log_warnx("pool key %zu (%s, tier %s): no pool for "
			    "this tier", k, kc->image,
			    parse_tier_name(kc->tier));
			p->keys[k].disabled = 1;
		}
	}
	p->nkeys = c->npool_keys;
	ld->pool = p;
	if ((p->fill_ev = evtimer_new(ld->base, pool_fill_cb, ld)) == NULL ||
	    event_priority_set(p->fill_ev, LAUNCHD_PRIO_BG) == -1)
		log_warnx("pool: no deferred refill; refilling at once");
	pool_fill(ld);
}

static void
pool_fill_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pool_fill(arg);
}

/*
 * Refill after the loop has done what is ready at a higher priority --
 * above all, written the result that freed the entry: the refill's work
 * (a tmpfs, the spec, a fork) must not sit between a result and its
 * orchestrator.
 */
void
pool_fill_soon(struct launchd *ld)
{
	struct timeval	 soon = { 0, 1000 };

	if (ld->pool == NULL)
		return;
	if (ld->pool->fill_ev == NULL) {
		pool_fill(ld);
		return;
	}
	/* A timer, not event_active: an active event of the same priority
	 * as the caller's could run in the same pass, before the write. */
	evtimer_add(ld->pool->fill_ev, &soon);
}

struct pool_entry *
pool_take(struct launchd *ld, const char *key)
{
	struct pool		*p = ld->pool;
	struct pool_entry	*e;

	if (p == NULL)
		return NULL;
	/*
	 * The one ready longest: an entry is ready when its runtime's start
	 * returns, but its warm interpreter may still be starting (under
	 * runsc's ptrace platform, 100 ms and more; seconds with
	 * warm_imports), and a launch given it would wait for that.  The
	 * newest entry is the least likely to be warm.
	 */
	e = NULL;
	for (struct pool_entry *x = p->entries; x != NULL; x = x->next)
		if (x->state == POOL_READY &&
		    strcmp(p->keys[x->k].key, key) == 0 &&
		    (e == NULL || x->ready_ns < e->ready_ns))
			e = x;
	if (e == NULL) {
		/* A miss on a known key: give a failing key another go. */
		for (size_t k = 0; k < p->nkeys; k++)
			if (strcmp(p->keys[k].key, key) == 0 &&
			    p->keys[k].failures >= POOL_MAX_FAILURES) {
				p->keys[k].failures = 0;
				pool_fill(ld);
			}
		return NULL;
	}
	pool_unlink(p, e);
	return e;
}

const char *
pool_entry_id(const struct pool_entry *e)
{
	return e->id;
}

const char *
pool_entry_dir(const struct pool_entry *e)
{
	return e->dir;
}

pid_t
pool_entry_pid(const struct pool_entry *e)
{
	return e->init_pid;
}

void
pool_entry_fds(struct pool_entry *e, int *out, int *err)
{
	*out = e->fd[0];
	*err = e->fd[1];
	e->fd[0] = e->fd[1] = -1;
}

gid_t
pool_entry_take_gid(struct pool_entry *e)
{
	gid_t	 g = e->gid;

	e->gid = 0;
	return g;
}

void
pool_entry_free(struct pool_entry *e)
{
	for (int i = 0; i < 2; i++)
		if (e->fd[i] != -1)
			close(e->fd[i]);
	free(e);
}

/* A pool entry that cannot become ready: count it against its key, log
 * what the runtime said, and make another. */
static void
pool_entry_failed(struct launchd *ld, struct pool_entry *e, const char *what,
    int status)
{
	char	 msg[512];
	ssize_t	 n;

	fcntl(e->fd[1], F_SETFL, O_NONBLOCK);
	n = read(e->fd[1], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	log_warnx("pool entry %s: %s failed (status %d): %s", e->id, what,
	    status, msg);
	ld->pool->keys[e->k].failures++;
	pool_unlink(ld->pool, e);
	pool_entry_destroy(ld, e);
	pool_fill(ld);
}

int
pool_reaped(struct launchd *ld, pid_t pid, int status)
{
	struct pool			*p = ld->pool;
	struct pool_entry		*e;
	char				 path[PATH_MAX], err[MON_ERR_MAX], *s;
	long				 v = -1;

	if (p == NULL)
		return 0;
	for (e = p->entries; e != NULL; e = e->next)
		if ((e->state != POOL_READY && e->cmd_pid == pid) ||
		    (e->state != POOL_CREATING && e->init_pid == pid))
			break;
	if (e == NULL)
		return 0;
	if (e->init_pid == pid) {
		/* Its init died before any launch: replace it. */
		log_warnx("pool entry %s: init exited (status 0x%x)", e->id,
		    status);
		e->init_pid = 0;
		pool_unlink(p, e);
		pool_entry_destroy(ld, e);
		pool_fill(ld);
		return 1;
	}
	e->cmd_pid = 0;
	if (e->state == POOL_STARTING) {
		if (status != 0) {
			pool_entry_failed(ld, e, "start", status);
			return 1;
		}
		/* Created at LAUNCHD_BG_NICE: its init (sbx-init, alone in
		 * it) gets the normal priority back now, and the program it
		 * starts inherits that. */
		if (mon_client_renice(ld, e->init_pid) == -1) {
			pool_entry_failed(ld, e, "renice", -1);
			return 1;
		}
		e->state = POOL_READY;
		e->ready_ns = mono_ns();
		p->keys[e->k].failures = 0;
		log_debug("pool entry %s ready (key %.12s, init %ld)", e->id,
		    p->keys[e->k].key, (long)e->init_pid);
		return 1;
	}
	bufprintf(path, sizeof(path), "%s/pid", e->dir);
	if (status == 0 && (s = read_file(path, 64, NULL)) != NULL) {
		v = strtol(s, NULL, 10);
		free(s);
	}
	if (v <= 1) {
		pool_entry_failed(ld, e, "create", status);
		return 1;
	}
	e->init_pid = (pid_t)v;
	/* Start it now: sbx-init becomes PID 1 and waits on its FIFO, so
	 * that a launch pays for neither step. */
	if ((e->cmd_pid = mon_client_cmd(ld, e->id, p->keys[e->k].conf->tier,
	    MON_START, pool_nice(ld, e->k), -1, -1, err, sizeof(err))) == -1) {
		log_warnx("pool entry %s: start: %s", e->id, err);
		e->cmd_pid = 0;
		pool_entry_failed(ld, e, "start", -1);
		return 1;
	}
	e->state = POOL_STARTING;
	return 1;
}

size_t
pool_ready(const struct launchd *ld)
{
	size_t	 n = 0;

	if (ld->pool == NULL)
		return 0;
	for (const struct pool_entry *e = ld->pool->entries; e != NULL;
	    e = e->next)
		n += e->state == POOL_READY;
	return n;
}

void
pool_stop(struct launchd *ld)
{
	struct pool		*p = ld->pool;
	struct pool_entry	*e;

	if (p == NULL)
		return;
	while ((e = p->entries) != NULL) {
		p->entries = e->next;
		if (e->init_pid > 0)
			(void)mon_client_sigkill(ld, e->init_pid);
		pool_entry_destroy(ld, e);
	}
	for (size_t k = 0; k < p->nkeys; k++)
		if (p->keys[k].own != NULL) {
			free(p->keys[k].own->image);
			free(p->keys[k].own);
		}
	free(p->keys);
	if (p->fill_ev != NULL)
		event_free(p->fill_ev);
	free(p);
	ld->pool = NULL;
}
