/*
 * frameprobe.c: send one deliberately good or bad frame to a running
 * daemon's socket and say, in one line, how it answered.  Scenario tests
 * use it to check DESIGN.md invariant 10 from outside: a daemon answers a
 * bad frame with the right Error, refuses a peer not on its allowlist
 * without a byte of reply, and keeps serving everyone else.
 *
 *	frameprobe SOCKET MODE
 *
 * MODE: garbage, oversize, truncated, badversion, empty-body, ok (a valid
 * AuditVerify request), silent (connect and read only), hello (a Hello:
 * prints the reply's server, version, socket and each request type) or
 * future (an envelope whose body is oneof field 99, unknown to any
 * server, then an ok request on the same connection: two answers).
 * Output: "error CODE_NAME: message", "reply BODYNAME" or
 * "closed-without-reply", one line per answer.
 * Exit 0 on any answer or a clean close, 1 on other trouble, 2 when the
 * socket does not accept the connection.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "sbx/v1/audit.pb-c.h"

#define PROBE_TIMEOUT	10		/* seconds to wait for an answer */
#define PROBE_MAX	(64 * 1024 * 1024)
#define PROBE_REQID	4242

static void
usage(void)
{
	fprintf(stderr, "usage: frameprobe SOCKET "
	    "garbage|oversize|truncated|badversion|empty-body|ok|silent|"
	    "audit-all|hello|future\n");
	exit(1);
}

