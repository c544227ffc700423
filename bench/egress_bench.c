/*
 * egress_bench.c: the load generator and the upstream of the egress bench
 * (bench/run_egress), so that every row (direct, through egressd, through
 * tinyproxy; plain HTTP and HTTPS) is driven and answered by the same
 * code and differs only in the path between the two.
 *
 *	egress_bench server [-b bytes] [-C cert -K key] port
 *	egress_bench client [-c conns] [-n requests] [-a addr] [-x host:port |
 *	    -X unix-socket] [-A cafile] [-L file] url
 *	egress_bench flood [-c conns] [-t seconds] -X unix-socket url
 *
 * server: a single-threaded libevent HTTP/1.1 server on 127.0.0.1:port
 * that answers every request head with 200 and a body of `bytes` bytes
 * (default 1024), keeping the connection open; with -C/-K over TLS.
 *
 * client: conns threads, each with one kept-alive connection, send
 * requests for url one at a time until n have been sent in all.
 *  - without a proxy: to addr (default 127.0.0.1) at the URL's port, in
 *    origin form, or over TLS for https (verified against -A, SNI and name
 *    from the URL);
 *  - with a proxy (-x over TCP, -X over a Unix socket): for http, in
 *    absolute form; for https, one CONNECT per connection, then TLS to the
 *    URL's host through the tunnel (verified against -A: the task CA for
 *    egressd, the upstream's CA for a tunnelling proxy), then requests in
 *    origin form.
 * A request counts only if its answer is a 200 with the body announced
 * by Content-Length; anything else is an error and is reported.  When the
 * far side closes (Connection: close, or end of stream), the client
 * reconnects, and the reconnection (CONNECT and handshake included) is
 * part of the next request's latency: that is what a proxy that closes
 * client connections costs its clients.  A kept-alive connection that
 * ends before any byte of an answer (closed without Connection: close,
 * as tinyproxy does) is retried once on a new connection, as HTTP
 * clients do, and counted as a retry.  The first connection of each
 * thread is opened before the clock starts.  Latency is measured per
 * request from its first byte written to the last byte of its answer;
 * -L appends every latency (ns, one a line) to file, so that runs can be
 * pooled.
 *
 * flood: what a task looping on denied requests does to egressd (issue
 * 10): conns threads, each opening a connection to the proxy's Unix
 * socket, sending a GET for url (which the policy must deny), reading
 * the answer to its end, and again, for seconds (default 10) or until
 * SIGTERM or SIGINT; then prints how many answers were 403s.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#define EB_HEAD_MAX	16384

/* ---- server ---- */

struct eb_server {
	struct event_base	*base;
	SSL_CTX			*ctx;		/* NULL: plain */
	char			*reply;		/* head and body */
	size_t			 replylen;
};

static void
eb_srv_read(struct bufferevent *bev, void *arg)
{
	struct eb_server	*s = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	struct evbuffer_ptr	 p;

	/* Requests carry no body: each head ends a request. */
	for (;;) {
		p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (p.pos == -1)
			break;
		evbuffer_drain(in, (size_t)p.pos + 4);
		bufferevent_write(bev, s->reply, s->replylen);
	}
	if (evbuffer_get_length(in) > EB_HEAD_MAX)
		bufferevent_free(bev);
}

static void
eb_srv_event(struct bufferevent *bev, short what, void *arg)
{
	(void)arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		bufferevent_free(bev);
}

