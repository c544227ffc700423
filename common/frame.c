/*
 * frame.c: the server side of framed protobuf messaging, and the codec
 * both sides share.  A frame is a 4-byte big-endian length and an encoded
 * sbx.v1.Envelope.  This file upholds DESIGN.md invariant 10: a socket
 * answers only the peers on its allowlist, checked from kernel-attested
 * credentials before a byte is read, and survives any bytes they send.  A
 * frame that is empty, too large, undecodable, of another protocol version
 * or without a body is answered with an Error and closes that one
 * connection; nothing a client sends reaches another client's connection.
 * An envelope that decodes but whose body is a field this side does not
 * know (a newer client's request) is answered ERROR_UNEXPECTED and the
 * connection stays open, as does a hello, which this file answers for
 * every socket (protocol version, server name and version, the request
 * types the socket serves).  A connection that makes the server answer
 * FRAME_REFUSED_MAX of those on its behalf is closed.
 *
 * Connection lifetime: the server owns one reference to each frame_conn
 * until the connection ends; a handler that answers later takes its own
 * reference with frame_conn_hold().  Once the connection has ended, sends
 * are refused and dropped, and the memory goes when the last reference is
 * released.
 *
 * The outgoing side (frame_connect) is for one daemon calling another: it
 * checks the server's credentials before sending anything and reports a
 * failure exactly once, so its caller can fail closed.
 *
 * Descriptor passing (pass_fds servers, launchd-sbx -> gated): such a
 * connection is read with recvmsg() by our own read event rather than by
 * the bufferevent, because a plain read() would silently discard the
 * SCM_RIGHTS that came with the bytes.  A descriptor belongs to the frame
 * whose bytes it arrived with; a frame keeps at most one (extras are
 * closed at once), and one its handler did not take is closed when the
 * handler returns, so a client can never make the server hoard them.
 */
#include <sys/types.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "frame.h"
#include "log.h"
#include "peer.h"
#include "utf8.h"
#include "util.h"
#include "version.h"

#define FRAME_CONNS_PER_PEER_DEFAULT	64
#define FRAME_CONNS_DEFAULT		1024
#define FRAME_IDLE_DEFAULT		300
#define FRAME_BACKLOG			SOMAXCONN	/* the kernel caps it */
/* Frames handled in one go before other clients get a turn. */
#define FRAME_BATCH			64
/* Queued replies beyond this many max-size frames stop reading requests. */
#define FRAME_OUT_FRAMES		4
#define FRAME_ERRMSG_MAX		512
/* Descriptors received but whose frame has not been handled yet. */
#define FRAME_FDS_PENDING		4
/* Bytes one recvmsg() may append to a pass_fds connection's input. */
#define FRAME_RECV_CHUNK		65536

struct frame_conn {
	TAILQ_ENTRY(frame_conn)	 fc_entry;
	struct frame_server	*fc_srv;	/* NULL once gone */
	struct bufferevent	*fc_bev;	/* NULL once gone */
	struct event		*fc_resume;	/* continue a long batch */
	struct ucred		 fc_peer;
	unsigned		 fc_refs;
	int			 fc_gone;	/* connection ended */
	int			 fc_closing;	/* flushing, then gone */
	int			 fc_paused;	/* output backlog: not reading */
	int			 fc_eof;	/* peer has stopped sending */
	int			 fc_pending;	/* whole frames may wait */
	int			 fc_hello;	/* hello answered */
	unsigned		 fc_refused;	/* answered on its behalf */
	/* pass_fds connections only: */
	struct event		*fc_rd;		/* our recvmsg read event */
	int			 fc_fd;		/* the current frame's fd */
	uint64_t		 fc_inpos;	/* bytes received in all */
	uint64_t		 fc_usedpos;	/* bytes consumed by frames */
	int			 fc_fds[FRAME_FDS_PENDING];
	uint64_t		 fc_fdpos[FRAME_FDS_PENDING];
	unsigned		 fc_nfds;
};

TAILQ_HEAD(frame_conns, frame_conn);

struct frame_server {
	struct event_base	*fs_base;
	struct evconnlistener	*fs_lev;
	struct event		*fs_retry;	/* re-enable accept after EMFILE */
	char			*fs_name;
	char			*fs_path;
	const struct peer_allow	*fs_allow;
	size_t			 fs_max_frame;
	size_t			 fs_max_out;
	unsigned		 fs_max_per_peer;
	unsigned		 fs_max_conns;
	int			 fs_idle;
	frame_handler		 fs_handler;
	void			*fs_arg;
	void			(*fs_refusedcb)(const struct ucred *,
				    const char *, void *);
	void			*fs_refused_arg;
	struct frame_conns	 fs_conns;
	unsigned		 fs_nconns;
	uint64_t		 fs_refused;
	int			 fs_pass_fds;
	char			*fs_server_name;
	void			(*fs_flush)(void *);
	uint32_t		*fs_serves;
	size_t			 fs_nserves;
	LIST_ENTRY(frame_server) fs_entry;	/* frame_servers */
};

/*
 * Every live server, so frame_servers_relisten() can reach them after a
 * privilege drop (see there).
 */
static LIST_HEAD(, frame_server) frame_servers =
    LIST_HEAD_INITIALIZER(frame_servers);

static void	frame_conn_gone(struct frame_conn *);
static int	frame_conn_drain(struct frame_conn *);
static int	frame_conn_drain1(struct frame_conn *);
static void	frame_conn_reading(struct frame_conn *, int);
static void	frame_conn_fds_close(struct frame_conn *);
static void	frame_conn_fds_take(struct frame_conn *, size_t);
static void	frame_conn_reject(struct frame_conn *, uint64_t,
		    Sbx__V1__ErrorCode, const char *);
static void	frame_conn_refuse(struct frame_conn *, uint64_t,
		    Sbx__V1__ErrorCode, const char *, ...)
		    __attribute__((format(printf, 4, 5)));
static void	frame_conn_hello(struct frame_conn *,
		    const Sbx__V1__Envelope *);

/* ---- codec ---- */

void
frame_env_init(Sbx__V1__Envelope *env, uint64_t request_id)
{
	sbx__v1__envelope__init(env);
	env->version = SBX_PROTO_VERSION;
	env->request_id = request_id;
}

uint8_t *
frame_pack(const Sbx__V1__Envelope *env, size_t *lenp)
{
	uint8_t	*buf;
	size_t	 n;

	n = sbx__v1__envelope__get_packed_size(env);
	/* An empty payload is a malformed frame; so is one past 32 bits. */
	if (n == 0 || n > UINT32_MAX)
		return NULL;
	buf = xmalloc(FRAME_HDR + n);
	buf[0] = (uint8_t)(n >> 24);
	buf[1] = (uint8_t)(n >> 16);
	buf[2] = (uint8_t)(n >> 8);
	buf[3] = (uint8_t)n;
	if (sbx__v1__envelope__pack(env, buf + FRAME_HDR) != n) {
		free(buf);
		return NULL;
	}
	*lenp = FRAME_HDR + n;
	return buf;
}

