/*
 * proxy.c: a channel's socket and its connections.  Each channel is one
 * execution: a listening Unix socket that launchd-sbx bound in the
 * execution's root-only staging (root and the sandbox's own group, mode
 * 0660) and handed over as a descriptor, so egressd names nothing on the
 * file system.  A connection is accepted only from a process in the
 * sandbox's cgroup with the sandbox's group (or root: gVisor's gofer
 * connects for the sandbox) -- checked on the kernel's peer credentials
 * before a byte is read (proxy_peer.c) -- so no other host user and no
 * other sandbox can ride the channel (invariant 11).  Its connections speak HTTP/1.1 as to
 * a forward proxy.  Each request goes through the same steps, in order:
 * parse and check framing (proxy_http.c), decide the head (decide.c),
 * read and count the body, decide again with the real sizes, fetch the
 * credential (broker.c), resolve the name and check the address
 * (resolve.c), dial exactly that address, send a request rebuilt from
 * the parsed one, and relay the response while checking its status,
 * Location and size.  Any refusal ends the request with a JSON denial and
 * an audit event, and nothing of that request has been sent upstream.
 *
 * A CONNECT is decided on its target, answered 200, and its TLS is
 * terminated by proxy_tls.c; the requests inside then take the same steps
 * on the same connection, with c->tls set and the CONNECT host as their
 * target, and go upstream over TLS that proxy_tls.c verified.
 *
 * Invariant: request bytes reach an upstream socket only in
 * proxy_send_request(), which runs only after every check above has
 * passed for that request (a TLS upstream's handshake comes first).
 *
 * Denials (invariant 6): a denied connection waits in PC_DENYING until
 * the denial's audit record is on disk, then gets its 403 (or TLS alert)
 * and is closed.  Records are committed in groups by a writer thread
 * (common/auditq.c), so the event loop never waits on fsync.  Past
 * denials_per_second denials in a second on one channel, further ones
 * are held and counted, and once a second one record per rule ("N
 * denials held in a flood...") is committed for them all, after which
 * the held answers go out: a flooding task gets every 403, each denial
 * is still counted in the log, and neither the disk nor the loop is
 * its to fill.
 *
 * Memory (issue 10): what an upstream sends waits for the sandbox only
 * up to PROXY_CONN_OUT_MAX per connection and PROXY_CHAN_OUT_MAX per
 * channel; past either, egressd stops reading that upstream until the
 * sandbox has read most of it, so a client that reads slowly slows its
 * upstream down (TCP pushes back) instead of growing egressd.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <jansson.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "audit.h"
#include "auditq.h"
#include "log.h"
#include "util.h"
#include "egressd.h"

static const char *const proxy_rules[EGRESS_NRULES] = {
	RULE_HOST, RULE_METHOD, RULE_PATH, RULE_REQ_SIZE, RULE_URL,
	RULE_HEADERS, RULE_RESP_SIZE, RULE_BUDGET, RULE_REDIRECT,
	RULE_ADDRESS, RULE_DNS, RULE_CREDENTIAL, RULE_BAD_REQUEST, RULE_SNI,
	RULE_CONNS, RULE_TIMEOUT, RULE_UPSTREAM, RULE_UPSTREAM_TLS,
	RULE_PEER, RULE_CRED_TLS,
};

static void	proxy_parse(struct proxy_conn *);
static void	proxy_up_read(struct bufferevent *, void *);
static void	proxy_up_event(struct bufferevent *, short, void *);
static void	proxy_client_read(struct bufferevent *, void *);
static void	proxy_client_write(struct bufferevent *, void *);
static void	proxy_client_event(struct bufferevent *, short, void *);
static void	proxy_out_cb(struct evbuffer *, const struct evbuffer_cb_info *,
		    void *);

int
proxy_rule_index(const char *rule)
{
	for (int i = 0; i < EGRESS_NRULES; i++)
		if (strcmp(proxy_rules[i], rule) == 0)
			return i;
	return -1;
}

const char *
proxy_rule_name(int i)
{
	return i >= 0 && i < EGRESS_NRULES ? proxy_rules[i] : "?";
}

/* ---- denials: group commit, and floods held and summarised ---- */

/* The denials held in one second of one channel's flood. */
struct proxy_flood {
	struct proxy_held	 held;
	uint64_t		 n[EGRESS_NRULES];
	uint64_t		 total;
	char			*first[EGRESS_NRULES];
	char			*last[EGRESS_NRULES];
};

/* The record of c's denial has run through the group commit. */
static void
proxy_denied(int ok, void *arg)
{
	struct proxy_conn	*c = arg;

	c->arec = NULL;
	if (!ok)
		log_warnx("audit: cannot record a %s denial", c->deny_rule);
	proxy_deny_release(c);
}

/* A flood's summary is on disk: every held denial is answered. */
static void
proxy_flood_done(int ok, void *arg)
{
	struct proxy_flood	*fl = arg;
	struct proxy_conn	*c;

	if (!ok)
		log_warnx("audit: cannot record a flood of %llu denials",
		    (unsigned long long)fl->total);
	while ((c = TAILQ_FIRST(&fl->held)) != NULL) {
		TAILQ_REMOVE(&fl->held, c, held_entry);
		c->flood = NULL;
		proxy_deny_release(c);
	}
	for (int i = 0; i < EGRESS_NRULES; i++) {
		free(fl->first[i]);
		free(fl->last[i]);
	}
	free(fl);
}

/* Queue the summary of the channel's flood: one record per rule. */
static void
proxy_flood_flush(struct channel *ch)
{
	struct proxy_flood	*fl = ch->flood;
	Sbx__V1__AuditEvent	 ev[EGRESS_NRULES];
	const Sbx__V1__AuditEvent *evp[EGRESS_NRULES];
	char			*detail[EGRESS_NRULES];
	size_t			 n = 0;

	if (fl == NULL)
		return;
	ch->flood = NULL;
	if (ch->flood_ev != NULL)
		evtimer_del(ch->flood_ev);
	log_info("flood task %s execution %s: %llu denials held past %u a "
	    "second, recorded as counts", ch->grant->task_id,
	    ch->grant->execution_id, (unsigned long long)fl->total,
	    ch->ed->conf->denials_per_second);
	for (int i = 0; i < EGRESS_NRULES; i++) {
		if (fl->n[i] == 0)
			continue;
		xasprintf(&detail[n], "%llu denials held in a flood (%llu in "
		    "all); first: %.200s; last: %.200s",
		    (unsigned long long)fl->n[i],
		    (unsigned long long)fl->total, fl->first[i],
		    fl->last[i] != NULL ? fl->last[i] : fl->first[i]);
		sbx__v1__audit_event__init(&ev[n]);
		ev[n].task_id = ch->grant->task_id;
		ev[n].execution_id = ch->grant->execution_id;
		ev[n].policy_hash = ch->grant->policy_hash;
		ev[n].traceparent = ch->traceparent;
		ev[n].action = (char *)"deny";
		ev[n].rule = (char *)proxy_rule_name(i);
		ev[n].detail = detail[n];
		ev[n].actor = (char *)"sandbox";
		evp[n] = &ev[n];
		n++;
	}
	if (ch->ed->aq != NULL)
		(void)auditq_add(ch->ed->aq, evp, n, proxy_flood_done, fl);
	for (size_t i = 0; i < n; i++)
		free(detail[i]);
	if (ch->ed->aq == NULL)
		proxy_flood_done(1, fl);
}

