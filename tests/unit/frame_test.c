/*
 * frame_test.c: the frame codec, and a real frame server on a temporary
 * socket (event loop in a thread) driven by blocking clients.  What a
 * client sees is what is asserted: the reply, the Error code it gets for
 * each kind of bad frame, that the connection then closes, that other
 * clients are still served, and that a refused peer reads zero bytes.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "frame.h"
#include "log.h"
#include "peer.h"
#include "util.h"
#include "version.h"
#include "sbx/v1/admin.pb-c.h"
#include "sbx/v1/audit.pb-c.h"

#define MALFORMED	SBX__V1__ERROR_CODE__ERROR_MALFORMED
#define TOO_LARGE	SBX__V1__ERROR_CODE__ERROR_FRAME_TOO_LARGE
#define TRUNCATED	SBX__V1__ERROR_CODE__ERROR_TRUNCATED
#define BADVERSION	SBX__V1__ERROR_CODE__ERROR_UNSUPPORTED_VERSION

/* ---- codec ---- */

static uint8_t *
pack_query(uint32_t version, uint64_t reqid, const char *task, int body,
    size_t *lenp)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditQuery	q;

	frame_env_init(&env, reqid);
	env.version = version;
	if (body) {
		sbx__v1__audit_query__init(&q);
		q.task_id = (char *)task;
		q.limit = 7;
		env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
		env.audit_query = &q;
	}
	return frame_pack(&env, lenp);
}

Test(codec, round_trip)
{
	Sbx__V1__Envelope	*env;
	Sbx__V1__ErrorCode	 code;
	const char		*why;
	uint8_t			*buf;
	size_t			 len, plen;

	buf = pack_query(SBX_PROTO_VERSION, 99, "t-1", 1, &len);
	cr_assert_not_null(buf);
	cr_assert(len > FRAME_HDR);
	cr_assert_eq(frame_parse_header(buf, 0, &plen, &code, &why), 0);
	cr_assert_eq(plen, len - FRAME_HDR, "header says %zu, payload %zu",
	    plen, len - FRAME_HDR);
	env = frame_decode(buf + FRAME_HDR, plen, 0, &code, &why);
	cr_assert_not_null(env, "decode failed: %s", why);
	cr_assert_eq(env->version, SBX_PROTO_VERSION);
	cr_assert_eq(env->request_id, 99);
	cr_assert_eq(env->body_case, SBX__V1__ENVELOPE__BODY_AUDIT_QUERY);
	cr_assert_str_eq(env->audit_query->task_id, "t-1");
	cr_assert_eq(env->audit_query->limit, 7);
	sbx__v1__envelope__free_unpacked(env, NULL);
	free(buf);
}

Test(codec, zero_length)
{
	static const uint8_t	 hdr[FRAME_HDR] = { 0, 0, 0, 0 };
	Sbx__V1__ErrorCode	 code = 0;
	const char		*why = NULL;
	size_t			 len;

	cr_assert_eq(frame_parse_header(hdr, 0, &len, &code, &why), -1);
	cr_assert_eq(code, MALFORMED);
	cr_assert_not_null(why);
	code = 0;
	cr_assert_null(frame_decode(hdr, 0, 0, &code, &why));
	cr_assert_eq(code, MALFORMED);
}

Test(codec, oversized)
{
	uint8_t			 hdr[FRAME_HDR] = { 0, 0, 0x10, 0x01 };
	Sbx__V1__ErrorCode	 code = 0;
	const char		*why;
	uint8_t			*buf;
	size_t			 len;

	/* 4097 bytes against a 4096-byte maximum; exactly 4096 is fine. */
	cr_assert_eq(frame_parse_header(hdr, 4096, &len, &code, &why), -1);
	cr_assert_eq(code, TOO_LARGE);
	hdr[3] = 0x00;
	cr_assert_eq(frame_parse_header(hdr, 4096, &len, &code, &why), 0);
	cr_assert_eq(len, 4096);
	/* The largest length a header can say, against the default. */
	memset(hdr, 0xff, sizeof(hdr));
	cr_assert_eq(frame_parse_header(hdr, 0, &len, &code, &why), -1);
	cr_assert_eq(code, TOO_LARGE);

	buf = pack_query(SBX_PROTO_VERSION, 1, "t-1", 1, &len);
	code = 0;
	cr_assert_null(frame_decode(buf + FRAME_HDR, len - FRAME_HDR,
	    len - FRAME_HDR - 1, &code, &why));
	cr_assert_eq(code, TOO_LARGE);
	free(buf);
}

Test(codec, garbage)
{
	static const uint8_t	 junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff };
	/* Field 2 (request_id) announced as a 100-byte string: cut short. */
	static const uint8_t	 cut[] = { 0x12, 100, 'a', 'b' };
	Sbx__V1__ErrorCode	 code = 0;
	const char		*why = NULL;

	cr_assert_null(frame_decode(junk, sizeof(junk), 0, &code, &why));
	cr_assert_eq(code, MALFORMED);
	cr_assert_not_null(why);
	code = 0;
	cr_assert_null(frame_decode(cut, sizeof(cut), 0, &code, &why));
	cr_assert_eq(code, MALFORMED);
}

Test(codec, wrong_version)
{
	Sbx__V1__ErrorCode	 code = 0;
	const char		*why;
	uint8_t			*buf;
	size_t			 len;

	buf = pack_query(2, 5, "t-1", 1, &len);
	cr_assert_null(frame_decode(buf + FRAME_HDR, len - FRAME_HDR, 0, &code,
	    &why));
	cr_assert_eq(code, BADVERSION);
	free(buf);
	/* No version at all is version 0: also not ours. */
	buf = pack_query(0, 5, "t-1", 1, &len);
	code = 0;
	cr_assert_null(frame_decode(buf + FRAME_HDR, len - FRAME_HDR, 0, &code,
	    &why));
	cr_assert_eq(code, BADVERSION);
	free(buf);
}

Test(codec, no_body)
{
	Sbx__V1__ErrorCode	 code = 0;
	const char		*why;
	uint8_t			*buf;
	size_t			 len;

	buf = pack_query(SBX_PROTO_VERSION, 5, NULL, 0, &len);
	cr_assert_not_null(buf);
	cr_assert_null(frame_decode(buf + FRAME_HDR, len - FRAME_HDR, 0, &code,
	    &why));
	cr_assert_eq(code, MALFORMED);
	free(buf);
}

/* ---- a real server ---- */

/* Several times a Unix socket's send buffer, under FRAME_MAX_DEFAULT. */
#define BIG_REPLY	(900 * 1024)

struct later {
	struct frame_conn	*conn;
	uint64_t		 reqid;
	int			*rv;
};

