/*
 * auditq.c: group commit of audit records on a writer thread (auditq.h).
 *
 * Three lists, each with one owner at a time: `open` (the event loop's:
 * what auditq_add() queued since the last hand-off), `flight` (the
 * writer's while `busy`: one transaction's worth) and `done` (the
 * loop's: committed or failed, callbacks still to run).  The loop hands
 * `open` over only when the writer is idle, so a batch is whatever
 * arrived while the previous one was being fsync'ed: under load a batch
 * grows and the fsyncs per record fall, and a lone record is committed
 * at once.  The writer signals an eventfd when it is done; the loop then
 * moves `flight` to `done`, hands over the next batch and runs the
 * callbacks, in that order, so the next fsync overlaps them.
 *
 * Invariant (DESIGN.md "Audit", invariant 6): a callback runs only after
 * the COMMIT of the transaction that holds its records has returned, so
 * whatever it acknowledges is on disk first; a batch that fails is
 * rolled back whole and every callback in it hears ok = 0.  Records
 * are committed in the order of the auditq_add() calls, so the hash
 * chain follows arrival.
 */
#include <sys/eventfd.h>
#include <sys/queue.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "audit.h"
#include "auditq.h"
#include "log.h"
#include "util.h"

struct auditq_entry {
	TAILQ_ENTRY(auditq_entry) link;
	Sbx__V1__AuditEvent	*evs;		/* our copies */
	size_t			 n;
	auditq_cb		 cb;
	void			*arg;
	int			 ok;
};
TAILQ_HEAD(auditq_list, auditq_entry);

struct auditq {
	struct event_base	*base;
	struct audit		*audit;
	struct auditq_list	 open;		/* loop */
	struct auditq_list	 flight;	/* the writer's while busy */
	struct auditq_list	 done;		/* loop */
	int			 busy;
	struct event		*ev_run;	/* hand over, run callbacks */
	struct event		*ev_wake;	/* efd: the writer is done */
	int			 efd;

	pthread_t		 thread;
	int			 thread_up;
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cv;
	int			 job;		/* mtx: run flight */
	int			 finished;	/* mtx: flight has run */
	int			 result;	/* mtx: and its result */
	int			 stop;		/* mtx: exit */

	uint64_t		 commits;
	uint64_t		 records;
	uint64_t		 failed;
};

static void	auditq_pump(struct auditq *);

static char *
auditq_dup(const char *s)
{
	return xstrdup(s != NULL ? s : "");
}

static void
auditq_entry_free(struct auditq_entry *e)
{
	for (size_t i = 0; i < e->n; i++) {
		Sbx__V1__AuditEvent	*ev = &e->evs[i];

		free(ev->task_id);
		free(ev->execution_id);
		free(ev->policy_hash);
		free(ev->action);
		free(ev->rule);
		free(ev->detail);
		free(ev->actor);
		free(ev->traceparent);
	}
	free(e->evs);
	free(e);
}

/* One transaction for the whole list: every record or none. */
static int
auditq_run(struct audit *a, struct auditq_list *l)
{
	struct auditq_entry	*e;
	Sbx__V1__AuditEvent	 ev;

	if (TAILQ_EMPTY(l))
		return 0;
	if (audit_begin(a) == -1)
		return -1;
	TAILQ_FOREACH(e, l, link) {
		for (size_t i = 0; i < e->n; i++) {
			/* audit_add fills the copy's daemon and hashes
			 * with allocations of its own: cleared below. */
			ev = e->evs[i];
			if (audit_add(a, &ev) == -1) {
				(void)audit_rollback(a);
				return -1;
			}
			audit_event_clear(&ev);
		}
	}
	return audit_commit(a);
}

static void *
auditq_writer(void *arg)
{
	struct auditq	*q = arg;
	uint64_t	 one = 1;
	int		 rc;

	pthread_mutex_lock(&q->mtx);
	for (;;) {
		while (!q->job && !q->stop)
			pthread_cond_wait(&q->cv, &q->mtx);
		if (!q->job)
			break;
		pthread_mutex_unlock(&q->mtx);
		rc = auditq_run(q->audit, &q->flight);
		pthread_mutex_lock(&q->mtx);
		q->job = 0;
		q->finished = 1;
		q->result = rc;
		pthread_cond_broadcast(&q->cv);
		/* After finished is set, so a wake-up never comes before
		 * the result it announces. */
		if (write(q->efd, &one, sizeof(one)) == -1 && errno != EAGAIN)
			log_warn("auditq: eventfd");
	}
	pthread_mutex_unlock(&q->mtx);
	return NULL;
}