static void
proxy_flood_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	proxy_flood_flush(arg);
}

/* 1 once the channel is past denials_per_second in this second. */
static int
proxy_flooding(struct channel *ch)
{
	uint64_t	 now = mono_ns();

	if (now - ch->dn_window >= 1000000000ULL) {
		ch->dn_window = now;
		ch->dn_count = 0;
	}
	return ++ch->dn_count > ch->ed->conf->denials_per_second;
}

/* Count the denial into the flood of this second (and hold c). */
static void
proxy_flood_hold(struct channel *ch, int i, const char *detail,
    struct proxy_conn *c)
{
	struct proxy_flood	*fl;
	struct timeval		 tv;
	uint64_t		 left, now = mono_ns();

	if ((fl = ch->flood) == NULL) {
		fl = xcalloc(1, sizeof(*fl));
		TAILQ_INIT(&fl->held);
		ch->flood = fl;
		if (ch->flood_ev == NULL &&
		    (ch->flood_ev = evtimer_new(ch->ed->base,
		    proxy_flood_timer, ch)) == NULL)
			fatalx("cannot create a timer");
		/* The summary goes at the end of this second. */
		left = ch->dn_window + 1000000000ULL > now ?
		    ch->dn_window + 1000000000ULL - now : 0;
		tv.tv_sec = (time_t)(left / 1000000000ULL);
		tv.tv_usec = (suseconds_t)(left % 1000000000ULL / 1000);
		evtimer_add(ch->flood_ev, &tv);
	}
	fl->n[i]++;
	fl->total++;
	if (fl->first[i] == NULL)
		fl->first[i] = xstrdup(detail);
	else {
		free(fl->last[i]);
		fl->last[i] = xstrdup(detail);
	}
	if (c != NULL) {
		TAILQ_INSERT_TAIL(&fl->held, c, held_entry);
		c->flood = fl;
	}
}

void
proxy_audit_deny(struct channel *ch, const char *rule, const char *detail,
    struct proxy_conn *c)
{
	Sbx__V1__AuditEvent	 ev = SBX__V1__AUDIT_EVENT__INIT;
	const Sbx__V1__AuditEvent *evp = &ev;
	int			 i = proxy_rule_index(rule);

	if (i >= 0) {
		if (ch->denials[i] == 0 && ch->dn_first[i] == NULL) {
			xasprintf(&ch->dn_first[i], "%.300s", detail);
			ch->dn_first_ns[i] = now_ns();
		}
		ch->denials[i]++;
		ch->ed->m.denials[i]++;
		if (proxy_flooding(ch)) {
			proxy_flood_hold(ch, i, detail, c);
			return;
		}
	}
	log_ctx_set(ch->grant->task_id, ch->grant->execution_id,
	    ch->grant->policy_hash, ch->traceparent);
	log_ctx_rule(rule);
	log_info("deny %s task %s execution %s: %s", rule,
	    ch->grant->task_id, ch->grant->execution_id, detail);
	log_ctx_clear();
	if (ch->ed->aq == NULL) {
		if (c != NULL)
			proxy_deny_release(c);
		return;
	}
	ev.task_id = ch->grant->task_id;
	ev.execution_id = ch->grant->execution_id;
	ev.policy_hash = ch->grant->policy_hash;
	ev.traceparent = ch->traceparent;
	ev.action = (char *)"deny";
	ev.rule = (char *)rule;
	ev.detail = (char *)detail;
	ev.actor = (char *)"sandbox";
	if (c != NULL)
		c->arec = auditq_add(ch->ed->aq, &evp, 1, proxy_denied, c);
	else
		(void)auditq_add(ch->ed->aq, &evp, 1, NULL, NULL);
}

static void
proxy_timeouts(struct bufferevent *bev, uint32_t rd, uint32_t wr)
{
	struct timeval	 r = { rd, 0 }, w = { wr, 0 };

	bufferevent_set_timeouts(bev, rd ? &r : NULL, wr ? &w : NULL);
}

static void
proxy_up_free(struct proxy_conn *c)
{
	if (c->up_paused) {
		c->up_paused = 0;
		c->ch->npaused--;
	}
	if (c->ubev != NULL)
		bufferevent_free(c->ubev);
	c->ubev = NULL;
	c->up_host[0] = '\0';
	c->up_tls = 0;
	c->connecting = 0;
}

static void
proxy_request_clear(struct proxy_conn *c)
{
	/* A request decided but never written gives its bytes back. */
	decide_budget_settle(&c->ch->budget, c->reserved, 0);
	c->reserved = 0;
	resolve_cancel(c->rq);
	c->rq = NULL;
	broker_cancel(c->br);
	c->br = NULL;
	if (c->cred_line != NULL)
		sodium_free(c->cred_line);
	c->cred_line = NULL;
	c->cred_len = 0;
	decide_target_clear(&c->target);
	memset(&c->target, 0, sizeof(c->target));
	http_resp_clear(&c->resp);
	memset(&c->resp, 0, sizeof(c->resp));
	if (c->head != NULL)
		evbuffer_drain(c->head, evbuffer_get_length(c->head));
	if (c->up_paused) {
		/* A kept-alive upstream is read again: its close must be
		 * seen. */
		c->up_paused = 0;
		c->ch->npaused--;
		if (c->ubev != NULL)
			bufferevent_enable(c->ubev, EV_READ);
	}
	c->rule = NULL;
	c->resp_head_sent = 0;
	memset(&c->dec, 0, sizeof(c->dec));
}

void
proxy_conn_free(struct proxy_conn *c)
{
	struct channel	*ch = c->ch;

	proxy_request_clear(c);
	http_req_clear(&c->req);
	proxy_up_free(c);
	if (c->head != NULL)
		evbuffer_free(c->head);
	/* A denial still waiting is recorded all the same; nobody is
	 * left to answer. */
	auditq_cancel(c->arec);
	if (c->flood != NULL)
		TAILQ_REMOVE(&c->flood->held, c, held_entry);
	if (c->cbev != NULL) {
		/* What is still queued for the sandbox leaves the
		 * channel's count with it. */
		if (evbuffer_remove_cb(bufferevent_get_output(c->cbev),
		    proxy_out_cb, c) == 0)
			ch->queued -= evbuffer_get_length(
			    bufferevent_get_output(c->cbev));
		bufferevent_free(c->cbev);
	}
	proxy_tls_clear(c);
	if (c->counted) {
		TAILQ_REMOVE(&ch->conns, c, entry);
		ch->nconns--;
	}
	if (c->refused) {
		TAILQ_REMOVE(&ch->refused, c, entry);
		if (--ch->nrefused < ch->ed->conf->max_conns_per_task &&
		    ch->lev_off && ch->lev != NULL) {
			evconnlistener_enable(ch->lev);
			ch->lev_off = 0;
		}
	}
	free(c->deny_rule);
	free(c->deny_detail);
	free(c->alert);
	if (c->alert_fd != -1)
		close(c->alert_fd);
	free(c);
}

/* Close after what is queued for the client has been written. */
static void
proxy_close(struct proxy_conn *c)
{
	proxy_request_clear(c);
	proxy_up_free(c);
	c->state = PC_CLOSING;
	bufferevent_disable(c->cbev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->cbev)) == 0) {
		proxy_tls_shutdown(c);
		proxy_conn_free(c);
	}
}