static struct {
	struct event_base	*base;
	struct frame_server	*srv;
	struct peer_allow	 allow;
	pthread_t		 thread;
	char			 dir[64];
	char			 path[128];
	uint64_t		 refused;
	int			 later_rv;
	unsigned		 handled;
	struct frame_conn	*held;		/* task "held": until flush */
	uint64_t		 held_id;
	int			 peek_fd;	/* task "big": the client's end */
	uint8_t			 peeked[64 * 1024];
	size_t			 npeeked;
} S;

static void
send_ack(struct frame_conn *c, uint64_t reqid, const char *detail)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__Ack		ack;

	frame_env_init(&env, reqid);
	sbx__v1__ack__init(&ack);
	ack.detail = (char *)detail;
	env.body_case = SBX__V1__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	if (frame_conn_send(c, &env) == -1)
		S.later_rv = -1;
}

static void
later_cb(evutil_socket_t fd, short what, void *arg)
{
	struct later		*l = arg;
	Sbx__V1__Envelope	 env;
	Sbx__V1__Ack		 ack;

	(void)fd;
	(void)what;
	frame_env_init(&env, l->reqid);
	sbx__v1__ack__init(&ack);
	ack.detail = "later";
	env.body_case = SBX__V1__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	*l->rv = frame_conn_send(l->conn, &env);
	frame_conn_release(l->conn);
	free(l);
}

/*
 * AuditQuery in, Ack "ok:<task>" out.  Task "later" is answered after
 * 100 ms, "later-slow" after 500 ms and "later-long" after 2.5 s,
 * holding the connection meanwhile.
 */
static void
handler(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	struct later	*l;
	struct timeval	 tv = { 0, 100000 };
	char		 detail[160];
	const char	*task;

	(void)arg;
	S.handled++;
	if (req->body_case != SBX__V1__ENVELOPE__BODY_AUDIT_QUERY) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, NULL,
		    "this socket takes AuditQuery only");
		return;
	}
	task = req->audit_query->task_id;
	if (strcmp(task, "fd") == 0) {
		/* Read what the passed descriptor holds and say so. */
		char	 got[64];
		ssize_t	 n;
		int	 pfd = frame_conn_take_fd(c);

		if (pfd == -1)
			snprintf(detail, sizeof(detail), "fd:none");
		else {
			n = pread(pfd, got, sizeof(got) - 1, 0);
			got[n > 0 ? n : 0] = '\0';
			snprintf(detail, sizeof(detail), "fd:%s", got);
			/* Taken: ours, and a second take gets nothing. */
			if (frame_conn_take_fd(c) != -1)
				snprintf(detail, sizeof(detail), "fd:twice");
			close(pfd);
		}
		send_ack(c, req->request_id, detail);
		return;
	}
	if (strcmp(task, "big") == 0) {
		/* A reply bigger than the socket's buffer, then another:
		 * the first is written in part and the rest queued.  The
		 * client's end is read here, between the two, so the
		 * socket has room again when the second is sent: it must
		 * still wait behind the first's queued rest. */
		char	*big = xmalloc(BIG_REPLY + 1);
		ssize_t	 got;

		memset(big, 'b', BIG_REPLY);
		big[BIG_REPLY] = '\0';
		send_ack(c, req->request_id, big);
		free(big);
		got = read(S.peek_fd, S.peeked, sizeof(S.peeked));
		S.npeeked = got > 0 ? (size_t)got : 0;
		send_ack(c, req->request_id + 1, "ok:after-big");
		return;
	}
	if (strcmp(task, "held") == 0) {
		/* Answered only by test_flush(), as policyd's group commit
		 * holds a compile's reply. */
		frame_conn_hold(c);
		S.held = c;
		S.held_id = req->request_id;
		return;
	}
	if (strncmp(task, "later", 5) == 0) {
		if (strcmp(task, "later-slow") == 0)
			tv.tv_usec = 500000;
		if (strcmp(task, "later-long") == 0) {
			tv.tv_sec = 2;
			tv.tv_usec = 500000;
		}
		l = xcalloc(1, sizeof(*l));
		l->conn = c;
		l->reqid = req->request_id;
		l->rv = &S.later_rv;
		frame_conn_hold(c);
		cr_assert_eq(event_base_once(S.base, -1, EV_TIMEOUT, later_cb,
		    l, &tv), 0);
		return;
	}
	snprintf(detail, sizeof(detail), "ok:%s", task);
	send_ack(c, req->request_id, detail);
}

static void *
loop_thread(void *arg)
{
	(void)arg;
	event_base_dispatch(S.base);
	return NULL;
}

/* Start a server that allows our own uid unless `allow` is given. */
static void
server_start(struct frame_server_config *cfg)
{
	struct frame_server_config	def;

	log_init("frame_test", 1, 0);
	cr_assert_eq(evthread_use_pthreads(), 0);
	snprintf(S.dir, sizeof(S.dir), "/tmp/frame_test.XXXXXX");
	cr_assert_not_null(mkdtemp(S.dir));
	snprintf(S.path, sizeof(S.path), "%s/sock", S.dir);
	if (cfg == NULL) {
		memset(&def, 0, sizeof(def));
		cfg = &def;
	}
	cfg->name = "test";
	cfg->path = S.path;
	cfg->mode = 0600;
	cfg->owner = (uid_t)-1;
	cfg->group = (gid_t)-1;
	if (cfg->allow == NULL) {
		peer_allow_uid(&S.allow, getuid());
		cfg->allow = &S.allow;
	}
	cr_assert_not_null(S.base = event_base_new());
	S.srv = frame_server_listen(S.base, cfg, handler, NULL);
	cr_assert_not_null(S.srv, "frame_server_listen failed");
	cr_assert_eq(pthread_create(&S.thread, NULL, loop_thread, NULL), 0);
}

static void
server_stop(void)
{
	event_base_loopexit(S.base, NULL);
	pthread_join(S.thread, NULL);
	S.refused = frame_server_refused(S.srv);
	frame_server_free(S.srv);
	event_base_free(S.base);
	peer_allow_free(&S.allow);
	rmdir(S.dir);
}

