/*
 * commit.c: the group commit, below control.c and launch.c, which hold
 * here what they must not acknowledge yet, and capability.c, which drains
 * it before it writes.
 *
 * The invariant it upholds: nothing is acknowledged before it is on disk.
 * A compile adds its records to the store's open batch, and its reply is
 * packed at once but held here.  When the store's writer thread is idle
 * it takes the open batch at once and commits it (one fsync) while the
 * loop goes on compiling into the next batch, so batches grow with the
 * load.  When the writer is done (seen at the next compile, or by its
 * wake-up, whichever comes first), the held replies of that batch go out
 * -- or, if the commit failed, every one of those clients gets
 * ERROR_INTERNAL instead and nothing is acknowledged.  Every other
 * request first drains both batches (commit_flush(): waits for the one in
 * flight, commits the open one), so each connection still gets its
 * replies in order and reads see every acknowledged record.
 *
 * What is held is a packed reply, or a call (a run's launch, launch.c)
 * made when the batch has settled instead of a reply: so this file calls
 * nothing above it.
 */
#include <stdlib.h>

#include <event2/event.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "policyd.h"

struct held {
	void			(*done)(void *, int);	/* or NULL: a reply */
	void			*arg;
	struct frame_conn	*conn;
	uint8_t			*buf;
	size_t			 len;
	uint64_t		 request_id;
	enum held_kind		 kind;
	const char		*rule;		/* HELD_DENIAL */
	int			 recorded;	/* true only if committed */
};

/* The replies that wait for one batch. */
struct held_list {
	struct held		*v;
	size_t			 n;
	size_t			 cap;
};

struct commit {
	struct policyd		*pd;
	struct event		*done_ev;	/* the writer has finished */
	struct held_list	 open;		/* for the store's open batch */
	struct held_list	 flight;	/* for the batch in flight */
};

static void	commit_start(struct commit *);

struct commit *
commit_new(struct policyd *pd)
{
	struct commit	*cm;

	cm = xcalloc(1, sizeof(*cm));
	cm->pd = pd;
	return cm;
}

void
commit_free(struct commit *cm)
{
	if (cm == NULL)
		return;
	if (cm->done_ev != NULL)
		event_free(cm->done_ev);
	free(cm->open.v);
	free(cm->flight.v);
	free(cm);
}

void
commit_hold_cb(struct commit *cm, struct frame_conn *c,
    const Sbx__V1__Envelope *env, enum held_kind kind, const char *rule,
    int recorded, void (*done)(void *, int), void *arg, uint64_t request_id)
{
	struct held_list	*l = &cm->open;
	struct held		*h;
	uint8_t			*buf = NULL;
	size_t			 len = 0;

	if (env != NULL && (buf = frame_pack(env, &len)) == NULL) {
		/* Still wait for the commit: an error sent now could
		 * overtake this client's earlier held replies. */
		Sbx__V1__Envelope	e;
		Sbx__V1__Error		err;

		sbx__v1__error__init(&err);
		err.code = SBX__V1__ERROR_CODE__ERROR_INTERNAL;
		err.message = (char *)"reply cannot be encoded";
		frame_env_init(&e, env->request_id);
		e.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
		e.error = &err;
		if ((buf = frame_pack(&e, &len)) == NULL)
			fatalx("cannot encode an error reply");
		kind = HELD_OTHER;
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = xreallocarray(l->v, l->cap, sizeof(*l->v));
	}
	h = &l->v[l->n++];
	h->done = done;
	h->arg = arg;
	h->conn = c;
	h->buf = buf;
	h->len = len;
	h->request_id = request_id;
	h->kind = kind;
	h->rule = rule;
	h->recorded = recorded;
	frame_conn_hold(c);
	/* An idle writer takes the batch at once: what arrives while it
	 * commits forms the next one, so batches grow with the load. */
	commit_kick(cm);
}

void
commit_hold(struct commit *cm, struct frame_conn *c,
    const Sbx__V1__Envelope *env, enum held_kind kind, const char *rule,
    int recorded)
{
	commit_hold_cb(cm, c, env, kind, rule, recorded, NULL, NULL,
	    env->request_id);
}

/*
 * Send the replies held for a batch that has committed (ok) or rolled
 * back.  A reply that recorded nothing does not depend on the outcome.
 * A held call goes where its reply would have: done(arg, 1) where that
 * would have gone out, done(arg, 0) after the client got the error.
 */
