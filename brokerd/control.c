/*
 * control.c: brokerd's two sockets (the skeleton in common/daemon.c
 * listens on them, with the handlers here) and the credential decision.
 * The credential socket takes only CredentialRequest, from egressd's uid (the
 * peer check in common/frame.c runs before a byte is read; a refused peer
 * is audited here); the admin socket stores secrets, lists their names
 * and answers audit and metrics questions.
 *
 * Invariant: a value leaves brokerd only for a binding of (task, host,
 * secret, header) that a policy signed by policyd, and not yet expired,
 * carries, and only after the grant's audit record is on disk.  Every
 * refusal is audited too.  Audit records and logs name the secret, the
 * host and the header, never the value; every buffer that held a value is
 * wiped before it is released.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>
#include <sodium.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "log.h"
#include "sign.h"
#include "trace.h"
#include "util.h"
#include "brokerd/brokerd.h"

#define BCONTROL_NAME_MAX	253	/* a host name; header names are less */

static const char *
bcontrol_kind_name(Sbx__V1__CredentialKind k)
{
	return k == SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED ? "minted" :
	    "static";
}

/* ---- the decision ---- */

const Sbx__V1__Credential *
bcontrol_binding(const Sbx__V1__PolicyGrant *g, const char *host,
    const char *secret, const char *header, char *why, size_t whylen)
{
	const Sbx__V1__Policy		*p = g->policy;
	const Sbx__V1__Credential	*c, *for_host = NULL;
	size_t				 i;

	for (i = 0; p != NULL && i < p->n_credentials; i++) {
		c = p->credentials[i];
		if (c->host == NULL || strcmp(c->host, host) != 0)
			continue;
		if (for_host == NULL)
			for_host = c;
		if (c->secret != NULL && strcmp(c->secret, secret) == 0 &&
		    c->header != NULL && strcasecmp(c->header, header) == 0)
			return c;
	}
	if (for_host == NULL)
		bufprintf(why, whylen, "the policy binds no credential to "
		    "host %s", host);
	else {
		/* Say which part differs from what the policy binds. */
		for (i = 0; i < p->n_credentials; i++) {
			c = p->credentials[i];
			if (strcmp(c->host, host) == 0 &&
			    strcmp(c->secret, secret) == 0) {
				bufprintf(why, whylen, "the policy binds "
				    "secret %s for host %s to header %s, not "
				    "%s", secret, host, c->header, header);
				return NULL;
			}
		}
		bufprintf(why, whylen, "the policy binds secret %s to host "
		    "%s (header %s), not secret %s", for_host->secret, host,
		    for_host->header, secret);
	}
	return NULL;
}