static int
client(void)
{
	struct timeval	tv = { 5, 0 };
	int		fd;

	fd = frame_client_connect(S.path);
	cr_assert_neq(fd, -1, "connect %s: %s", S.path, strerror(errno));
	/* A broken server must fail the test, not hang it. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void
write_raw(int fd, const void *buf, size_t len)
{
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
}

static void
send_query(int fd, uint64_t reqid, const char *task)
{
	uint8_t	*buf;
	size_t	 len;

	buf = pack_query(SBX_PROTO_VERSION, reqid, task, 1, &len);
	write_raw(fd, buf, len);
	free(buf);
}

static void
expect_ack(int fd, uint64_t reqid, const char *detail)
{
	Sbx__V1__Envelope	*env;
	int			 rv;

	rv = frame_read(fd, 0, &env);
	cr_assert_eq(rv, 0, "frame_read: %d (%s)", rv, strerror(errno));
	cr_assert_eq(env->request_id, reqid);
	cr_assert_eq(env->body_case, SBX__V1__ENVELOPE__BODY_ACK,
	    "reply body %d, want Ack", env->body_case);
	cr_assert_str_eq(env->ack->detail, detail);
	sbx__v1__envelope__free_unpacked(env, NULL);
}

/* The next frame is an Error with this code; the connection stays open. */
static void
expect_error_open(int fd, Sbx__V1__ErrorCode code, uint64_t reqid)
{
	Sbx__V1__Envelope	*env;
	int			 rv;

	rv = frame_read(fd, 0, &env);
	cr_assert_eq(rv, 0, "frame_read: %d (%s)", rv, strerror(errno));
	cr_assert_eq(env->body_case, SBX__V1__ENVELOPE__BODY_ERROR,
	    "reply body %d, want Error", env->body_case);
	cr_assert_eq(env->error->code, code, "error code %d, want %d: %s",
	    env->error->code, code, env->error->message);
	cr_assert_eq(env->request_id, reqid);
	cr_assert(strlen(env->error->message) > 0);
	sbx__v1__envelope__free_unpacked(env, NULL);
}

/* The next frame is an Error with this code, then the server hangs up. */
static void
expect_error_then_close(int fd, Sbx__V1__ErrorCode code, uint64_t reqid)
{
	char	 c;

	expect_error_open(fd, code, reqid);
	cr_assert_eq(read(fd, &c, 1), 0, "connection still open");
}

Test(server, good_request_gets_reply)
{
	int	fd;

	server_start(NULL);
	fd = client();
	send_query(fd, 17, "t-1");
	expect_ack(fd, 17, "ok:t-1");
	/* The connection stays usable for further requests. */
	send_query(fd, 18, "t-2");
	expect_ack(fd, 18, "ok:t-2");
	close(fd);
	server_stop();
	cr_assert_eq(S.refused, 0);
}

Test(server, client_call)
{
	Sbx__V1__Envelope	 req, *reply;
	Sbx__V1__AuditQuery	 q;
	int			 fd;

	server_start(NULL);
	fd = client();
	frame_env_init(&req, 3);
	sbx__v1__audit_query__init(&q);
	q.task_id = "t-9";
	req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
	req.audit_query = &q;
	cr_assert_eq(frame_client_call(fd, &req, &reply, 0), 0);
	cr_assert_eq(reply->request_id, 3);
	cr_assert_str_eq(reply->ack->detail, "ok:t-9");
	sbx__v1__envelope__free_unpacked(reply, NULL);
	close(fd);
	server_stop();
}

Test(server, several_frames_in_one_write)
{
	uint8_t	*a, *b, *both;
	size_t	 alen, blen;
	int	 fd;

	server_start(NULL);
	fd = client();
	a = pack_query(SBX_PROTO_VERSION, 1, "first", 1, &alen);
	b = pack_query(SBX_PROTO_VERSION, 2, "second", 1, &blen);
	both = xmalloc(alen + blen);
	memcpy(both, a, alen);
	memcpy(both + alen, b, blen);
	write_raw(fd, both, alen + blen);
	expect_ack(fd, 1, "ok:first");
	expect_ack(fd, 2, "ok:second");
	free(a);
	free(b);
	free(both);
	close(fd);
	server_stop();
}

Test(server, garbage_closes_only_that_connection)
{
	static const uint8_t	garbage[] = { 0, 0, 0, 8, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff, 0xff };
	int			good, bad, again;

	server_start(NULL);
	good = client();
	send_query(good, 1, "before");
	expect_ack(good, 1, "ok:before");
	bad = client();
	write_raw(bad, garbage, sizeof(garbage));
	expect_error_then_close(bad, MALFORMED, 0);
	close(bad);
	/* The other client, and a new one, are still served. */
	send_query(good, 2, "after");
	expect_ack(good, 2, "ok:after");
	again = client();
	send_query(again, 3, "new");
	expect_ack(again, 3, "ok:new");
	close(good);
	close(again);
	server_stop();
}

Test(server, oversized_length)
{
	struct frame_server_config	cfg;
	static const uint8_t		hdr[] = { 0, 0, 0x10, 0x01 };
	int				fd;

	memset(&cfg, 0, sizeof(cfg));
	cfg.max_frame = 4096;
	server_start(&cfg);
	fd = client();
	write_raw(fd, hdr, sizeof(hdr));
	expect_error_then_close(fd, TOO_LARGE, 0);
	close(fd);
	server_stop();
}

Test(server, oversized_default_max)
{
	static const uint8_t	hdr[] = { 0x7f, 0xff, 0xff, 0xff };
	int			fd;

	server_start(NULL);
	fd = client();
	write_raw(fd, hdr, sizeof(hdr));
	expect_error_then_close(fd, TOO_LARGE, 0);
	close(fd);
	server_stop();
}

Test(server, zero_length)
{
	static const uint8_t	hdr[] = { 0, 0, 0, 0 };
	int			fd;

	server_start(NULL);
	fd = client();
	write_raw(fd, hdr, sizeof(hdr));
	expect_error_then_close(fd, MALFORMED, 0);
	close(fd);
	server_stop();
}

Test(server, truncated_frame)
{
	uint8_t	*buf;
	size_t	 len;
	int	 fd;

	server_start(NULL);
	fd = client();
	buf = pack_query(SBX_PROTO_VERSION, 8, "t-1", 1, &len);
	write_raw(fd, buf, len - 3);
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	expect_error_then_close(fd, TRUNCATED, 0);
	free(buf);
	close(fd);
	server_stop();
}

Test(server, truncated_header)
{
	static const uint8_t	hdr[] = { 0, 0 };
	int			fd;

	server_start(NULL);
	fd = client();
	write_raw(fd, hdr, sizeof(hdr));
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	expect_error_then_close(fd, TRUNCATED, 0);
	close(fd);
	server_stop();
}

Test(server, wrong_version)
{
	uint8_t	*buf;
	size_t	 len;
	int	 fd;

	server_start(NULL);
	fd = client();
	buf = pack_query(2, 44, "t-1", 1, &len);
	write_raw(fd, buf, len);
	/* The request id decoded, so the Error echoes it. */
	expect_error_then_close(fd, BADVERSION, 44);
	free(buf);
	close(fd);
	server_stop();
}

Test(server, empty_body)
{
	uint8_t	*buf;
	size_t	 len;
	int	 fd;

	server_start(NULL);
	fd = client();
	buf = pack_query(SBX_PROTO_VERSION, 45, NULL, 0, &len);
	write_raw(fd, buf, len);
	expect_error_then_close(fd, MALFORMED, 45);
	free(buf);
	close(fd);
	server_stop();
	cr_assert_eq(S.handled, 0, "the handler saw a bodiless envelope");
}

Test(server, peer_not_on_allowlist_gets_nothing)
{
	struct frame_server_config	cfg;
	struct peer_allow		other = { 0 };
	char				c;
	int				fd;

	cr_assert_neq(getuid(), 12345);
	peer_allow_uid(&other, 12345);
	memset(&cfg, 0, sizeof(cfg));
	cfg.allow = &other;
	server_start(&cfg);
	fd = client();
	cr_assert_eq(read(fd, &c, 1), 0, "refused peer read a byte");
	close(fd);
	server_stop();
	peer_allow_free(&other);
	cr_assert_eq(S.refused, 1);
	cr_assert_eq(S.handled, 0);
}

Test(server, allowed_by_gid)
{
	struct frame_server_config	cfg;
	struct peer_allow		bygid = { 0 };
	int				fd;

	peer_allow_uid(&bygid, 12345);
	peer_allow_gid(&bygid, getgid());
	memset(&cfg, 0, sizeof(cfg));
	cfg.allow = &bygid;
	server_start(&cfg);
	fd = client();
	send_query(fd, 1, "g");
	expect_ack(fd, 1, "ok:g");
	close(fd);
	server_stop();
	peer_allow_free(&bygid);
	cr_assert_eq(S.refused, 0);
}

/* Connect and complete a round trip, retrying while the server catches up
 * with a connection we closed; -1 if it never serves us. */
static int
client_served(uint64_t reqid)
{
	Sbx__V1__Envelope	*env;
	int			 fd, tries;

	for (tries = 0; tries < 100; tries++) {
		fd = client();
		send_query(fd, reqid, "x");
		if (frame_read(fd, 0, &env) == 0) {
			sbx__v1__envelope__free_unpacked(env, NULL);
			return fd;
		}
		close(fd);
		usleep(20000);
	}
	return -1;
}

Test(server, max_conns_per_peer)
{
	struct frame_server_config	cfg;
	char				c;
	int				a, b, extra, d;

	memset(&cfg, 0, sizeof(cfg));
	cfg.max_conns_per_peer = 2;
	server_start(&cfg);
	a = client();
	send_query(a, 1, "a");
	expect_ack(a, 1, "ok:a");
	b = client();
	send_query(b, 2, "b");
	expect_ack(b, 2, "ok:b");
	extra = client();
	cr_assert_eq(read(extra, &c, 1), 0, "third connection was served");
	close(extra);
	/* Closing one makes room again. */
	close(a);
	d = client_served(4);
	cr_assert_neq(d, -1, "no room after a connection closed");
	close(b);
	close(d);
	server_stop();
	cr_assert_geq(S.refused, 1);
}

Test(server, max_conns)
{
	struct frame_server_config	cfg;
	char				c;
	int				a, extra;

	memset(&cfg, 0, sizeof(cfg));
	cfg.max_conns = 1;
	server_start(&cfg);
	a = client();
	send_query(a, 1, "a");
	expect_ack(a, 1, "ok:a");
	extra = client();
	cr_assert_eq(read(extra, &c, 1), 0, "second connection was served");
	close(extra);
	close(a);
	server_stop();
	cr_assert_eq(S.refused, 1);
}

Test(server, idle_timeout_closes)
{
	struct frame_server_config	cfg;
	char				c;
	time_t				t0;
	int				fd;

	memset(&cfg, 0, sizeof(cfg));
	cfg.idle_timeout = 1;
	server_start(&cfg);
	fd = client();
	t0 = time(NULL);
	cr_assert_eq(read(fd, &c, 1), 0, "idle connection not closed");
	cr_assert_leq(time(NULL) - t0, 3);
	close(fd);
	server_stop();
}

/*
 * The idle timer does not run while a reply is owed (a run in policyd):
 * a reply 2.5 s late, with a 1 s idle timeout, still arrives, and the
 * connection is idle again (closed) once it has.  proto/README.md says so.
 */
Test(server, idle_timer_waits_for_a_held_reply)
{
	struct frame_server_config	cfg;
	char				c;
	time_t				t0;
	int				fd;

	memset(&cfg, 0, sizeof(cfg));
	cfg.idle_timeout = 1;
	server_start(&cfg);
	fd = client();
	send_query(fd, 9, "later-long");
	expect_ack(fd, 9, "later");
	t0 = time(NULL);
	cr_assert_eq(read(fd, &c, 1), 0, "idle connection not closed");
	cr_assert_leq(time(NULL) - t0, 3);
	close(fd);
	server_stop();
	cr_assert_eq(S.later_rv, 0);
}

Test(server, deferred_reply)
{
	int	fd;

	server_start(NULL);
	fd = client();
	send_query(fd, 5, "later");
	expect_ack(fd, 5, "later");
	close(fd);
	server_stop();
	cr_assert_eq(S.later_rv, 0);
}

Test(server, deferred_reply_after_half_close)
{
	char	c;
	int	fd;

	server_start(NULL);
	fd = client();
	send_query(fd, 6, "later");
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	expect_ack(fd, 6, "later");
	cr_assert_eq(read(fd, &c, 1), 0, "connection not closed after reply");
	close(fd);
	server_stop();
}

Test(server, deferred_reply_to_gone_peer_is_dropped)
{
	int	fd;

	server_start(NULL);
	fd = client();
	send_query(fd, 7, "later-slow");
	usleep(100000);
	close(fd);
	/* The handler's send comes 500 ms after the request. */
	usleep(800000);
	server_stop();
	cr_assert_eq(S.later_rv, -1, "send to a closed connection succeeded");
}

Test(server, stale_socket_replaced)
{
	struct sockaddr_un	sun;
	struct peer_allow	allow = { 0 };
	struct frame_server_config cfg;
	int			fd;

	/* A socket file nobody listens on, as left by a crashed daemon. */
	log_init("frame_test", 1, 0);
	cr_assert_not_null(mkdtemp(strcpy(S.dir, "/tmp/frame_test.XXXXXX")));
	snprintf(S.path, sizeof(S.path), "%s/sock", S.dir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, S.path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);

	peer_allow_uid(&allow, getuid());
	memset(&cfg, 0, sizeof(cfg));
	cfg.name = "test";
	cfg.path = S.path;
	cfg.mode = 0600;
	cfg.owner = (uid_t)-1;
	cfg.group = (gid_t)-1;
	cfg.allow = &allow;
	cr_assert_not_null(S.base = event_base_new());
	S.srv = frame_server_listen(S.base, &cfg, handler, NULL);
	cr_assert_not_null(S.srv, "stale socket not replaced");
	/* A second server on the same live path is refused. */
	cr_assert_null(frame_server_listen(S.base, &cfg, handler, NULL));
	frame_server_free(S.srv);
	event_base_free(S.base);
	peer_allow_free(&allow);
	rmdir(S.dir);
}

Test(server, refuses_to_replace_a_file_or_run_without_allowlist)
{
	struct frame_server_config	cfg;
	struct event_base		*base;
	struct stat			st;
	char				dir[] = "/tmp/frame_test.XXXXXX";
	char				path[64];
	int				fd;

	log_init("frame_test", 1, 0);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	cr_assert_neq(fd, -1);
	close(fd);
	memset(&cfg, 0, sizeof(cfg));
	cfg.name = "test";
	cfg.path = path;
	cfg.mode = 0600;
	cfg.owner = (uid_t)-1;
	cfg.group = (gid_t)-1;
	cfg.allow = &S.allow;
	base = event_base_new();
	cr_assert_null(frame_server_listen(base, &cfg, handler, NULL));
	cr_assert_eq(stat(path, &st), 0);
	cr_assert(S_ISREG(st.st_mode), "the regular file was replaced");
	unlink(path);
	cfg.allow = NULL;
	cr_assert_null(frame_server_listen(base, &cfg, handler, NULL));
	event_base_free(base);
	rmdir(dir);
}

Test(server, socket_mode)
{
	struct frame_server_config	cfg;
	struct stat			st;

	memset(&cfg, 0, sizeof(cfg));
	server_start(&cfg);
	cr_assert_eq(stat(S.path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o",
	    (unsigned)(st.st_mode & 07777));
	server_stop();
	cr_assert_neq(access(S.path, F_OK), 0, "socket left behind");
}

Test(server, socket_owner_and_group)
{
	struct frame_server_config	cfg;
	struct peer_allow		allow = { 0 };
	struct event_base		*base;
	struct stat			st;
	char				dir[] = "/tmp/frame_test.XXXXXX";
	char				path[64];
	struct frame_server		*srv;

	if (geteuid() != 0)
		cr_skip_test("needs root to give the socket away");
	log_init("frame_test", 1, 0);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	peer_allow_uid(&allow, getuid());
	memset(&cfg, 0, sizeof(cfg));
	cfg.name = "test";
	cfg.path = path;
	cfg.mode = 0660;
	cfg.owner = 4444;
	cfg.group = 4242;
	cfg.allow = &allow;
	base = event_base_new();
	cr_assert_not_null(srv = frame_server_listen(base, &cfg, handler,
	    NULL));
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_uid, 4444);
	cr_assert_eq(st.st_gid, 4242);
	cr_assert_eq(st.st_mode & 07777, 0660);
	frame_server_free(srv);
	event_base_free(base);
	peer_allow_free(&allow);
	rmdir(dir);
}

/* ---- outgoing connection (frame_connect) ---- */

static struct {
	struct event_base	*base;
	int			 replies;
	int			 failures;
	char			 detail[160];
	char			 why[256];
	int			 free_in_cb;
	struct frame_client	*fc;
} C;

static void
client_handler(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	(void)arg;
	if (rep == NULL) {
		C.failures++;
		snprintf(C.why, sizeof(C.why), "%s", why);
	} else {
		C.replies++;
		if (rep->body_case == SBX__V1__ENVELOPE__BODY_ACK)
			snprintf(C.detail, sizeof(C.detail), "%s",
			    rep->ack->detail);
	}
	if (C.free_in_cb) {
		frame_client_free(fc);
		C.fc = NULL;
	}
	event_base_loopbreak(C.base);
}

/* Run the client's loop until the handler has been called, or 5 s. */
static void
client_loop(void)
{
	struct timeval	tv = { 5, 0 };

	event_base_loopexit(C.base, &tv);
	event_base_dispatch(C.base);
}

static void
client_query(struct frame_client *fc, uint64_t reqid, const char *task)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditQuery	q;

	frame_env_init(&env, reqid);
	sbx__v1__audit_query__init(&q);
	q.task_id = (char *)task;
	env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
	env.audit_query = &q;
	cr_assert_eq(frame_client_send(fc, &env), 0);
}