static void
commit_release(struct commit *cm, struct held_list *l, int ok)
{
	struct policyd		*pd = cm->pd;
	struct held_list	 take = *l;

	/* Take the list first: a send can run callbacks. */
	l->v = NULL;
	l->n = l->cap = 0;
	if (!ok)
		log_warnx("policyd.db: batch of %zu not committed; every "
		    "waiting client gets an error", take.n);
	for (size_t i = 0; i < take.n; i++) {
		struct held *h = &take.v[i];

		if (ok || !h->recorded) {
			if (h->kind == HELD_EXECUTION) {
				pd->metrics.compiles++;
				pd->metrics.executions++;
			} else if (h->kind == HELD_DENIAL) {
				pd->metrics.compiles++;
				if (h->rule != NULL)
					compile_count_denial(&pd->metrics,
					    h->rule);
			}
			if (h->done != NULL)
				h->done(h->arg, 1);
			else
				frame_conn_send_packed(h->conn, h->buf,
				    h->len);
		} else {
			frame_conn_send_error(h->conn, h->request_id,
			    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
			    "policyd.db: the record could not be committed; "
			    "nothing was done");
			if (h->done != NULL)
				h->done(h->arg, 0);
		}
		free(h->buf);
		frame_conn_release(h->conn);
	}
	/* Keep whichever array is larger for the next batch. */
	if (l->v == NULL) {
		take.n = 0;
		*l = take;
	} else
		free(take.v);
}

static void
commit_committed(struct commit *cm, int ok)
{
	if (ok)
		cm->pd->metrics.commits++;
}

static void
commit_swap(struct held_list *a, struct held_list *b)
{
	struct held_list	 t = *a;

	*a = *b;
	*b = t;
}

/*
 * A batch the writer has finished (finished, ok its result): its records
 * are settled and its replies taken out; what arrived meanwhile is the
 * next batch, and the writer starts on it before we spend time on the
 * replies, which go out in batch order.
 */
static void
commit_settle(struct commit *cm, int finished, int ok)
{
	struct held_list	 done = { NULL, 0, 0 };

	if (finished) {
		commit_committed(cm, ok);
		commit_swap(&done, &cm->flight);
	}
	commit_start(cm);
	if (done.n > 0)
		commit_release(cm, &done, ok);
	free(done.v);
}

static void
commit_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct commit		*cm = arg;
	int			 ok = 0, finished;

	(void)fd;
	(void)what;
	finished = store_reap(cm->pd->store, &ok) == 1;
	commit_settle(cm, finished, ok);
}

/* Listen for the writer thread, once the store exists.  -1 if we cannot:
 * then batches commit on the loop's own thread. */
static int
commit_watch_writer(struct commit *cm)
{
	int	 fd;

	if (cm->done_ev != NULL)
		return 0;
	if ((fd = store_done_fd(cm->pd->store)) == -1)
		return -1;
	if ((cm->done_ev = event_new(cm->pd->base, fd, EV_READ | EV_PERSIST,
	    commit_done_cb, cm)) == NULL)
		return -1;
	if (event_add(cm->done_ev, NULL) == -1) {
		event_free(cm->done_ev);
		cm->done_ev = NULL;
		return -1;
	}
	return 0;
}

/*
 * Called after every held reply (commit_hold_cb).  The writer's wake-up
 * (commit_done_cb) is read only between passes of the loop, and a pass
 * may hold a compile for every connection that had a request, each with
 * its signature: the writer would idle that long with a batch waiting.
 * So a batch the writer has finished is settled here, at the next
 * compile, and the writer takes the next batch at once.  A reply still
 * goes out only once the writer's COMMIT of its records has returned
 * (store_poll sees the writer's result), and in batch order.
 */
void
commit_kick(struct commit *cm)
{
	struct store		*s = cm->pd->store;
	int			 ok = 0, finished;

	if (s == NULL)
		return;
	finished = store_busy(s) && store_poll(s, &ok) == 1;
	commit_settle(cm, finished, ok);
}

static void
commit_start(struct commit *cm)
{
	struct store	*s = cm->pd->store;
	int		 ok;

	/* One batch in flight at a time; its done event kicks again. */
	if (s == NULL || store_busy(s))
		return;
	if (!store_in_batch(s)) {
		/* Only replies that recorded nothing: nothing to wait for. */
		if (cm->open.n > 0)
			commit_release(cm, &cm->open, 1);
		return;
	}
	commit_swap(&cm->open, &cm->flight);
	if (commit_watch_writer(cm) == 0 && store_submit(s) == 1)
		return;
	log_warnx("policyd.db: no writer thread; committing in the loop");
	ok = store_commit(s) == 0;
	commit_committed(cm, ok);
	commit_release(cm, &cm->flight, ok);
}

void
commit_flush(struct commit *cm)
{
	struct store	*s = cm->pd->store;
	int		 ok;

	if (s == NULL)
		return;
	if (store_busy(s)) {
		ok = store_wait(s) == 0;
		commit_committed(cm, ok);
		commit_release(cm, &cm->flight, ok);
	}
	if (store_in_batch(s)) {
		ok = store_commit(s) == 0;
		commit_committed(cm, ok);
		commit_release(cm, &cm->open, ok);
	} else if (cm->open.n > 0)
		commit_release(cm, &cm->open, 1);
}

void
commit_rollout(struct commit *cm)
{
	struct policyd	*pd = cm->pd;

	if (!rollout_due(pd->roll))
		return;
	/* The write handle must be free, and what led to the halt (the
	 * result or refusal) is recorded before it. */
	commit_flush(cm);
	(void)rollout_write_due(pd->roll);
}
