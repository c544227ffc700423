/*
 * brokerclient.c: a test client for brokerd that plays policyd, egressd
 * and an operator.  It signs grants with a key of its own (the daemon
 * under test trusts that key's public half), asks for credentials, puts
 * secrets through the admin socket (value from stdin, like sbxctl), and
 * verifies minted tokens with brokerd's verification code.  Output is one
 * line per answer so tests/broker/run can check it.
 *
 *   brokerclient keygen SK PK
 *   brokerclient put -s ADMIN [-m] NAME		(value on stdin; -m minted,
 *						 stdin ignored)
 *   brokerclient list -s ADMIN
 *   brokerclient admin -s ADMIN metrics|verify|audit
 *   brokerclient cred -s SOCK -k SK [-b HOST,SECRET,HEADER[,minted]]...
 *       [-t TASK] [-x EXEC] [-e TTL] [-w WALL] [-B] [-P PUBHEX]
 *       HOST SECRET HEADER
 *
 * cred prints "ok header=H expires_at=N value=V" and exits 0 (with -P, a
 * minted value is verified and "claims aud=A sub=S exe=X iat=N exp=N"
 * follows); a refusal prints "error code=N rule=R: message" and exits 3;
 * no reply at all prints "noreply" and exits 4.  -e with a negative TTL
 * signs an already expired grant; -B flips a bit of the signature.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "frame.h"
#include "log.h"
#include "tests/lib/testclient.h"
#include "policy.h"
#include "sign.h"
#include "util.h"
#include "brokerd/brokerd.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: brokerclient keygen SK PK\n"
	    "       brokerclient put -s ADMIN [-m] NAME\n"
	    "       brokerclient list -s ADMIN\n"
	    "       brokerclient admin -s ADMIN metrics|verify|audit\n"
	    "       brokerclient cred -s SOCK -k SK [-b HOST,SECRET,HEADER"
	    "[,minted]]... [-t TASK]\n"
	    "           [-x EXEC] [-e TTL] [-w WALL] [-B] [-P PUBHEX] HOST "
	    "SECRET HEADER\n");
	exit(2);
}

static long
num(const char *s)
{
	char	*end;
	long	 v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0')
		usage();
	return v;
}

/* 0 with a reply, 4 (printed "noreply") without one. */
static int
call(const char *sock, const Sbx__V1__Envelope *req, Sbx__V1__Envelope **rep)
{
	int	 fd, rc;

	if ((fd = frame_client_connect(sock)) == -1) {
		printf("noreply connect %s: %s\n", sock, strerror(errno));
		return 4;
	}
	rc = frame_client_call(fd, req, rep, 1024 * 1024);
	close(fd);
	if (rc != 0) {
		printf("noreply\n");
		return 4;
	}
	return 0;
}


static int
getsock(int argc, char **argv, const char *opts, char **sock, int *flag)
{
	int	 ch;

	while ((ch = getopt(argc, argv, opts)) != -1) {
		if (ch == 's')
			*sock = optarg;
		else if (ch == 'm' && flag != NULL)
			*flag = 1;
		else
			usage();
	}
	if (*sock == NULL)
		usage();
	return optind;
}

static int
cmd_put(int argc, char **argv)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__SecretPut	 put = SBX__V1__SECRET_PUT__INIT;
	char			*sock = NULL;
	unsigned char		 buf[BROKERD_VALUE_MAX + 2];
	size_t			 len = 0, r;
	int			 minted = 0, rc;

	optind = getsock(argc, argv, "ms:", &sock, &minted);
	if (argc - optind != 1)
		usage();
	if (!minted) {
		while ((r = fread(buf + len, 1, sizeof(buf) - len, stdin)) > 0)
			len += r;
		/* One trailing newline is the shell's, not the secret's. */
		if (len > 0 && buf[len - 1] == '\n')
			len--;
	}
	put.name = argv[optind];
	put.value.data = buf;
	put.value.len = len;
	put.kind = minted ? SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED :
	    SBX__V1__CREDENTIAL_KIND__CREDENTIAL_STATIC;
	frame_env_init(&req, 1);
	req.body_case = SBX__V1__ENVELOPE__BODY_SECRET_PUT;
	req.secret_put = &put;
	rc = call(sock, &req, &rep);
	sodium_memzero(buf, sizeof(buf));
	if (rc != 0)
		return rc;
	if (tc_print_error(rep))
		rc = 3;
	else
		printf("ok %s\n", rep->body_case ==
		    SBX__V1__ENVELOPE__BODY_ACK ? rep->ack->detail : "?");
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