Test(client, reply_reaches_handler)
{
	char	err[256];

	server_start(NULL);
	memset(&C, 0, sizeof(C));
	cr_assert_not_null(C.base = event_base_new());
	C.fc = frame_connect(C.base, S.path, getuid(), 0, client_handler,
	    NULL, err, sizeof(err));
	cr_assert_not_null(C.fc, "frame_connect: %s", err);
	cr_assert_eq(frame_client_peer(C.fc)->uid, getuid());
	client_query(C.fc, 1, "t-1");
	client_loop();
	cr_assert_eq(C.replies, 1);
	cr_assert_str_eq(C.detail, "ok:t-1");
	/* A second request on the same connection. */
	client_query(C.fc, 2, "t-2");
	client_loop();
	cr_assert_eq(C.replies, 2);
	cr_assert_str_eq(C.detail, "ok:t-2");
	cr_assert_eq(C.failures, 0);
	frame_client_free(C.fc);
	event_base_free(C.base);
	server_stop();
}

Test(client, server_of_another_uid_is_refused)
{
	char	err[256];

	server_start(NULL);
	memset(&C, 0, sizeof(C));
	cr_assert_not_null(C.base = event_base_new());
	C.fc = frame_connect(C.base, S.path, getuid() + 1, 0, client_handler,
	    NULL, err, sizeof(err));
	cr_assert_null(C.fc, "connected to a server of the wrong uid");
	cr_assert(strstr(err, "not the expected uid") != NULL, "err: %s", err);
	/* Refused before a byte was sent: the server handled nothing. */
	usleep(100000);
	cr_assert_eq(S.handled, 0);
	event_base_free(C.base);
	server_stop();
}