static void
bcontrol_refuse(struct bcontrol_answer *a, const char *rule,
    Sbx__V1__ErrorCode code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
bcontrol_refuse(struct bcontrol_answer *a, const char *rule,
    Sbx__V1__ErrorCode code, const char *fmt, ...)
{
	va_list	 ap;

	a->rule = rule;
	a->code = code;
	va_start(ap, fmt);
	(void)vsnprintf(a->msg, sizeof(a->msg), fmt, ap);
	va_end(ap);
}

static int
bcontrol_field_ok(const char *s)
{
	size_t	 n;

	if (s == NULL || (n = strlen(s)) == 0 || n > BCONTROL_NAME_MAX)
		return 0;
	for (; *s != '\0'; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

void
bcontrol_decide(struct brokerd *bd, const Sbx__V1__CredentialRequest *r,
    int64_t now, struct bcontrol_answer *a)
{
	Sbx__V1__PolicyGrant		*g;
	const Sbx__V1__Credential	*cred;
	struct bsecret			 sec;
	char				 err[384];
	int				 rc;

	memset(a, 0, sizeof(*a));
	if (r->signed_ == NULL) {
		bcontrol_refuse(a, RULE_BAD_REQUEST,
		    SBX__V1__ERROR_CODE__ERROR_INVALID,
		    "the request carries no signed policy");
		return;
	}
	if (trace_parent_check(r->traceparent, err, sizeof(err)) == -1) {
		bcontrol_refuse(a, RULE_BAD_REQUEST,
		    SBX__V1__ERROR_CODE__ERROR_INVALID,
		    "credential request: traceparent: %s", err);
		return;
	}
	if ((g = sign_verify_trust(&bd->trust, r->signed_, now, err,
	    sizeof(err))) == NULL) {
		bcontrol_refuse(a, strncmp(err, "policy expired", 14) == 0 ?
		    RULE_EXPIRED : RULE_SIGNATURE,
		    SBX__V1__ERROR_CODE__ERROR_DENIED,
		    "signed policy refused: %s", err);
		return;
	}
	bufprintf(a->task_id, sizeof(a->task_id), "%s", g->task_id);
	bufprintf(a->execution_id, sizeof(a->execution_id), "%s",
	    g->execution_id);
	bufprintf(a->policy_hash, sizeof(a->policy_hash), "%s",
	    g->policy_hash);
	if (!bcontrol_field_ok(r->host) || !bcontrol_field_ok(r->secret) ||
	    !bcontrol_field_ok(r->header)) {
		bcontrol_refuse(a, RULE_BAD_REQUEST,
		    SBX__V1__ERROR_CODE__ERROR_INVALID,
		    "host, secret and header must each be 1..%d printable "
		    "characters without spaces", BCONTROL_NAME_MAX);
		goto done;
	}
	if ((cred = bcontrol_binding(g, r->host, r->secret, r->header, err,
	    sizeof(err))) == NULL) {
		bcontrol_refuse(a, RULE_NOT_BOUND,
		    SBX__V1__ERROR_CODE__ERROR_DENIED, "%s", err);
		goto done;
	}
	a->kind = cred->kind;
	if ((rc = bstore_get(bd->store, cred->secret, &sec, err,
	    sizeof(err))) == 0) {
		bcontrol_refuse(a, RULE_UNKNOWN,
		    SBX__V1__ERROR_CODE__ERROR_NOT_FOUND, "secret %s is bound "
		    "by the policy but brokerd has no such secret",
		    cred->secret);
		goto done;
	}
	if (rc == -1) {
		bcontrol_refuse(a, RULE_UNREADABLE,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "%s", err);
		goto done;
	}
	if (sec.kind != cred->kind) {
		bcontrol_refuse(a, RULE_KIND, SBX__V1__ERROR_CODE__ERROR_DENIED,
		    "the policy binds secret %s as %s, but it is stored as %s",
		    cred->secret, bcontrol_kind_name(cred->kind),
		    bcontrol_kind_name(sec.kind));
		bsecret_clear(&sec);
		goto done;
	}
	if (sec.kind == SBX__V1__CREDENTIAL_KIND__CREDENTIAL_STATIC) {
		/* The value moves to the answer: no copy to wipe. */
		a->value = sec.value;
		a->len = sec.len;
		a->expires_at = g->expires_at;
		sec.value = NULL;
		bsecret_clear(&sec);
		goto done;
	}
	a->expires_at = mint_expiry(g, now, bd->conf != NULL ?
	    bd->conf->mint_ttl : BROKERD_MINT_TTL);
	if (sec.len != crypto_sign_SEEDBYTES ||
	    mint_token(sec.value, r->host, g->task_id, g->execution_id, now,
	    a->expires_at, &a->value, &a->len, err, sizeof(err)) == -1) {
		bcontrol_refuse(a, a->expires_at <= now ? RULE_EXPIRED :
		    RULE_UNREADABLE, a->expires_at <= now ?
		    SBX__V1__ERROR_CODE__ERROR_DENIED :
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL,
		    "cannot mint a token from secret %s: %s", cred->secret,
		    sec.len != crypto_sign_SEEDBYTES ? "its seed is damaged" :
		    err);
	}
	bsecret_clear(&sec);
done:
	sbx__v1__policy_grant__free_unpacked(g, NULL);
}

void
bcontrol_answer_clear(struct bcontrol_answer *a)
{
	if (a->value != NULL)
		sodium_free(a->value);
	a->value = NULL;
	a->len = 0;
}

/* ---- audit ---- */

static int
bcontrol_audit(struct brokerd *bd, const char *actor, const char *action,
    const char *task, const char *exe, const char *hash, const char *rule,
    const char *detail)
{
	Sbx__V1__AuditEvent	 ev;

	sbx__v1__audit_event__init(&ev);
	ev.task_id = (char *)(task != NULL ? task : "");
	ev.execution_id = (char *)(exe != NULL ? exe : "");
	ev.policy_hash = (char *)(hash != NULL ? hash : "");
	ev.action = (char *)action;
	ev.rule = (char *)(rule != NULL ? rule : "");
	ev.detail = (char *)detail;
	ev.actor = (char *)actor;
	/* The execution's, once bcontrol_credential has checked it. */
	ev.traceparent = (char *)log_ctx_traceparent(ev.task_id);
	if (audit_append(bstore_audit(bd->store), &ev) == -1) {
		log_warnx("audit: cannot record %s %s", action, detail);
		return -1;
	}
	audit_event_clear(&ev);
	return 0;
}

void
bcontrol_refused_peer(void *arg, const char *sock, const struct ucred *cr,
    const char *why)
{
	struct brokerd		*bd = arg;
	char			 actor[32], detail[256];

	bd->metrics.peers_refused++;
	if (bd->store == NULL)
		return;		/* still starting: nothing to record into */
	peer_actor(cr, actor, sizeof(actor));
	peer_refused_detail(cr, why, sock, detail, sizeof(detail));
	(void)bcontrol_audit(bd, actor, "deny", NULL, NULL, NULL, RULE_PEER,
	    detail);
}

/* ---- the credential socket ---- */

static void
bcontrol_credential_1(struct brokerd *bd, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__CredentialRequest *r = req->credential;
	struct bcontrol_answer		 a;
	Sbx__V1__Envelope		 env;
	Sbx__V1__CredentialReply	 rep;
	char				 actor[32], detail[768];
	uint8_t				*buf;
	size_t				 len;

	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	bcontrol_decide(bd, r, now_s(), &a);
	/* bcontrol_decide checked the traceparent before it took ids. */
	log_ctx_set(a.task_id, a.execution_id, a.policy_hash, a.task_id[0] !=
	    '\0' ? r->traceparent : "");
	if (a.rule != NULL) {
		bd->metrics.refused++;
		bufprintf(detail, sizeof(detail), "host %.253s secret "
		    "%.128s header %.128s: %s", r->host, r->secret, r->header,
		    a.msg);
		(void)bcontrol_audit(bd, actor, "deny", a.task_id,
		    a.execution_id, a.policy_hash, a.rule, detail);
		log_ctx_rule(a.rule);
		log_info("credential refused by rule %s: task %s: %s", a.rule,
		    a.task_id[0] ? a.task_id : "-", detail);
		frame_conn_send_error(c, req->request_id, a.code, a.rule, "%s",
		    a.msg);
		return;
	}
	bufprintf(detail, sizeof(detail), "host %s secret %s header %s "
	    "kind %s expires_at %lld", r->host, r->secret, r->header,
	    bcontrol_kind_name(a.kind), (long long)a.expires_at);
	/* On disk before the value leaves: a grant nobody can see later
	 * is a grant that did not happen. */
	if (bcontrol_audit(bd, actor, "grant", a.task_id, a.execution_id,
	    a.policy_hash, NULL, detail) == -1) {
		bcontrol_answer_clear(&a);
		bd->metrics.refused++;
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the grant cannot be audited; no credential released");
		return;
	}
	bd->metrics.granted++;
	if (a.kind == SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED)
		bd->metrics.minted++;
	log_debug("credential granted: task %s %s", a.task_id, detail);

	sbx__v1__credential_reply__init(&rep);
	rep.header = r->header;
	rep.value.data = a.value;
	rep.value.len = a.len;
	rep.expires_at = a.expires_at;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_CREDENTIAL_REPLY;
	env.credential_reply = &rep;
	/* Packed here rather than by frame_conn_send so the packed copy
	 * can be wiped. */
	if ((buf = frame_pack(&env, &len)) == NULL) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the reply cannot be encoded");
	} else {
		frame_conn_send_packed(c, buf, len);
		sodium_memzero(buf, len);
		free(buf);
	}
	bcontrol_answer_clear(&a);
}

static void
bcontrol_credential(struct brokerd *bd, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	bcontrol_credential_1(bd, c, req);
	log_ctx_clear();
}

/* ---- the admin socket ---- */

static void
bcontrol_ack(struct frame_conn *c, uint64_t rid, const char *detail)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__Ack		 ack;

	sbx__v1__ack__init(&ack);
	ack.detail = (char *)detail;
	frame_env_init(&env, rid);
	env.body_case = SBX__V1__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	frame_conn_send(c, &env);
}

static void
bcontrol_secret_put(struct brokerd *bd, struct frame_conn *c,
    Sbx__V1__Envelope *req)
{
	Sbx__V1__SecretPut	*p = req->secret_put;
	struct audit		*au = bstore_audit(bd->store);
	Sbx__V1__AuditEvent	 ev;
	unsigned char		*seed = NULL, pk[32];
	const unsigned char	*value = p->value.data;
	size_t			 len = p->value.len;
	char			 err[512], actor[32], detail[256], hex[65];

	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	if (p->name == NULL || !name_ok(p->name)) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", "bad secret name "
		    "\"%.128s\": want 1..128 of [A-Za-z0-9._@:-]",
		    p->name != NULL ? p->name : "");
		goto done;
	}
	if (bstore_value_ok(p->kind, value, len, err, sizeof(err)) == -1) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", "secret %s: %s",
		    p->name, err);
		goto done;
	}
	if (p->kind == SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED &&
	    len == 0) {
		/* brokerd makes the minting key itself: nobody else ever
		 * holds it. */
		if ((seed = sodium_malloc(crypto_sign_SEEDBYTES)) == NULL) {
			frame_conn_send_error(c, req->request_id,
			    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
			    "cannot allocate secure memory");
			goto done;
		}
		randombytes_buf(seed, crypto_sign_SEEDBYTES);
		value = seed;
		len = crypto_sign_SEEDBYTES;
	}
	if (p->kind == SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED) {
		mint_public(value, pk);
		hex_encode(pk, sizeof(pk), hex);
		bufprintf(detail, sizeof(detail), "secret %s stored "
		    "(minted; verify tokens with ed25519 %s)", p->name, hex);
	} else
		bufprintf(detail, sizeof(detail), "secret %s stored "
		    "(static)", p->name);

	/* The row and its audit record commit together. */
	bufprintf(err, sizeof(err), "the audit log refused the record");
	sbx__v1__audit_event__init(&ev);
	ev.action = (char *)"secret-put";
	ev.detail = detail;
	ev.actor = actor;
	if (audit_begin(au) == -1 ||
	    bstore_put(bd->store, p->name, p->kind, value, len, err,
	    sizeof(err)) == -1 || audit_add(au, &ev) == -1 ||
	    audit_commit(au) == -1) {
		(void)audit_rollback(au);
		log_warnx("secret %s: not stored: %s", p->name, err);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "secret %s was not stored", p->name);
		goto done;
	}
	audit_event_clear(&ev);
	bd->metrics.puts++;
	log_info("%s by %s", detail, actor);
	bcontrol_ack(c, req->request_id, detail);
