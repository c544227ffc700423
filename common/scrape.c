/*
 * scrape.c: the opt-in Prometheus scrape listener (scrape.h).  Prometheus
 * scrapes HTTP over TCP only, so a daemon whose configuration has
 * `metrics: {listen: 127.0.0.1:PORT}` serves `GET /metrics` there, with the
 * same text its admin socket gives `sbxctl metrics`, and nothing else.
 *
 * A TCP port carries no SO_PEERCRED, and a port on loopback is open to
 * every local user.  So the listener takes loopback addresses only
 * (config.c refuses others) and, before it reads a byte, asks the kernel
 * (NETLINK_SOCK_DIAG, as ss(8) does) which user owns the connecting
 * socket, and checks that user against metrics.allow, or when that is
 * absent the daemon's admin socket's allowlist: who may read the counters
 * over TCP is who may read them on the admin socket.  A refused peer gets
 * 403 and is reported through the daemon's refused hook like any socket's.
 *
 * Requests are small and bounded: the head must arrive within
 * SCRAPE_TIMEOUT seconds and fit in SCRAPE_HEAD_MAX bytes, at most
 * SCRAPE_CONNS connections are open at once (more are closed at accept),
 * and every answer closes the connection.  So a slow or huge client costs
 * one bounded buffer and never holds up the daemon's other sockets.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "config.h"
#include "log.h"
#include "peer.h"
#include "scrape.h"
#include "util.h"

#define SCRAPE_HEAD_MAX		8192
#define SCRAPE_TIMEOUT		5
#define SCRAPE_CONNS		16

struct scrape_conn {
	TAILQ_ENTRY(scrape_conn) entry;
	struct scrape		*s;
	struct bufferevent	*bev;
	int			 answered;
	size_t			 drained;
};

struct scrape {
	TAILQ_HEAD(, scrape_conn) conns;
	struct evconnlistener	*lev;
	struct event_base	*base;
	const struct peer_allow	*allow;
	char			*(*text)(void *);
	void			*arg;
	void			(*refused)(const struct ucred *, const char *,
				    void *);
	void			*refused_arg;
	size_t			 nconns;
	int			 full;		/* said so since the last free */
};

/*
 * The user owning the other end of the TCP connection fd, from the kernel's
 * socket table: the peer's socket is the one whose source is our peer's
 * address and whose destination is our address.  0, or -1 (not found, or
 * netlink refused).
 */
static int
scrape_peer_uid(int fd, uid_t *uid)
{
	struct sockaddr_storage		 us, them;
	socklen_t			 ul = sizeof(us), tl = sizeof(them);
	struct {
		struct nlmsghdr		nlh;
		struct inet_diag_req_v2	r;
	}				 req;
	struct sockaddr_nl		 nl;
	union {
		struct nlmsghdr		nlh;
		char			buf[8192];
	}				 ans;
	struct inet_diag_msg		*m;
	ssize_t				 n;
	int				 s, rc = -1;

	if (getsockname(fd, (struct sockaddr *)&us, &ul) == -1 ||
	    getpeername(fd, (struct sockaddr *)&them, &tl) == -1 ||
	    us.ss_family != them.ss_family)
		return -1;
	memset(&req, 0, sizeof(req));
	req.nlh.nlmsg_len = sizeof(req);
	req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nlh.nlmsg_flags = NLM_F_REQUEST;
	req.r.sdiag_family = (uint8_t)us.ss_family;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0U;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (us.ss_family == AF_INET) {
		struct sockaddr_in	*u = (struct sockaddr_in *)&us;
		struct sockaddr_in	*t = (struct sockaddr_in *)&them;

		req.r.id.idiag_sport = t->sin_port;
		req.r.id.idiag_dport = u->sin_port;
		memcpy(req.r.id.idiag_src, &t->sin_addr, 4);
		memcpy(req.r.id.idiag_dst, &u->sin_addr, 4);
	} else if (us.ss_family == AF_INET6) {
		struct sockaddr_in6	*u = (struct sockaddr_in6 *)&us;
		struct sockaddr_in6	*t = (struct sockaddr_in6 *)&them;

		req.r.id.idiag_sport = t->sin6_port;
		req.r.id.idiag_dport = u->sin6_port;
		memcpy(req.r.id.idiag_src, &t->sin6_addr, 16);
		memcpy(req.r.id.idiag_dst, &u->sin6_addr, 16);
	} else
		return -1;

	if ((s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
	    NETLINK_SOCK_DIAG)) == -1) {
		log_warn("metrics: netlink socket");
		return -1;
	}
	memset(&nl, 0, sizeof(nl));
	nl.nl_family = AF_NETLINK;
	if (sendto(s, &req, sizeof(req), 0, (struct sockaddr *)&nl,
	    sizeof(nl)) != (ssize_t)sizeof(req)) {
		log_warn("metrics: sock_diag request");
		goto out;
	}
	/* One answer: the socket, or an error.  Blocking, but the kernel
	 * answers at once. */
	if ((n = recv(s, &ans, sizeof(ans), 0)) < (ssize_t)sizeof(ans.nlh) ||
	    !NLMSG_OK(&ans.nlh, (size_t)n))
		goto out;
	if (ans.nlh.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    ans.nlh.nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		goto out;
	m = NLMSG_DATA(&ans.nlh);
	*uid = m->idiag_uid;
	rc = 0;
 out:
	close(s);
	return rc;
}

