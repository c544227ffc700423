/*
 * resolve.c: names to addresses, egressd's own way.  The sandbox never
 * resolves anything: egressd looks the canonical name up with libevent's
 * evdns (the resolver and hosts file named in egressd.yaml, nothing
 * else), and only after decide() has allowed the name, so a denied name
 * never causes a DNS query.  Every address is classified; one that is not
 * public (loopback, private, link-local and metadata, CGNAT, multicast,
 * NAT64, 6to4, Teredo, IPv4-mapped, unspecified, documentation ...) is
 * refused unless the host's rule names a CIDR that holds it.  The address
 * handed back is the one that was checked, and the caller dials exactly
 * that sockaddr: there is no second lookup to race.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "log.h"
#include "util.h"
#include "egressd.h"

struct resolve_req {
	struct evdns_getaddrinfo_request *gai;
	const Sbx__V1__AllowRule	*rule;
	char				 host[DECIDE_HOST_MAX];
	resolve_cb			 cb;
	void				*arg;
	int				 starting;	/* inside resolve_start */
	int				 done;		/* answered meanwhile */
};

/* Free, unless resolve_start() is still on the stack: it frees. */
static void
resolve_free(struct resolve_req *rq)
{
	if (rq->starting)
		rq->done = 1;
	else
		free(rq);
}

struct net4 {
	uint32_t	 net;
	int		 len;
	const char	*class;
};

static const struct net4 special4[] = {
	{ 0x00000000, 8, "unspecified" },	/* 0.0.0.0/8 */
	{ 0x0a000000, 8, "private" },		/* 10/8 */
	{ 0x64400000, 10, "cgnat" },		/* 100.64/10 */
	{ 0x7f000000, 8, "loopback" },		/* 127/8 */
	{ 0xa9fea9fe, 32, "metadata" },		/* 169.254.169.254 */
	{ 0xa9fe0000, 16, "link-local" },	/* 169.254/16 */
	{ 0xac100000, 12, "private" },		/* 172.16/12 */
	{ 0xc0000000, 24, "reserved" },		/* 192.0.0/24 */
	{ 0xc0000200, 24, "documentation" },	/* 192.0.2/24 */
	{ 0xc0586300, 24, "6to4-relay" },	/* 192.88.99/24 */
	{ 0xc0a80000, 16, "private" },		/* 192.168/16 */
	{ 0xc6120000, 15, "benchmarking" },	/* 198.18/15 */
	{ 0xc6336400, 24, "documentation" },	/* 198.51.100/24 */
	{ 0xcb007100, 24, "documentation" },	/* 203.0.113/24 */
	{ 0xe0000000, 4, "multicast" },		/* 224/4 */
	{ 0xf0000000, 4, "reserved" },		/* 240/4, broadcast */
	{ 0xa83f8110, 32, "metadata" },		/* 168.63.129.16 */
};

struct net6 {
	uint8_t		 net[16];
	int		 len;
	const char	*class;
};

static const struct net6 special6[] = {
	{ { 0 }, 128, "unspecified" },
	{ { [15] = 1 }, 128, "loopback" },
	{ { [10] = 0xff, [11] = 0xff }, 96, "mapped" },
	{ { 0 }, 96, "ipv4-compatible" },
	{ { 0x00, 0x64, 0xff, 0x9b }, 96, "nat64" },
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "nat64" },
	{ { 0x01, 0x00 }, 64, "discard" },
	{ { 0x20, 0x01, 0x00, 0x00 }, 32, "teredo" },
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, "documentation" },
	{ { 0x20, 0x02 }, 16, "6to4" },
	{ { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 }, 128, "metadata" },
	{ { 0xfc }, 7, "private" },
	{ { 0xfe, 0x80 }, 10, "link-local" },
	{ { 0xfe, 0xc0 }, 10, "site-local" },
	{ { 0xff }, 8, "multicast" },
};

static int
resolve_prefix6(const uint8_t *a, const uint8_t *net, int len)
{
	int	 full = len / 8, rem = len % 8;

	if (memcmp(a, net, (size_t)full) != 0)
		return 0;
	if (rem == 0)
		return 1;
	return ((a[full] ^ net[full]) & (0xff << (8 - rem))) == 0;
}

const char *
resolve_addr_class(const struct sockaddr *sa)
{
	size_t	 i;

	if (sa->sa_family == AF_INET) {
		uint32_t a = ntohl(((const struct sockaddr_in *)sa)->
		    sin_addr.s_addr);

		for (i = 0; i < sizeof(special4) / sizeof(special4[0]); i++) {
			uint32_t mask = special4[i].len == 0 ? 0 :
			    0xffffffffu << (32 - special4[i].len);

			if ((a & mask) == special4[i].net)
				return special4[i].class;
		}
		return NULL;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)sa)->
		    sin6_addr.s6_addr;

		for (i = 0; i < sizeof(special6) / sizeof(special6[0]); i++)
			if (resolve_prefix6(a, special6[i].net,
			    special6[i].len))
				return special6[i].class;
		return NULL;
	}
	return "not an IP address";
}

