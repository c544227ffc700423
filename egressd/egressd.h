/*
 * egressd.h: egressd's structures and the prototypes of its modules.
 * egressd is the sandbox's only route out: one channel per execution,
 * each a listening Unix socket launchd-sbx bound into that one sandbox and
 * handed over as a descriptor (egressd names none), on which only the
 * sandbox's own processes are accepted, and behind which every HTTP
 * request is decided against the execution's signed policy before a byte
 * leaves.  The invariant everything here serves: nothing is sent upstream
 * unless decide() allowed that exact request, to an address that was
 * resolved and checked by egressd itself, and every denial is audited.
 */
#ifndef SBX_EGRESSD_H
#define SBX_EGRESSD_H

#include <sys/types.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>

#include "config.h"
#include "peer.h"
#include "sign.h"
#include "policy.h"
#include "trace.h"

#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/policy.pb-c.h"

#define EGRESSD_CONF_DEFAULT	"/etc/sbx/egressd.yaml"
#define EGRESSD_DB		"egressd.db"

/* Rule ids (EGRESS.md). */
#define RULE_HOST		"host-not-allowed"
#define RULE_METHOD		"method-not-allowed"
#define RULE_PATH		"path-not-allowed"
#define RULE_REQ_SIZE		"request-too-large"
#define RULE_URL		"url-too-long"
#define RULE_HEADERS		"headers-too-large"
#define RULE_RESP_SIZE		"response-too-large"
#define RULE_BUDGET		"egress-budget-exhausted"
#define RULE_REDIRECT		"redirect-not-allowed"
#define RULE_ADDRESS		"address-not-allowed"
#define RULE_SIGNATURE		"signature-invalid"
#define RULE_EXPIRED		"policy-expired"
#define RULE_DNS		"dns-failed"
#define RULE_CREDENTIAL		"credential-unavailable"
#define RULE_BAD_REQUEST	"bad-request"
#define RULE_SNI		"sni-mismatch"
#define RULE_CONNS		"too-many-connections"
#define RULE_TIMEOUT		"timeout"
#define RULE_UPSTREAM		"upstream-failed"
#define RULE_UPSTREAM_TLS	"upstream-tls-failed"
#define RULE_PEER		"channel-peer-refused"
#define RULE_CRED_TLS		"credential-needs-tls"
#define EGRESS_NRULES		20

#define DECIDE_URL_MAX		2048
#define DECIDE_HOST_MAX		256

/*
 * Memory bounds (issue 10).  Bytes from an upstream wait for a slow
 * client only up to a mark: past PROXY_CONN_OUT_MAX queued for one
 * connection, or PROXY_CHAN_OUT_MAX for all of a channel's, egressd stops
 * reading that upstream (TCP pushes back on it) until the queue drains to
 * a quarter of the connection's mark and half the channel's.  A
 * chunk-size line with its extensions, or the trailers, may be at most
 * HTTP_CHUNK_LINE_MAX bytes.
 */
#define PROXY_CONN_OUT_MAX	(256 * 1024)
#define PROXY_CHAN_OUT_MAX	(1024 * 1024)
#define HTTP_CHUNK_LINE_MAX	4096

struct event_base;
struct evdns_base;
struct evconnlistener;
struct bufferevent;
struct evbuffer;
struct audit;
struct auditq;
struct auditq_entry;
struct yerrs;
struct frame_conn;
struct ca;

/* ---- parse.c ---- */

struct egressd_conf {
	struct cfg_common	 common;	/* file, user, state_dir, ... */
	char			*run_dir;
	char			*public_key;
	char			*public_key_previous;
	char			*resolv_conf;	/* NULL: /etc/resolv.conf */
	char			*hosts_file;	/* NULL: none */
	char			**upstream_cas;	/* extra trusted CA files */
	size_t			  nupstream_cas;
	char			*broker_path;	/* NULL: no broker */
	uid_t			 broker_uid;
	uint32_t		 max_conns_per_task;
	uint32_t		 header_timeout;	/* seconds */
	uint32_t		 idle_timeout;
	uint32_t		 connect_timeout;
	uint32_t		 max_header_kb;
	uint32_t		 max_headers;
	uint32_t		 denials_per_second;	/* per channel */
	struct cfg_sock		 control;
	struct cfg_sock		 admin;
};