/* The uid, its primary group or one of its groups is on the list. */
static int
scrape_allowed(const struct peer_allow *a, uid_t uid, gid_t *gid)
{
	struct passwd	*pw;
	gid_t		 groups[256];
	int		 ng = (int)(sizeof(groups) / sizeof(groups[0]));

	*gid = (gid_t)-1;
	if (peer_uid_listed(a, uid))
		return 1;
	if (a->ngids == 0 || (pw = getpwuid(uid)) == NULL)
		return 0;
	*gid = pw->pw_gid;
	if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &ng) == -1)
		ng = 1, groups[0] = pw->pw_gid;
	for (int g = 0; g < ng; g++)
		if (peer_gid_listed(a, groups[g]))
			return 1;
	return 0;
}

static void	scrape_event(struct bufferevent *, short, void *);

static void
scrape_conn_free(struct scrape_conn *sc)
{
	sc->s->nconns--;
	sc->s->full = 0;
	TAILQ_REMOVE(&sc->s->conns, sc, entry);
	bufferevent_free(sc->bev);
	free(sc);
}

/* After the answer: what the client still sends is read and dropped
 * until it closes (or the timeout), up to a bound.  Closing with unread
 * input would reset the connection, and the client might lose the answer
 * (a 403 before its request was read, a 405 with a body). */
static void
scrape_drain(struct bufferevent *bev, void *arg)
{
	struct scrape_conn	*sc = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);

	sc->drained += evbuffer_get_length(in);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (sc->drained > SCRAPE_HEAD_MAX * 4)
		scrape_conn_free(sc);
}

/* Once the answer is out: no more to write; wait for the client's close. */
static void
scrape_written(struct bufferevent *bev, void *arg)
{
	struct scrape_conn	*sc = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)) != 0)
		return;
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	bufferevent_setcb(bev, scrape_drain, NULL, scrape_event, sc);
	bufferevent_enable(bev, EV_READ);
	scrape_drain(bev, sc);
}

static void
scrape_answer(struct scrape_conn *sc, const char *status,
    const char *extra, const char *body, int head)
{
	struct evbuffer	*out = bufferevent_get_output(sc->bev);
	size_t		 len = body != NULL ? strlen(body) : 0;

	sc->answered = 1;
	evbuffer_add_printf(out, "HTTP/1.1 %s\r\n"
	    "Content-Type: %s\r\n"
	    "Content-Length: %zu\r\n"
	    "Cache-Control: no-store\r\n"
	    "Connection: close\r\n"
	    "%s\r\n", status, body != NULL && strncmp(status, "200", 3) == 0 ?
	    "text/plain; version=0.0.4; charset=utf-8" :
	    "text/plain; charset=utf-8", len, extra != NULL ? extra : "");
	if (!head && len > 0)
		evbuffer_add(out, body, len);
	bufferevent_disable(sc->bev, EV_READ);
	bufferevent_setcb(sc->bev, NULL, scrape_written, scrape_event, sc);
	bufferevent_enable(sc->bev, EV_WRITE);
}

/*
 * The request line of a complete head: GET or HEAD of /metrics (a query
 * is ignored) is the one thing served; another path is 404, another
 * method on /metrics 405, anything that is not a request line 400.
 */
static void
scrape_request(struct scrape_conn *sc, const char *line)
{
	const char	*sp, *target, *tend;
	size_t		 mlen, tlen;
	char		*text;
	int		 head;

	if ((sp = strchr(line, ' ')) == NULL || sp == line) {
		scrape_answer(sc, "400 Bad Request", NULL,
		    "not an HTTP request\n", 0);
		return;
	}
	mlen = (size_t)(sp - line);
	target = sp + 1;
	if ((tend = strchr(target, ' ')) == NULL ||
	    strncmp(tend + 1, "HTTP/1.", 7) != 0) {
		scrape_answer(sc, "400 Bad Request", NULL,
		    "not an HTTP/1 request line\n", 0);
		return;
	}
	tlen = strcspn(target, " ?");
	if (tlen != strlen("/metrics") ||
	    strncmp(target, "/metrics", tlen) != 0) {
		scrape_answer(sc, "404 Not Found", NULL,
		    "only /metrics is served here\n", 0);
		return;
	}
	head = mlen == 4 && strncmp(line, "HEAD", 4) == 0;
	if (!head && !(mlen == 3 && strncmp(line, "GET", 3) == 0)) {
		scrape_answer(sc, "405 Method Not Allowed",
		    "Allow: GET, HEAD\r\n", "/metrics takes GET or HEAD\n", 0);
		return;
	}
	text = sc->s->text(sc->s->arg);
	scrape_answer(sc, "200 OK", NULL, text, head);
	free(text);
}

