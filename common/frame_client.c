/*
 * frame_client.c: the blocking side of framed messaging, for sbxctl, tests
 * and benches.  It writes and reads whole frames whatever the kernel does
 * (short reads and writes, EINTR), never dies of SIGPIPE, and never trusts
 * a length it has not checked against the caller's maximum: an oversized
 * or undecodable frame is reported (-2), not allocated.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "util.h"

int
frame_client_connect(const char *path)
{
	struct sockaddr_un	sun;
	struct pollfd		pfd;
	socklen_t		len;
	int			fd, err, rv;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (path == NULL || strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
		return fd;
	if (errno != EINTR)
		goto fail;
	/*
	 * An interrupted connect() goes on in the background; calling it
	 * again is not portable, so wait for it and ask how it ended.
	 */
	pfd.fd = fd;
	pfd.events = POLLOUT;
	do {
		rv = poll(&pfd, 1, -1);
	} while (rv == -1 && errno == EINTR);
	if (rv == -1)
		goto fail;
	len = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
		goto fail;
	if (err != 0) {
		errno = err;
		goto fail;
	}
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/* Write all of buf.  send(MSG_NOSIGNAL) on sockets, write() otherwise. */
static int
frame_write_all(int fd, const uint8_t *buf, size_t len)
{
	ssize_t	n;
	int	sock = 1;

	while (len > 0) {
		if (sock) {
			n = send(fd, buf, len, MSG_NOSIGNAL);
			if (n == -1 && errno == ENOTSOCK) {
				sock = 0;
				continue;
			}
		} else
			n = write(fd, buf, len);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Read exactly len bytes.  At end of file: EPIPE when nothing of this
 * piece arrived and `first` says a new frame starts here, ECONNRESET when
 * the peer stopped part way through a frame.
 */
static int
frame_read_all(int fd, uint8_t *buf, size_t len, int first)
{
	size_t	got = 0;
	ssize_t	n;

	while (got < len) {
		n = read(fd, buf + got, len - got);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = (first && got == 0) ? EPIPE : ECONNRESET;
			return -1;
		}
		got += (size_t)n;
	}
	return 0;
}

int
frame_write(int fd, const Sbx__V1__Envelope *env)
{
	uint8_t	*buf;
	size_t	 len;
	int	 rv, err;

	if ((buf = frame_pack(env, &len)) == NULL) {
		errno = EINVAL;
		return -1;
	}
	rv = frame_write_all(fd, buf, len);
	err = errno;
	free(buf);
	errno = err;
	return rv;
}

int
frame_read(int fd, size_t max, Sbx__V1__Envelope **out)
{
	Sbx__V1__Envelope	*env;
	Sbx__V1__ErrorCode	 code;
	const char		*why;
	uint8_t			 hdr[FRAME_HDR], *buf;
	size_t			 len;

	*out = NULL;
	if (max == 0)
		max = FRAME_MAX_DEFAULT;
	if (frame_read_all(fd, hdr, sizeof(hdr), 1) == -1)
		return -1;
	if (frame_parse_header(hdr, max, &len, &code, &why) == -1) {
		errno = code == SBX__V1__ERROR_CODE__ERROR_FRAME_TOO_LARGE ?
		    EMSGSIZE : EBADMSG;
		return -2;
	}
	buf = xmalloc(len);
	if (frame_read_all(fd, buf, len, 0) == -1) {
		int err = errno;

		free(buf);
		errno = err;
		return -1;
	}
	env = frame_decode(buf, len, max, &code, &why);
	free(buf);
	if (env == NULL) {
		errno = EBADMSG;
		return -2;
	}
	*out = env;
	return 0;
}

int
frame_client_call(int fd, const Sbx__V1__Envelope *req,
    Sbx__V1__Envelope **reply, size_t max)
{
	*reply = NULL;
	if (frame_write(fd, req) == -1)
		return -1;
	return frame_read(fd, max, reply);
}