int
resolve_cidr_match(const char *cidr, const struct sockaddr *sa)
{
	char		 buf[64], *slash, *end;
	long		 len;
	uint8_t		 net[16];

	if (strlen(cidr) >= sizeof(buf))
		return 0;
	snprintf(buf, sizeof(buf), "%s", cidr);
	if ((slash = strchr(buf, '/')) == NULL)
		return 0;
	*slash++ = '\0';
	len = strtol(slash, &end, 10);
	if (*slash == '\0' || *end != '\0' || len < 0)
		return 0;
	if (sa->sa_family == AF_INET && inet_pton(AF_INET, buf, net) == 1) {
		if (len > 32)
			return 0;
		return resolve_prefix6((const uint8_t *)
		    &((const struct sockaddr_in *)sa)->sin_addr, net,
		    (int)len);
	}
	if (sa->sa_family == AF_INET6 && inet_pton(AF_INET6, buf, net) == 1) {
		if (len > 128)
			return 0;
		return resolve_prefix6(((const struct sockaddr_in6 *)sa)->
		    sin6_addr.s6_addr, net, (int)len);
	}
	return 0;
}

const char *
resolve_addr_check(const Sbx__V1__AllowRule *r, const struct sockaddr *sa)
{
	const char	*class = resolve_addr_class(sa);

	if (class == NULL)
		return NULL;
	for (size_t i = 0; i < r->n_cidrs; i++)
		if (resolve_cidr_match(r->cidrs[i], sa))
			return NULL;
	return class;
}

void
resolve_addr_str(const struct sockaddr *sa, char *out, size_t len)
{
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		    out, (socklen_t)len);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->
		    sin6_addr, out, (socklen_t)len);
	else
		snprintf(out, len, "?");
}

struct evdns_base *
resolve_init(struct event_base *base, const struct egressd_conf *c)
{
	struct evdns_base	*dns;
	const char		*rc = c->resolv_conf != NULL ? c->resolv_conf :
				    "/etc/resolv.conf";
	int			 r;

	/* No default nameservers and no /etc/hosts: only what the
	 * configuration names. */
	if ((dns = evdns_base_new(base, 0)) == NULL)
		return NULL;
	r = evdns_base_resolv_conf_parse(dns, DNS_OPTION_NAMESERVERS |
	    DNS_OPTION_MISC, rc);
	if (r != 0 && r != 6)
		log_warnx("%s: cannot read the resolver configuration "
		    "(error %d)", rc, r);
	if (c->hosts_file != NULL &&
	    evdns_base_load_hosts(dns, c->hosts_file) != 0)
		log_warnx("%s: cannot read the hosts file", c->hosts_file);
	/* Never search: a name is looked up exactly as decided. */
	evdns_base_search_clear(dns);
	return dns;
}

static void
resolve_done(int err, struct evutil_addrinfo *res, void *arg)
{
	struct resolve_req	*rq = arg;
	struct evutil_addrinfo	*ai;
	const char		*class = NULL;
	char			 detail[600], addr[64] = "";

	rq->gai = NULL;
	if (err == EVUTIL_EAI_CANCEL || rq->cb == NULL) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		resolve_free(rq);
		return;
	}
	if (err != 0) {
		snprintf(detail, sizeof(detail), "cannot resolve %s: %s",
		    rq->host, evutil_gai_strerror(err));
		rq->cb(-1, NULL, 0, RULE_DNS, detail, rq->arg);
		resolve_free(rq);
		return;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if ((class = resolve_addr_check(rq->rule, ai->ai_addr)) ==
		    NULL) {
			rq->cb(0, ai->ai_addr, (socklen_t)ai->ai_addrlen,
			    NULL, NULL, rq->arg);
			evutil_freeaddrinfo(res);
			resolve_free(rq);
			return;
		}
		resolve_addr_str(ai->ai_addr, addr, sizeof(addr));
	}
	snprintf(detail, sizeof(detail), "%s resolves to %s (%s), which "
	    "the policy does not allow", rq->host, addr,
	    class != NULL ? class : "no address");
	if (res != NULL)
		evutil_freeaddrinfo(res);
	rq->cb(-1, NULL, 0, res != NULL ? RULE_ADDRESS : RULE_DNS, detail,
	    rq->arg);
	resolve_free(rq);
}

struct resolve_req *
resolve_start(struct evdns_base *dns, const Sbx__V1__AllowRule *r,
    const struct decide_target *t, resolve_cb cb, void *arg)
{
	struct resolve_req	*rq;
	struct evutil_addrinfo	 hints;
	struct evdns_getaddrinfo_request *gai;
	char			 port[8];

	rq = xcalloc(1, sizeof(*rq));
	rq->rule = r;
	rq->cb = cb;
	rq->arg = arg;
	snprintf(rq->host, sizeof(rq->host), "%s", t->host);
	snprintf(port, sizeof(port), "%u", t->port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* A literal needs no query; its class is still checked. */
	hints.ai_flags = t->ip ? EVUTIL_AI_NUMERICHOST : 0;
	rq->starting = 1;
	gai = evdns_getaddrinfo(dns, t->host, port, &hints, resolve_done, rq);
	rq->starting = 0;
	/* Answered at once (literal, hosts file, error): the callback
	 * has run. */
	if (rq->done || gai == NULL) {
		free(rq);
		return NULL;
	}
	rq->gai = gai;
	return rq;
}

void
resolve_cancel(struct resolve_req *rq)
{
	if (rq == NULL)
		return;
	/* The callback runs with EVUTIL_EAI_CANCEL and frees rq. */
	rq->cb = NULL;
	if (rq->gai != NULL)
		evdns_getaddrinfo_cancel(rq->gai);
}