static void
scrape_read(struct bufferevent *bev, void *arg)
{
	struct scrape_conn	*sc = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	struct evbuffer_ptr	 end;
	char			*line;
	size_t			 len;

	if (sc->answered)
		return;
	end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (end.pos == -1)
		end = evbuffer_search(in, "\n\n", 2, NULL);
	if (end.pos == -1) {
		if (evbuffer_get_length(in) > SCRAPE_HEAD_MAX)
			scrape_answer(sc, "431 Request Header Fields Too Large",
			    NULL, "the request head is too large\n", 0);
		return;
	}
	if ((size_t)end.pos > SCRAPE_HEAD_MAX) {
		scrape_answer(sc, "431 Request Header Fields Too Large", NULL,
		    "the request head is too large\n", 0);
		return;
	}
	if ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF)) == NULL) {
		scrape_answer(sc, "400 Bad Request", NULL,
		    "not an HTTP request\n", 0);
		return;
	}
	if (strlen(line) != len)
		scrape_answer(sc, "400 Bad Request", NULL,
		    "a NUL in the request line\n", 0);
	else
		scrape_request(sc, line);
	free(line);
}

static void
scrape_event(struct bufferevent *bev, short what, void *arg)
{
	struct scrape_conn	*sc = arg;

	(void)bev;
	if (what & BEV_EVENT_TIMEOUT)
		log_debug("metrics: a client timed out");
	scrape_conn_free(sc);
}

static void
scrape_accept(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct scrape		*s = arg;
	struct scrape_conn	*sc;
	struct ucred		 cr;
	const struct timeval	 tmo = { SCRAPE_TIMEOUT, 0 };
	const char		*why = NULL;
	uid_t			 uid = (uid_t)-1;
	gid_t			 gid = (gid_t)-1;

	(void)lev;
	(void)sa;
	(void)salen;
	if (s->nconns >= SCRAPE_CONNS) {
		if (!s->full)
			log_warnx("metrics: %d connections open: closing "
			    "more until one ends", SCRAPE_CONNS);
		s->full = 1;
		close(fd);
		return;
	}
	if (scrape_peer_uid(fd, &uid) == -1) {
		uid = (uid_t)-1;
		why = "its user cannot be determined";
	}
	else if (!scrape_allowed(s->allow, uid, &gid))
		why = "not on the metrics allowlist";
	if ((sc = calloc(1, sizeof(*sc))) == NULL ||
	    (sc->bev = bufferevent_socket_new(s->base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		log_warnx("metrics: out of memory");
		free(sc);
		close(fd);
		return;
	}
	sc->s = s;
	s->nconns++;
	TAILQ_INSERT_TAIL(&s->conns, sc, entry);
	bufferevent_set_timeouts(sc->bev, &tmo, &tmo);
	bufferevent_setcb(sc->bev, scrape_read, NULL, scrape_event, sc);
	if (why != NULL) {
		memset(&cr, 0, sizeof(cr));
		cr.uid = uid;
		cr.gid = gid;
		if (s->refused != NULL)
			s->refused(&cr, why, s->refused_arg);
		else
			log_warnx("metrics: peer uid %d refused: %s",
			    (int)cr.uid, why);
		scrape_answer(sc, "403 Forbidden", NULL,
		    "not on this daemon's metrics allowlist\n", 0);
		return;
	}
	bufferevent_enable(sc->bev, EV_READ);
}

struct scrape *
scrape_listen(struct event_base *base, const char *listen,
    const struct peer_allow *allow, char *(*text)(void *), void *arg,
    void (*refused)(const struct ucred *, const char *, void *),
    void *refused_arg)
{
	struct scrape		*s;
	struct sockaddr_storage	 ss;
	socklen_t		 len;
	const char		*why;

	if (cfg_metrics_addr(listen, &ss, &len, &why) == -1) {
		log_warnx("metrics.listen %s: %s", listen, why);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	TAILQ_INIT(&s->conns);
	s->base = base;
	s->allow = allow;
	s->text = text;
	s->arg = arg;
	s->refused = refused;
	s->refused_arg = refused_arg;
	if ((s->lev = evconnlistener_new_bind(base, scrape_accept, s,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
	    16, (struct sockaddr *)&ss, (int)len)) == NULL) {
		log_warn("metrics.listen %s", listen);
		free(s);
		return NULL;
	}
	log_info("metrics: serving GET /metrics on %s", listen);
	return s;
}

void
scrape_free(struct scrape *s)
{
	if (s == NULL)
		return;
	while (!TAILQ_EMPTY(&s->conns))
		scrape_conn_free(TAILQ_FIRST(&s->conns));
	evconnlistener_free(s->lev);
	free(s);
}
