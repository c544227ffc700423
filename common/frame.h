/*
 * frame.h: framed protobuf messaging.  A frame is a 4-byte big-endian
 * length followed by an encoded sbx.v1.Envelope (proto/README.md).  The
 * server side runs on libevent bufferevents: it checks the peer against the
 * socket's allowlist before reading, caps frame size and connections per
 * peer, checks the protocol version, and answers a malformed frame with an
 * Error before closing that one connection; every other client is served.
 * The client side is blocking and small, for sbxctl, tests and benches.
 */
#ifndef SBX_FRAME_H
#define SBX_FRAME_H

#include <sys/types.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/v1/envelope.pb-c.h"

#define SBX_PROTO_VERSION	1
#define FRAME_HDR		4
#define FRAME_MAX_DEFAULT	(1024 * 1024)

struct event_base;
struct peer_allow;
struct frame_conn;
struct frame_server;

/* Set version and request id on a zeroed envelope. */
void	frame_env_init(Sbx__V1__Envelope *, uint64_t request_id);

/* Encode: malloc'd buffer holding header and payload; NULL on error. */
uint8_t	*frame_pack(const Sbx__V1__Envelope *, size_t *lenp);

/*
 * Decode one payload (the bytes after the header).  Returns the envelope,
 * or NULL with *code and *why set (ERROR_MALFORMED,
 * ERROR_UNSUPPORTED_VERSION, ERROR_FRAME_TOO_LARGE; ERROR_UNEXPECTED for
 * an envelope that decodes but whose only body is a field number this
 * side does not know, a message from a newer protocol).  Free the result with
 * sbx__v1__envelope__free_unpacked(env, NULL).
 */
Sbx__V1__Envelope *frame_decode(const uint8_t *, size_t, size_t max,
	    Sbx__V1__ErrorCode *code, const char **why);

/*
 * Parse the 4-byte header the way the server does: 0 with *lenp set, or -1
 * with *code and *why set (ERROR_MALFORMED for a zero length,
 * ERROR_FRAME_TOO_LARGE above max; max 0: FRAME_MAX_DEFAULT).
 */
int	frame_parse_header(const uint8_t hdr[FRAME_HDR], size_t max,
	    size_t *lenp, Sbx__V1__ErrorCode *code, const char **why);

/* ---- server ---- */

/*
 * Called once per decoded request.  `req` is freed when the handler
 * returns; a handler that answers later packs its reply now or copies what
 * it needs, and holds the connection with frame_conn_hold().
 */
typedef void (*frame_handler)(struct frame_conn *, Sbx__V1__Envelope *req,
	    void *arg);

struct frame_server_config {
	const char		*name;		/* for logs: "orchestrator" */
	const char		*path;		/* Unix socket path */
	mode_t			 mode;		/* e.g. 0660 */
	uid_t			 owner;		/* (uid_t)-1: leave */
	gid_t			 group;		/* (gid_t)-1: leave */
	const struct peer_allow	*allow;
	size_t			 max_frame;	/* 0: FRAME_MAX_DEFAULT */
	unsigned		 max_conns_per_peer;	/* 0: 64 */
	unsigned		 max_conns;	/* 0: 1024 */
	int			 idle_timeout;	/* seconds; 0: 300 */
	/* Optional: told of every peer refused at accept (not on the
	 * allowlist: why "not-allowed"; over a connection cap:
	 * "max-conns"), after the refusal is logged, so a daemon can audit
	 * it.  cred is NULL when the credentials could not be read. */
	void			(*refused)(const struct ucred *cred,
				    const char *why, void *arg);
	void			*refused_arg;
	/* Accept one file descriptor (SCM_RIGHTS) with a frame: the server
	 * reads with recvmsg and keeps at most one per frame (extras are
	 * closed); the handler takes it with frame_conn_take_fd(). */
	int			 pass_fds;
	/* For hello (proto/README.md): the daemon's name ("policyd") and
	 * the Envelope body field numbers this socket serves, ending with
	 * 0.  The frame code answers hello itself, never the handler. */
	const char		*server_name;
	const uint32_t		*serves;
	/* Optional: called with the handler's arg before the frame code
	 * answers a request itself (hello, an unknown body), so a daemon
	 * that holds replies back (policyd's group commit) sends them
	 * first and each connection gets its replies in request order. */
	void			(*flush)(void *arg);
};

/* A hello's client_name longer than this is refused (ERROR_INVALID). */
#define FRAME_HELLO_NAME_MAX	128
/* Requests on one connection the frame code answers with an Error on the
 * server's behalf (an unknown body, a bad or second hello) before it
 * closes that connection. */
#define FRAME_REFUSED_MAX	32

/* Unlinks a stale socket, binds, chmods/chowns, listens.  NULL on error
 * (logged). */
struct frame_server *frame_server_listen(struct event_base *,
	    const struct frame_server_config *, frame_handler, void *arg);