static int
cmd_list(int argc, char **argv)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__SecretList	 sl = SBX__V1__SECRET_LIST__INIT;
	char			*sock = NULL;
	int			 rc;

	optind = getsock(argc, argv, "s:", &sock, NULL);
	if (argc != optind)
		usage();
	frame_env_init(&req, 2);
	req.body_case = SBX__V1__ENVELOPE__BODY_SECRET_LIST;
	req.secret_list = &sl;
	if ((rc = call(sock, &req, &rep)) != 0)
		return rc;
	if (tc_print_error(rep))
		rc = 3;
	else if (rep->body_case == SBX__V1__ENVELOPE__BODY_SECRET_NAMES) {
		for (size_t i = 0; i < rep->secret_names->n_names; i++)
			printf("%s\n", rep->secret_names->names[i]);
	} else
		rc = 5;
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

static int
cmd_admin(int argc, char **argv)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__MetricsRequest	 mr = SBX__V1__METRICS_REQUEST__INIT;
	Sbx__V1__AuditVerify	 av = SBX__V1__AUDIT_VERIFY__INIT;
	Sbx__V1__AuditQuery	 aq = SBX__V1__AUDIT_QUERY__INIT;
	char			*sock = NULL;
	const char		*what;
	int			 rc;

	optind = getsock(argc, argv, "s:", &sock, NULL);
	if (argc - optind != 1)
		usage();
	what = argv[optind];
	frame_env_init(&req, 3);
	if (strcmp(what, "metrics") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_METRICS_REQUEST;
		req.metrics_request = &mr;
	} else if (strcmp(what, "verify") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY;
		req.audit_verify = &av;
	} else if (strcmp(what, "audit") == 0) {
		req.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_QUERY;
		req.audit_query = &aq;
	} else
		usage();
	if ((rc = call(sock, &req, &rep)) != 0)
		return rc;
	rc = tc_print_admin(rep, 1);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return rc;
}

/* -b HOST,SECRET,HEADER[,minted] */
static void
add_binding(Sbx__V1__Policy *pol, const char *spec)
{
	Sbx__V1__Credential	*c;
	char			*s = xstrdup(spec), *f[4] = { NULL };
	char			*p = s;
	int			 n = 0;

	while (n < 4 && (f[n] = strsep(&p, ",")) != NULL)
		n++;
	if (n < 3 || p != NULL)
		usage();
	c = xcalloc(1, sizeof(*c));
	sbx__v1__credential__init(c);
	c->host = xstrdup(f[0]);
	c->secret = xstrdup(f[1]);
	c->header = xstrdup(f[2]);
	if (n == 4 && strcmp(f[3], "minted") == 0)
		c->kind = SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED;
	else if (n == 4)
		usage();
	pol->credentials = xreallocarray(pol->credentials,
	    pol->n_credentials + 1, sizeof(*pol->credentials));
	pol->credentials[pol->n_credentials++] = c;
	free(s);
}

