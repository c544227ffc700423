/*
 * mon_client_test.c: the launcher's side of the monitor's wire
 * (mon_client.c) against a fake monitor on the other end of a
 * socketpair.  A request goes out whole; its answer is read; a MON_EXIT
 * met before the answer is queued and reaches the hook from the loop,
 * never inside the call; mon_wait_exit takes one pid's exit and leaves
 * the others queued; a SIGKILL for a pid whose exit has come is not sent;
 * HANDOVER sends only names the monitor takes and returns its
 * descriptor; a damaged packet, a descriptor where none belongs and the
 * monitor's end are fatal.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "launchd-sbx/launchd.h"
#include "launchd-sbx/monitor.h"

static struct launchd	 ld;
static int		 peer = -1;	/* the fake monitor's end */
static pid_t		 seen_pid[8];
static int		 seen_st[8];
static int		 nseen;

static void
exited(struct launchd *l, pid_t pid, int st)
{
	(void)l;
	if (nseen < 8) {
		seen_pid[nseen] = pid;
		seen_st[nseen] = st;
	}
	nseen++;
}

static void
setup(void)
{
	int	 sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
	    sv), 0);
	memset(&ld, 0, sizeof(ld));
	cr_assert_not_null(ld.base = event_base_new());
	ld.child_exited = exited;
	mon_client_attach(&ld, sv[0]);
	peer = sv[1];
	nseen = 0;
}

static void
teardown(void)
{
	ld.mon_pid = 0;
	mon_client_stop(&ld);
	event_base_free(ld.base);
	close(peer);
}