Test(client, missing_socket_is_reported)
{
	struct event_base	*base;
	char			 err[256];

	log_init("frame_test", 1, 0);
	cr_assert_not_null(base = event_base_new());
	cr_assert_null(frame_connect(base, "/nonexistent/sbx.sock", 0, 0,
	    client_handler, NULL, err, sizeof(err)));
	cr_assert(strstr(err, "/nonexistent/sbx.sock") != NULL, "err: %s",
	    err);
	event_base_free(base);
}

Test(client, close_without_reply_fails_closed)
{
	struct frame_server_config	cfg;
	struct peer_allow		other = { 0 };
	char				err[256];

	/* A server that does not allow us closes without a word. */
	peer_allow_uid(&other, getuid() + 1);
	memset(&cfg, 0, sizeof(cfg));
	cfg.allow = &other;
	server_start(&cfg);
	memset(&C, 0, sizeof(C));
	C.free_in_cb = 1;
	cr_assert_not_null(C.base = event_base_new());
	C.fc = frame_connect(C.base, S.path, getuid(), 0, client_handler,
	    NULL, err, sizeof(err));
	cr_assert_not_null(C.fc, "frame_connect: %s", err);
	client_query(C.fc, 1, "t-1");
	client_loop();
	cr_assert_eq(C.replies, 0);
	cr_assert_eq(C.failures, 1);
	cr_assert(strstr(C.why, "without a reply") != NULL, "why: %s", C.why);
	cr_assert_null(C.fc);
	event_base_free(C.base);
	server_stop();
	peer_allow_free(&other);
}

