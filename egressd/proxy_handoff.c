/*
 * proxy_handoff.c: sbx-init hands its client connections over, so the
 * bridge leaves the data path (common/handoff.h has the protocol).
 *
 * Without it every byte a sandbox sends through its proxy crosses
 * sbx-init twice (TCP in, Unix out, and back): two more system calls per
 * direction per message, and one more process on the CPUs.  With it
 * sbx-init passes each connection it accepts on 127.0.0.1 to egressd
 * (SCM_RIGHTS) on one long-lived connection and closes its own copy;
 * egressd then reads and writes the client's socket itself, and every
 * request on it goes through the same steps as on any other connection
 * (proxy.c): decided, audited, budgeted, backpressured.
 *
 * Who may hand over a descriptor is what keeps this safe.  A descriptor
 * shares its open file description with every copy of it, so whoever
 * else holds one could clear O_NONBLOCK under egressd and stall its event
 * loop for every task, or read egressd's answers from under it.  Only
 * sbx-init may hand over, because only sbx-init closes its copy and no
 * one in the sandbox can take one from it (PID 1, not dumpable, and the
 * code has no capability).  egressd knows sbx-init's connection by its
 * place: it is the channel's first connection, made before the code
 * starts (cold or pooled: sbx-init connects before it starts the program),
 * and connections are accepted in the order they were made.  Only that
 * connection may open with the hello, once; any later connection that
 * begins with a NUL byte is an ordinary one, refused by the HTTP parser.
 * Only the container tier (runc, crun) is answered yes: a gVisor
 * sandbox's sockets are its own network stack's, not the host's, and a
 * microVM's bridge reaches egressd over TCP; there sbx-init relays as
 * before.
 * Every descriptor must be a connected TCP stream socket, else it is
 * closed, refused and audited (channel-peer-refused).  Invariant 11 holds
 * as for the relay: the connections come from 127.0.0.1 in the
 * sandbox's own network namespace, which only the sandbox reaches.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "handoff.h"
#include "log.h"
#include "util.h"
#include "egressd.h"

#define HANDOFF_MAX_FDS		4	/* room to see a message carry more than one */
#define HANDOFF_PER_WAKE	64	/* descriptors taken per wake, then the loop */

static void	handoff_first(evutil_socket_t, short, void *);
static void	handoff_read(evutil_socket_t, short, void *);
static void	handoff_refuse(struct channel *, const char *);

void
proxy_handoff_first(struct channel *ch, int fd)
{
	struct timeval	 tv = { ch->ed->conf->header_timeout, 0 };

	ch->ho_fd = fd;
	if ((ch->ho_ev = event_new(ch->ed->base, fd, EV_READ, handoff_first,
	    ch)) == NULL) {
		ch->ho_fd = -1;
		proxy_conn_start(ch, fd);
		return;
	}
	(void)event_add(ch->ho_ev, tv.tv_sec > 0 ? &tv : NULL);
}

void
proxy_handoff_close(struct channel *ch)
{
	if (ch->ho_ev != NULL)
		event_free(ch->ho_ev);
	ch->ho_ev = NULL;
	if (ch->ho_fd != -1)
		close(ch->ho_fd);
	ch->ho_fd = -1;
	ch->ho_on = 0;
}

/* Give up the first connection to proxy.c as an ordinary one. */
static void
handoff_ordinary(struct channel *ch)
{
	int	 fd = ch->ho_fd;

	event_free(ch->ho_ev);
	ch->ho_ev = NULL;
	ch->ho_fd = -1;
	proxy_conn_start(ch, fd);
}

/*
 * The channel's first connection spoke (or kept quiet past the header
 * timeout).  A first byte other than the hello makes it an ordinary
 * connection, its bytes unread; the hello makes it the handoff
 * connection, in the container tier.
 */
static void
handoff_first(evutil_socket_t fd, short what, void *arg)
{
	struct channel	*ch = arg;
	unsigned char	 b;
	ssize_t		 n;

	if (what & EV_TIMEOUT) {
		handoff_ordinary(ch);
		return;
	}
	n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR)) {
		(void)event_add(ch->ho_ev, NULL);
		return;
	}
	if (n != 1 || b != HANDOFF_HELLO) {
		/* EOF and errors too: proxy.c ends it the usual way. */
		handoff_ordinary(ch);
		return;
	}
	/* Take the hello; a descriptor sent with it is dropped unread. */
	(void)recv(fd, &b, 1, MSG_DONTWAIT);
	if (ch->pol->isolation != SBX__V1__ISOLATION__ISOLATION_CONTAINER) {
		b = HANDOFF_NO;
		(void)send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		log_debug("channel %s: no handoff outside the container tier",
		    ch->grant->execution_id);
		proxy_handoff_close(ch);
		return;
	}
	event_free(ch->ho_ev);
	if ((ch->ho_ev = event_new(ch->ed->base, fd, EV_READ | EV_PERSIST,
	    handoff_read, ch)) == NULL || event_add(ch->ho_ev, NULL) == -1) {
		proxy_handoff_close(ch);
		return;
	}
	b = HANDOFF_YES;
	if (send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
		proxy_handoff_close(ch);
		return;
	}
	ch->ho_on = 1;
}