static void
eb_srv_accept(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct eb_server	*s = arg;
	struct bufferevent	*bev;
	int			 one = 1;

	(void)l;
	(void)sa;
	(void)salen;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (s->ctx != NULL)
		bev = bufferevent_openssl_socket_new(s->base, fd,
		    SSL_new(s->ctx), BUFFEREVENT_SSL_ACCEPTING,
		    BEV_OPT_CLOSE_ON_FREE);
	else
		bev = bufferevent_socket_new(s->base, fd,
		    BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		close(fd);
		return;
	}
	bufferevent_setcb(bev, eb_srv_read, NULL, eb_srv_event, s);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static int
eb_server(int argc, char **argv)
{
	struct eb_server	 s;
	struct evconnlistener	*l;
	struct sockaddr_in	 sin;
	const char		*cert = NULL, *key = NULL;
	size_t			 body = 1024;
	char			*b;
	int			 ch;

	while ((ch = getopt(argc, argv, "b:C:K:")) != -1) {
		switch (ch) {
		case 'b':
			body = (size_t)strtoul(optarg, NULL, 10);
			break;
		case 'C':
			cert = optarg;
			break;
		case 'K':
			key = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc)
		return 2;
	memset(&s, 0, sizeof(s));
	if (cert != NULL) {
		if ((s.ctx = SSL_CTX_new(TLS_server_method())) == NULL ||
		    SSL_CTX_use_certificate_chain_file(s.ctx, cert) != 1 ||
		    SSL_CTX_use_PrivateKey_file(s.ctx, key,
		    SSL_FILETYPE_PEM) != 1) {
			fprintf(stderr, "egress_bench: %s, %s: cannot load\n",
			    cert, key);
			return 1;
		}
	}
	b = malloc(body + 1);
	if (b == NULL)
		return 1;
	memset(b, 'x', body);
	b[body] = '\0';
	if (asprintf(&s.reply, "HTTP/1.1 200 OK\r\nContent-Type: text/plain"
	    "\r\nContent-Length: %zu\r\n\r\n%s", body, b) == -1)
		return 1;
	free(b);
	s.replylen = strlen(s.reply);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)atoi(argv[optind]));
	if ((s.base = event_base_new()) == NULL ||
	    (l = evconnlistener_new_bind(s.base, eb_srv_accept, &s,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 1024,
	    (struct sockaddr *)&sin, sizeof(sin))) == NULL) {
		fprintf(stderr, "egress_bench: cannot listen on port %s\n",
		    argv[optind]);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	event_base_dispatch(s.base);
	return 0;
}

/* ---- client ---- */

static struct {
	const char		*addr;		/* direct: where to connect */
	const char		*proxy_host;	/* -x */
	int			 proxy_port;
	const char		*proxy_unix;	/* -X */
	const char		*cafile;
	int			 tls;		/* https URL */
	char			 host[256];
	int			 port;
	char			 path[1024];
	char			 req[2048];	/* the request as sent */
	size_t			 reqlen;
	SSL_CTX			*ctx;
	pthread_barrier_t	 start;
} eb;

struct eb_client {
	pthread_t	 thread;
	size_t		 count;
	uint64_t	*lat;		/* ns, into the shared array */
	size_t		 done;
	size_t		 errors;
	size_t		 connects;
	size_t		 retries;
	size_t		 answered;	/* on the current connection */
	char		 first_error[256];
	int		 fd;
	SSL		*ssl;
	char		 buf[EB_HEAD_MAX + 65536];
	size_t		 have;
};

static uint64_t
eb_now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void
eb_error(struct eb_client *c, const char *fmt, const char *arg)
{
	c->errors++;
	if (c->first_error[0] == '\0')
		snprintf(c->first_error, sizeof(c->first_error), fmt, arg);
}

static void
eb_close(struct eb_client *c)
{
	if (c->ssl != NULL) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	c->have = 0;
	c->answered = 0;
}

static ssize_t
eb_read(struct eb_client *c, char *p, size_t n)
{
	ssize_t	 r;

	if (c->ssl != NULL) {
		r = SSL_read(c->ssl, p, (int)n);
		return r > 0 ? r : (SSL_get_error(c->ssl, (int)r) ==
		    SSL_ERROR_ZERO_RETURN ? 0 : -1);
	}
	do
		r = read(c->fd, p, n);
	while (r == -1 && errno == EINTR);
	return r;
}

static int
eb_write(struct eb_client *c, const char *p, size_t n)
{
	ssize_t	 w;

	while (n > 0) {
		if (c->ssl != NULL)
			w = SSL_write(c->ssl, p, (int)n);
		else
			w = write(c->fd, p, n);
		if (w <= 0) {
			if (w == -1 && c->ssl == NULL && errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Read one response: 1 on a 200 with its whole body (*close set if the
 * far side will close), 0 on anything else (why set).
 */
static int
eb_response(struct eb_client *c, int *close_after, const char **why)
{
	char		*end, *p, *line;
	size_t		 headlen, bodylen = 0, need;
	ssize_t		 r;
	int		 status, have_len = 0;

	*close_after = 0;
	for (;;) {
		c->buf[c->have] = '\0';
		if ((end = strstr(c->buf, "\r\n\r\n")) != NULL)
			break;
		if (c->have >= EB_HEAD_MAX) {
			*why = "response head too large";
			return 0;
		}
		if ((r = eb_read(c, c->buf + c->have, EB_HEAD_MAX -
		    c->have)) <= 0) {
			*why = r == 0 ? "closed before a response" :
			    "read failed";
			return 0;
		}
		c->have += (size_t)r;
	}
	headlen = (size_t)(end - c->buf) + 4;
	if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1 || status != 200) {
		*why = "status other than 200";
		return 0;
	}
	for (line = strstr(c->buf, "\r\n") + 2; line < end;
	    line = strstr(line, "\r\n") + 2) {
		if (strncasecmp(line, "Content-Length:", 15) == 0) {
			bodylen = strtoul(line + 15, NULL, 10);
			have_len = 1;
		} else if (strncasecmp(line, "Connection:", 11) == 0) {
			for (p = line + 11; *p == ' '; p++)
				;
			if (strncasecmp(p, "close", 5) == 0)
				*close_after = 1;
		}
	}
	if (!have_len || bodylen > sizeof(c->buf) - EB_HEAD_MAX - 1) {
		*why = "no usable Content-Length";
		return 0;
	}
	need = headlen + bodylen;
	while (c->have < need) {
		if ((r = eb_read(c, c->buf + c->have, need - c->have)) <= 0) {
			*why = "closed in the body";
			return 0;
		}
		c->have += (size_t)r;
	}
	/* One request in flight: nothing may follow the answer. */
	c->have = 0;
	return 1;
}

static int
eb_connect(struct eb_client *c, const char **why)
{
	struct sockaddr_in	 sin;
	struct sockaddr_un	 sun;
	char			 connect_req[512];
	int			 one = 1, n, ok;
	const char		*host;

	c->connects++;
	if (eb.proxy_unix != NULL) {
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s",
		    eb.proxy_unix);
		if ((c->fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1 ||
		    connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) ==
		    -1) {
			*why = "cannot connect to the proxy's socket";
			return -1;
		}
	} else {
		host = eb.proxy_host != NULL ? eb.proxy_host : eb.addr;
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t)(eb.proxy_host != NULL ?
		    eb.proxy_port : eb.port));
		if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
			*why = "address is not an IPv4 literal";
			return -1;
		}
		if ((c->fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
		    connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)) ==
		    -1) {
			*why = "cannot connect";
			return -1;
		}
		(void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
	}
	if (!eb.tls)
		return 0;
	if (eb.proxy_host != NULL || eb.proxy_unix != NULL) {
		char	*e;
		ssize_t	 r;

		n = snprintf(connect_req, sizeof(connect_req), "CONNECT %s:%d "
		    "HTTP/1.1\r\nHost: %s:%d\r\n\r\n", eb.host, eb.port,
		    eb.host, eb.port);
		if (eb_write(c, connect_req, (size_t)n) == -1) {
			*why = "CONNECT not sent";
			return -1;
		}
		/* Byte by byte: nothing of the TLS stream may be eaten. */
		c->have = 0;
		for (;;) {
			if (c->have >= 4 && memcmp(c->buf + c->have - 4,
			    "\r\n\r\n", 4) == 0)
				break;
			if (c->have >= EB_HEAD_MAX ||
			    (r = read(c->fd, c->buf + c->have, 1)) != 1) {
				*why = "no answer to CONNECT";
				return -1;
			}
			c->have++;
		}
		c->buf[c->have] = '\0';
		c->have = 0;
		if ((e = strchr(c->buf, ' ')) == NULL ||
		    strncmp(e + 1, "200", 3) != 0) {
			*why = "CONNECT refused";
			return -1;
		}
	}
	if ((c->ssl = SSL_new(eb.ctx)) == NULL ||
	    SSL_set_tlsext_host_name(c->ssl, eb.host) != 1 ||
	    SSL_set1_host(c->ssl, eb.host) != 1 ||
	    SSL_set_fd(c->ssl, c->fd) != 1) {
		*why = "cannot set up TLS";
		return -1;
	}
	ok = SSL_connect(c->ssl);
	if (ok != 1) {
		*why = "TLS handshake failed (certificate not trusted?)";
		return -1;
	}
	return 0;
}