int
frame_parse_header(const uint8_t hdr[FRAME_HDR], size_t max, size_t *lenp,
    Sbx__V1__ErrorCode *code, const char **why)
{
	uint32_t	n;

	if (max == 0)
		max = FRAME_MAX_DEFAULT;
	n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
	    (uint32_t)hdr[2] << 8 | (uint32_t)hdr[3];
	if (n == 0) {
		*code = SBX__V1__ERROR_CODE__ERROR_MALFORMED;
		*why = "frame has length 0";
		return -1;
	}
	if (n > max) {
		*code = SBX__V1__ERROR_CODE__ERROR_FRAME_TOO_LARGE;
		*why = "frame length exceeds this socket's maximum";
		return -1;
	}
	*lenp = n;
	return 0;
}

/*
 * frame_decode(), also telling the caller the request id whenever the
 * envelope decoded far enough to have one, so that an Error can echo it.
 */
static Sbx__V1__Envelope *
frame_decode_id(const uint8_t *buf, size_t len, size_t max,
    Sbx__V1__ErrorCode *code, const char **why, uint64_t *reqid)
{
	Sbx__V1__Envelope	*env;

	*reqid = 0;
	if (max == 0)
		max = FRAME_MAX_DEFAULT;
	if (len == 0) {
		*code = SBX__V1__ERROR_CODE__ERROR_MALFORMED;
		*why = "frame has length 0";
		return NULL;
	}
	if (len > max) {
		*code = SBX__V1__ERROR_CODE__ERROR_FRAME_TOO_LARGE;
		*why = "frame length exceeds this socket's maximum";
		return NULL;
	}
	if ((env = sbx__v1__envelope__unpack(NULL, len, buf)) == NULL) {
		*code = SBX__V1__ERROR_CODE__ERROR_MALFORMED;
		*why = "frame does not decode as an sbx.v1.Envelope";
		return NULL;
	}
	*reqid = env->request_id;
	if (env->version != SBX_PROTO_VERSION) {
		*code = SBX__V1__ERROR_CODE__ERROR_UNSUPPORTED_VERSION;
		*why = "unsupported protocol version (this side speaks 1)";
		sbx__v1__envelope__free_unpacked(env, NULL);
		return NULL;
	}
	if (env->body_case == SBX__V1__ENVELOPE__BODY__NOT_SET &&
	    env->base.n_unknown_fields > 0) {
		/* It decoded: a body from a newer protocol, not garbage. */
		*code = SBX__V1__ERROR_CODE__ERROR_UNEXPECTED;
		*why = "the envelope's body is a field this side does not "
		    "know (a newer protocol's request?)";
		sbx__v1__envelope__free_unpacked(env, NULL);
		return NULL;
	}
	if (env->body_case == SBX__V1__ENVELOPE__BODY__NOT_SET) {
		*code = SBX__V1__ERROR_CODE__ERROR_MALFORMED;
		*why = "envelope carries no message body";
		sbx__v1__envelope__free_unpacked(env, NULL);
		return NULL;
	}
	return env;
}

Sbx__V1__Envelope *
frame_decode(const uint8_t *buf, size_t len, size_t max,
    Sbx__V1__ErrorCode *code, const char **why)
{
	uint64_t	reqid;

	return frame_decode_id(buf, len, max, code, why, &reqid);
}

/* ---- connections ---- */

void
frame_conn_hold(struct frame_conn *c)
{
	c->fc_refs++;
}

void
frame_conn_release(struct frame_conn *c)
{
	if (c->fc_refs == 0)
		fatalx("frame_conn_release: connection has no references");
	if (--c->fc_refs == 0) {
		/* The server's reference goes only when the conn is gone. */
		free(c);
		return;
	}
	/*
	 * A peer that half-closed after its request waits for the reply; once
	 * the last handler holding the connection lets go, it has it.
	 */
	if (c->fc_refs == 1 && c->fc_eof && !c->fc_pending && !c->fc_gone &&
	    !c->fc_closing)
		frame_conn_close(c);
}

int
frame_conn_closed(const struct frame_conn *c)
{
	return c->fc_gone || c->fc_closing;
}

const struct ucred *
frame_conn_peer(const struct frame_conn *c)
{
	return &c->fc_peer;
}

size_t
frame_conn_max_frame(const struct frame_conn *c)
{
	return c->fc_srv->fs_max_frame;
}

int
frame_conn_fd(const struct frame_conn *c)
{
	if (c->fc_gone || c->fc_bev == NULL)
		return -1;
	return (int)bufferevent_getfd(c->fc_bev);
}

int
frame_conn_send_packed(struct frame_conn *c, const uint8_t *buf, size_t len)
{
	ssize_t	 n = 0;
	int	 fd;

	if (c->fc_gone || c->fc_closing || c->fc_bev == NULL)
		return -1;
	/*
	 * With nothing queued before it, the reply is written at once:
	 * through the bufferevent alone it costs a write event (two
	 * epoll_ctl calls) and a pass of the loop before the peer has it.
	 * The order stays: only an empty queue is overtaken.  Whatever the
	 * socket does not take now (a full buffer, EINTR, an error the
	 * bufferevent's own write then meets and reports) is queued as
	 * before.
	 */
	if (evbuffer_get_length(bufferevent_get_output(c->fc_bev)) == 0 &&
	    (fd = bufferevent_getfd(c->fc_bev)) != -1 &&
	    (n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT)) == -1)
		n = 0;
	if ((size_t)n < len &&
	    bufferevent_write(c->fc_bev, buf + n, len - (size_t)n) == -1)
		return -1;
	return 0;
}

int
frame_conn_send(struct frame_conn *c, const Sbx__V1__Envelope *env)
{
	uint8_t	*buf;
	size_t	 len;
	int	 rv;

	if (c->fc_gone || c->fc_closing)
		return -1;
	if ((buf = frame_pack(env, &len)) == NULL) {
		log_warnx("frame: cannot encode a reply to peer uid %u",
		    (unsigned)c->fc_peer.uid);
		return -1;
	}
	rv = frame_conn_send_packed(c, buf, len);
	free(buf);
	return rv;
}