Test(client, silence_times_out)
{
	struct sockaddr_un	sun;
	char			dir[] = "/tmp/frame_test.XXXXXX", path[64];
	char			err[256];
	int			lfd;

	/* A listener that never accepts nor answers. */
	log_init("frame_test", 1, 0);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/sock", dir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	cr_assert_eq(listen(lfd, 4), 0);
	memset(&C, 0, sizeof(C));
	cr_assert_not_null(C.base = event_base_new());
	C.fc = frame_connect(C.base, path, getuid(), 0, client_handler, NULL,
	    err, sizeof(err));
	cr_assert_not_null(C.fc, "frame_connect: %s", err);
	frame_client_timeout(C.fc, 1);
	client_query(C.fc, 1, "t-1");
	client_loop();
	cr_assert_eq(C.failures, 1);
	cr_assert(strstr(C.why, "no reply") != NULL, "why: %s", C.why);
	/* After the failure nothing more is sent. */
	cr_assert_eq(frame_client_send(C.fc, &(Sbx__V1__Envelope)
	    SBX__V1__ENVELOPE__INIT), -1);
	frame_client_free(C.fc);
	event_base_free(C.base);
	close(lfd);
	unlink(path);
	rmdir(dir);
}

/* ---- descriptor passing ---- */

static int
fd_file(const char *content)
{
	char	path[] = "/tmp/frame_fd.XXXXXX";
	int	fd;

	cr_assert_neq(fd = mkstemp(path), -1);
	unlink(path);
	cr_assert_eq(write(fd, content, strlen(content)),
	    (ssize_t)strlen(content));
	return fd;
}

static void
env_query(Sbx__V1__Envelope *env, Sbx__V1__AuditQuery *q, uint64_t reqid,
    const char *task)
{
	frame_env_init(env, reqid);
	sbx__v1__audit_query__init(q);
	q->task_id = (char *)task;
	env->body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
	env->audit_query = q;
}

static void
pass_server_start(void)
{
	struct frame_server_config	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.pass_fds = 1;
	server_start(&cfg);
}

Test(fdpass, descriptor_reaches_handler)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditQuery	q;
	int			fd, f;

	pass_server_start();
	fd = client();
	f = fd_file("scratch-dir");
	env_query(&env, &q, 5, "fd");
	cr_assert_eq(frame_write_fd(fd, &env, f), 0, "frame_write_fd: %s",
	    strerror(errno));
	expect_ack(fd, 5, "fd:scratch-dir");
	/* The next frame without a descriptor does not inherit one. */
	env_query(&env, &q, 6, "fd");
	cr_assert_eq(frame_write(fd, &env), 0);
	expect_ack(fd, 6, "fd:none");
	/* Ordinary requests still work on a pass_fds socket. */
	send_query(fd, 7, "t-7");
	expect_ack(fd, 7, "ok:t-7");
	close(f);
	close(fd);
	server_stop();
}

Test(fdpass, several_frames_each_with_its_own)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditQuery	q;
	int			fd, f1, f2;

	pass_server_start();
	fd = client();
	f1 = fd_file("one");
	f2 = fd_file("two");
	env_query(&env, &q, 1, "fd");
	cr_assert_eq(frame_write_fd(fd, &env, f1), 0);
	env_query(&env, &q, 2, "fd");
	cr_assert_eq(frame_write_fd(fd, &env, f2), 0);
	expect_ack(fd, 1, "fd:one");
	expect_ack(fd, 2, "fd:two");
	close(f1);
	close(f2);
	close(fd);
	server_stop();
}

/* A descriptor the handler leaves is closed by the server. */
Test(fdpass, untaken_descriptor_is_closed)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditQuery	q;
	struct timeval		tv = { 5, 0 };
	char			ch;
	int			fd, p[2];

	pass_server_start();
	fd = client();
	cr_assert_eq(pipe(p), 0);
	env_query(&env, &q, 3, "keep");
	cr_assert_eq(frame_write_fd(fd, &env, p[1]), 0);
	expect_ack(fd, 3, "ok:keep");
	close(p[1]);
	setsockopt(p[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* EOF only if no copy of the write end is left in the server. */
	cr_assert_eq(read(p[0], &ch, 1), 0);
	close(p[0]);
	close(fd);
	server_stop();
}

/* A server without pass_fds never receives a descriptor. */
Test(fdpass, plain_server_drops_descriptor)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditQuery	q;
	int			fd, f;

	server_start(NULL);
	fd = client();
	f = fd_file("x");
	env_query(&env, &q, 4, "fd");
	cr_assert_eq(frame_write_fd(fd, &env, f), 0);
	expect_ack(fd, 4, "fd:none");
	close(f);
	close(fd);
	server_stop();
}

Test(fdpass, garbage_still_answered_with_error)
{
	static const uint8_t	garbage[] = { 0, 0, 0, 8, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff, 0xff };
	int			fd;

	pass_server_start();
	fd = client();
	write_raw(fd, garbage, sizeof(garbage));
	expect_error_then_close(fd, MALFORMED, 0);
	close(fd);
	server_stop();
}

Test(fdpass, async_client_sends_descriptor)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditQuery	q;
	char			err[256];
	int			f;

	pass_server_start();
	memset(&C, 0, sizeof(C));
	cr_assert_not_null(C.base = event_base_new());
	C.fc = frame_connect(C.base, S.path, getuid(), 0, client_handler,
	    NULL, err, sizeof(err));
	cr_assert_not_null(C.fc, "frame_connect: %s", err);
	f = fd_file("async");
	env_query(&env, &q, 9, "fd");
	cr_assert_eq(frame_client_send_fd(C.fc, &env, f), 0);
	client_loop();
	cr_assert_eq(C.replies, 1);
	cr_assert_str_eq(C.detail, "fd:async");
	/* With a request still queued a descriptor is refused: it would
	 * travel with the wrong frame. */
	client_query(C.fc, 10, "t-10");
	errno = 0;
	cr_assert_eq(frame_client_send_fd(C.fc, &env, f), -1);
	cr_assert_eq(errno, EBUSY);
	client_loop();
	cr_assert_str_eq(C.detail, "ok:t-10");
	close(f);
	frame_client_free(C.fc);
	event_base_free(C.base);
	server_stop();
}