/* The fake monitor says something (with descriptor fd unless -1). */
static void
say(uint32_t type, const void *body, size_t len, int fd)
{
	union {
		struct cmsghdr	 c;
		char		 b[CMSG_SPACE(sizeof(int))];
	}		 cm;
	struct mon_hdr	 h = { MON_MAGIC, type, (uint32_t)len, 0 };
	struct iovec	 iov[2] = { { &h, sizeof(h) }, { (void *)body, len } };
	struct msghdr	 msg;
	struct cmsghdr	*c;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = 2;
	if (fd != -1) {
		memset(&cm, 0, sizeof(cm));
		msg.msg_control = cm.b;
		msg.msg_controllen = sizeof(cm.b);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	cr_assert_eq(sendmsg(peer, &msg, 0), (ssize_t)(sizeof(h) + len));
}

static void
say_exit(pid_t pid, int st)
{
	struct mon_exit	 e = { pid, st };

	say(MON_EXIT, &e, sizeof(e), -1);
}

static void
say_ok(int64_t v, int fd)
{
	struct mon_ok	 ok = { v };

	say(MON_OK, &ok, sizeof(ok), fd);
}

/* What the launcher sent: the header, the body into buf; -1 if nothing. */
static ssize_t
heard(struct mon_hdr *h, void *buf, size_t len)
{
	char	 pkt[sizeof(*h) + sizeof(struct mon_handover)];
	ssize_t	 n;

	if ((n = recv(peer, pkt, sizeof(pkt), MSG_DONTWAIT)) < 0)
		return -1;
	cr_assert_geq((size_t)n, sizeof(*h));
	memcpy(h, pkt, sizeof(*h));
	cr_assert_eq(h->magic, MON_MAGIC);
	cr_assert_eq(h->len, (size_t)n - sizeof(*h));
	memcpy(buf, pkt + sizeof(*h), (size_t)n - sizeof(*h) < len ?
	    (size_t)n - sizeof(*h) : len);
	return n - (ssize_t)sizeof(*h);
}

TestSuite(mon_client, .init = setup, .fini = teardown);

Test(mon_client, answer_after_an_exit)
{
	struct mon_hdr	 h;
	struct mon_cmd	 c;
	char		 err[MON_ERR_MAX];
	pid_t		 pid;

	say_exit(100, 0);
	say_ok(4242, -1);
	pid = mon_client_cmd(&ld, "abc", 1, MON_START, 7, -1, -1, err,
	    sizeof(err));
	cr_assert_eq(pid, 4242);
	cr_assert_eq(heard(&h, &c, sizeof(c)), (ssize_t)sizeof(c));
	cr_assert_eq(h.type, MON_CMD);
	cr_assert_str_eq(c.id, "abc");
	cr_assert_eq(c.verb, MON_START);
	cr_assert_eq(c.tier, 1);
	cr_assert_eq(c.nice, 7);
	/* Not inside the call: from the loop. */
	cr_assert_eq(nseen, 0);
	event_base_loop(ld.base, EVLOOP_NONBLOCK);
	cr_assert_eq(nseen, 1);
	cr_assert_eq(seen_pid[0], 100);
}

Test(mon_client, exit_on_its_own)
{
	say_exit(7, 9);
	event_base_loop(ld.base, EVLOOP_ONCE);
	cr_assert_eq(nseen, 1);
	cr_assert_eq(seen_pid[0], 7);
	cr_assert_eq(seen_st[0], 9);
}

Test(mon_client, error_answer)
{
	struct mon_err	 e;
	char		 err[MON_ERR_MAX];

	memset(&e, 0, sizeof(e));
	e.err = ENOENT;
	strcpy(e.msg, "SEAL abc: no such thing");
	say(MON_ERR, &e, sizeof(e), -1);
	cr_assert_eq(mon_client_seal(&ld, "abc", err, sizeof(err)), -1);
	cr_assert_eq(errno, ENOENT);
	cr_assert_str_eq(err, "SEAL abc: no such thing");
}

Test(mon_client, bad_id_not_sent)
{
	struct mon_hdr	 h;
	char		 b[8], err[MON_ERR_MAX];

	cr_assert_eq(mon_client_stage(&ld, "../x", 4, 1, err, sizeof(err)),
	    -1);
	cr_assert_eq(mon_client_stage(&ld, "ok", 0, 1, err, sizeof(err)), -1);
	cr_assert_eq(heard(&h, b, sizeof(b)), -1);
}

Test(mon_client, wait_exit)
{
	say_exit(50, 1);
	say_exit(60, 2);
	cr_assert_eq(mon_wait_exit(&ld, 60, 1), 2);
	cr_assert_eq(mon_wait_exit(&ld, 50, 0), 1, "queued on the way");
	cr_assert_eq(mon_wait_exit(&ld, 70, 0), -1);
	event_base_loop(ld.base, EVLOOP_NONBLOCK);
	cr_assert_eq(nseen, 0, "taken exits are not delivered again");
}

Test(mon_client, sigkill_after_exit_not_sent)
{
	struct mon_hdr	 h;
	char		 b[8];

	say_exit(70, 9);
	cr_assert_eq(mon_client_sigkill(&ld, 70), -1);
	cr_assert_eq(errno, ESRCH);
	cr_assert_eq(heard(&h, b, sizeof(b)), -1);
	event_base_loop(ld.base, EVLOOP_NONBLOCK);
	cr_assert_eq(nseen, 1);
}

Test(mon_client, handover)
{
	static struct mon_handover	 r;
	struct mon_hdr			 h;
	char				*names[] = { "a.csv", "../x", "/abs",
					    "d/e.txt", "" };
	char				 err[MON_ERR_MAX];
	int				 p[2], fd;

	cr_assert_eq(pipe(p), 0);
	say_ok(0, p[0]);
	fd = mon_client_handover(&ld, "abc", names, 5, err, sizeof(err));
	cr_assert_geq(fd, 0);
	cr_assert_eq(heard(&h, &r, sizeof(r)), (ssize_t)sizeof(r));
	cr_assert_eq(h.type, MON_HANDOVER);
	cr_assert_eq(r.n, 2);
	cr_assert_str_eq(r.names[0], "a.csv");
	cr_assert_str_eq(r.names[1], "d/e.txt");
	close(fd);
	close(p[0]);
	close(p[1]);
}

Test(mon_client, damaged_packet, .exit_code = 1)
{
	struct mon_ok	 ok = { 5 };
	char		 buf[sizeof(struct mon_hdr) + sizeof(ok)];
	struct mon_hdr	 h = { 0xdeadbeef, MON_OK, sizeof(ok), 0 };

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &ok, sizeof(ok));
	cr_assert_eq(send(peer, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	(void)mon_client_sigkill(&ld, 1234);
}

Test(mon_client, wrong_size, .exit_code = 1)
{
	struct mon_exit	 e = { 1, 2 };

	say(MON_OK, &e, sizeof(e) - 1, -1);
	(void)mon_client_unstage(&ld, "abc");
}

Test(mon_client, descriptor_on_an_exit, .exit_code = 1)
{
	struct mon_exit	 e = { 1, 2 };

	say(MON_EXIT, &e, sizeof(e), 0);
	event_base_loop(ld.base, EVLOOP_ONCE);
}

Test(mon_client, monitor_gone, .exit_code = 1)
{
	close(peer);
	peer = -1;
	(void)mon_client_cg_remove(&ld, "abc");
}