/* A reply egressd writes itself: a denial or an upstream failure. */
static void
proxy_reply(struct proxy_conn *c, int status, const char *rule,
    const char *detail)
{
	struct evbuffer	*out = bufferevent_get_output(c->cbev);
	json_t		*j;
	char		*body;
	const char	*reason;

	switch (status) {
	case 400: reason = "Bad Request"; break;
	case 408: reason = "Request Timeout"; break;
	case 413: reason = "Payload Too Large"; break;
	case 414: reason = "URI Too Long"; break;
	case 431: reason = "Request Header Fields Too Large"; break;
	case 502: reason = "Bad Gateway"; break;
	case 504: reason = "Gateway Timeout"; break;
	default: reason = "Forbidden"; break;
	}
	j = json_pack("{s:s, s:s, s:s}", "rule", rule, "detail", detail,
	    "policy_hash", c->ch->grant->policy_hash);
	body = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	if (body == NULL)
		body = xstrdup("{}");
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "X-Sbx-Rule: %s\r\n"
	    "Connection: close\r\n\r\n%s\n", status, reason,
	    strlen(body) + 1, rule, body);
	free(body);
	json_decref(j);
}

/* Deny this request: nothing more of it goes anywhere; once its record
 * is on disk, answer and close the connection (the rest of the request
 * may still be unread). */
void
proxy_deny(struct proxy_conn *c, const char *rule, int status,
    const char *detail)
{
	char	*r, *d;

	if (c->state == PC_CLOSING || c->state == PC_DENYING)
		return;
	/* Copied first: they may point into what is cleared below. */
	r = xstrdup(rule);
	d = xstrdup(detail);
	/* Part of the response is out: all that is left is to cut it
	 * short. */
	c->deny_cut = c->resp_head_sent;
	proxy_request_clear(c);
	proxy_up_free(c);
	c->state = PC_DENYING;
	c->deny_rule = r;
	c->deny_detail = d;
	c->deny_status = status;
	bufferevent_disable(c->cbev, EV_READ);
	bufferevent_set_timeouts(c->cbev, NULL, NULL);
	/* Nothing the client sent is read again: a denial held for its
	 * record keeps no request bytes. */
	evbuffer_drain(c->req.body, evbuffer_get_length(c->req.body));
	evbuffer_drain(bufferevent_get_input(c->cbev),
	    evbuffer_get_length(bufferevent_get_input(c->cbev)));
	/* Last: with no audit log it answers at once. */
	proxy_audit_deny(c->ch, r, d, c);
}

void
proxy_deny_alert(struct proxy_conn *c, const char *rule, const char *detail)
{
	if (c->state == PC_CLOSING || c->state == PC_DENYING) {
		proxy_audit_deny(c->ch, rule, detail, NULL);
		return;
	}
	c->state = PC_DENYING;
	c->deny_alert = 1;
	c->deny_rule = xstrdup(rule);
	c->deny_detail = xstrdup(detail);
	proxy_audit_deny(c->ch, c->deny_rule, c->deny_detail, c);
}

void
proxy_deny_release(struct proxy_conn *c)
{
	c->deny_done = 1;
	if (c->deny_alert) {
		/* Still inside the failing handshake: proxy_tls.c takes
		 * the alert and calls again. */
		if (c->cbev != NULL)
			return;
		if (c->alert_fd != -1 && c->alert_len > 0 &&
		    write(c->alert_fd, c->alert, c->alert_len) == -1)
			log_debug("execution %s: the TLS alert was not sent",
			    c->ch->grant->execution_id);
		proxy_conn_free(c);
		return;
	}
	if (!c->deny_cut)
		proxy_reply(c, c->deny_status, c->deny_rule, c->deny_detail);
	proxy_close(c);
}

static void
proxy_fail(struct proxy_conn *c, int status, const char *detail)
{
	c->ch->ed->m.upstream_errors++;
	log_debug("execution %s: %s", c->ch->grant->execution_id, detail);
	if (!c->resp_head_sent)
		proxy_reply(c, status, RULE_UPSTREAM, detail);
	proxy_close(c);
}

static int
proxy_status(const char *rule)
{
	if (strcmp(rule, RULE_HEADERS) == 0)
		return 431;
	if (strcmp(rule, RULE_REQ_SIZE) == 0)
		return 413;
	if (strcmp(rule, RULE_URL) == 0)
		return 414;
	if (strcmp(rule, RULE_BAD_REQUEST) == 0)
		return 400;
	return 403;
}

/* ---- request ---- */

/* The length of https://host[:port] plus an origin-form target. */
static size_t
proxy_tunnel_url_len(const struct proxy_conn *c, size_t target_len)
{
	char	 port[8] = "";

	if (c->tls_port != 443)
		snprintf(port, sizeof(port), ":%u", c->tls_port);
	return strlen("https://") + strlen(c->tls_host) +
	    (c->tls_ip == 6 ? 2 : 0) + strlen(port) + target_len;
}

/*
 * The head is parsed: canonicalise the target, check it against Host,
 * and decide everything that does not need the body, so a denied
 * request's body is never even read.
 */