/* ---- evolving: unknown bodies and hello (issue 14) ---- */

#define UNEXPECTED	SBX__V1__ERROR_CODE__ERROR_UNEXPECTED
#define INVALID		SBX__V1__ERROR_CODE__ERROR_INVALID

/*
 * A frame a newer client would send: version 1, request id reqid, and a
 * body in oneof field 99 (a length-delimited message this side has never
 * heard of), plus, when with_query, a known audit_query beside it.
 */
static size_t
future_frame(uint8_t *out, uint64_t reqid, int with_query)
{
	uint8_t	*p = out + FRAME_HDR;
	size_t	 n;

	*p++ = 0x08;			/* field 1, varint: version */
	*p++ = SBX_PROTO_VERSION;
	*p++ = 0x10;			/* field 2, varint: request id */
	*p++ = (uint8_t)reqid;		/* < 128 in these tests */
	*p++ = 0x9a;			/* field 99, length-delimited */
	*p++ = 0x06;
	*p++ = 3;
	*p++ = 0x0a;			/* inside: field 1, "x" */
	*p++ = 1;
	*p++ = 'x';
	if (with_query) {
		*p++ = 0x92;		/* field 50 (audit_query) */
		*p++ = 0x03;
		*p++ = 5;
		*p++ = 0x0a;		/* task_id "t-9" */
		*p++ = 3;
		*p++ = 't';
		*p++ = '-';
		*p++ = '9';
	}
	n = (size_t)(p - out) - FRAME_HDR;
	out[0] = out[1] = 0;
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
	return n + FRAME_HDR;
}

static void
send_hello(int fd, uint64_t reqid, uint32_t version, const char *name)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__Hello		h;

	frame_env_init(&env, reqid);
	sbx__v1__hello__init(&h);
	h.protocol_version = version;
	h.client_name = (char *)name;
	env.body_case = SBX__V1__ENVELOPE__BODY_HELLO;
	env.hello = &h;
	cr_assert_eq(frame_write(fd, &env), 0);
}

static const uint32_t test_serves[] = {
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_METRICS_REQUEST,
	0
};

static void
hello_server_start(void)
{
	struct frame_server_config	cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.server_name = "testd";
	cfg.serves = test_serves;
	server_start(&cfg);
}

static void
expect_hello_reply(int fd, uint64_t reqid)
{
	Sbx__V1__Envelope	*env;

	cr_assert_eq(frame_read(fd, 0, &env), 0);
	cr_assert_eq(env->request_id, reqid);
	cr_assert_eq(env->body_case, SBX__V1__ENVELOPE__BODY_HELLO_REPLY,
	    "reply body %d, want HelloReply", env->body_case);
	cr_assert_eq(env->hello_reply->protocol_version, SBX_PROTO_VERSION);
	cr_assert_str_eq(env->hello_reply->server_name, "testd");
	cr_assert_str_eq(env->hello_reply->server_version, SBX_VERSION);
	cr_assert_str_eq(env->hello_reply->socket, "test");
	cr_assert_eq(env->hello_reply->n_requests, 2);
	cr_assert_eq(env->hello_reply->requests[0]->field, 50);
	cr_assert_str_eq(env->hello_reply->requests[0]->name, "audit_query");
	cr_assert_eq(env->hello_reply->requests[1]->field, 68);
	cr_assert_str_eq(env->hello_reply->requests[1]->name,
	    "metrics_request");
	sbx__v1__envelope__free_unpacked(env, NULL);
}

Test(codec, unknown_body_is_unexpected_not_malformed)
{
	Sbx__V1__Envelope	*env;
	Sbx__V1__ErrorCode	 code = 0;
	const char		*why = NULL;
	uint8_t			 buf[64];
	size_t			 len;

	len = future_frame(buf, 9, 0);
	cr_assert_null(frame_decode(buf + FRAME_HDR, len - FRAME_HDR, 0,
	    &code, &why));
	cr_assert_eq(code, UNEXPECTED, "code %d: %s", code, why);
	/* Beside a known body, the unknown field is simply ignored. */
	len = future_frame(buf, 9, 1);
	env = frame_decode(buf + FRAME_HDR, len - FRAME_HDR, 0, &code, &why);
	cr_assert_not_null(env, "decode: %s", why);
	cr_assert_eq(env->body_case, SBX__V1__ENVELOPE__BODY_AUDIT_QUERY);
	cr_assert_str_eq(env->audit_query->task_id, "t-9");
	sbx__v1__envelope__free_unpacked(env, NULL);
}

Test(server, unknown_body_keeps_the_connection)
{
	uint8_t	buf[64];
	size_t	len;
	int	fd;

	server_start(NULL);
	fd = client();
	len = future_frame(buf, 9, 0);
	write_raw(fd, buf, len);
	expect_error_open(fd, UNEXPECTED, 9);
	/* The same connection still serves a good request. */
	send_query(fd, 10, "after");
	expect_ack(fd, 10, "ok:after");
	/* A known body with an unknown field beside it is served. */
	len = future_frame(buf, 11, 1);
	write_raw(fd, buf, len);
	expect_ack(fd, 11, "ok:t-9");
	close(fd);
	server_stop();
	cr_assert_eq(S.handled, 2, "the handler saw the unknown body");
}

Test(server, unknown_body_flood_is_bounded)
{
	uint8_t	*flood, one[64];
	size_t	 len, i;
	int	 bad, good;

	server_start(NULL);
	good = client();
	bad = client();
	/* Far more than the cap, in one write: the server must neither
	 * queue answers without end nor stop serving the other client. */
	len = future_frame(one, 7, 0);
	flood = xcalloc(FRAME_REFUSED_MAX * 8, len);
	for (i = 0; i < FRAME_REFUSED_MAX * 8; i++)
		memcpy(flood + i * len, one, len);
	write_raw(bad, flood, FRAME_REFUSED_MAX * 8 * len);
	free(flood);
	send_query(good, 1, "meanwhile");
	expect_ack(good, 1, "ok:meanwhile");
	for (i = 0; i < FRAME_REFUSED_MAX - 1; i++)
		expect_error_open(bad, UNEXPECTED, 7);
	/* The last one it answers, then it hangs up. */
	expect_error_then_close(bad, UNEXPECTED, 7);
	close(bad);
	send_query(good, 2, "after");
	expect_ack(good, 2, "ok:after");
	close(good);
	server_stop();
	cr_assert_eq(S.handled, 2);
}