/* The keys of egressd.yaml, for the skeleton (daemon.h) and cfg_parse. */
extern const struct cfg_table parse_table;

/* ---- idn.c ---- */

#define IDN_SONAME	"libidn2.so.0"

/* Can soname (NULL: IDN_SONAME) be loaded with the calls egressd makes?
 * 0, or -1 with err naming it; unloaded again either way. */
int		 idn_check(const char *soname, char *err, size_t errlen);
/* Is libidn2 loaded (at the first non-ASCII host)? */
int		 idn_loaded(void);
/* host (UTF-8) in its punycode form into out (host and out may be the
 * same buffer): 0, or -1 with *why. */
int		 idn_to_ascii(const char *host, char *out, size_t outlen,
		    const char **why);

/* ---- decide.c: the pure decision ---- */

/* A request target, canonicalised. */
struct decide_target {
	int		 tls;			/* https or inside CONNECT */
	char		 host[DECIDE_HOST_MAX];	/* canonical; IPv6 bare */
	int		 ip;			/* 4 or 6 for literals, else 0 */
	uint16_t	 port;
	int		 port_given;
	char		*path;			/* origin-form, malloc'd */
};

struct decide_req {
	const char	*method;
	const struct decide_target *target;
	size_t		 url_len;	/* the target as the client sent it */
	uint64_t	 body_bytes;	/* decoded */
	uint64_t	 out_bytes;	/* request line, headers and body sent */
	/* A header the client sent that some servers read as the path or
	 * the method instead of the request line's (decide_header), or
	 * NULL. */
	const char	*override;
};

struct decision {
	const char			*rule;	/* NULL: allowed */
	int				 status;
	const Sbx__V1__AllowRule	*allow;
	char				 detail[256];
};

/* Canonicalise a host as written in a URL or Host header (without the
 * port): 0, or -1 with *why. */
int		 decide_host_canon(const char *in, size_t len, char *out,
		    size_t outlen, int *ip, const char **why);
/* Parse an absolute-form http(s) URL (or, with authority_only, a CONNECT
 * target host:port).  0 or -1 with *why; free with decide_target_clear. */
int		 decide_parse_target(const char *url, size_t len,
		    int authority_only, struct decide_target *,
		    const char **why);
/* Parse a Host header value: 0 or -1. */
int		 decide_parse_authority(const char *s, size_t len, int tls,
		    struct decide_target *, const char **why);
void		 decide_target_clear(struct decide_target *);
/* The rule for a host, or NULL. */
const Sbx__V1__AllowRule *decide_rule(const Sbx__V1__Policy *,
		    const char *host);
uint16_t	 decide_rule_port(const Sbx__V1__AllowRule *, int tls);
/* 1 if path (origin-form, query allowed) is in canonical form and
 * allowed by the rule, else 0 with *why. */
int		 decide_path(const Sbx__V1__AllowRule *, const char *path,
		    const char **why);
/* What egressd does with a request header the sandbox sent. */
enum decide_hdr {
	DECIDE_HDR_FORWARD,
	DECIDE_HDR_STRIP,	/* identity or routing: never forwarded */
	DECIDE_HDR_PATH,	/* overrides the path: path-not-allowed */
	DECIDE_HDR_METHOD,	/* overrides the method: method-not-allowed */
};
enum decide_hdr	 decide_header(const char *name);
uint64_t	 decide_max_request(const Sbx__V1__AllowRule *);
uint64_t	 decide_max_response(const Sbx__V1__AllowRule *);
uint64_t	 decide_max_out(const Sbx__V1__Policy *);
/*
 * The task's egress budget as one execution sees it.  max_out_kb is the
 * task's across all its executions: `before` is what policyd signed into
 * the grant as spent by the earlier ones, `sent` what this execution has
 * sent, `reserved` what requests already decided but not yet written
 * upstream will send.  A request is decided against all three and
 * reserves its bytes at once, so requests decided together (waiting on
 * brokerd, DNS or connect) cannot each pass against the same count.
 */