static int
proxy_on_head(struct http_req *r, void *arg)
{
	struct proxy_conn	*c = arg;
	const struct http_hdr	*h, *cl;
	struct decide_target	 ht;
	struct decide_req	 dr;
	const char		*why = NULL;
	uint64_t		 declared = 0;
	size_t			 url_len = r->url_len;

	c->ch->requests++;
	c->ch->ed->m.requests++;
	if (r->p.method == HTTP_CONNECT) {
		if (c->tls) {
			decide_deny(&c->dec, RULE_BAD_REQUEST, 400,
			    "CONNECT inside a CONNECT tunnel");
			return -1;
		}
		if (decide_parse_target(r->url, r->url_len, 1, &c->target,
		    &why) == -1) {
			decide_deny(&c->dec, RULE_BAD_REQUEST, 400,
			    "bad CONNECT target: %s", why);
			return -1;
		}
	} else if (c->tls) {
		/* Inside the tunnel: origin-form, on the CONNECT's host.
		 * The URL length is that of the https URL the request
		 * stands for, as with an absolute-form one. */
		url_len = proxy_tunnel_url_len(c, r->url_len);
		if (r->url_len == 0 || url_len > DECIDE_URL_MAX ||
		    r->url[0] != '/') {
			if (url_len > DECIDE_URL_MAX)
				decide_deny(&c->dec, RULE_URL, 414, "URL of "
				    "%zu bytes is over the %d-byte limit",
				    url_len, DECIDE_URL_MAX);
			else
				decide_deny(&c->dec, RULE_BAD_REQUEST, 400,
				    "want an origin-form target inside the "
				    "tunnel");
			return -1;
		}
		if (strpbrk(r->url, "\\#") != NULL) {
			decide_deny(&c->dec, RULE_BAD_REQUEST, 400,
			    "backslash or fragment in URL");
			return -1;
		}
		memset(&c->target, 0, sizeof(c->target));
		snprintf(c->target.host, sizeof(c->target.host), "%s",
		    c->tls_host);
		c->target.ip = c->tls_ip;
		c->target.port = c->tls_port;
		c->target.tls = 1;
		c->target.path = xstrdup(r->url);
	} else if (r->url_len > DECIDE_URL_MAX) {
		/* Too long to be worth parsing; the host still decides
		 * which denial an agent reads, so try. */
		if (decide_parse_target(r->url, strlen(r->url), 0,
		    &c->target, &why) == -1) {
			decide_deny(&c->dec, RULE_URL, 414, "URL of %zu bytes "
			    "is over the %d-byte limit", r->url_len,
			    DECIDE_URL_MAX);
			return -1;
		}
	} else if (decide_parse_target(r->url, r->url_len, 0, &c->target,
	    &why) == -1) {
		decide_deny(&c->dec, RULE_BAD_REQUEST, 400, "bad request "
		    "target: %s", why);
		return -1;
	}
	if (r->p.method != HTTP_CONNECT &&
	    (h = http_req_header(r, "Host", NULL)) != NULL) {
		if (decide_parse_authority(h->value, h->vlen, c->target.tls,
		    &ht, &why) == -1) {
			decide_deny(&c->dec, RULE_BAD_REQUEST, 400, "bad Host "
			    "header: %s", why);
			return -1;
		}
		if (strcmp(ht.host, c->target.host) != 0 ||
		    ht.port != c->target.port) {
			decide_deny(&c->dec, c->tls ? RULE_SNI :
			    RULE_BAD_REQUEST, c->tls ? 403 : 400,
			    "Host %s:%u does not match the target %s:%u",
			    ht.host, ht.port, c->target.host,
			    c->target.port);
			return -1;
		}
	}
	if ((cl = http_req_header(r, "Content-Length", NULL)) != NULL)
		declared = strtoull(cl->value, NULL, 10);
	memset(&dr, 0, sizeof(dr));
	dr.method = r->p.method == HTTP_CONNECT ? NULL : r->method;
	dr.target = &c->target;
	dr.url_len = url_len;
	dr.body_bytes = declared;
	dr.override = http_req_override(r);
	if (r->p.method == HTTP_CONNECT) {
		/* A tunnel is decided on host and port here; every
		 * request inside is decided on its own. */
		const Sbx__V1__AllowRule *ar = decide_rule(c->ch->pol,
		    c->target.host);

		if (ar == NULL)
			decide_deny(&c->dec, RULE_HOST, 403, "host %s is not "
			    "in the policy's allowlist", c->target.host);
		else if (c->target.port != decide_rule_port(ar, 1))
			decide_deny(&c->dec, RULE_HOST, 403, "port %u is not "
			    "allowed for host %s", c->target.port,
			    c->target.host);
		c->dec.allow = ar;
		c->rule = ar;
		return c->dec.rule != NULL ? -1 : 0;
	}
	/* Everything but the budget: that is checked with the real
	 * sizes once the body is in. */
	decide_request(c->ch->pol, &dr, 0, &c->dec);
	if (c->dec.rule != NULL && strcmp(c->dec.rule, RULE_BUDGET) != 0)
		return -1;
	memset(&c->dec, 0, sizeof(c->dec));
	c->rule = decide_rule(c->ch->pol, c->target.host);
	r->max_body = decide_max_request(c->rule);
	if (r->expect_continue)
		evbuffer_add_printf(bufferevent_get_output(c->cbev),
		    "HTTP/1.1 100 Continue\r\n\r\n");
	return 0;
}

/*
 * Queue data on bev, first writing what the socket takes at once when
 * nothing is queued ahead of it.  Left to itself, libevent writes on the
 * next loop pass and arms and disarms EPOLLOUT around each write: two
 * epoll_ctl calls and a pass per message, about a third of egressd's
 * system calls per proxied request.  TLS goes through proxy_tls_write_now
 * (with coalesce, a record per 16 KiB rather than one per buffer chain:
 * never for bytes that must not be copied).  Write errors are left to the
 * bufferevent: whatever is left is queued, and the bufferevent meets the
 * error on its own write.
 */
static void
proxy_write_now(struct bufferevent *bev, struct evbuffer *data,
    int coalesce)
{
	struct evbuffer		*out = bufferevent_get_output(bev);
	evutil_socket_t		 fd;

	if (evbuffer_get_length(out) == 0 && evbuffer_get_length(data) > 0) {
		if (bufferevent_openssl_get_ssl(bev) != NULL)
			proxy_tls_write_now(bev, data, coalesce);
		else if ((fd = bufferevent_getfd(bev)) != -1)
			(void)evbuffer_write(data, fd);
	}
	evbuffer_add_buffer(out, data);
}

void
proxy_send_request(struct proxy_conn *c)
{
	struct evbuffer	*out = c->ch->ed->scratch;
	size_t		 n = evbuffer_get_length(c->head) +
			    evbuffer_get_length(c->req.body) + 2;
	int		 cred;

	evbuffer_add_buffer(out, c->head);
	cred = c->cred_line != NULL;
	if (cred) {
		/* The credential stays in sodium memory until it is
		 * written, and is zeroed as it is freed. */
		if (evbuffer_add_reference(out, c->cred_line, c->cred_len,
		    proxy_cred_cleanup, NULL) == 0)
			c->cred_line = NULL;
		else {
			proxy_fail(c, 502, "cannot queue the request");
			return;
		}
	}
	evbuffer_add(out, "\r\n", 2);
	evbuffer_add_buffer(out, c->req.body);
	/* Over TLS every chain of the buffer becomes a record of its own:
	 * a small request goes out as one -- unless it carries a
	 * credential, which must not be copied out of sodium memory. */
	if (c->up_tls && !cred && evbuffer_get_length(out) <= 16384)
		evbuffer_pullup(out, -1);
	proxy_write_now(c->ubev, out, !cred);
	decide_budget_settle(&c->ch->budget, c->reserved, n);
	c->reserved = 0;
	c->ch->ed->m.bytes_out += n;
	c->ch->ed->m.allowed++;
	http_resp_init(&c->resp, c->ch->ed->conf->max_headers,
	    c->req.p.method == HTTP_HEAD, decide_max_response(c->rule));
	c->state = PC_RESPONSE;
	proxy_timeouts(c->ubev, c->ch->ed->conf->idle_timeout,
	    c->ch->ed->conf->idle_timeout);
	proxy_timeouts(c->cbev, 0, c->ch->ed->conf->idle_timeout);
	/* EV_WRITE only for what the socket did not take at once:
	 * enabling it on an empty buffer arms EPOLLOUT for nothing. */
	bufferevent_enable(c->ubev, EV_READ | (evbuffer_get_length(
	    bufferevent_get_output(c->ubev)) > 0 ? EV_WRITE : 0));
}

void
proxy_cred_cleanup(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	sodium_free((void *)data);
}