void	frame_server_free(struct frame_server *);
/* listen(2) again on every server, so peers see the credentials the
 * process has now (after a privilege drop).  0, or -1 if any failed. */
int	frame_servers_relisten(void);
/* Number of connections refused at the peer check (for tests/metrics). */
uint64_t frame_server_refused(const struct frame_server *);

/* Queue a reply.  0, or -1 if the connection is gone or encoding failed. */
int	frame_conn_send(struct frame_conn *, const Sbx__V1__Envelope *);
/* Queue already packed bytes (header included); takes no ownership. */
int	frame_conn_send_packed(struct frame_conn *, const uint8_t *, size_t);
int	frame_conn_send_error(struct frame_conn *, uint64_t request_id,
	    Sbx__V1__ErrorCode, const char *rule, const char *fmt, ...)
	    __attribute__((format(printf, 5, 6)));
const struct ucred *frame_conn_peer(const struct frame_conn *);
/* The largest frame its server takes (max_frame_kb), a reply's bound too. */
size_t	frame_conn_max_frame(const struct frame_conn *);
/* The connection's socket, for more of the peer's credentials
 * (SO_PEERGROUPS); -1 once gone. */
int	frame_conn_fd(const struct frame_conn *);
void	frame_conn_hold(struct frame_conn *);
void	frame_conn_release(struct frame_conn *);
/* The descriptor that came with the request being handled (pass_fds
 * servers), or -1.  The caller then owns it; one not taken is closed when
 * the handler returns. */
int	frame_conn_take_fd(struct frame_conn *);
/* 1 once the peer has gone; sends are then dropped. */
int	frame_conn_closed(const struct frame_conn *);
/* Close after queued output has been written. */
void	frame_conn_close(struct frame_conn *);

/* ---- blocking client ---- */

/* Connect to a Unix socket path; -1 with errno. */
int	frame_client_connect(const char *path);
/* Write one frame; 0 or -1 with errno. */
int	frame_write(int fd, const Sbx__V1__Envelope *);
/* Write one frame with descriptor pass (SCM_RIGHTS, sent with the frame's
 * first bytes) to a pass_fds server; 0 or -1 with errno.  pass stays the
 * caller's. */
int	frame_write_fd(int sock, const Sbx__V1__Envelope *, int pass);
/* Read one frame; 0, -1 with errno (EPIPE/ECONNRESET at EOF), -2 when the
 * frame does not decode or exceeds max (0: FRAME_MAX_DEFAULT). */
int	frame_read(int fd, size_t max, Sbx__V1__Envelope **out);
/* Write the request, read the reply. */
int	frame_client_call(int fd, const Sbx__V1__Envelope *req,
	    Sbx__V1__Envelope **reply, size_t max);

/* ---- outgoing connection on libevent ---- */

/*
 * A daemon's connection to another daemon (policyd -> launchd-sbx).  The
 * SERVER's kernel-attested credentials are checked right after connect():
 * a socket whose listener is not expect_uid is refused before a byte is
 * sent, so a stranger that took over the path never sees a request.
 * Replies go to the handler one by one; when the connection fails, ends,
 * times out or sends a bad frame the handler is called once with
 * reply NULL and why set, and nothing more comes: the caller fails closed.
 * The reply is freed when the handler returns.  The handler may call
 * frame_client_free() on its own client.
 */
struct frame_client;
typedef void (*frame_reply_handler)(struct frame_client *,
	    Sbx__V1__Envelope *reply, const char *why, void *arg);

/* Connect now.  NULL with err set when the socket cannot be reached or
 * its listener is not expect_uid.  max_frame 0: FRAME_MAX_DEFAULT. */
struct frame_client *frame_connect(struct event_base *, const char *path,
	    uid_t expect_uid, size_t max_frame, frame_reply_handler,
	    void *arg, char *err, size_t errlen);
/* Queue a request.  0, or -1 if the connection is gone or encoding
 * failed. */
int	frame_client_send(struct frame_client *, const Sbx__V1__Envelope *);
/* Queue already packed bytes (header included); takes no ownership. */
int	frame_client_send_packed(struct frame_client *, const uint8_t *,
	    size_t);
/* frame_client_send() with descriptor pass attached (SCM_RIGHTS) for a
 * pass_fds server.  The header and the descriptor are sent at once (a
 * short wait for room at most), the rest is queued; so nothing else may be
 * queued before it: -1 with EBUSY then.  pass stays the caller's. */
int	frame_client_send_fd(struct frame_client *, const Sbx__V1__Envelope *,
	    int pass);
/* No reply for this many seconds ends the connection (0: never). */
void	frame_client_timeout(struct frame_client *, int seconds);
/* The listener's credentials, as checked. */
const struct ucred *frame_client_peer(const struct frame_client *);
void	frame_client_free(struct frame_client *);

#endif