/* Cut a truncated message back to whole UTF-8 characters. */
static void
frame_utf8_trim(char *s)
{
	size_t	n = strlen(s), i = n, need;

	while (i > 0 && ((unsigned char)s[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0)
		return;
	i--;	/* the last lead byte */
	if (((unsigned char)s[i] & 0x80) == 0)
		return;
	if (((unsigned char)s[i] & 0xe0) == 0xc0)
		need = 2;
	else if (((unsigned char)s[i] & 0xf0) == 0xe0)
		need = 3;
	else
		need = 4;
	if (n - i < need)
		s[i] = '\0';
}

int
frame_conn_send_error(struct frame_conn *c, uint64_t request_id,
    Sbx__V1__ErrorCode code, const char *rule, const char *fmt, ...)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__Error		 err;
	char			 msg[FRAME_ERRMSG_MAX];
	va_list			 ap;
	int			 n;

	if (c->fc_gone || c->fc_closing)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		msg[0] = '\0';
	else if ((size_t)n >= sizeof(msg))
		frame_utf8_trim(msg);
	sbx__v1__error__init(&err);
	err.code = code;
	err.message = msg;
	err.rule = (char *)(rule != NULL ? rule : "");
	frame_env_init(&env, request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
	env.error = &err;
	return frame_conn_send(c, &env);
}

void
frame_conn_close(struct frame_conn *c)
{
	if (c->fc_gone || c->fc_closing)
		return;
	c->fc_closing = 1;
	frame_conn_reading(c, 0);
	/* Freeing the bufferevent would discard queued output: wait. */
	if (evbuffer_get_length(bufferevent_get_output(c->fc_bev)) == 0)
		frame_conn_gone(c);
}

/* The connection has ended: free the socket, drop the server's reference. */
static void
frame_conn_gone(struct frame_conn *c)
{
	struct frame_server	*srv = c->fc_srv;

	if (c->fc_gone)
		return;
	c->fc_gone = 1;
	if (c->fc_resume != NULL) {
		event_free(c->fc_resume);
		c->fc_resume = NULL;
	}
	if (c->fc_rd != NULL) {
		event_free(c->fc_rd);
		c->fc_rd = NULL;
	}
	frame_conn_fds_close(c);
	if (c->fc_bev != NULL) {
		bufferevent_free(c->fc_bev);	/* closes the socket */
		c->fc_bev = NULL;
	}
	if (srv != NULL) {
		TAILQ_REMOVE(&srv->fs_conns, c, fc_entry);
		srv->fs_nconns--;
		c->fc_srv = NULL;
	}
	frame_conn_release(c);
}

static void
frame_conn_reject(struct frame_conn *c, uint64_t reqid,
    Sbx__V1__ErrorCode code, const char *why)
{
	log_warnx("%s: peer uid %u pid %ld: %s; closing the connection",
	    c->fc_srv->fs_name, (unsigned)c->fc_peer.uid,
	    (long)c->fc_peer.pid, why);
	frame_conn_send_error(c, reqid, code, NULL, "%s", why);
	frame_conn_close(c);
}

/*
 * Answer a request with an Error on the server's behalf and keep the
 * connection open, up to FRAME_REFUSED_MAX of them: then close it, so a
 * client cannot keep the server busy answering what it never serves.
 */
static void
frame_conn_refuse(struct frame_conn *c, uint64_t reqid,
    Sbx__V1__ErrorCode code, const char *fmt, ...)
{
	char	msg[FRAME_ERRMSG_MAX];
	va_list	ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->fc_srv->fs_flush != NULL)
		c->fc_srv->fs_flush(c->fc_srv->fs_arg);
	if (++c->fc_refused >= FRAME_REFUSED_MAX) {
		frame_conn_reject(c, reqid, code, "too many requests this "
		    "socket does not serve on one connection");
		return;
	}
	log_debug("%s: peer uid %u pid %ld: %s", c->fc_srv->fs_name,
	    (unsigned)c->fc_peer.uid, (long)c->fc_peer.pid, msg);
	frame_conn_send_error(c, reqid, code, NULL, "%s", msg);
}

/* 1 if s is at most max bytes of printable UTF-8 (no controls, nothing
 * hidden). */
static int
frame_text_ok(const char *s, size_t max)
{
	size_t		 n = strlen(s), i, k;
	uint32_t	 cp;

	if (n > max)
		return 0;
	for (i = 0; i < n; i += k) {
		k = utf8_decode((const uint8_t *)s + i, n - i, &cp);
		if (k == 0 || cp < 0x20 || cp == 0x7f || utf8_hidden(cp))
			return 0;
	}
	return 1;
}

/* The answer to a hello: see proto/README.md. */
static void
frame_conn_hello(struct frame_conn *c, const Sbx__V1__Envelope *req)
{
	const ProtobufCFieldDescriptor	*fd;
	struct frame_server		*srv = c->fc_srv;
	const Sbx__V1__Hello		*h = req->hello;
	Sbx__V1__Envelope		 env;
	Sbx__V1__HelloReply		 rep;
	Sbx__V1__RequestType		*types, **ptypes;
	size_t				 i;

	if (c->fc_hello) {
		frame_conn_refuse(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "hello: already "
		    "answered on this connection");
		return;
	}
	if (h->protocol_version != SBX_PROTO_VERSION) {
		frame_conn_refuse(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNSUPPORTED_VERSION, "hello: "
		    "protocol version %u is not one %s speaks (it speaks %d)",
		    (unsigned)h->protocol_version, srv->fs_server_name,
		    SBX_PROTO_VERSION);
		return;
	}
	if (!frame_text_ok(h->client_name, FRAME_HELLO_NAME_MAX)) {
		frame_conn_refuse(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "hello: client_name "
		    "must be at most %d bytes of printable UTF-8",
		    FRAME_HELLO_NAME_MAX);
		return;
	}
	c->fc_hello = 1;
	if (srv->fs_flush != NULL)
		srv->fs_flush(srv->fs_arg);
	log_debug("%s: peer uid %u pid %ld: hello from \"%s\"",
	    srv->fs_name, (unsigned)c->fc_peer.uid, (long)c->fc_peer.pid,
	    h->client_name);

	sbx__v1__hello_reply__init(&rep);
	rep.protocol_version = SBX_PROTO_VERSION;
	rep.server_name = srv->fs_server_name;
	rep.server_version = (char *)SBX_VERSION;
	rep.socket = srv->fs_name;
	types = xcalloc(srv->fs_nserves + 1, sizeof(*types));
	ptypes = xcalloc(srv->fs_nserves + 1, sizeof(*ptypes));
	for (i = 0; i < srv->fs_nserves; i++) {
		sbx__v1__request_type__init(&types[i]);
		types[i].field = srv->fs_serves[i];
		fd = protobuf_c_message_descriptor_get_field(
		    &sbx__v1__envelope__descriptor, srv->fs_serves[i]);
		types[i].name = (char *)(fd != NULL ? fd->name : "");
		ptypes[i] = &types[i];
	}
	rep.n_requests = srv->fs_nserves;
	rep.requests = ptypes;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_HELLO_REPLY;
	env.hello_reply = &rep;
	(void)frame_conn_send(c, &env);
	free(ptypes);
	free(types);
}

/*
 * Handle every complete frame in the input buffer, in order, stopping when
 * the connection closes, its output backs up, or a batch is done (then the
 * rest waits one turn of the loop so other clients are served meanwhile).
 * Returns 1 when whole frames may still be waiting, else 0.
 */
static int
frame_conn_drain(struct frame_conn *c)
{
	int	rv;

	rv = frame_conn_drain1(c);
	c->fc_pending = rv;
	return rv;
}

static int
frame_conn_drain1(struct frame_conn *c)
{
	struct frame_server	*srv;
	struct evbuffer		*in;
	Sbx__V1__Envelope	*env;
	Sbx__V1__ErrorCode	 code;
	const char		*why;
	uint8_t			 hdr[FRAME_HDR], *payload;
	size_t			 avail, len;
	uint64_t		 reqid;
	int			 handled = 0;

	while (!c->fc_gone && !c->fc_closing && !c->fc_paused &&
	    (srv = c->fc_srv) != NULL) {
		in = bufferevent_get_input(c->fc_bev);
		avail = evbuffer_get_length(in);
		if (avail < FRAME_HDR)
			return 0;
		if (handled == FRAME_BATCH) {
			event_active(c->fc_resume, EV_TIMEOUT, 0);
			return 1;
		}
		if (evbuffer_copyout(in, hdr, FRAME_HDR) != FRAME_HDR)
			return 0;
		if (frame_parse_header(hdr, srv->fs_max_frame, &len, &code,
		    &why) == -1) {
			frame_conn_reject(c, 0, code, why);
			return 0;
		}
		if (avail - FRAME_HDR < len)
			return 0;	/* the rest of the frame is on its way */
		frame_conn_fds_take(c, FRAME_HDR + len);
		evbuffer_drain(in, FRAME_HDR);
		if ((payload = evbuffer_pullup(in, len)) == NULL) {
			frame_conn_reject(c, 0,
			    SBX__V1__ERROR_CODE__ERROR_INTERNAL,
			    "out of memory reading a frame");
			return 0;
		}
		env = frame_decode_id(payload, len, srv->fs_max_frame, &code,
		    &why, &reqid);
		evbuffer_drain(in, len);
		if (env == NULL &&
		    code == SBX__V1__ERROR_CODE__ERROR_UNEXPECTED) {
			frame_conn_refuse(c, reqid, code, "%s", why);
		} else if (env == NULL) {
			frame_conn_reject(c, reqid, code, why);
			return 0;
		} else if (env->body_case == SBX__V1__ENVELOPE__BODY_HELLO) {
			frame_conn_hello(c, env);
			sbx__v1__envelope__free_unpacked(env, NULL);
		} else {
			srv->fs_handler(c, env, srv->fs_arg);
			sbx__v1__envelope__free_unpacked(env, NULL);
		}
		if (c->fc_fd != -1) {
			/* Not taken by the handler: not kept either. */
			close(c->fc_fd);
			c->fc_fd = -1;
		}
		handled++;
		if (c->fc_gone || c->fc_closing)
			return 0;
		if (evbuffer_get_length(bufferevent_get_output(c->fc_bev)) >
		    srv->fs_max_out) {
			/* It does not read its replies: stop reading requests. */
			c->fc_paused = 1;
			frame_conn_reading(c, 0);
			return 1;
		}
	}
	return c->fc_paused && !c->fc_gone && !c->fc_closing;
}

/*
 * 1 if the peer closed its end entirely rather than only its sending
 * half: then nothing we write can reach it.
 */
static int
frame_conn_hungup(struct frame_conn *c)
{
	struct pollfd	pfd;

	pfd.fd = bufferevent_getfd(c->fc_bev);
	pfd.events = POLLOUT;
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) == -1)
		return 0;
	return (pfd.revents & (POLLHUP | POLLERR)) != 0;
}