static void
proxy_resolved(int ok, const struct sockaddr *sa, socklen_t salen,
    const char *rule, const char *detail, void *arg)
{
	struct proxy_conn	*c = arg;
	char			 addr[64];
	int			 one = 1;

	c->rq = NULL;
	if (ok == -1) {
		proxy_deny(c, rule, 403, detail);
		return;
	}
	resolve_addr_str(sa, addr, sizeof(addr));
	log_debug("execution %s: %s:%u is %s", c->ch->grant->execution_id,
	    c->target.host, c->target.port, addr);
	if ((c->ubev = bufferevent_socket_new(c->ch->ed->base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		proxy_fail(c, 502, "cannot create a socket");
		return;
	}
	bufferevent_setcb(c->ubev, proxy_up_read, NULL, proxy_up_event, c);
	proxy_timeouts(c->ubev, c->ch->ed->conf->connect_timeout,
	    c->ch->ed->conf->connect_timeout);
	/* Exactly the address that was checked. */
	if (bufferevent_socket_connect(c->ubev, sa, (int)salen) == -1) {
		proxy_fail(c, 502, "cannot connect upstream");
		return;
	}
	/* Requests are written whole: Nagle would only hold back the
	 * tail of one (a TLS record after the first) for the upstream's
	 * delayed ACK, up to 40 ms. */
	(void)setsockopt(bufferevent_getfd(c->ubev), IPPROTO_TCP, TCP_NODELAY,
	    &one, sizeof(one));
	snprintf(c->up_host, sizeof(c->up_host), "%s", c->target.host);
	c->up_port = c->target.port;
	c->connecting = 1;
}

/* Reuse the upstream connection when it goes to the same place. */
void
proxy_dial(struct proxy_conn *c)
{
	struct resolve_req	*rq;

	if (c->ubev != NULL && !c->connecting &&
	    strcmp(c->up_host, c->target.host) == 0 &&
	    c->up_port == c->target.port) {
		proxy_send_request(c);
		return;
	}
	proxy_up_free(c);
	c->state = PC_WAIT;
	rq = resolve_start(c->ch->ed->dns, c->rule, &c->target,
	    proxy_resolved, c);
	/* An immediate answer has run the callback already. */
	if (rq != NULL)
		c->rq = rq;
}

static void
proxy_credential(int ok, const char *header, const uint8_t *value,
    size_t len, const char *why, void *arg)
{
	struct proxy_conn	*c = arg;
	size_t			 hl;
	char			 detail[600];

	c->br = NULL;
	if (!ok) {
		snprintf(detail, sizeof(detail), "no credential for %s: %s",
		    c->target.host, why);
		proxy_deny(c, RULE_CREDENTIAL, 403, detail);
		return;
	}
	for (size_t i = 0; i < len; i++)
		if (value[i] == '\r' || value[i] == '\n' || value[i] == '\0') {
			proxy_deny(c, RULE_CREDENTIAL, 403, "the credential "
			    "is not a valid header value");
			return;
		}
	hl = strlen(header);
	c->cred_len = hl + 2 + len + 2;
	if ((c->cred_line = sodium_malloc(c->cred_len)) == NULL) {
		proxy_deny(c, RULE_CREDENTIAL, 403, "out of secure memory");
		return;
	}
	memcpy(c->cred_line, header, hl);
	memcpy(c->cred_line + hl, ": ", 2);
	memcpy(c->cred_line + hl + 2, value, len);
	memcpy(c->cred_line + hl + 2 + len, "\r\n", 2);
	proxy_dial(c);
}

/* The whole request is in: decide again with the real sizes. */
static void
proxy_request_ready(struct proxy_conn *c)
{
	const Sbx__V1__Credential	*cred;
	const struct egressd_conf	*conf = c->ch->ed->conf;
	struct decide_req		 dr;

	c->state = PC_WAIT;
	bufferevent_set_timeouts(c->cbev, NULL, NULL);
	if (c->req.p.method == HTTP_CONNECT) {
		proxy_tls_start(c);
		return;
	}
	cred = decide_credential(c->ch->pol, c->target.host);
	http_req_head(&c->req, &c->target, cred != NULL ? cred->header :
	    NULL, c->head);
	memset(&dr, 0, sizeof(dr));
	dr.method = c->req.method;
	dr.target = &c->target;
	dr.url_len = c->tls ? proxy_tunnel_url_len(c, c->req.url_len) :
	    c->req.url_len;
	dr.body_bytes = c->req.body_bytes;
	dr.out_bytes = evbuffer_get_length(c->head) + 2 + c->req.body_bytes;
	decide_request(c->ch->pol, &dr, decide_budget_used(&c->ch->budget),
	    &c->dec);
	if (c->dec.rule != NULL) {
		proxy_deny(c, c->dec.rule, c->dec.status, c->dec.detail);
		return;
	}
	/* Reserved now, not counted when written: brokerd, DNS and the
	 * connect come in between, and every request decided meanwhile
	 * must see these bytes as spent.  The body is all in, so this is
	 * exactly what will be written (the credential aside, which the
	 * budget never counts). */
	c->reserved = dr.out_bytes;
	decide_budget_reserve(&c->ch->budget, c->reserved);
	if (cred == NULL) {
		proxy_dial(c);
		return;
	}
	/* decide_request() refused this already; the secret is never
	 * fetched for a request it could only go out on in clear. */
	if (!decide_credential_ok(cred, &c->target)) {
		proxy_deny(c, RULE_CRED_TLS, 403, "the credential goes only "
		    "over TLS");
		return;
	}
	if (conf->broker_path == NULL) {
		proxy_deny(c, RULE_CREDENTIAL, 403, "no credential broker is "
		    "configured");
		return;
	}
	c->br = broker_fetch(c->ch->ed->base, conf, &c->ch->signed_,
	    c->ch->traceparent, c->target.host, cred->secret, cred->header, proxy_credential, c);
}

static void
proxy_head_timeout(struct proxy_conn *c)
{
	struct evbuffer	*in = bufferevent_get_input(c->cbev);
	size_t		 len = evbuffer_get_length(in);

	proxy_timeouts(c->cbev, len > 0 ? c->ch->ed->conf->header_timeout :
	    c->ch->ed->conf->idle_timeout, c->ch->ed->conf->idle_timeout);
}

static void
proxy_parse(struct proxy_conn *c)
{
	struct evbuffer		*in = bufferevent_get_input(c->cbev);
	const struct egressd_conf *conf = c->ch->ed->conf;
	size_t			 max_head = (size_t)conf->max_header_kb * 1024;
	struct evbuffer_ptr	 pos;
	const char		*why;
	size_t			 len, n;
	char			*data;
	long			 used;

	while (c->state == PC_IDLE || c->state == PC_BODY) {
		len = evbuffer_get_length(in);
		if (len == 0)
			break;
		if (c->state == PC_IDLE) {
			pos = evbuffer_search(in, "\r\n\r\n", 4, NULL);
			if (pos.pos == -1) {
				n = len < max_head ? len : max_head;
				data = (char *)evbuffer_pullup(in, (ssize_t)n);
				/* Refuse a bad head before it is complete,
				 * but a trailing CR may still get its LF. */
				if (n > 0 && data[n - 1] == '\r')
					n--;
				if (http_head_check(data, n, &why) == -1) {
					proxy_deny(c, RULE_BAD_REQUEST, 400,
					    why);
					return;
				}
				if (len > max_head)
					proxy_deny(c, RULE_HEADERS, 431,
					    "request head over max_header_kb");
				else
					proxy_head_timeout(c);
				return;
			}
			n = (size_t)pos.pos + 4;
			if (n > max_head) {
				proxy_deny(c, RULE_HEADERS, 431, "request "
				    "head over max_header_kb");
				return;
			}
			data = (char *)evbuffer_pullup(in, (ssize_t)n);
			if (http_head_check(data, n, &why) == -1) {
				proxy_deny(c, RULE_BAD_REQUEST, 400, why);
				return;
			}
			c->state = PC_BODY;
		} else {
			n = len;
			data = (char *)evbuffer_pullup(in, -1);
		}
		used = http_req_feed(&c->req, data, n);
		if (used < 0) {
			if (c->dec.rule != NULL)
				proxy_deny(c, c->dec.rule, c->dec.status,
				    c->dec.detail);
			else
				proxy_deny(c, c->req.rule,
				    proxy_status(c->req.rule),
				    c->req.why != NULL ? c->req.why :
				    "refused");
			return;
		}
		evbuffer_drain(in, (size_t)used);
		if (c->req.complete) {
			proxy_request_ready(c);
			return;
		}
		if (used == 0)
			break;
	}
	if (c->state == PC_BODY)
		proxy_timeouts(c->cbev, conf->header_timeout,
		    conf->idle_timeout);
}

/* The sandbox's TLS is up: what follows are requests to the CONNECT
 * host, each read and decided like any other. */
void
proxy_tunnel_ready(struct proxy_conn *c)
{
	proxy_request_clear(c);
	http_req_reset(&c->req);
	c->state = PC_IDLE;
	proxy_conn_setup(c);
	/* The handshake's last read may have brought the first request. */
	proxy_tls_pending(c->cbev);
	proxy_parse(c);
}

/* The response is over: ready for the next request. */
static void
proxy_response_done(struct proxy_conn *c)
{
	int	 keep = c->req.keep_alive && !c->close_after;

	log_debug("response done: keep %d (client %d close_after %d), "
	    "%zu bytes waiting", keep, c->req.keep_alive, c->close_after,
	    evbuffer_get_length(bufferevent_get_input(c->cbev)));
	if (!c->resp.keep_alive || evbuffer_get_length(
	    bufferevent_get_input(c->ubev)) > 0)
		proxy_up_free(c);
	proxy_request_clear(c);
	if (!keep) {
		proxy_close(c);
		return;
	}
	http_req_reset(&c->req);
	c->state = PC_IDLE;
	if (c->ubev != NULL)
		proxy_timeouts(c->ubev, 0, 0);
	proxy_head_timeout(c);
	bufferevent_enable(c->cbev, EV_READ);
	proxy_tls_pending(c->ubev);
	proxy_tls_pending(c->cbev);
	proxy_parse(c);
}

/* ---- backpressure ---- */

/* Count what is queued for the sandbox on each channel. */
static void
proxy_out_cb(struct evbuffer *b, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct proxy_conn	*c = arg;

	(void)b;
	c->ch->queued += info->n_added;
	c->ch->queued -= info->n_deleted;
}

/* 1 while more is queued for the sandbox than c or its channel may
 * hold. */
static int
proxy_out_full(const struct proxy_conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->cbev)) >
	    PROXY_CONN_OUT_MAX || c->ch->queued > PROXY_CHAN_OUT_MAX;
}