done:
	if (seed != NULL)
		sodium_free(seed);
	/* The request's copy of the value goes when the handler returns;
	 * wipe it first. */
	if (p->value.data != NULL)
		sodium_memzero(p->value.data, p->value.len);
}

static void
bcontrol_secret_list(struct brokerd *bd, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__SecretNames	 sn = SBX__V1__SECRET_NAMES__INIT;
	char			**names;
	size_t			  n;

	if (bstore_names(bd->store, &names, &n) == -1) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the secret store cannot be read");
		return;
	}
	sn.names = names;
	sn.n_names = n;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_SECRET_NAMES;
	env.secret_names = &sn;
	frame_conn_send(c, &env);
	bstore_names_free(names, n);
}



char *
bcontrol_metrics(const struct brokerd *bd)
{
	const struct brokerd_metrics	*m = &bd->metrics;
	char				*s;

	xasprintf(&s,
	    "# HELP sbx_brokerd_credentials_total Credential requests, by "
	    "result.\n"
	    "# TYPE sbx_brokerd_credentials_total counter\n"
	    "sbx_brokerd_credentials_total{result=\"granted\"} %llu\n"
	    "sbx_brokerd_credentials_total{result=\"refused\"} %llu\n"
	    "# HELP sbx_brokerd_minted_total Tokens minted.\n"
	    "# TYPE sbx_brokerd_minted_total counter\n"
	    "sbx_brokerd_minted_total %llu\n"
	    "# HELP sbx_brokerd_peers_refused_total Connections refused at "
	    "the peer check.\n"
	    "# TYPE sbx_brokerd_peers_refused_total counter\n"
	    "sbx_brokerd_peers_refused_total %llu\n"
	    "# HELP sbx_brokerd_secret_puts_total Secrets stored.\n"
	    "# TYPE sbx_brokerd_secret_puts_total counter\n"
	    "sbx_brokerd_secret_puts_total %llu\n",
	    (unsigned long long)m->granted, (unsigned long long)m->refused,
	    (unsigned long long)m->minted,
	    (unsigned long long)m->peers_refused,
	    (unsigned long long)m->puts);
	return s;
}


void
bcontrol_credential_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	if (req->body_case == SBX__V1__ENVELOPE__BODY_CREDENTIAL) {
		bcontrol_credential(arg, c, req);
		return;
	}
	frame_conn_send_error(c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
	    "the credential socket takes only credential requests");
}

void
bcontrol_admin_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	struct brokerd	*bd = arg;
	char		*text;

	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_SECRET_PUT:
		bcontrol_secret_put(bd, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_SECRET_LIST:
		bcontrol_secret_list(bd, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		admin_audit_query(c, req, bstore_audit(bd->store));
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
		admin_audit_verify(c, req, bstore_audit(bd->store), "brokerd");
		return;
	case SBX__V1__ENVELOPE__BODY_METRICS_REQUEST:
		text = bcontrol_metrics(bd);
		admin_metrics(c, req, text);
		free(text);
		return;
	default:
		admin_refuse(c, req);
	}
}