/*
 * The peer has stopped sending and every whole frame is handled: bytes
 * still buffered are a frame it never finished.
 */
static void
frame_conn_eof_check(struct frame_conn *c)
{
	size_t	left;

	if (!c->fc_eof || c->fc_pending || c->fc_gone || c->fc_closing)
		return;
	left = evbuffer_get_length(bufferevent_get_input(c->fc_bev));
	if (left == 0)
		return;
	log_warnx("%s: peer uid %u pid %ld: connection ended inside a frame "
	    "(%zu bytes); closing", c->fc_srv->fs_name,
	    (unsigned)c->fc_peer.uid, (long)c->fc_peer.pid, left);
	frame_conn_send_error(c, 0, SBX__V1__ERROR_CODE__ERROR_TRUNCATED, NULL,
	    "connection ended inside a frame (%zu bytes of it received)",
	    left);
	frame_conn_close(c);
}

static void
frame_conn_readcb(struct bufferevent *bev, void *arg)
{
	struct frame_conn	*c = arg;

	(void)bev;
	frame_conn_hold(c);
	frame_conn_drain(c);
	frame_conn_release(c);
}

static void
frame_conn_resumecb(evutil_socket_t fd, short what, void *arg)
{
	struct frame_conn	*c = arg;

	(void)fd;
	(void)what;
	frame_conn_hold(c);
	if (frame_conn_drain(c) == 0)
		frame_conn_eof_check(c);
	frame_conn_release(c);
}

/* All queued output has been written. */
static void
frame_conn_writecb(struct bufferevent *bev, void *arg)
{
	struct frame_conn	*c = arg;

	(void)bev;
	if (c->fc_gone)
		return;
	if (c->fc_closing) {
		frame_conn_gone(c);
		return;
	}
	if (c->fc_paused) {
		c->fc_paused = 0;
		if (!c->fc_eof)
			frame_conn_reading(c, 1);
		event_active(c->fc_resume, EV_TIMEOUT, 0);
	}
}