static void
proxy_pause(struct proxy_conn *c)
{
	if (c->up_paused || c->ubev == NULL)
		return;
	c->up_paused = 1;
	c->ch->npaused++;
	bufferevent_disable(c->ubev, EV_READ);
}

/* Read the upstream again once the sandbox has read most of what was
 * queued, on the connection and on the channel. */
static void
proxy_resume(struct proxy_conn *c)
{
	if (!c->up_paused || c->state != PC_RESPONSE ||
	    evbuffer_get_length(bufferevent_get_output(c->cbev)) >
	    PROXY_CONN_OUT_MAX / 4 || c->ch->queued > PROXY_CHAN_OUT_MAX / 2)
		return;
	c->up_paused = 0;
	c->ch->npaused--;
	bufferevent_enable(c->ubev, EV_READ);
	proxy_tls_pending(c->ubev);
	/* What was read before the pause is relayed from the loop, not
	 * from inside this write callback. */
	if (evbuffer_get_length(bufferevent_get_input(c->ubev)) > 0)
		bufferevent_trigger(c->ubev, EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

static int
proxy_is_redirect(unsigned status)
{
	return status == 301 || status == 302 || status == 303 ||
	    status == 307 || status == 308;
}

/* Feed the upstream's bytes through the response parser, forwarding
 * exactly what it has accepted. */
static void
proxy_relay(struct proxy_conn *c, int eof)
{
	struct evbuffer	*in = bufferevent_get_input(c->ubev);
	size_t		 max_head = (size_t)c->ch->ed->conf->max_header_kb *
			    1024 * 4;
	struct evbuffer_ptr pos;
	const char	*why;
	char		*data, detail[600];
	size_t		 len, n;
	long		 used;
	int		 head;

	/* Past libhttp-parser's own limit a head could only be refused
	 * later, after buffering it. */
	if (max_head > HTTP_MAX_HEADER_SIZE)
		max_head = HTTP_MAX_HEADER_SIZE;
	while (c->state == PC_RESPONSE) {
		len = evbuffer_get_length(in);
		head = !c->resp.headers_done;
		if (head) {
			if (len == 0 && !eof)
				return;
			pos = evbuffer_search(in, "\r\n\r\n", 4, NULL);
			if (pos.pos == -1) {
				if (len > max_head)
					proxy_fail(c, 502, "response head too "
					    "large");
				else if (eof)
					proxy_fail(c, 502, "upstream closed "
					    "without a response");
				return;
			}
			n = (size_t)pos.pos + 4;
			data = (char *)evbuffer_pullup(in, (ssize_t)n);
			if (http_head_check(data, n, &why) == -1) {
				snprintf(detail, sizeof(detail), "malformed "
				    "response head: %s", why);
				proxy_fail(c, 502, detail);
				return;
			}
		} else {
			n = len;
			if (n == 0 && !eof)
				return;
			data = n > 0 ? (char *)evbuffer_pullup(in, -1) : NULL;
		}
		used = http_resp_feed(&c->resp, data, n);
		if (used < 0) {
			/* What was accepted before still goes out, as it
			 * would have from the queue. */
			proxy_write_now(c->cbev, c->ch->ed->scratch, 1);
			if (strcmp(c->resp.rule, RULE_RESP_SIZE) == 0 ||
			    strcmp(c->resp.rule, RULE_REDIRECT) == 0) {
				snprintf(detail, sizeof(detail), "%s from %s",
				    c->resp.why, c->target.host);
				proxy_deny(c, c->resp.rule, 403, detail);
			} else {
				snprintf(detail, sizeof(detail), "bad response "
				    "from %s: %s", c->target.host,
				    c->resp.why);
				proxy_fail(c, 502, detail);
			}
			return;
		}
		if (c->resp.headers_done && !c->resp_head_sent) {
			if (c->resp.status == 101) {
				proxy_fail(c, 502, "upstream switched "
				    "protocols");
				return;
			}
			if (proxy_is_redirect(c->resp.status) &&
			    c->resp.location != NULL &&
			    decide_redirect(c->ch->pol, &c->target,
			    c->resp.location, detail, sizeof(detail)) !=
			    NULL) {
				proxy_deny(c, RULE_REDIRECT, 403, detail);
				return;
			}
			if ((c->resp.p.flags & F_CONTENTLENGTH) &&
			    !c->resp.head_request &&
			    c->resp.p.content_length > c->resp.max_body) {
				snprintf(detail, sizeof(detail), "response of "
				    "%llu bytes from %.200s is over "
				    "max_response_kb",
				    (unsigned long long)
				    c->resp.p.content_length, c->target.host);
				proxy_deny(c, RULE_RESP_SIZE, 403, detail);
				return;
			}
			c->resp_head_sent = 1;
		}
		c->ch->bytes_in += (uint64_t)used;
		c->ch->ed->m.bytes_in += (uint64_t)used;
		evbuffer_remove_buffer(in, c->ch->ed->scratch, (size_t)used);
		/* A head whose body is already here goes out with it, in
		 * one write: the next pass feeds the body. */
		if (!head || c->resp.complete || evbuffer_get_length(in) == 0)
			proxy_write_now(c->cbev, c->ch->ed->scratch, 1);
		if (c->resp.complete) {
			if (c->resp.status >= 100 && c->resp.status < 200) {
				/* An interim response: the real one
				 * follows. */
				uint64_t mb = c->resp.max_body;
				int	 hr = c->resp.head_request;

				http_resp_clear(&c->resp);
				http_resp_init(&c->resp,
				    c->ch->ed->conf->max_headers, hr, mb);
				c->resp_head_sent = 0;
				continue;
			}
			if (eof || c->resp.p.flags & F_CONNECTION_CLOSE)
				c->close_after = 1;
			proxy_response_done(c);
			return;
		}
		if (eof && n == 0) {
			proxy_close(c);
			return;
		}
		if (!head && !eof && proxy_out_full(c)) {
			/* The sandbox reads slower than the upstream
			 * sends: leave the rest in the upstream's socket
			 * until it has read most of what is queued.  (Not
			 * with a head still in scratch: its body is fed
			 * on the next pass.) */
			proxy_pause(c);
			return;
		}
		if ((size_t)used == n && !eof)
			return;
		if (used == 0 && eof) {
			proxy_close(c);
			return;
		}
	}
}

static void
proxy_up_read(struct bufferevent *bev, void *arg)
{
	struct proxy_conn	*c = arg;

	/* Before anything here can free the connection. */
	proxy_tls_pending(bev);
	if (c->state == PC_RESPONSE)
		proxy_relay(c, 0);
	else if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		/* Bytes nobody asked for: this connection is not
		 * reusable. */
		proxy_up_free(c);
}

static void
proxy_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_conn	*c = arg;
	char			 detail[600];

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		if (c->tls && !c->up_tls) {
			/* TCP is up: the same socket now speaks TLS, and
			 * the next CONNECTED is its verified handshake. */
			if (proxy_tls_upstream(c) == -1)
				return;
			bufferevent_setcb(c->ubev, proxy_up_read, NULL,
			    proxy_up_event, c);
			proxy_timeouts(c->ubev,
			    c->ch->ed->conf->connect_timeout,
			    c->ch->ed->conf->connect_timeout);
			bufferevent_enable(c->ubev, EV_READ | EV_WRITE);
			return;
		}
		c->connecting = 0;
		proxy_send_request(c);
		return;
	}
	if (c->state != PC_RESPONSE && c->state != PC_WAIT &&
	    c->state != PC_TUNNEL) {
		/* An idle kept-alive upstream went away. */
		proxy_up_free(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		snprintf(detail, sizeof(detail), "%s:%u did not %s in time",
		    c->target.host, c->target.port, c->connecting ?
		    "accept the connection" : "answer");
		if (c->resp_head_sent)
			proxy_close(c);
		else
			proxy_deny(c, RULE_TIMEOUT, 504, detail);
		return;
	}
	if ((what & BEV_EVENT_EOF) && c->state == PC_RESPONSE) {
		proxy_relay(c, 1);
		return;
	}
	if (c->connecting)
		snprintf(detail, sizeof(detail), "cannot connect to %s:%u: %s",
		    c->target.host, c->target.port,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	else
		snprintf(detail, sizeof(detail), "connection to %s:%u failed",
		    c->target.host, c->target.port);
	if (c->up_tls && c->connecting)
		proxy_tls_upstream_failed(c);
	else
		proxy_fail(c, 502, detail);
}

/* ---- client side ---- */

static void
proxy_client_read(struct bufferevent *bev, void *arg)
{
	struct proxy_conn	*c = arg;

	proxy_tls_pending(bev);
	if (c->state == PC_CLOSING) {
		evbuffer_drain(bufferevent_get_input(bev),
		    evbuffer_get_length(bufferevent_get_input(bev)));
		return;
	}
	/* Pipelined bytes wait in the buffer (bounded by the
	 * watermark) until the response before them is done. */
	if (c->state == PC_IDLE || c->state == PC_BODY)
		proxy_parse(c);
}

/* Called when the queue for the sandbox is down to its low mark
 * (a quarter of PROXY_CONN_OUT_MAX), and when it is empty. */
static void
proxy_client_write(struct bufferevent *bev, void *arg)
{
	struct proxy_conn	*c = arg, *o, *next;
	struct channel		*ch = c->ch;

	if (c->state == PC_CLOSING) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
			proxy_tls_shutdown(c);
			proxy_conn_free(c);
		}
		return;
	}
	proxy_resume(c);
	/* Connections paused for the channel's sake go on once the
	 * channel's queue is down too. */
	if (ch->npaused == 0 || ch->queued > PROXY_CHAN_OUT_MAX / 2)
		return;
	for (o = TAILQ_FIRST(&ch->conns); o != NULL; o = next) {
		next = TAILQ_NEXT(o, entry);
		proxy_resume(o);
	}
}