struct decide_budget {
	uint64_t	 before;
	uint64_t	 sent;
	uint64_t	 reserved;
};
/* Bytes counted against the budget: before + sent + reserved. */
uint64_t	 decide_budget_used(const struct decide_budget *);
/* Reserve n bytes for a request decided allowed. */
void		 decide_budget_reserve(struct decide_budget *, uint64_t n);
/* The request that reserved `reserved` bytes sent `sent` (0: none, it
 * was refused or failed before a byte went out). */
void		 decide_budget_settle(struct decide_budget *, uint64_t reserved,
		    uint64_t sent);
/* The reference decide() and the extras, in order: host, port,
 * method, URL length, path, override headers, a credential over plain
 * http, request size, budget.  bytes_out: decide_budget_used(). */
void		 decide_request(const Sbx__V1__Policy *,
		    const struct decide_req *, uint64_t bytes_out,
		    struct decision *);
/* 1 if egressd may add cred to a request to t: over TLS always (egressd
 * verifies the upstream's certificate), over plain http only when the
 * credential says scheme: http. */
int		 decide_credential_ok(const Sbx__V1__Credential *,
		    const struct decide_target *t);
/* The target of a 3xx Location relative to the request: NULL if the
 * policy allows the client to follow it, else the rule id. */
const char	*decide_redirect(const Sbx__V1__Policy *,
		    const struct decide_target *from, const char *location,
		    char *detail, size_t detaillen);
const Sbx__V1__Credential *decide_credential(const Sbx__V1__Policy *,
		    const char *host);