static void
frame_conn_eventcb(struct bufferevent *bev, short what, void *arg)
{
	struct frame_conn	*c = arg;
	struct frame_server	*srv = c->fc_srv;

	(void)bev;
	if (c->fc_gone || srv == NULL)
		return;
	if (what & BEV_EVENT_EOF) {
		frame_conn_hold(c);
		c->fc_eof = 1;
		frame_conn_reading(c, 0);
		/* Whole frames that arrived with the EOF are still served. */
		if (frame_conn_drain(c) == 0)
			frame_conn_eof_check(c);
		/*
		 * A peer that is gone altogether hears nothing more: a reply
		 * still owed to it is refused when it is sent.
		 */
		if (!c->fc_gone && !c->fc_closing && frame_conn_hungup(c))
			frame_conn_gone(c);
		/* Closes now unless a handler still owes this peer a reply. */
		frame_conn_release(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		/*
		 * Silence is expected while a handler works on this peer's
		 * request; only a connection nobody is answering is idle.
		 */
		if ((what & BEV_EVENT_READING) && c->fc_refs > 1 &&
		    !c->fc_closing) {
			frame_conn_reading(c, 1);
			return;
		}
		log_info("%s: peer uid %u pid %ld: idle for %d s; closing",
		    srv->fs_name, (unsigned)c->fc_peer.uid,
		    (long)c->fc_peer.pid, srv->fs_idle);
		frame_conn_gone(c);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		log_debug("%s: peer uid %u pid %ld: connection error: %s",
		    srv->fs_name, (unsigned)c->fc_peer.uid,
		    (long)c->fc_peer.pid,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		frame_conn_gone(c);
	}
}

/* ---- descriptor passing (pass_fds servers) ---- */

static void
frame_conn_fds_close(struct frame_conn *c)
{
	for (unsigned i = 0; i < c->fc_nfds; i++)
		close(c->fc_fds[i]);
	c->fc_nfds = 0;
	if (c->fc_fd != -1)
		close(c->fc_fd);
	c->fc_fd = -1;
}

/*
 * The next frame is the next `total` bytes of input: the first descriptor
 * that arrived with them becomes the frame's, any other is closed.
 */
static void
frame_conn_fds_take(struct frame_conn *c, size_t total)
{
	uint64_t	end;
	unsigned	i, j;

	if (c->fc_rd == NULL)
		return;
	end = c->fc_usedpos + total;
	for (i = 0, j = 0; i < c->fc_nfds; i++) {
		if (c->fc_fdpos[i] < end) {
			if (c->fc_fd == -1)
				c->fc_fd = c->fc_fds[i];
			else
				close(c->fc_fds[i]);
			continue;
		}
		c->fc_fds[j] = c->fc_fds[i];
		c->fc_fdpos[j] = c->fc_fdpos[i];
		j++;
	}
	c->fc_nfds = j;
	c->fc_usedpos = end;
}

int
frame_conn_take_fd(struct frame_conn *c)
{
	int	fd = c->fc_fd;

	c->fc_fd = -1;
	return fd;
}

/* Keep descriptors from one recvmsg(): at most one per message. */
static void
frame_conn_fds_keep(struct frame_conn *c, struct msghdr *msg, uint64_t pos)
{
	struct cmsghdr	*cm;
	int		*fds, kept = 0;
	size_t		 n, i;

	for (cm = CMSG_FIRSTHDR(msg); cm != NULL; cm = CMSG_NXTHDR(msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		fds = (int *)(void *)CMSG_DATA(cm);
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			if (!kept && c->fc_nfds < FRAME_FDS_PENDING) {
				c->fc_fds[c->fc_nfds] = fds[i];
				c->fc_fdpos[c->fc_nfds] = pos;
				c->fc_nfds++;
				kept = 1;
			} else
				close(fds[i]);
		}
	}
}

static void
frame_conn_reading(struct frame_conn *c, int on)
{
	struct timeval	tv;

	if (c->fc_bev == NULL)
		return;
	if (c->fc_rd == NULL) {
		if (on)
			bufferevent_enable(c->fc_bev, EV_READ);
		else
			bufferevent_disable(c->fc_bev, EV_READ);
		return;
	}
	if (on && c->fc_srv != NULL) {
		tv.tv_sec = c->fc_srv->fs_idle;
		tv.tv_usec = 0;
		event_add(c->fc_rd, &tv);
	} else
		event_del(c->fc_rd);
}

static void	frame_conn_readcb(struct bufferevent *, void *);
static void	frame_conn_eventcb(struct bufferevent *, short, void *);

/* A pass_fds connection is readable (or idle). */
static void
frame_conn_recvcb(evutil_socket_t fd, short what, void *arg)
{
	struct frame_conn	*c = arg;
	struct evbuffer		*in;
	struct evbuffer_iovec	 v;
	struct msghdr		 msg;
	struct iovec		 iov;
	union {
		struct cmsghdr	 hdr;
		char		 buf[CMSG_SPACE(sizeof(int) * 4)];
	}			 cbuf;
	size_t			 have, room;
	ssize_t			 n;

	if (c->fc_gone || c->fc_srv == NULL)
		return;
	if (what & EV_TIMEOUT) {
		event_del(c->fc_rd);
		frame_conn_eventcb(c->fc_bev,
		    BEV_EVENT_TIMEOUT | BEV_EVENT_READING, c);
		return;
	}
	in = bufferevent_get_input(c->fc_bev);
	have = evbuffer_get_length(in);
	/* Never buffer more than one frame's worth of unread request. */
	room = c->fc_srv->fs_max_frame + FRAME_HDR;
	room = have >= room ? 0 : room - have;
	if (room > FRAME_RECV_CHUNK)
		room = FRAME_RECV_CHUNK;
	if (room == 0) {
		event_del(c->fc_rd);
		return;
	}
	/* bufferevent_socket keeps the end of its input frozen against
	 * everyone but itself; we are doing its reading here. */
	evbuffer_unfreeze(in, 0);
	if (evbuffer_reserve_space(in, (ev_ssize_t)room, &v, 1) < 1) {
		evbuffer_freeze(in, 0);
		log_warnx("%s: peer uid %u: out of memory reading a frame",
		    c->fc_srv->fs_name, (unsigned)c->fc_peer.uid);
		frame_conn_gone(c);
		return;
	}
	iov.iov_base = v.iov_base;
	iov.iov_len = v.iov_len < room ? v.iov_len : room;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n > 0 || msg.msg_controllen > 0)
		frame_conn_fds_keep(c, &msg, c->fc_inpos);
	if (n <= 0) {
		v.iov_len = 0;
		evbuffer_commit_space(in, &v, 0);
		evbuffer_freeze(in, 0);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			return;
		frame_conn_eventcb(c->fc_bev, (n == 0 ? BEV_EVENT_EOF :
		    BEV_EVENT_ERROR) | BEV_EVENT_READING, c);
		return;
	}
	v.iov_len = (size_t)n;
	evbuffer_commit_space(in, &v, 1);
	evbuffer_freeze(in, 0);
	c->fc_inpos += (uint64_t)n;
	frame_conn_readcb(c->fc_bev, c);
}

/* ---- server ---- */

static unsigned
frame_server_count_uid(const struct frame_server *srv, uid_t uid)
{
	const struct frame_conn	*c;
	unsigned		 n = 0;

	TAILQ_FOREACH(c, &srv->fs_conns, fc_entry)
		if (c->fc_peer.uid == uid)
			n++;
	return n;
}

/*
 * Refusals close the socket without a byte of reply: a peer that may not
 * talk to us learns nothing, not even which daemon it reached.
 */
static void
frame_server_acceptcb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct frame_server	*srv = arg;
	struct frame_conn	*c;
	struct ucred		 cred;
	struct timeval		 tv;
	int			 ok;

	(void)lev;
	(void)sa;
	(void)salen;
	if ((ok = peer_allowed(fd, srv->fs_allow, &cred)) != 1) {
		srv->fs_refused++;
		if (ok == -1)
			log_warn("%s: refused a connection: cannot read the "
			    "peer's credentials", srv->fs_name);
		else
			log_warnx("%s: refused peer uid %u gid %u pid %ld: "
			    "not on the socket's allowlist", srv->fs_name,
			    (unsigned)cred.uid, (unsigned)cred.gid,
			    (long)cred.pid);
		close(fd);
		if (srv->fs_refusedcb != NULL)
			srv->fs_refusedcb(ok == -1 ? NULL : &cred,
			    "not-allowed", srv->fs_refused_arg);
		return;
	}
	if (srv->fs_nconns >= srv->fs_max_conns) {
		srv->fs_refused++;
		log_warnx("%s: refused peer uid %u gid %u pid %ld: %u "
		    "connections open (max_conns)", srv->fs_name,
		    (unsigned)cred.uid, (unsigned)cred.gid, (long)cred.pid,
		    srv->fs_nconns);
		close(fd);
		if (srv->fs_refusedcb != NULL)
			srv->fs_refusedcb(&cred, "max-conns",
			    srv->fs_refused_arg);
		return;
	}
	if (frame_server_count_uid(srv, cred.uid) >= srv->fs_max_per_peer) {
		srv->fs_refused++;
		log_warnx("%s: refused peer uid %u gid %u pid %ld: it has %u "
		    "connections open (max_conns_per_peer)", srv->fs_name,
		    (unsigned)cred.uid, (unsigned)cred.gid, (long)cred.pid,
		    srv->fs_max_per_peer);
		close(fd);
		if (srv->fs_refusedcb != NULL)
			srv->fs_refusedcb(&cred, "max-conns",
			    srv->fs_refused_arg);
		return;
	}

	c = xcalloc(1, sizeof(*c));
	c->fc_peer = cred;
	c->fc_refs = 1;		/* the server's */
	c->fc_fd = -1;
	c->fc_bev = bufferevent_socket_new(srv->fs_base, fd,
	    BEV_OPT_CLOSE_ON_FREE);
	c->fc_resume = event_new(srv->fs_base, -1, 0, frame_conn_resumecb, c);
	if (srv->fs_pass_fds)
		c->fc_rd = event_new(srv->fs_base, fd, EV_READ | EV_PERSIST,
		    frame_conn_recvcb, c);
	if (c->fc_bev == NULL || c->fc_resume == NULL ||
	    (srv->fs_pass_fds && c->fc_rd == NULL)) {
		log_warnx("%s: peer uid %u: cannot set up the connection",
		    srv->fs_name, (unsigned)cred.uid);
		if (c->fc_bev != NULL)
			bufferevent_free(c->fc_bev);
		else
			close(fd);
		if (c->fc_resume != NULL)
			event_free(c->fc_resume);
		if (c->fc_rd != NULL)
			event_free(c->fc_rd);
		free(c);
		return;
	}
	c->fc_srv = srv;
	TAILQ_INSERT_TAIL(&srv->fs_conns, c, fc_entry);
	srv->fs_nconns++;

	bufferevent_setcb(c->fc_bev, frame_conn_readcb, frame_conn_writecb,
	    frame_conn_eventcb, c);
	/* Never buffer more than one frame's worth of unread request. */
	bufferevent_setwatermark(c->fc_bev, EV_READ, FRAME_HDR,
	    srv->fs_max_frame + FRAME_HDR);
	tv.tv_sec = srv->fs_idle;
	tv.tv_usec = 0;
	bufferevent_set_timeouts(c->fc_bev, &tv, &tv);
	if (c->fc_rd != NULL) {
		/* recvmsg() reads, so the descriptors are not lost. */
		bufferevent_enable(c->fc_bev, EV_WRITE);
		frame_conn_reading(c, 1);
	} else
		bufferevent_enable(c->fc_bev, EV_READ | EV_WRITE);
	log_debug("%s: accepted peer uid %u gid %u pid %ld", srv->fs_name,
	    (unsigned)cred.uid, (unsigned)cred.gid, (long)cred.pid);
}