static void
proxy_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_conn	*c = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);

	if (c->state == PC_CLOSING) {
		proxy_conn_free(c);
		return;
	}
	if ((what & BEV_EVENT_EOF) && (c->state == PC_WAIT ||
	    c->state == PC_RESPONSE)) {
		/* Half-closed: the client still reads its response. */
		c->close_after = 1;
		bufferevent_disable(bev, EV_READ);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING)) {
		if ((c->state == PC_IDLE && evbuffer_get_length(in) > 0) ||
		    c->state == PC_BODY) {
			proxy_deny(c, RULE_TIMEOUT, 408, "the request did "
			    "not arrive in time");
			return;
		}
	}
	/* EOF, error, idle timeout: the client is gone or done. */
	proxy_conn_free(c);
}

void
proxy_conn_setup(struct proxy_conn *c)
{
	const struct egressd_conf *conf = c->ch->ed->conf;

	bufferevent_setcb(c->cbev, proxy_client_read, proxy_client_write,
	    proxy_client_event, c);
	/* Bound what a client can queue ahead of its current request. */
	bufferevent_setwatermark(c->cbev, EV_READ, 0,
	    (size_t)conf->max_header_kb * 1024 + 64 * 1024);
	/* The write callback resumes a paused upstream. */
	bufferevent_setwatermark(c->cbev, EV_WRITE, PROXY_CONN_OUT_MAX / 4, 0);
	(void)evbuffer_remove_cb(bufferevent_get_output(c->cbev), proxy_out_cb,
	    c);
	if (evbuffer_add_cb(bufferevent_get_output(c->cbev), proxy_out_cb,
	    c) == NULL)
		fatalx("cannot watch a buffer");
	proxy_head_timeout(c);
	bufferevent_enable(c->cbev, EV_READ | EV_WRITE);
}