static int
probe_write(int fd, const void *buf, size_t len)
{
	const uint8_t	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
probe_env(int fd, uint32_t version, int with_body)
{
	Sbx__V1__Envelope	env;
	Sbx__V1__AuditVerify	verify;

	frame_env_init(&env, PROBE_REQID);
	env.version = version;
	if (with_body) {
		sbx__v1__audit_verify__init(&verify);
		env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY;
		env.audit_verify = &verify;
	}
	return frame_write(fd, &env);
}

/* Send what MODE asks for; -1 if the socket would not take it. */
static int
probe_send(int fd, const char *mode)
{
	/* An unterminated varint: no protobuf decoder accepts it. */
	static const uint8_t	garbage[] = { 0, 0, 0, 8,
	    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t	oversize[] = { 0x7f, 0xff, 0xff, 0xff };
	/* Announces 100 bytes, delivers 6, then stops sending. */
	static const uint8_t	truncated[] = { 0, 0, 0, 100,
	    0x08, 0x01, 0x10, 0x01, 0x08, 0x01 };
	/* Version 1, request id 7, field 99 holding an empty message. */
	static const uint8_t	future[] = { 0, 0, 0, 7,
	    0x08, 0x01, 0x10, 0x07, 0x9a, 0x06, 0x00 };

	if (strcmp(mode, "garbage") == 0)
		return probe_write(fd, garbage, sizeof(garbage));
	if (strcmp(mode, "oversize") == 0)
		return probe_write(fd, oversize, sizeof(oversize));
	if (strcmp(mode, "truncated") == 0) {
		if (probe_write(fd, truncated, sizeof(truncated)) == -1)
			return -1;
		return shutdown(fd, SHUT_WR);
	}
	if (strcmp(mode, "badversion") == 0)
		return probe_env(fd, 99, 1);
	if (strcmp(mode, "empty-body") == 0)
		return probe_env(fd, SBX_PROTO_VERSION, 0);
	if (strcmp(mode, "ok") == 0)
		return probe_env(fd, SBX_PROTO_VERSION, 1);
	if (strcmp(mode, "audit-all") == 0) {
		Sbx__V1__Envelope	env;
		Sbx__V1__AuditQuery	q;

		frame_env_init(&env, PROBE_REQID);
		sbx__v1__audit_query__init(&q);
		env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
		env.audit_query = &q;
		return frame_write(fd, &env);
	}
	if (strcmp(mode, "future") == 0)
		return probe_write(fd, future, sizeof(future));
	if (strcmp(mode, "hello") == 0) {
		Sbx__V1__Envelope	env;
		Sbx__V1__Hello		h;

		frame_env_init(&env, PROBE_REQID);
		sbx__v1__hello__init(&h);
		h.protocol_version = SBX_PROTO_VERSION;
		h.client_name = "frameprobe";
		env.body_case = SBX__V1__ENVELOPE__BODY_HELLO;
		env.hello = &h;
		return frame_write(fd, &env);
	}
	return 0;	/* silent */
}

static void
probe_print(const Sbx__V1__Envelope *env)
{
	const ProtobufCEnumValue	*ev;
	const ProtobufCFieldDescriptor	*fd;

	if (env->body_case == SBX__V1__ENVELOPE__BODY_ERROR &&
	    env->error != NULL) {
		ev = protobuf_c_enum_descriptor_get_value(
		    &sbx__v1__error_code__descriptor, (int)env->error->code);
		if (ev != NULL)
			printf("error %s: %s\n", ev->name, env->error->message);
		else
			printf("error %d: %s\n", (int)env->error->code,
			    env->error->message);
		return;
	}
	fd = protobuf_c_message_descriptor_get_field(
	    &sbx__v1__envelope__descriptor, (unsigned)env->body_case);
	printf("reply %s\n", fd != NULL ? fd->name : "unknown");
	/* audit-all: a line a record, "task ID ACTION RULE ACTOR" ("-"
	 * for an empty field). */
	if (env->body_case == SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS &&
	    env->audit_records != NULL)
		for (size_t i = 0; i < env->audit_records->n_events; i++) {
			const Sbx__V1__AuditEvent *e =
			    env->audit_records->events[i];

			printf("task %s %s %s %s\n",
			    *e->task_id != '\0' ? e->task_id : "-", e->action,
			    *e->rule != '\0' ? e->rule : "-",
			    *e->actor != '\0' ? e->actor : "-");
		}
	if (env->body_case == SBX__V1__ENVELOPE__BODY_HELLO_REPLY) {
		const Sbx__V1__HelloReply *r = env->hello_reply;

		printf("server %s %s socket %s protocol %u\n",
		    r->server_name, r->server_version, r->socket,
		    (unsigned)r->protocol_version);
		for (size_t i = 0; i < r->n_requests; i++)
			printf("serves %u %s\n",
			    (unsigned)r->requests[i]->field,
			    r->requests[i]->name);
	}
}

int
main(int argc, char *argv[])
{
	const char *const	 modes[] = { "garbage", "oversize", "truncated",
	    "badversion", "empty-body", "ok", "silent", "audit-all", "hello",
	    "future" };
	Sbx__V1__Envelope	*env;
	struct timeval		 tv = { PROBE_TIMEOUT, 0 };
	size_t			 i;
	int			 fd, rv;

	if (argc != 3)
		usage();
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(argv[2], modes[i]) == 0)
			break;
	if (i == sizeof(modes) / sizeof(modes[0]))
		usage();

	if ((fd = frame_client_connect(argv[1])) == -1) {
		fprintf(stderr, "frameprobe: connect %s: %s\n", argv[1],
		    strerror(errno));
		return 2;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == -1) {
		fprintf(stderr, "frameprobe: SO_RCVTIMEO: %s\n",
		    strerror(errno));
		return 1;
	}
	/*
	 * A daemon that refuses us may close before our request is written;
	 * what it then sends back (nothing) is still the answer to report.
	 */
	if (probe_send(fd, argv[2]) == -1 && errno != EPIPE &&
	    errno != ECONNRESET) {
		fprintf(stderr, "frameprobe: send: %s\n", strerror(errno));
		return 1;
	}
	rv = frame_read(fd, PROBE_MAX, &env);
	if (rv == 0 && strcmp(argv[2], "future") == 0) {
		/* The same connection must answer a good request next. */
		probe_print(env);
		sbx__v1__envelope__free_unpacked(env, NULL);
		if (probe_env(fd, SBX_PROTO_VERSION, 1) == -1 &&
		    errno != EPIPE && errno != ECONNRESET) {
			fprintf(stderr, "frameprobe: send: %s\n",
			    strerror(errno));
			return 1;
		}
		rv = frame_read(fd, PROBE_MAX, &env);
	}
	close(fd);
	if (rv == 0) {
		probe_print(env);
		sbx__v1__envelope__free_unpacked(env, NULL);
		return 0;
	}
	if (rv == -1 && (errno == EPIPE || errno == ECONNRESET)) {
		printf("closed-without-reply\n");
		return 0;
	}
	if (rv == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		printf("timeout\n");
		fprintf(stderr, "frameprobe: no answer within %d s\n",
		    PROBE_TIMEOUT);
		return 1;
	}
	if (rv == -2) {
		printf("bad-reply\n");
		fprintf(stderr, "frameprobe: the reply does not decode\n");
		return 1;
	}
	fprintf(stderr, "frameprobe: read: %s\n", strerror(errno));
	return 1;
}