static void
frame_server_retrycb(evutil_socket_t fd, short what, void *arg)
{
	struct frame_server	*srv = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(srv->fs_lev);
}

/*
 * accept() failed for want of descriptors or memory.  Retrying at once
 * would spin; pause accepting for a second while current clients finish.
 */
static void
frame_server_errorcb(struct evconnlistener *lev, void *arg)
{
	struct frame_server	*srv = arg;
	struct timeval		 tv = { 1, 0 };

	log_warn("%s: accept on %s", srv->fs_name, srv->fs_path);
	evconnlistener_disable(lev);
	evtimer_add(srv->fs_retry, &tv);
}

/* 1 if something answers on the socket path: another server is running. */
static int
frame_socket_live(const struct sockaddr_un *sun)
{
	int	fd, live;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return 0;
	live = connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0 ||
	    errno == EAGAIN || errno == EINPROGRESS;
	close(fd);
	return live;
}

static int
frame_server_socket(const struct frame_server_config *cfg)
{
	struct sockaddr_un	 sun;
	struct stat		 st;
	mode_t			 mode;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(cfg->path) >= sizeof(sun.sun_path)) {
		log_warnx("%s: socket path %s is longer than %zu bytes",
		    cfg->name, cfg->path, sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, cfg->path, strlen(cfg->path) + 1);

	if (lstat(cfg->path, &st) == 0) {
		/* Replace only a dead socket, never a file or a live peer. */
		if (!S_ISSOCK(st.st_mode)) {
			log_warnx("%s: %s exists and is not a socket",
			    cfg->name, cfg->path);
			return -1;
		}
		if (frame_socket_live(&sun)) {
			log_warnx("%s: %s: another server is listening there",
			    cfg->name, cfg->path);
			return -1;
		}
		if (unlink(cfg->path) == -1) {
			log_warn("%s: unlink stale socket %s", cfg->name,
			    cfg->path);
			return -1;
		}
	} else if (errno != ENOENT) {
		log_warn("%s: %s", cfg->name, cfg->path);
		return -1;
	}

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1) {
		log_warn("%s: socket", cfg->name);
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		log_warn("%s: bind %s", cfg->name, cfg->path);
		close(fd);
		return -1;
	}
	/* Mode 0 would lock everyone out: read it as owner-only. */
	mode = cfg->mode != 0 ? cfg->mode : 0600;
	if (chmod(cfg->path, mode) == -1) {
		log_warn("%s: chmod %s", cfg->name, cfg->path);
		goto fail;
	}
	if ((cfg->owner != (uid_t)-1 || cfg->group != (gid_t)-1) &&
	    chown(cfg->path, cfg->owner, cfg->group) == -1) {
		log_warn("%s: chown %s", cfg->name, cfg->path);
		goto fail;
	}
	if (listen(fd, FRAME_BACKLOG) == -1) {
		log_warn("%s: listen %s", cfg->name, cfg->path);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	unlink(cfg->path);
	return -1;
}