/* Send the request and read its answer: 0, or -1 with why. */
static int
eb_request(struct eb_client *c, int *close_after, const char **why)
{
	*why = NULL;
	if (eb_write(c, eb.req, eb.reqlen) == -1) {
		*why = "request not sent";
		return -1;
	}
	if (!eb_response(c, close_after, why))
		return -1;
	return 0;
}

static void *
eb_client_run(void *arg)
{
	struct eb_client	*c = arg;
	const char		*why = NULL;
	uint64_t		 t0;
	size_t			 i;
	int			 close_after;

	c->fd = -1;
	if (eb_connect(c, &why) == -1) {
		eb_error(c, "%s", why);
		eb_close(c);
	}
	pthread_barrier_wait(&eb.start);
	for (i = 0; i < c->count; i++) {
		t0 = eb_now();
		if (c->fd == -1 && eb_connect(c, &why) == -1) {
			eb_error(c, "%s", why);
			eb_close(c);
			continue;
		}
		if (eb_request(c, &close_after, &why) == -1 &&
		    c->answered > 0 && c->have == 0) {
			/*
			 * A kept-alive connection closed before any byte of
			 * the answer: the far side closed it without saying
			 * so (tinyproxy does).  Retry once on a new one, as
			 * HTTP clients do, on this request's clock.
			 */
			c->retries++;
			eb_close(c);
			if (eb_connect(c, &why) == -1) {
				eb_error(c, "%s", why);
				eb_close(c);
				continue;
			}
			why = NULL;
			(void)eb_request(c, &close_after, &why);
		}
		if (why != NULL) {
			eb_error(c, "%s", why);
			eb_close(c);
			continue;
		}
		c->lat[c->done++] = eb_now() - t0;
		c->answered++;
		if (close_after)
			eb_close(c);
	}
	eb_close(c);
	return NULL;
}