int
proxy_handoff_check_fd(int fd, char *why, size_t whylen)
{
	struct sockaddr_storage	 ss;
	socklen_t		 sl;
	int			 dom, type, proto, acc;

	sl = sizeof(dom);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &sl) == -1) {
		snprintf(why, whylen, "handed over a descriptor that is not "
		    "a socket: %s", strerror(errno));
		return -1;
	}
	sl = sizeof(type);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &sl) == -1)
		type = -1;
	sl = sizeof(proto);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &sl) == -1)
		proto = -1;
	if ((dom != AF_INET && dom != AF_INET6) || type != SOCK_STREAM ||
	    proto != IPPROTO_TCP) {
		snprintf(why, whylen, "handed over a socket that is not TCP "
		    "(domain %d, type %d, protocol %d)", dom, type, proto);
		return -1;
	}
	sl = sizeof(acc);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &sl) == -1 ||
	    acc != 0) {
		snprintf(why, whylen, "handed over a listening socket");
		return -1;
	}
	sl = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == -1) {
		snprintf(why, whylen, "handed over an unconnected socket: %s",
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* A damaged handoff connection ends; sbx-init relays from then on. */
static void
handoff_refuse(struct channel *ch, const char *why)
{
	proxy_audit_deny(ch, RULE_PEER, why, NULL);
	proxy_handoff_close(ch);
}

/*
 * Each message is one HANDOFF_CONN byte with exactly one descriptor.
 * Anything else (another byte, none or several descriptors, a truncated
 * control message) ends the handoff connection.
 */
static void
handoff_read(evutil_socket_t fd, short what, void *arg)
{
	struct channel	*ch = arg;
	union {
		struct cmsghdr	 h;
		char		 buf[CMSG_SPACE(HANDOFF_MAX_FDS * sizeof(int))];
	}		 cm;
	struct msghdr	 msg;
	struct cmsghdr	*cmsg;
	struct iovec	 iov;
	unsigned char	 b;
	char		 why[256];
	int		 fds[HANDOFF_MAX_FDS], nfds, i, k, cfd;
	ssize_t		 n;

	(void)what;
	for (k = 0; k < HANDOFF_PER_WAKE; k++) {
		memset(&msg, 0, sizeof(msg));
		iov.iov_base = &b;
		iov.iov_len = 1;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = cm.buf;
		msg.msg_controllen = sizeof(cm.buf);
		n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
		    errno == EINTR))
			return;
		if (n <= 0) {
			/* sbx-init is gone (or the socket failed). */
			proxy_handoff_close(ch);
			return;
		}
		nfds = 0;
		for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
		    cmsg = CMSG_NXTHDR(&msg, cmsg)) {
			size_t	 len;

			if (cmsg->cmsg_level != SOL_SOCKET ||
			    cmsg->cmsg_type != SCM_RIGHTS)
				continue;
			len = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (i = 0; i < (int)len; i++) {
				int	 f;

				memcpy(&f, CMSG_DATA(cmsg) + i * sizeof(int),
				    sizeof(f));
				if (nfds < HANDOFF_MAX_FDS)
					fds[nfds++] = f;
				else
					close(f);
			}
		}
		if (b != HANDOFF_CONN || nfds != 1 ||
		    (msg.msg_flags & MSG_CTRUNC)) {
			for (i = 0; i < nfds; i++)
				close(fds[i]);
			snprintf(why, sizeof(why), "handoff message 0x%02x "
			    "with %d descriptors%s", b, nfds,
			    (msg.msg_flags & MSG_CTRUNC) ? " (truncated)" : "");
			handoff_refuse(ch, why);
			return;
		}
		cfd = fds[0];
		if (proxy_handoff_check_fd(cfd, why, sizeof(why)) == -1) {
			close(cfd);
			proxy_audit_deny(ch, RULE_PEER, why, NULL);
			continue;
		}
		if (ch->lev_off) {
			/* Refused connections hold the cap: not one more
			 * descriptor for them (proxy_accept's listener is
			 * off for the same reason). */
			close(cfd);
			snprintf(why, sizeof(why), "the task already has %u "
			    "connections open", ch->nconns);
			proxy_audit_deny(ch, RULE_CONNS, why, NULL);
			continue;
		}
		(void)evutil_make_socket_nonblocking(cfd);
		ch->ed->m.handoffs++;
		proxy_conn_start(ch, cfd);
		if (ch->ho_ev == NULL)
			return;
	}
}