static void
proxy_accept(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct channel		*ch = arg;
	char			 detail[256];

	(void)lev;
	(void)sa;
	(void)salen;
	if (proxy_peer_check(ch->cgdir, ch->gid, fd, detail,
	    sizeof(detail)) == -1) {
		/* Not a byte read, not a byte answered. */
		close(fd);
		proxy_audit_deny(ch, RULE_PEER, detail, NULL);
		return;
	}
	/* The channel's first connection may be sbx-init's handoff
	 * connection (proxy_handoff.c), which looks at its first byte
	 * before it is either that or an ordinary connection. */
	if (!ch->ho_seen) {
		ch->ho_seen = 1;
		proxy_handoff_first(ch, fd);
		return;
	}
	proxy_conn_start(ch, fd);
}

/*
 * Serve fd, a connection from the sandbox (accepted here after the peer
 * check, or handed over by sbx-init), as a proxy connection: counted
 * against max_conns_per_task like any other.
 */
void
proxy_conn_start(struct channel *ch, int fd)
{
	struct proxy_conn	*c;
	char			 detail[256];

	c = xcalloc(1, sizeof(*c));
	c->ch = ch;
	c->alert_fd = -1;
	if ((c->cbev = bufferevent_socket_new(ch->ed->base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		free(c);
		return;
	}
	c->head = evbuffer_new();
	http_req_init(&c->req, ch->ed->conf->max_headers);
	c->req.on_head = proxy_on_head;
	c->req.arg = c;
	if (ch->nconns >= ch->ed->conf->max_conns_per_task) {
		snprintf(detail, sizeof(detail), "the task already has %u "
		    "connections open", ch->nconns);
		bufferevent_setcb(c->cbev, NULL, proxy_client_write,
		    proxy_client_event, c);
		bufferevent_enable(c->cbev, EV_WRITE);
		/* Each waits for its denial's record; a flood of them
		 * would hold a descriptor each: past the cap, the
		 * channel stops accepting until some are answered. */
		c->refused = 1;
		TAILQ_INSERT_TAIL(&ch->refused, c, entry);
		if (++ch->nrefused >= ch->ed->conf->max_conns_per_task &&
		    !ch->lev_off) {
			evconnlistener_disable(ch->lev);
			ch->lev_off = 1;
		}
		proxy_deny(c, RULE_CONNS, 403, detail);
		return;
	}
	TAILQ_INSERT_TAIL(&ch->conns, c, entry);
	ch->nconns++;
	c->counted = 1;
	c->state = PC_IDLE;
	proxy_conn_setup(c);
}

/* ---- channels ---- */

struct channel *
proxy_channel_find(struct egressd *ed, const char *xid)
{
	struct channel	*ch;

	TAILQ_FOREACH(ch, &ed->channels, entry)
		if (strcmp(ch->grant->execution_id, xid) == 0)
			return ch;
	return NULL;
}

/* launchd-sbx's socket must be a listening Unix stream socket. */
static int
proxy_listen(struct channel *ch, int lfd, char *err, size_t errlen)
{
	int		 v;
	socklen_t	 sl = sizeof(v);

	if (getsockopt(lfd, SOL_SOCKET, SO_DOMAIN, &v, &sl) == -1 ||
	    v != AF_UNIX || (sl = sizeof(v), getsockopt(lfd, SOL_SOCKET,
	    SO_TYPE, &v, &sl)) == -1 || v != SOCK_STREAM ||
	    (sl = sizeof(v), getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, &v,
	    &sl)) == -1 || v != 1) {
		snprintf(err, errlen, "the channel's descriptor is not a "
		    "listening Unix stream socket");
		close(lfd);
		return -1;
	}
	if (evutil_make_socket_nonblocking(lfd) == -1 ||
	    evutil_make_socket_closeonexec(lfd) == -1 ||
	    (ch->lev = evconnlistener_new(ch->ed->base, proxy_accept, ch,
	    LEV_OPT_CLOSE_ON_FREE, -1, lfd)) == NULL) {
		snprintf(err, errlen, "cannot listen on the channel's socket");
		close(lfd);
		return -1;
	}
	return 0;
}

struct channel *
proxy_channel_open(struct egressd *ed, Sbx__V1__PolicyGrant *g,
    const Sbx__V1__SignedPolicy *sp, int lfd, gid_t gid, const char *cgroup,
    char *err, size_t errlen)
{
	struct channel	*ch;

	ch = xcalloc(1, sizeof(*ch));
	ch->ed = ed;
	ch->ho_fd = -1;
	ch->grant = g;
	ch->pol = g->policy;
	/* max_out_kb is the task's: what its earlier executions spent,
	 * as policyd signed it, is spent for this one too. */
	ch->budget.before = g->egress_spent;
	TAILQ_INIT(&ch->conns);
	TAILQ_INIT(&ch->refused);
	sbx__v1__signed_policy__init(&ch->signed_);
	ch->signed_.grant.data = xmalloc(sp->grant.len);
	memcpy(ch->signed_.grant.data, sp->grant.data, sp->grant.len);
	ch->signed_.grant.len = sp->grant.len;
	ch->signed_.signature.data = xmalloc(sp->signature.len + 1);
	memcpy(ch->signed_.signature.data, sp->signature.data,
	    sp->signature.len);
	ch->signed_.signature.len = sp->signature.len;
	ch->gid = gid;
	ch->cgroup = xstrdup(cgroup);
	if ((ch->cgdir = proxy_peer_cgdir(cgroup, err, errlen)) == NULL ||
	    (ch->ca = ca_new(g->execution_id, err, errlen)) == NULL) {
		close(lfd);
		ch->grant = NULL;
		proxy_channel_close(ch);
		return NULL;
	}
	if (proxy_listen(ch, lfd, err, errlen) == -1) {
		ch->grant = NULL;
		proxy_channel_close(ch);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&ed->channels, ch, entry);
	ch->listed = 1;
	ed->m.channels_open++;
	return ch;
}

void
proxy_channel_close(struct channel *ch)
{
	struct proxy_conn	*c;

	/* The socket's name is launchd-sbx's to remove, with the staging;
	 * closing ours ends every connect from now on. */
	if (ch->lev != NULL) {
		evconnlistener_free(ch->lev);
		ch->lev = NULL;
	}
	/* The held denials are recorded as counts now; their connections
	 * go with the channel, unanswered. */
	proxy_flood_flush(ch);
	if (ch->flood_ev != NULL)
		event_free(ch->flood_ev);
	proxy_handoff_close(ch);
	while ((c = TAILQ_FIRST(&ch->conns)) != NULL)
		proxy_conn_free(c);
	while ((c = TAILQ_FIRST(&ch->refused)) != NULL)
		proxy_conn_free(c);
	if (ch->listed) {
		TAILQ_REMOVE(&ch->ed->channels, ch, entry);
		ch->ed->m.channels_open--;
	}
	ca_free(ch->ca);
	free(ch->cgroup);
	free(ch->cgdir);
	for (int i = 0; i < EGRESS_NRULES; i++)
		free(ch->dn_first[i]);
	free(ch->signed_.grant.data);
	free(ch->signed_.signature.data);
	if (ch->grant != NULL)
		sbx__v1__policy_grant__free_unpacked(ch->grant, NULL);
	free(ch);
}