static int
eb_cmp(const void *a, const void *b)
{
	uint64_t	 x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array, in ms. */
static double
eb_pct_ms(const uint64_t *v, size_t n, double p)
{
	size_t	 k;

	if (n == 0)
		return 0;
	k = (size_t)(p / 100.0 * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return (double)v[k - 1] / 1e6;
}

static int
eb_parse_url(const char *url)
{
	const char	*p, *slash, *colon;
	size_t		 hl;

	if (strncmp(url, "http://", 7) == 0)
		p = url + 7;
	else if (strncmp(url, "https://", 8) == 0) {
		p = url + 8;
		eb.tls = 1;
	} else
		return -1;
	if ((slash = strchr(p, '/')) == NULL)
		slash = p + strlen(p);
	if ((colon = memchr(p, ':', (size_t)(slash - p))) == NULL) {
		hl = (size_t)(slash - p);
		eb.port = eb.tls ? 443 : 80;
	} else {
		hl = (size_t)(colon - p);
		eb.port = atoi(colon + 1);
	}
	if (hl == 0 || hl >= sizeof(eb.host))
		return -1;
	memcpy(eb.host, p, hl);
	eb.host[hl] = '\0';
	snprintf(eb.path, sizeof(eb.path), "%s", *slash ? slash : "/");
	return 0;
}

static int
eb_client(int argc, char **argv)
{
	struct eb_client	*cl;
	uint64_t		*lat, t0, wall;
	size_t			 n = 10000, ok = 0, errors = 0, connects = 0;
	size_t			 retries = 0;
	unsigned		 nc = 1;
	int			 ch, absolute;
	char			*colon;
	const char		*first_error = NULL, *latfile = NULL;
	FILE			*lf;

	eb.addr = "127.0.0.1";
	while ((ch = getopt(argc, argv, "a:A:c:L:n:x:X:")) != -1) {
		switch (ch) {
		case 'L':
			latfile = optarg;
			break;
		case 'a':
			eb.addr = optarg;
			break;
		case 'A':
			eb.cafile = optarg;
			break;
		case 'c':
			nc = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'n':
			n = (size_t)strtoull(optarg, NULL, 10);
			break;
		case 'x':
			eb.proxy_host = optarg;
			if ((colon = strrchr(optarg, ':')) == NULL)
				return 2;
			*colon = '\0';
			eb.proxy_port = atoi(colon + 1);
			break;
		case 'X':
			eb.proxy_unix = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc || nc == 0 || n < nc ||
	    eb_parse_url(argv[optind]) == -1)
		return 2;
	if (eb.tls) {
		if ((eb.ctx = SSL_CTX_new(TLS_client_method())) == NULL ||
		    eb.cafile == NULL ||
		    SSL_CTX_load_verify_locations(eb.ctx, eb.cafile,
		    NULL) != 1) {
			fprintf(stderr, "egress_bench: https needs -A CAFILE "
			    "that loads\n");
			return 1;
		}
		SSL_CTX_set_verify(eb.ctx, SSL_VERIFY_PEER, NULL);
	}
	absolute = !eb.tls && (eb.proxy_host != NULL || eb.proxy_unix != NULL);
	/* Absolute form to a plain proxy, origin form otherwise. */
	eb.reqlen = (size_t)snprintf(eb.req, sizeof(eb.req),
	    "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: egress_bench\r\n"
	    "Accept: */*\r\n\r\n", absolute ? argv[optind] : eb.path,
	    eb.host, eb.port);
	signal(SIGPIPE, SIG_IGN);

	lat = calloc(n, sizeof(*lat));
	cl = calloc(nc, sizeof(*cl));
	if (lat == NULL || cl == NULL)
		return 1;
	pthread_barrier_init(&eb.start, NULL, nc + 1);
	for (unsigned i = 0; i < nc; i++) {
		cl[i].count = n / nc + (i < n % nc);
		cl[i].lat = lat + (n / nc) * i + (i < n % nc ? i : n % nc);
		if (pthread_create(&cl[i].thread, NULL, eb_client_run,
		    &cl[i]) != 0)
			return 1;
	}
	pthread_barrier_wait(&eb.start);
	t0 = eb_now();
	for (unsigned i = 0; i < nc; i++)
		pthread_join(cl[i].thread, NULL);
	wall = eb_now() - t0;

	/* Successful latencies first in each slice: gather them. */
	for (unsigned i = 0; i < nc; i++) {
		memmove(lat + ok, cl[i].lat, cl[i].done * sizeof(*lat));
		ok += cl[i].done;
		errors += cl[i].errors;
		connects += cl[i].connects;
		retries += cl[i].retries;
		if (first_error == NULL && cl[i].first_error[0] != '\0')
			first_error = cl[i].first_error;
	}
	qsort(lat, ok, sizeof(*lat), eb_cmp);
	if (latfile != NULL) {
		if ((lf = fopen(latfile, "a")) == NULL) {
			fprintf(stderr, "egress_bench: %s: cannot append\n",
			    latfile);
			return 1;
		}
		for (size_t i = 0; i < ok; i++)
			fprintf(lf, "%" PRIu64 "\n", lat[i]);
		fclose(lf);
	}
	printf("c=%u n=%zu ok=%zu req/s=%.0f p50=%.3f ms p99=%.3f ms "
	    "connects=%zu retries=%zu errors=%zu\n", nc, n, ok,
	    wall > 0 ? (double)ok * 1e9 / (double)wall : 0.0,
	    eb_pct_ms(lat, ok, 50), eb_pct_ms(lat, ok, 99), connects, retries, errors);
	if (first_error != NULL)
		printf("first error: %s\n", first_error);
	free(lat);
	free(cl);
	return errors == 0 && ok > 0 ? 0 : 1;
}

/* ---- flood ---- */

static volatile sig_atomic_t eb_flood_stop;

struct eb_flooder {
	pthread_t	 thread;
	const char	*path;
	const char	*req;
	size_t		 reqlen;
	uint64_t	 until;
	size_t		 denied;
	size_t		 other;
};

static void
eb_flood_sig(int sig)
{
	(void)sig;
	eb_flood_stop = 1;
}

static void *
eb_flood_run(void *arg)
{
	struct eb_flooder	*f = arg;
	struct sockaddr_un	 sun;
	char			 buf[4096], sink[4096];
	size_t			 have;
	ssize_t			 r;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", f->path);
	while (!eb_flood_stop && eb_now() < f->until) {
		if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
			break;
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
			close(fd);
			f->other++;
			usleep(1000);
			continue;
		}
		/* Unread when the connection is over the cap: the answer
		 * comes all the same. */
		(void)write(fd, f->req, f->reqlen);
		/* The status line is in the first 12 bytes; read to the
		 * end (egressd closes after a denial). */
		have = 0;
		while ((r = read(fd, have < 12 ? buf + have : sink, have < 12 ?
		    sizeof(buf) - have : sizeof(sink))) > 0)
			if (have < 12)
				have += (size_t)r;
		if (have >= 12 && strncmp(buf, "HTTP/1.1 403", 12) == 0)
			f->denied++;
		else
			f->other++;
		close(fd);
	}
	return NULL;
}

static int
eb_flood(int argc, char **argv)
{
	struct eb_flooder	*fl;
	const char		*path = NULL;
	char			 req[2048];
	unsigned		 nc = 4;
	double			 secs = 10;
	uint64_t		 t0, wall;
	size_t			 denied = 0, other = 0;
	int			 ch;

	while ((ch = getopt(argc, argv, "c:t:X:")) != -1) {
		switch (ch) {
		case 'c':
			nc = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 't':
			secs = strtod(optarg, NULL);
			break;
		case 'X':
			path = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc || nc == 0 || path == NULL ||
	    eb_parse_url(argv[optind]) == -1)
		return 2;
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%d\r\n"
	    "User-Agent: egress_bench\r\n\r\n", argv[optind], eb.host,
	    eb.port);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, eb_flood_sig);
	signal(SIGINT, eb_flood_sig);
	if ((fl = calloc(nc, sizeof(*fl))) == NULL)
		return 1;
	t0 = eb_now();
	for (unsigned i = 0; i < nc; i++) {
		fl[i].path = path;
		fl[i].req = req;
		fl[i].reqlen = strlen(req);
		fl[i].until = t0 + (uint64_t)(secs * 1e9);
		if (pthread_create(&fl[i].thread, NULL, eb_flood_run,
		    &fl[i]) != 0)
			return 1;
	}
	for (unsigned i = 0; i < nc; i++) {
		pthread_join(fl[i].thread, NULL);
		denied += fl[i].denied;
		other += fl[i].other;
	}
	wall = eb_now() - t0;
	printf("flood c=%u secs=%.1f denied=%zu denials/s=%.0f other=%zu\n",
	    nc, (double)wall / 1e9, denied,
	    wall > 0 ? (double)denied * 1e9 / (double)wall : 0.0, other);
	free(fl);
	return denied > 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "server") == 0)
		return eb_server(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "client") == 0)
		return eb_client(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "flood") == 0)
		return eb_flood(argc - 1, argv + 1);
	fprintf(stderr, "usage: egress_bench server [-b bytes] [-C cert -K key]"
	    " port\n"
	    "       egress_bench client [-c conns] [-n requests] [-a addr] "
	    "[-x host:port | -X unix-socket] [-A cafile] [-L file] url\n"
	    "       egress_bench flood [-c conns] [-t seconds] -X unix-socket "
	    "url\n");
	return 2;
}