/* Started at the first hand-off: after the daemon has forked and
 * dropped its privileges. */
static int
auditq_start(struct auditq *q)
{
	sigset_t	 all, old;
	int		 rc;

	if (q->thread_up)
		return 0;
	/* Signals are the event loop's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&q->thread, NULL, auditq_writer, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_warnx("auditq: cannot start the writer thread: %s",
		    strerror(rc));
		return -1;
	}
	q->thread_up = 1;
	return 0;
}

/* A batch has run: its entries wait for their callbacks. */
static void
auditq_settle(struct auditq *q, struct auditq_list *l, int ok)
{
	struct auditq_entry	*e;
	uint64_t		 n = 0;

	while ((e = TAILQ_FIRST(l)) != NULL) {
		TAILQ_REMOVE(l, e, link);
		e->ok = ok;
		n += e->n;
		TAILQ_INSERT_TAIL(&q->done, e, link);
	}
	if (n == 0)
		return;
	if (ok) {
		q->commits++;
		q->records += n;
	} else {
		q->failed++;
		log_warnx("audit: a batch of %llu records could not be "
		    "committed", (unsigned long long)n);
	}
}

/* Hand the open batch to the writer; on a writer that cannot start,
 * commit it here instead. */
static void
auditq_submit(struct auditq *q)
{
	struct auditq_entry	*e;

	if (q->busy || TAILQ_EMPTY(&q->open))
		return;
	if (auditq_start(q) == -1) {
		(void)auditq_sync(q);
		return;
	}
	while ((e = TAILQ_FIRST(&q->open)) != NULL) {
		TAILQ_REMOVE(&q->open, e, link);
		TAILQ_INSERT_TAIL(&q->flight, e, link);
	}
	q->busy = 1;
	pthread_mutex_lock(&q->mtx);
	q->finished = 0;
	q->job = 1;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mtx);
}

/* Take the writer's result if it has one; with wait, wait for it. */
static void
auditq_reap(struct auditq *q, int wait)
{
	int	 fin, rc;

	if (!q->busy)
		return;
	pthread_mutex_lock(&q->mtx);
	while (wait && !q->finished)
		pthread_cond_wait(&q->cv, &q->mtx);
	fin = q->finished;
	rc = q->result;
	q->finished = 0;
	pthread_mutex_unlock(&q->mtx);
	if (!fin)
		return;
	q->busy = 0;
	auditq_settle(q, &q->flight, rc == 0);
}

/* The callbacks of what has committed (or failed); with again, what
 * they queue meanwhile is handed to the writer from the loop. */
static void
auditq_run_done(struct auditq *q, int again)
{
	struct auditq_entry	*e;

	while ((e = TAILQ_FIRST(&q->done)) != NULL) {
		TAILQ_REMOVE(&q->done, e, link);
		if (e->cb != NULL)
			e->cb(e->ok, e->arg);
		auditq_entry_free(e);
	}
	/* Callbacks may have queued more, with the writer idle. */
	if (again && !q->busy && !TAILQ_EMPTY(&q->open))
		event_active(q->ev_run, EV_TIMEOUT, 0);
}

static void
auditq_pump(struct auditq *q)
{
	auditq_reap(q, 0);
	/* The next fsync starts before the callbacks run. */
	auditq_submit(q);
	auditq_run_done(q, 1);
}

static void
auditq_run_ev(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	auditq_pump(arg);
}

static void
auditq_wake_ev(evutil_socket_t fd, short what, void *arg)
{
	uint64_t	 n;

	(void)what;
	/* The finished flag, not the count, is the news. */
	if (read(fd, &n, sizeof(n)) == -1 && errno != EAGAIN)
		log_warn("auditq: eventfd");
	auditq_pump(arg);
}