void		 decide_deny(struct decision *, const char *rule, int status,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- resolve.c ---- */

/* The class of a non-public address ("loopback", "private", ...), NULL
 * for a public one. */
const char	*resolve_addr_class(const struct sockaddr *);
/* 1 if sa is inside cidr ("10.0.0.0/8", "fd00::/8"), 0 if not. */
int		 resolve_cidr_match(const char *cidr, const struct sockaddr *);
/* NULL if the rule lets egressd dial sa, else the class that forbids it. */
const char	*resolve_addr_check(const Sbx__V1__AllowRule *,
		    const struct sockaddr *);
void		 resolve_addr_str(const struct sockaddr *, char *, size_t);

struct resolve_req;
/* ok: 0 with sa the first address the rule allows; -1 with rule
 * (RULE_DNS or RULE_ADDRESS) and detail. */
typedef void	(*resolve_cb)(int ok, const struct sockaddr *, socklen_t,
		    const char *rule, const char *detail, void *arg);
struct evdns_base *resolve_init(struct event_base *,
		    const struct egressd_conf *);
struct resolve_req *resolve_start(struct evdns_base *,
		    const Sbx__V1__AllowRule *, const struct decide_target *,
		    resolve_cb, void *arg);
void		 resolve_cancel(struct resolve_req *);

/* ---- ca.c ---- */

struct ca	*ca_new(const char *execution_id, char *err, size_t errlen);
void		 ca_free(struct ca *);
/* PEM of the CA certificate (the public part). */
const char	*ca_cert_pem(const struct ca *, size_t *lenp);
/* An SSL_CTX serving a leaf for host (cached per CA); NULL on error. */
struct ssl_ctx_st *ca_leaf_ctx(struct ca *, const char *host);

/* ---- broker.c ---- */

struct broker_req;
/* ok 1: value (len bytes, sodium_malloc'd, zeroed and freed after the
 * callback returns) for header; ok 0: why says what failed. */
typedef void	(*broker_cb)(int ok, const char *header,
		    const uint8_t *value, size_t len, const char *why,
		    void *arg);
struct broker_req *broker_fetch(struct event_base *,
		    const struct egressd_conf *,
		    const Sbx__V1__SignedPolicy *, const char *traceparent,
		    const char *host, const char *secret, const char *header,
		    broker_cb, void *arg);
void		 broker_cancel(struct broker_req *);

/* ---- proxy_http.c ---- */

struct http_hdr {
	char		*name;
	size_t		 nlen;
	char		*value;		/* NULL until a value arrives */
	size_t		 vlen;
	size_t		 ncap;		/* allocated, kept across requests */
	size_t		 vcap;
};

/* One request as the sandbox sent it, parsed by libhttp-parser. */
struct http_req {
	http_parser	 p;
	/* Called once the head is parsed and checked, before any body
	 * byte: decides, sets max_body; -1 refuses (rule set by it). */
	int		(*on_head)(struct http_req *, void *);
	void		*arg;
	size_t		 max_headers;
	uint64_t	 max_body;	/* set once the rule is known */
	char		*url;		/* NULL until the target arrives */
	size_t		 url_len;	/* as sent, even past the cap */
	const char	*method;
	struct http_hdr	*hdrs;
	size_t		 nhdrs;
	size_t		 nhead;		/* of those, in the head (the rest are
					 * trailers until the message ends) */
	/* Storage kept from one request on a connection to the next, so
	 * that parsing one allocates nothing once the first is done. */
	char		*url_buf;
	size_t		 hcap;
	int		 in_value;
	int		 headers_done;
	int		 complete;
	int		 chunked;
	int		 keep_alive;
	int		 expect_continue;
	/* The bytes the parser took for this message, read again by
	 * http_frame_check (proxy_http.c): the head's end, then a chunked
	 * body's framing, strictly (RFC 9112 section 7.1). */
	int		 fv_state;
	unsigned	 fv_match;	/* of "\r\n\r\n", in the head */
	uint64_t	 fv_size;	/* chunk size, then data still due */
	size_t		 fv_digits;
	size_t		 fv_run;	/* bytes of this chunk line / trailers */
	struct evbuffer	*body;		/* decoded */
	uint64_t	 body_bytes;
	const char	*rule;		/* set on a refusal */
	const char	*why;
	char		 why_buf[192];	/* a why that names a field */
};

/* The upstream's response head, and the body's framing. */
struct http_resp {
	http_parser	 p;
	int		 head_request;	/* the request was HEAD */
	uint64_t	 max_body;
	unsigned	 status;
	char		*location;
	int		 in_location;
	int		 field_is_location;
	size_t		 nhdrs;
	size_t		 max_headers;
	int		 headers_done;
	int		 complete;
	int		 keep_alive;
	uint64_t	 body_bytes;
	/* Every byte after the head counts against max_body, chunk
	 * framing, extensions and trailers included (wire_bytes); a run
	 * of framing between two body bytes is capped (framing_run). */
	uint64_t	 wire_bytes;
	size_t		 framing_run;
	size_t		 head_left;	/* of the head, fed again */
	const char	*cursor;	/* feed: accounted up to here */
	const char	*rule;
	const char	*why;
};

/* Strict checks of a head (request or response) before it is parsed:
 * CRLF line ends only, no obs-fold, no NUL or other control bytes in it,
 * every complete field line a token (RFC 9110 tchar) and a colon.
 * 0 or -1 with *why (which may point to a buffer the next call reuses). */
int		 http_head_check(const char *head, size_t len,
		    const char **why);
void		 http_req_init(struct http_req *, size_t max_headers);
void		 http_req_reset(struct http_req *);
void		 http_req_clear(struct http_req *);
/*
 * Feed bytes; returns how many were used.  Calls on_head after the head
 * and stops after the message (complete).  On a refusal returns -1 with
 * rule and why set.
 */
long		 http_req_feed(struct http_req *, const char *, size_t);
const struct http_hdr *http_req_header(const struct http_req *,
		    const char *name, size_t *count);
/* The name of the first header that would override the request line's
 * path or method (decide_header), or NULL. */
const char	*http_req_override(const struct http_req *);
/* The head to send upstream: request line in origin form, Host, the
 * client's end-to-end headers minus `drop` (the credential's header, may
 * be NULL) and minus identity and routing headers (decide_header),
 * Content-Length; without the final CRLF.  Trailers are never sent. */
void		 http_req_head(const struct http_req *,
		    const struct decide_target *, const char *drop,
		    struct evbuffer *out);
void		 http_resp_init(struct http_resp *, size_t max_headers,
		    int head_request, uint64_t max_body);
void		 http_resp_clear(struct http_resp *);
long		 http_resp_feed(struct http_resp *, const char *, size_t);

/* ---- proxy.c ---- */

struct egress_metrics {
	uint64_t	 requests;
	uint64_t	 allowed;
	uint64_t	 bytes_out;
	uint64_t	 bytes_in;
	uint64_t	 channels_open;
	uint64_t	 upstream_errors;
	uint64_t	 handoffs;	/* connections sbx-init handed over */
	uint64_t	 denials[EGRESS_NRULES];
};

struct proxy_conn;
TAILQ_HEAD(proxy_conns, proxy_conn);

enum proxy_state {
	PC_IDLE,		/* waiting for (the rest of) a request head */
	PC_BODY,		/* head decided, reading the body */
	PC_WAIT,		/* brokerd, DNS or connect in progress */
	PC_RESPONSE,		/* request sent, relaying the response */
	PC_TUNNEL,		/* CONNECT: TLS handshake with the client */
	PC_DENYING,		/* a denial waits for its audit record */
	PC_CLOSING,		/* flushing a last reply, then freed */
};

struct proxy_flood;
TAILQ_HEAD(proxy_held, proxy_conn);

struct proxy_conn {
	TAILQ_ENTRY(proxy_conn)	 entry;
	struct channel		*ch;
	int			 counted;	/* in ch->conns */
	enum proxy_state	 state;
	struct bufferevent	*cbev;		/* the sandbox's side */
	struct bufferevent	*ubev;		/* upstream */
	char			 up_host[DECIDE_HOST_MAX];
	uint16_t		 up_port;
	int			 connecting;
	int			 close_after;
	struct http_req		 req;
	struct decide_target	 target;
	struct decision		 dec;
	const Sbx__V1__AllowRule *rule;
	struct evbuffer		*head;		/* rebuilt request head */
	uint8_t			*cred_line;	/* sodium_malloc'd */
	size_t			 cred_len;
	struct resolve_req	*rq;
	struct broker_req	*br;
	struct http_resp	 resp;
	int			 resp_head_sent;
	/* CONNECT interception (proxy_tls.c) */
	int			 tls;		/* requests come over TLS */
	char			 tls_host[DECIDE_HOST_MAX];
	int			 tls_ip;
	uint16_t		 tls_port;
	struct ssl_st		*client_ssl;	/* owned by cbev */
	int			 sni_denied;	/* audited in the handshake */
	int			 up_tls;	/* ubev is TLS (handshaking
						 * while connecting) */
	int			 up_paused;	/* the client's queue is full */
	/* A denial (PC_DENYING): answered once its record is on disk,
	 * either its own (arec) or a flood's summary (flood). */
	struct auditq_entry	*arec;
	struct proxy_flood	*flood;
	TAILQ_ENTRY(proxy_conn)	 held_entry;
	char			*deny_rule;
	char			*deny_detail;
	int			 deny_status;
	int			 deny_cut;	/* part of a response is out */
	int			 deny_alert;	/* TLS alert, not a 403 */
	int			 deny_done;	/* the record is in */
	int			 alert_fd;	/* dup of the client socket */
	struct bio_st		*alert_bio;	/* the SSL's, until taken */
	char			*alert;		/* the alert record */
	size_t			 alert_len;
	int			 refused;	/* over max_conns_per_task */
	uint64_t		 reserved;	/* of ch->budget, until sent */
};

struct channel {
	TAILQ_ENTRY(channel)	 entry;
	struct egressd		*ed;
	Sbx__V1__PolicyGrant	*grant;
	const Sbx__V1__Policy	*pol;		/* grant->policy */
	Sbx__V1__SignedPolicy	 signed_;	/* copy, for brokerd */
	gid_t			 gid;		/* the sandbox's own group */
	char			*cgroup;	/* the sandbox's cgroup path */
	char			 traceparent[TRACE_PARENT_LEN + 1];
	char			*cgdir;		/* ... in egressd's pids mount */
	struct evconnlistener	*lev;		/* launchd-sbx's socket */
	struct ca		*ca;
	int			 listed;	/* in ed->channels */
	struct proxy_conns	 conns;
	uint32_t		 nconns;
	/* The task's budget: spent before (the grant's egress_spent),
	 * sent on this channel (its bytes out), reserved by requests
	 * decided and not yet written. */
	struct decide_budget	 budget;
	uint64_t		 bytes_in;
	uint64_t		 requests;
	uint64_t		 denials[EGRESS_NRULES];
	/* The first denial of each rule: its detail and wall-clock time,
	 * for the result (so an approver later reads which host). */
	char			*dn_first[EGRESS_NRULES];
	int64_t			 dn_first_ns[EGRESS_NRULES];
	/* Bytes queued for the sandbox on all connections. */
	size_t			 queued;
	uint32_t		 npaused;
	/* Connections over max_conns_per_task waiting for their denial;
	 * at the cap the listener stops accepting. */
	struct proxy_conns	 refused;
	uint32_t		 nrefused;
	int			 lev_off;
	/* Denials in the current second, and the flood summary they
	 * are held for past denials_per_second (proxy.c). */
	uint64_t		 dn_window;	/* mono_ns of its start */
	uint32_t		 dn_count;
	struct proxy_flood	*flood;
	struct event		*flood_ev;
	/* sbx-init's handoff connection (proxy_handoff.c): ho_seen once
	 * the channel's first connection came; ho_fd and ho_ev while it
	 * is waited for or serves; ho_on once it takes descriptors. */
	int			 ho_seen;
	int			 ho_on;
	int			 ho_fd;
	struct event		*ho_ev;
};
TAILQ_HEAD(channels, channel);

/* A CA file's bytes, read at start-up (before the privilege drop) and
 * loaded into the upstream TLS context when it is made (proxy_tls.c). */
struct tls_pem {
	char			*name;		/* "upstream_cas: FILE" */
	char			*pem;
	size_t			 len;
};

struct egressd {
	struct egressd_conf	*conf;
	struct sign_trust	 trust;
	struct event_base	*base;
	struct evdns_base	*dns;
	struct audit		*audit;
	struct auditq		*aq;		/* group commit of denials */
	struct channels		 channels;
	struct egress_metrics	 m;
	struct ssl_ctx_st	*upstream_ctx;	/* verified client side, made
						 * at the first CONNECT */
	struct tls_pem		*upstream_pems;	/* its CA files, read at start */
	size_t			 nupstream_pems;
	struct evbuffer		*scratch;	/* empty between callbacks */
};

/* Index of a rule id in the counters, -1 if unknown. */
int		 proxy_rule_index(const char *rule);
const char	*proxy_rule_name(int);
/*
 * Open the channel of a verified grant on lfd, the listening socket
 * launchd-sbx bound for the sandbox.  The grant becomes the channel's
 * (on failure it stays the caller's); lfd is consumed either way.  Connections are accepted only from processes
 * in cgroup (a path as /proc/PID/cgroup shows it) whose group is gid, or
 * root's (gVisor's gofer connects for the sandbox).
 */
struct channel	*proxy_channel_open(struct egressd *, Sbx__V1__PolicyGrant *,
		    const Sbx__V1__SignedPolicy *, int lfd, gid_t gid,
		    const char *cgroup, char *err, size_t errlen);
struct channel	*proxy_channel_find(struct egressd *, const char *exec_id);
/* Stop accepting, end every connection, remove the socket, free. */
void		 proxy_channel_close(struct channel *);
/* Count and audit a denial of the channel.  With c, c waits in
 * PC_DENYING until the record (or its flood's summary) is on disk and is
 * then answered; proxy_deny() does that. */
void		 proxy_audit_deny(struct channel *, const char *rule,
		    const char *detail, struct proxy_conn *c);
/* The SNI callback's denial: the handshake fails with an alert that
 * proxy_tls.c holds back until the record is on disk. */
void		 proxy_deny_alert(struct proxy_conn *, const char *rule,
		    const char *detail);
/* The record of c's denial is on disk (or failed): answer and close,
 * if the answer is ready (proxy_tls.c's alert may still be coming). */
void		 proxy_deny_release(struct proxy_conn *);
/* Deny the connection's request: audit, JSON reply, close. */
void		 proxy_deny(struct proxy_conn *, const char *rule, int status,
		    const char *detail);
void		 proxy_conn_free(struct proxy_conn *);
/* Serve fd, a connection from the sandbox, as a proxy connection. */
void		 proxy_conn_start(struct channel *, int fd);
/* Callbacks and timeouts of the client side, after a TLS switch too. */
void		 proxy_conn_setup(struct proxy_conn *);
/* Resolve, check and dial the target (or reuse the connection). */
void		 proxy_dial(struct proxy_conn *);
void		 proxy_cred_cleanup(const void *, size_t, void *);

/* ---- proxy_peer.c: who may use a channel ---- */

/* Find the cgroup hierarchy the peer check reads (the v1 pids one, or the
 * unified one): 0, or -1 with err (no channel can then be opened). */
int		 proxy_peer_init(char *err, size_t errlen);
/* The directory of cgroup (a path from the hierarchy's root, as
 * launchd-sbx gave it to the runtime) in that hierarchy, malloc'd; NULL
 * with err if there is no hierarchy or the path is malformed. */
char		*proxy_peer_cgdir(const char *cgroup, char *err, size_t errlen);
/* 1 if pid is in the cgroup at dir or one level below it, 0 if not, -1
 * if its cgroup.procs cannot be read. */
int		 proxy_peer_member(const char *dir, pid_t pid);
/* 0 if the peer of an accepted connection is the channel's sandbox (in
 * cgdir, with group gid unless it is root), else -1 with why. */
int		 proxy_peer_check(const char *cgdir, gid_t gid, int fd,
		    char *why, size_t whylen);

/* ---- proxy_handoff.c: sbx-init hands its client connections over ---- */

/* fd is the channel's first connection, peer checked: wait for its
 * first byte, then serve it as the handoff connection or as an ordinary
 * one.  Consumes fd. */
void		 proxy_handoff_first(struct channel *, int fd);
/* End the handoff connection, if any (the channel closes). */
void		 proxy_handoff_close(struct channel *);
/* 0 if fd is a connected TCP stream socket, else -1 with why. */
int		 proxy_handoff_check_fd(int fd, char *why, size_t whylen);

/* ---- proxy_tls.c ---- */

/* The CONNECT was allowed: answer 200 and start the TLS handshake. */
void		 proxy_tls_start(struct proxy_conn *);
/* The upstream TCP connection is up: replace c->ubev by a verifying
 * TLS client on the same socket (the caller sets its callbacks); 0, or
 * -1 with the connection denied. */
int		 proxy_tls_upstream(struct proxy_conn *);
/* The upstream TLS handshake failed: deny upstream-tls-failed (502). */
void		 proxy_tls_upstream_failed(struct proxy_conn *);
/* The client's tunnel is closing gracefully: send close_notify. */
void		 proxy_tls_shutdown(struct proxy_conn *);
void		 proxy_tls_clear(struct proxy_conn *);
/* The client's handshake is done (proxy.c): read requests inside. */
void		 proxy_tunnel_ready(struct proxy_conn *);
/* Write data through bev's TLS at once, as far as the socket takes it
 * (bev's output must be empty); what is left stays in data, for the
 * caller to queue on bev.  coalesce: one record per 16 KiB, copying;
 * else one record per chain of data, copying nothing. */
void		 proxy_tls_write_now(struct bufferevent *, struct evbuffer *,
		    int coalesce);
/* Have bev read again if OpenSSL holds records it read ahead. */
void		 proxy_tls_pending(struct bufferevent *);
/* Read the CA files of upstream TLS (SSL_CERT_FILE where set,
 * upstream_cas) into ed; -1 with err naming the file. */
int		 proxy_tls_trust_read(struct egressd *, char *err, size_t);
/* The client-side SSL_CTX for upstreams (system store + the CA files
 * read); NULL, logged naming what failed. */
struct ssl_ctx_st *proxy_tls_upstream_ctx(const struct egressd *);
/* The same, made and thrown away in a child process, so that egressd
 * does not initialise OpenSSL before its first TLS: 0 if it could be
 * made (the child's errors are logged). */
int		 proxy_tls_upstream_check(const struct egressd *);
void		 proxy_tls_trust_free(struct egressd *);
/* Send the rebuilt request (proxy.c). */
void		 proxy_send_request(struct proxy_conn *);

/* ---- control.c ---- */

/* The frame handlers of the control and admin sockets (arg: the struct
 * egressd). */
void		 control_control_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
void		 control_admin_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
char		*control_metrics(const struct egressd *);

#endif
