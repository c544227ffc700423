/*
 * daemon_loop_test.c: the loop daemon_main makes (common/daemon.c,
 * daemon_event_base).  launchd-sbx's background work (the pool's refills,
 * the host cleanup after a delete) runs at LAUNCHD_PRIO_BG, each callback
 * blocking on sbx-monitor for milliseconds; with bg_prio those callbacks
 * run one a pass, so a frame that arrives meanwhile is served after one
 * of them, not after all that were ready (bench/README, issue 15 item 3).
 *
 * The attack: four background callbacks ready at once, the first of
 * which makes a descriptor readable (a frame arriving while it blocks).
 * Libevent learns of it only when it polls again.  With bg_prio the read
 * callback (priority 1) runs second; with libevent's default, last.
 */
#include <criterion/criterion.h>
#include <sys/socket.h>
#include <event2/event.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

#define NBG	4

struct order {
	char		 seq[16];
	size_t		 n;
	int		 wfd;
};

static void
bg_cb(evutil_socket_t fd, short what, void *arg)
{
	struct order	*o = arg;

	(void)fd;
	(void)what;
	if (o->n < sizeof(o->seq) - 1)
		o->seq[o->n++] = 'b';
	if (o->wfd != -1) {
		cr_assert_eq(write(o->wfd, "x", 1), 1);
		o->wfd = -1;
	}
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct order	*o = arg;
	char		 c;

	(void)what;
	cr_assert_eq(read(fd, &c, 1), 1);
	if (o->n < sizeof(o->seq) - 1)
		o->seq[o->n++] = 'r';
}

/* The order the callbacks ran in: 'b' background, 'r' the read. */
static void
run_order(int bg_prio, char out[16])
{
	static const struct timeval	 now = { 0, 0 };
	struct event_base		*base;
	struct event			*bg[NBG], *rd;
	struct order			 o;
	int				 sv[2];

	memset(&o, 0, sizeof(o));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	o.wfd = sv[1];
	base = daemon_event_base(4, bg_prio);
	cr_assert_not_null(base);
	rd = event_new(base, sv[0], EV_READ, read_cb, &o);
	cr_assert_not_null(rd);
	cr_assert_eq(event_priority_set(rd, 1), 0);
	cr_assert_eq(event_add(rd, NULL), 0);
	for (int i = 0; i < NBG; i++) {
		bg[i] = evtimer_new(base, bg_cb, &o);
		cr_assert_not_null(bg[i]);
		cr_assert_eq(event_priority_set(bg[i], 3), 0);
		cr_assert_eq(evtimer_add(bg[i], &now), 0);
	}
	cr_assert_eq(event_base_dispatch(base), 1);	/* nothing left */
	memcpy(out, o.seq, sizeof(o.seq));
	for (int i = 0; i < NBG; i++)
		event_free(bg[i]);
	event_free(rd);
	event_base_free(base);
	close(sv[0]);
	close(sv[1]);
}

Test(daemon_loop, background_one_a_pass)
{
	char	 seq[16];

	run_order(3, seq);
	cr_assert_str_eq(seq, "brbbb",
	    "a frame ready after the first background callback waited for "
	    "more of them: %s", seq);
}

/* The control: without bg_prio libevent runs every ready background
 * callback before it polls again (what launchd-sbx's loop did). */
Test(daemon_loop, default_all_in_one_pass)
{
	char	 seq[16];

	run_order(0, seq);
	cr_assert_str_eq(seq, "bbbbr", "%s", seq);
}

Test(daemon_loop, priorities)
{
	struct event_base	*base;

	base = daemon_event_base(4, 3);
	cr_assert_not_null(base);
	cr_assert_eq(event_base_get_npriorities(base), 4);
	event_base_free(base);
	base = daemon_event_base(0, 0);
	cr_assert_not_null(base);
	cr_assert_eq(event_base_get_npriorities(base), 1);
	event_base_free(base);
}