Test(server, hello_answers_what_the_socket_serves)
{
	int	fd;

	hello_server_start();
	fd = client();
	send_hello(fd, 1, SBX_PROTO_VERSION, "frame_test/1.0");
	expect_hello_reply(fd, 1);
	send_query(fd, 2, "t-1");
	expect_ack(fd, 2, "ok:t-1");
	/* A second hello: refused, the connection kept. */
	send_hello(fd, 3, SBX_PROTO_VERSION, "again");
	expect_error_open(fd, UNEXPECTED, 3);
	send_query(fd, 4, "t-2");
	expect_ack(fd, 4, "ok:t-2");
	close(fd);
	server_stop();
	cr_assert_eq(S.handled, 2, "the handler saw a hello");
}

Test(server, hello_with_a_version_it_does_not_speak)
{
	int	fd;

	hello_server_start();
	fd = client();
	send_hello(fd, 1, SBX_PROTO_VERSION + 1, "future");
	expect_error_open(fd, BADVERSION, 1);
	send_hello(fd, 2, 0, "unset");
	expect_error_open(fd, BADVERSION, 2);
	/* It may then say hello in the version the server speaks. */
	send_hello(fd, 3, SBX_PROTO_VERSION, "fallback");
	expect_hello_reply(fd, 3);
	close(fd);
	server_stop();
}

Test(server, hello_client_name_bounded_and_printable)
{
	char	*huge;
	char	 name[FRAME_HELLO_NAME_MAX + 2];
	int	 fd;

	hello_server_start();
	fd = client();
	huge = xcalloc(1, 512 * 1024 + 1);
	memset(huge, 'a', 512 * 1024);
	send_hello(fd, 1, SBX_PROTO_VERSION, huge);
	expect_error_open(fd, INVALID, 1);
	free(huge);
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	send_hello(fd, 2, SBX_PROTO_VERSION, name);	/* one byte over */
	expect_error_open(fd, INVALID, 2);
	send_hello(fd, 3, SBX_PROTO_VERSION, "bad\nname");
	expect_error_open(fd, INVALID, 3);
	send_hello(fd, 4, SBX_PROTO_VERSION, "bad\xe2\x80\xaename");
	expect_error_open(fd, INVALID, 4);
	send_hello(fd, 5, SBX_PROTO_VERSION, "bad\xff");
	expect_error_open(fd, INVALID, 5);
	name[sizeof(name) - 2] = '\0';			/* exactly the max */
	send_hello(fd, 6, SBX_PROTO_VERSION, name);
	expect_hello_reply(fd, 6);
	close(fd);
	server_stop();
}

Test(server, hello_after_refusals_counts_toward_the_cap)
{
	int	fd;

	hello_server_start();
	fd = client();
	for (unsigned i = 1; i < FRAME_REFUSED_MAX; i++) {
		send_hello(fd, i, 7, "v7");
		expect_error_open(fd, BADVERSION, i);
	}
	send_hello(fd, 99, 7, "v7");
	expect_error_then_close(fd, BADVERSION, 99);
	close(fd);
	server_stop();
}

/* The server's flush hook: the reply held for task "held" goes out. */
static void
test_flush(void *arg)
{
	(void)arg;
	if (S.held == NULL)
		return;
	send_ack(S.held, S.held_id, "held");
	frame_conn_release(S.held);
	S.held = NULL;
}

Test(server, frame_answers_come_after_held_replies)
{
	struct frame_server_config	cfg;
	uint8_t				buf[64];
	size_t				len;
	int				fd;

	memset(&cfg, 0, sizeof(cfg));
	cfg.server_name = "testd";
	cfg.serves = test_serves;
	cfg.flush = test_flush;
	server_start(&cfg);
	fd = client();
	/* A request whose reply the daemon holds back, then a hello: the
	 * held reply must come first (request order on a connection). */
	send_query(fd, 1, "held");
	send_hello(fd, 2, SBX_PROTO_VERSION, "pipelined");
	expect_ack(fd, 1, "held");
	expect_hello_reply(fd, 2);
	/* The same for an unknown body. */
	send_query(fd, 3, "held");
	len = future_frame(buf, 4, 0);
	write_raw(fd, buf, len);
	expect_ack(fd, 3, "held");
	expect_error_open(fd, UNEXPECTED, 4);
	close(fd);
	server_stop();
	cr_assert_null(S.held);
}

/*
 * A reply is written straight to the socket only when nothing is queued
 * before it (frame_conn_send_packed): one the socket takes in part leaves
 * the rest queued, and the next reply must come after all of it, not in
 * the middle.  The client reads only after both are sent.
 */
Test(server, reply_larger_than_the_socket_buffer_then_another)
{
	Sbx__V1__Envelope	*env;
	Sbx__V1__ErrorCode	 code;
	const char		*why;
	uint8_t			*buf;
	size_t			 len, have;
	ssize_t			 n;
	int			 fd;

	server_start(NULL);
	fd = client();
	S.peek_fd = fd;
	send_query(fd, 7, "big");
	usleep(200000);
	/* The first frame: what the handler read, then the rest. */
	cr_assert_geq(S.npeeked, FRAME_HDR, "the handler read %zu bytes",
	    S.npeeked);
	cr_assert_eq(frame_parse_header(S.peeked, 0, &len, &code, &why), 0);
	buf = xmalloc(FRAME_HDR + len);
	have = S.npeeked < FRAME_HDR + len ? S.npeeked : FRAME_HDR + len;
	memcpy(buf, S.peeked, have);
	while (have < FRAME_HDR + len) {
		n = read(fd, buf + have, FRAME_HDR + len - have);
		cr_assert_gt(n, 0, "read: %s", strerror(errno));
		have += (size_t)n;
	}
	env = frame_decode(buf + FRAME_HDR, len, 0, &code, &why);
	cr_assert_not_null(env, "the big reply does not decode: %s", why);
	cr_assert_eq(env->request_id, 7);
	cr_assert_eq(env->body_case, SBX__V1__ENVELOPE__BODY_ACK);
	cr_assert_eq(strlen(env->ack->detail), BIG_REPLY);
	cr_assert_eq(strspn(env->ack->detail, "b"), BIG_REPLY,
	    "another reply's bytes inside the big one");
	sbx__v1__envelope__free_unpacked(env, NULL);
	free(buf);
	expect_ack(fd, 8, "ok:after-big");
	/* And the connection still serves. */
	send_query(fd, 9, "again");
	expect_ack(fd, 9, "ok:again");
	close(fd);
	server_stop();
}