struct auditq *
auditq_new(struct event_base *base, struct audit *a, char *err,
    size_t errlen)
{
	struct auditq	*q;

	q = xcalloc(1, sizeof(*q));
	q->base = base;
	q->audit = a;
	TAILQ_INIT(&q->open);
	TAILQ_INIT(&q->flight);
	TAILQ_INIT(&q->done);
	if (pthread_mutex_init(&q->mtx, NULL) != 0 ||
	    pthread_cond_init(&q->cv, NULL) != 0)
		fatalx("auditq: cannot initialise a lock");
	if ((q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if ((q->ev_run = event_new(base, -1, 0, auditq_run_ev, q)) == NULL ||
	    (q->ev_wake = event_new(base, q->efd, EV_READ | EV_PERSIST,
	    auditq_wake_ev, q)) == NULL || event_add(q->ev_wake, NULL) == -1) {
		snprintf(err, errlen, "cannot create the audit queue's "
		    "events");
		goto fail;
	}
	return q;
fail:
	if (q->ev_run != NULL)
		event_free(q->ev_run);
	if (q->ev_wake != NULL)
		event_free(q->ev_wake);
	if (q->efd != -1)
		close(q->efd);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mtx);
	free(q);
	return NULL;
}

void
auditq_flush(struct auditq *q)
{
	(void)auditq_sync(q);
	auditq_run_done(q, 1);
}

void
auditq_free(struct auditq *q)
{
	if (q == NULL)
		return;
	(void)auditq_sync(q);
	if (q->thread_up) {
		pthread_mutex_lock(&q->mtx);
		q->stop = 1;
		pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->mtx);
		pthread_join(q->thread, NULL);
	}
	auditq_run_done(q, 0);
	event_free(q->ev_run);
	event_free(q->ev_wake);
	close(q->efd);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mtx);
	free(q);
}

struct auditq_entry *
auditq_add(struct auditq *q, const Sbx__V1__AuditEvent *const *evs,
    size_t n, auditq_cb cb, void *arg)
{
	struct auditq_entry	*e;
	int64_t			 now = now_ns();

	e = xcalloc(1, sizeof(*e));
	e->evs = xreallocarray(NULL, n > 0 ? n : 1, sizeof(*e->evs));
	e->n = n;
	for (size_t i = 0; i < n; i++) {
		Sbx__V1__AuditEvent	*ev = &e->evs[i];

		sbx__v1__audit_event__init(ev);
		/* The event's time is the decision's, not the commit's. */
		ev->time_ns = evs[i]->time_ns != 0 ? evs[i]->time_ns : now;
		ev->task_id = auditq_dup(evs[i]->task_id);
		ev->execution_id = auditq_dup(evs[i]->execution_id);
		ev->policy_hash = auditq_dup(evs[i]->policy_hash);
		ev->action = auditq_dup(evs[i]->action);
		ev->rule = auditq_dup(evs[i]->rule);
		ev->detail = auditq_dup(evs[i]->detail);
		ev->actor = auditq_dup(evs[i]->actor);
		ev->traceparent = auditq_dup(evs[i]->traceparent);
	}
	e->cb = cb;
	e->arg = arg;
	TAILQ_INSERT_TAIL(&q->open, e, link);
	/* Everything queued in this pass of the loop goes in one batch;
	 * while the writer is busy its wake-up hands the batch over. */
	if (!q->busy)
		event_active(q->ev_run, EV_TIMEOUT, 0);
	return e;
}

void
auditq_cancel(struct auditq_entry *e)
{
	if (e != NULL)
		e->cb = NULL;
}

struct audit *
auditq_sync(struct auditq *q)
{
	struct auditq_list	 l;
	struct auditq_entry	*e;

	/* The batch in flight first: the chain is in arrival order. */
	auditq_reap(q, 1);
	if (!TAILQ_EMPTY(&q->open)) {
		TAILQ_INIT(&l);
		while ((e = TAILQ_FIRST(&q->open)) != NULL) {
			TAILQ_REMOVE(&q->open, e, link);
			TAILQ_INSERT_TAIL(&l, e, link);
		}
		auditq_settle(q, &l, auditq_run(q->audit, &l) == 0);
	}
	if (!TAILQ_EMPTY(&q->done))
		event_active(q->ev_run, EV_TIMEOUT, 0);
	return q->audit;
}

void
auditq_stats(const struct auditq *q, uint64_t *commits, uint64_t *records,
    uint64_t *failed)
{
	*commits = q->commits;
	*records = q->records;
	*failed = q->failed;
}