struct frame_server *
frame_server_listen(struct event_base *base,
    const struct frame_server_config *cfg, frame_handler handler, void *arg)
{
	struct frame_server	*srv;
	const char		*name;
	int			 fd;

	name = cfg->name != NULL ? cfg->name : "frame";
	if (cfg->path == NULL || handler == NULL) {
		log_warnx("%s: no socket path or no handler", name);
		return NULL;
	}
	if (cfg->allow == NULL) {
		/* Fail closed: a socket without an allowlist answers no one. */
		log_warnx("%s: %s has no peer allowlist", name, cfg->path);
		return NULL;
	}
	/*
	 * libevent writes replies with writev(), which cannot say
	 * MSG_NOSIGNAL: a peer that hangs up must cost us an EPIPE, never
	 * the process.
	 */
	signal(SIGPIPE, SIG_IGN);

	srv = xcalloc(1, sizeof(*srv));
	srv->fs_base = base;
	srv->fs_name = xstrdup(name);
	srv->fs_path = xstrdup(cfg->path);
	srv->fs_allow = cfg->allow;
	srv->fs_max_frame = cfg->max_frame != 0 ? cfg->max_frame :
	    FRAME_MAX_DEFAULT;
	if (srv->fs_max_frame > UINT32_MAX)
		srv->fs_max_frame = UINT32_MAX;
	srv->fs_max_out = srv->fs_max_frame * FRAME_OUT_FRAMES;
	srv->fs_max_per_peer = cfg->max_conns_per_peer != 0 ?
	    cfg->max_conns_per_peer : FRAME_CONNS_PER_PEER_DEFAULT;
	srv->fs_max_conns = cfg->max_conns != 0 ? cfg->max_conns :
	    FRAME_CONNS_DEFAULT;
	srv->fs_idle = cfg->idle_timeout > 0 ? cfg->idle_timeout :
	    FRAME_IDLE_DEFAULT;
	srv->fs_handler = handler;
	srv->fs_arg = arg;
	srv->fs_refusedcb = cfg->refused;
	srv->fs_refused_arg = cfg->refused_arg;
	srv->fs_pass_fds = cfg->pass_fds != 0;
	srv->fs_server_name = xstrdup(cfg->server_name != NULL ?
	    cfg->server_name : name);
	srv->fs_flush = cfg->flush;
	for (; cfg->serves != NULL && cfg->serves[srv->fs_nserves] != 0;
	    srv->fs_nserves++)
		;
	srv->fs_serves = xcalloc(srv->fs_nserves + 1,
	    sizeof(*srv->fs_serves));
	if (srv->fs_nserves > 0)
		memcpy(srv->fs_serves, cfg->serves,
		    srv->fs_nserves * sizeof(*srv->fs_serves));
	TAILQ_INIT(&srv->fs_conns);

	if ((srv->fs_retry = evtimer_new(base, frame_server_retrycb,
	    srv)) == NULL) {
		log_warnx("%s: cannot create a timer", name);
		goto fail;
	}
	if ((fd = frame_server_socket(cfg)) == -1)
		goto fail;
	srv->fs_lev = evconnlistener_new(base, frame_server_acceptcb, srv,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (srv->fs_lev == NULL) {
		log_warnx("%s: cannot listen on %s with libevent", name,
		    cfg->path);
		close(fd);
		unlink(cfg->path);
		goto fail;
	}
	evconnlistener_set_error_cb(srv->fs_lev, frame_server_errorcb);
	LIST_INSERT_HEAD(&frame_servers, srv, fs_entry);
	log_debug("%s: listening on %s", name, cfg->path);
	return srv;
fail:
	if (srv->fs_retry != NULL)
		event_free(srv->fs_retry);
	free(srv->fs_name);
	free(srv->fs_path);
	free(srv->fs_server_name);
	free(srv->fs_serves);
	free(srv);
	return NULL;
}

/*
 * A Unix socket's clients see, through SO_PEERCRED, the credentials its
 * server had when it called listen(2).  A daemon binds as root (to chown
 * the socket to the right group) and drops privileges afterwards, so its
 * peers would see uid 0 and refuse it.  Calling listen(2) again on the
 * same socket records the current credentials (Linux re-initialises the
 * peer credentials on every listen), so this runs right after the drop.
 */
int
frame_servers_relisten(void)
{
	struct frame_server	*srv;
	int			 rc = 0;

	LIST_FOREACH(srv, &frame_servers, fs_entry) {
		if (listen(evconnlistener_get_fd(srv->fs_lev),
		    FRAME_BACKLOG) == -1) {
			log_warn("%s: listen again on %s", srv->fs_name,
			    srv->fs_path);
			rc = -1;
		}
	}
	return rc;
}

void
frame_server_free(struct frame_server *srv)
{
	struct frame_conn	*c;

	if (srv == NULL)
		return;
	LIST_REMOVE(srv, fs_entry);
	if (srv->fs_lev != NULL) {
		evconnlistener_free(srv->fs_lev);
		unlink(srv->fs_path);
	}
	event_free(srv->fs_retry);
	/* Handlers still holding a conn see it closed; sends are dropped. */
	while ((c = TAILQ_FIRST(&srv->fs_conns)) != NULL)
		frame_conn_gone(c);
	free(srv->fs_name);
	free(srv->fs_path);
	free(srv->fs_server_name);
	free(srv->fs_serves);
	free(srv);
}

uint64_t
frame_server_refused(const struct frame_server *srv)
{
	return srv->fs_refused;
}

/* ---- outgoing connection ---- */

/*
 * The client's lifetime: the caller owns it and frees it.  A handler may
 * free its client from inside the callback; fcl_incb makes that free wait
 * until the callback has returned, so this file never touches freed
 * memory.  After the one failure report (fcl_dead) nothing more is
 * delivered.
 */
struct frame_client {
	struct bufferevent	*fcl_bev;
	struct ucred		 fcl_peer;
	size_t			 fcl_max;
	frame_reply_handler	 fcl_handler;
	void			*fcl_arg;
	int			 fcl_dead;	/* failure reported */
	int			 fcl_incb;	/* inside the handler */
	int			 fcl_freed;	/* freed inside the handler */
	int			 fcl_timeout;	/* seconds, 0: none */
};

static void
frame_client_destroy(struct frame_client *fc)
{
	if (fc->fcl_bev != NULL)
		bufferevent_free(fc->fcl_bev);
	free(fc);
}

/* Report a failure once.  Returns 1 if the client was freed meanwhile. */
static int
frame_client_fail(struct frame_client *fc, const char *why)
{
	if (fc->fcl_dead)
		return 0;
	fc->fcl_dead = 1;
	if (fc->fcl_bev != NULL)
		bufferevent_disable(fc->fcl_bev, EV_READ | EV_WRITE);
	fc->fcl_incb = 1;
	fc->fcl_handler(fc, NULL, why, fc->fcl_arg);
	fc->fcl_incb = 0;
	if (fc->fcl_freed) {
		frame_client_destroy(fc);
		return 1;
	}
	return 0;
}

static void
frame_client_readcb(struct bufferevent *bev, void *arg)
{
	struct frame_client	*fc = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	Sbx__V1__Envelope	*env;
	Sbx__V1__ErrorCode	 code;
	const char		*why;
	uint8_t			 hdr[FRAME_HDR], *payload;
	size_t			 len;

	while (!fc->fcl_dead && evbuffer_get_length(in) >= FRAME_HDR) {
		if (evbuffer_copyout(in, hdr, FRAME_HDR) != FRAME_HDR)
			return;
		if (frame_parse_header(hdr, fc->fcl_max, &len, &code,
		    &why) == -1) {
			frame_client_fail(fc, why);
			return;
		}
		if (evbuffer_get_length(in) - FRAME_HDR < len)
			return;
		evbuffer_drain(in, FRAME_HDR);
		if ((payload = evbuffer_pullup(in, len)) == NULL) {
			frame_client_fail(fc, "out of memory reading a reply");
			return;
		}
		env = frame_decode(payload, len, fc->fcl_max, &code, &why);
		evbuffer_drain(in, len);
		if (env == NULL) {
			frame_client_fail(fc, why);
			return;
		}
		fc->fcl_incb = 1;
		fc->fcl_handler(fc, env, NULL, fc->fcl_arg);
		fc->fcl_incb = 0;
		sbx__v1__envelope__free_unpacked(env, NULL);
		if (fc->fcl_freed) {
			frame_client_destroy(fc);
			return;
		}
	}
}

static void
frame_client_eventcb(struct bufferevent *bev, short what, void *arg)
{
	struct frame_client	*fc = arg;

	(void)bev;
	if (what & BEV_EVENT_EOF) {
		/* Whole frames that came with the EOF were read already. */
		if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
			frame_client_fail(fc, "the server closed the "
			    "connection inside a reply");
		else
			frame_client_fail(fc, "the server closed the "
			    "connection without a reply");
	} else if (what & BEV_EVENT_TIMEOUT)
		frame_client_fail(fc, "no reply within the time allowed");
	else if (what & BEV_EVENT_ERROR) {
		int	e = EVUTIL_SOCKET_ERROR();

		/* A server that hangs up on an unread request resets. */
		if (e == ECONNRESET || e == EPIPE)
			frame_client_fail(fc, "the server closed the "
			    "connection without a reply");
		else
			frame_client_fail(fc,
			    evutil_socket_error_to_string(e));
	}
}

struct frame_client *
frame_connect(struct event_base *base, const char *path, uid_t expect_uid,
    size_t max_frame, frame_reply_handler handler, void *arg, char *err,
    size_t errlen)
{
	struct frame_client	*fc;
	struct sockaddr_un	 sun;
	struct ucred		 cred;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (path == NULL || handler == NULL ||
	    strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "socket path %s is not usable",
		    path != NULL ? path : "(none)");
		return NULL;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	/* libevent writes with writev(): a hang-up must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return NULL;
	}
	/*
	 * A Unix stream connect completes at once or fails at once; EAGAIN
	 * means the listener's backlog is full, which is a refusal too.
	 */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		snprintf(err, errlen, "cannot connect to %s: %s", path,
		    errno == EAGAIN ? "the server's backlog is full" :
		    strerror(errno));
		close(fd);
		return NULL;
	}
	/* SO_PEERCRED of a connected socket names the listener. */
	if (peer_credentials(fd, &cred) == -1) {
		snprintf(err, errlen, "%s: cannot read the server's "
		    "credentials: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (cred.uid != expect_uid) {
		snprintf(err, errlen, "%s is served by uid %u pid %ld, not "
		    "the expected uid %u: refused", path, (unsigned)cred.uid,
		    (long)cred.pid, (unsigned)expect_uid);
		close(fd);
		return NULL;
	}
	fc = xcalloc(1, sizeof(*fc));
	fc->fcl_peer = cred;
	fc->fcl_max = max_frame != 0 ? max_frame : FRAME_MAX_DEFAULT;
	fc->fcl_handler = handler;
	fc->fcl_arg = arg;
	if ((fc->fcl_bev = bufferevent_socket_new(base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		snprintf(err, errlen, "%s: cannot set up the connection",
		    path);
		close(fd);
		free(fc);
		return NULL;
	}
	bufferevent_setcb(fc->fcl_bev, frame_client_readcb, NULL,
	    frame_client_eventcb, fc);
	bufferevent_enable(fc->fcl_bev, EV_READ | EV_WRITE);
	return fc;
}

int
frame_client_send_packed(struct frame_client *fc, const uint8_t *buf,
    size_t len)
{
	if (fc->fcl_dead || fc->fcl_bev == NULL)
		return -1;
	return bufferevent_write(fc->fcl_bev, buf, len) == 0 ? 0 : -1;
}

int
frame_client_send(struct frame_client *fc, const Sbx__V1__Envelope *env)
{
	uint8_t	*buf;
	size_t	 len;
	int	 rv;

	if (fc->fcl_dead || fc->fcl_bev == NULL)
		return -1;
	if ((buf = frame_pack(env, &len)) == NULL)
		return -1;
	rv = bufferevent_write(fc->fcl_bev, buf, len);
	free(buf);
	return rv == 0 ? 0 : -1;
}

/*
 * sendmsg() with pass attached to the first bytes of buf.  Returns the
 * bytes sent (at least 1) or -1 with errno.  wait_ms bounds the wait for
 * room on a non-blocking socket; -1 waits as long as it takes.
 */
static ssize_t
frame_sendmsg_fd(int sock, const uint8_t *buf, size_t len, int pass,
    int wait_ms)
{
	struct msghdr	 msg;
	struct iovec	 iov;
	struct pollfd	 pfd;
	union {
		struct cmsghdr	 hdr;
		char		 buf[CMSG_SPACE(sizeof(int))];
	}		 cbuf;
	struct cmsghdr	*cm;
	ssize_t		 n;

	if (pass < 0) {
		errno = EBADF;
		return -1;
	}
	for (;;) {
		memset(&msg, 0, sizeof(msg));
		memset(&cbuf, 0, sizeof(cbuf));
		iov.iov_base = (void *)(uintptr_t)buf;
		iov.iov_len = len;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = sizeof(cbuf.buf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass, sizeof(int));
		if ((n = sendmsg(sock, &msg, MSG_NOSIGNAL)) > 0)
			return n;
		if (n == 0) {
			errno = EPIPE;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		pfd.fd = sock;
		pfd.events = POLLOUT;
		pfd.revents = 0;
		n = poll(&pfd, 1, wait_ms);
		if (n == 0) {
			errno = EAGAIN;
			return -1;
		}
		if (n == -1 && errno != EINTR)
			return -1;
	}
}

int
frame_write_fd(int sock, const Sbx__V1__Envelope *env, int pass)
{
	uint8_t	*buf;
	size_t	 len, off;
	ssize_t	 n;
	int	 e;

	if ((buf = frame_pack(env, &len)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	if ((n = frame_sendmsg_fd(sock, buf, len, pass, -1)) == -1)
		goto fail;
	for (off = (size_t)n; off < len; off += (size_t)n) {
		n = send(sock, buf + off, len - off, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd	pfd = { sock, POLLOUT, 0 };

			(void)poll(&pfd, 1, -1);
			n = 0;
			continue;
		}
		if (n <= 0)
			goto fail;
	}
	free(buf);
	return 0;
fail:
	e = errno;
	free(buf);
	errno = e;
	return -1;
}

int
frame_client_send_fd(struct frame_client *fc, const Sbx__V1__Envelope *env,
    int pass)
{
	uint8_t	*buf;
	size_t	 len;
	ssize_t	 n;
	int	 rv = 0;

	if (fc->fcl_dead || fc->fcl_bev == NULL)
		return -1;
	if (evbuffer_get_length(bufferevent_get_output(fc->fcl_bev)) != 0) {
		/* The descriptor would arrive with the wrong frame. */
		errno = EBUSY;
		return -1;
	}
	if ((buf = frame_pack(env, &len)) == NULL)
		return -1;
	/* A fresh Unix socket has room for a header; wait a second at most
	 * rather than block the loop. */
	if ((n = frame_sendmsg_fd(bufferevent_getfd(fc->fcl_bev), buf, len,
	    pass, 1000)) == -1)
		rv = -1;
	else if ((size_t)n < len &&
	    bufferevent_write(fc->fcl_bev, buf + n, len - (size_t)n) == -1)
		rv = -1;
	free(buf);
	return rv;
}

void
frame_client_timeout(struct frame_client *fc, int seconds)
{
	struct timeval	tv;

	fc->fcl_timeout = seconds;
	if (fc->fcl_bev == NULL)
		return;
	tv.tv_sec = seconds;
	tv.tv_usec = 0;
	bufferevent_set_timeouts(fc->fcl_bev, seconds > 0 ? &tv : NULL, NULL);
}

const struct ucred *
frame_client_peer(const struct frame_client *fc)
{
	return &fc->fcl_peer;
}

void
frame_client_free(struct frame_client *fc)
{
	if (fc == NULL)
		return;
	if (fc->fcl_incb) {
		/* The callback that called us is still running. */
		fc->fcl_freed = 1;
		fc->fcl_dead = 1;
		return;
	}
	frame_client_destroy(fc);
}