static int
cmd_cred(int argc, char **argv)
{
	Sbx__V1__Policy			*pol = policy_new();
	Sbx__V1__PolicyGrant		 g = SBX__V1__POLICY_GRANT__INIT;
	Sbx__V1__SignedPolicy		 sp = SBX__V1__SIGNED_POLICY__INIT;
	Sbx__V1__CredentialRequest	 cr = SBX__V1__CREDENTIAL_REQUEST__INIT;
	Sbx__V1__Envelope		 req, *rep = NULL;
	struct sign_key			*key;
	struct mint_claims		 cl;
	const char			*sock = NULL, *sk = NULL, *pub = NULL;
	const char			*task = "task-broker-test";
	char				 hash[POLICY_HASH_HEX], xid[64];
	char				 err[512], *v;
	unsigned char			 pk[32];
	size_t				 pklen;
	long				 ttl = 300;
	int				 ch, badsig = 0, rc;

	free(pol->name);
	pol->name = xstrdup("broker-test");
	pol->version = 1;
	pol->limits->wall_seconds = 60;
	random_id("exec", xid, sizeof(xid));
	while ((ch = getopt(argc, argv, "b:Be:k:P:s:t:w:x:")) != -1) {
		switch (ch) {
		case 'b': add_binding(pol, optarg); break;
		case 'B': badsig = 1; break;
		case 'e': ttl = num(optarg); break;
		case 'k': sk = optarg; break;
		case 'P': pub = optarg; break;
		case 's': sock = optarg; break;
		case 't': task = optarg; break;
		case 'w': pol->limits->wall_seconds = (uint32_t)num(optarg);
			break;
		case 'x': snprintf(xid, sizeof(xid), "%s", optarg); break;
		default: usage();
		}
	}
	if (sock == NULL || sk == NULL || argc - optind != 3)
		usage();
	if ((key = sign_key_load(sk, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	policy_normalize(pol);
	if (policy_hash(pol, hash) == -1)
		fatalx("cannot hash the policy");
	g.policy = pol;
	g.policy_hash = hash;
	g.task_id = (char *)task;
	g.execution_id = xid;
	g.tenant = (char *)"test";
	g.user = (char *)"tester";
	g.issued_at = now_s() - (ttl < 0 ? 600 : 0);
	g.expires_at = now_s() + ttl;
	if (sign_grant(key, &g, &sp) == -1)
		fatalx("cannot sign the grant");
	if (badsig)
		sp.signature.data[7] ^= 0x10;

	cr.signed_ = &sp;
	cr.host = argv[optind];
	cr.secret = argv[optind + 1];
	cr.header = argv[optind + 2];
	frame_env_init(&req, 9);
	req.body_case = SBX__V1__ENVELOPE__BODY_CREDENTIAL;
	req.credential = &cr;
	if ((rc = call(sock, &req, &rep)) != 0)
		goto out;
	if (tc_print_error(rep)) {
		rc = 3;
		goto out;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_CREDENTIAL_REPLY) {
		printf("unexpected reply %d\n", (int)rep->body_case);
		rc = 5;
		goto out;
	}
	v = xmalloc(rep->credential_reply->value.len + 1);
	memcpy(v, rep->credential_reply->value.data,
	    rep->credential_reply->value.len);
	v[rep->credential_reply->value.len] = '\0';
	printf("ok header=%s expires_at=%lld now=%lld execution=%s value=%s\n",
	    rep->credential_reply->header,
	    (long long)rep->credential_reply->expires_at, (long long)now_s(),
	    xid, v);
	if (pub != NULL) {
		if (sodium_hex2bin(pk, sizeof(pk), pub, strlen(pub), NULL,
		    &pklen, NULL) != 0 || pklen != sizeof(pk))
			fatalx("bad public key hex");
		if (mint_verify(pk, v, now_s(), &cl, err, sizeof(err)) == -1) {
			printf("token invalid: %s\n", err);
			rc = 6;
		} else {
			printf("claims aud=%s sub=%s exe=%s iat=%lld "
			    "exp=%lld\n", cl.aud, cl.sub, cl.exe,
			    (long long)cl.iat, (long long)cl.exp);
			mint_claims_clear(&cl);
		}
	}
	free(v);
out:
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	sign_signed_clear(&sp);
	sign_key_free(key);
	policy_free(pol);
	return rc;
}

int
main(int argc, char **argv)
{
	log_init("brokerclient", 1, 0);
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "keygen") == 0) {
		if (tc_keygen(argc - 1, argv + 1) == -1)
			usage();
		return 0;
	}
	if (strcmp(argv[1], "put") == 0)
		return cmd_put(argc - 1, argv + 1);
	if (strcmp(argv[1], "list") == 0)
		return cmd_list(argc - 1, argv + 1);
	if (strcmp(argv[1], "admin") == 0)
		return cmd_admin(argc - 1, argv + 1);
	if (strcmp(argv[1], "cred") == 0)
		return cmd_cred(argc - 1, argv + 1);
	usage();
}
