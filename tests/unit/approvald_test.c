/*
 * approvald_test.c: approvald's queue and the quoting the console relies
 * on, without sockets.  A queued request survives closing and reopening
 * the database with every field intact; a decision is recorded once,
 * never for an unknown or decided request, cannot be changed afterwards,
 * and is audited with the approver; the audit chain verifies.  Text from
 * a request reaches a terminal with every control character and escape
 * sequence neutralised and nothing dropped.  An approver is refused a
 * request of a task whose user approvers: says they are, or whose user has
 * their Unix name; a bad approvers: entry is an error.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit.h"
#include "config.h"
#include "util.h"
#include "yaml.h"
#include "approvald/approvald.h"

#define PENDING		SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING
#define APPROVED	SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED
#define DENIED		SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED

static char	 dir[64];
static char	 dbpath[128];

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/approvald_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(dbpath, sizeof(dbpath), "%s/approvald.db", dir);
}

static void
teardown(void)
{
	char	*cmd;

	xasprintf(&cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
}

static struct aqueue *
open_queue(void)
{
	struct aqueue	*q;
	char		 err[256];

	q = aqueue_open(dbpath, err, sizeof(err));
	cr_assert_not_null(q, "%s", err);
	return q;
}

static void
add_host(struct aqueue *q, const char *id, int want)
{
	Sbx__V1__CapabilityRequest	 r;
	Sbx__V1__AllowRule		 h;
	char				*methods[] = { (char *)"GET", (char *)"POST" };
	char				*paths[] = { (char *)"/v1/rates" };
	char				 err[256];
	static const char		 src[] = "x = 1\n\033[2J\0tail";

	sbx__v1__capability_request__init(&r);
	sbx__v1__allow_rule__init(&h);
	h.host = (char *)"api.example.com";
	h.methods = methods;
	h.n_methods = 2;
	h.paths = paths;
	h.n_paths = 1;
	r.request_id = (char *)id;
	r.task_id = (char *)"t-1";
	r.tenant = (char *)"acme";
	r.user = (char *)"alice";
	r.template_ = (char *)"py-analytics@1";
	r.created_at = 1700000000;
	r.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_HOST;
	r.host = &h;
	r.why = (char *)"need rates";
	r.source.data = (uint8_t *)src;
	r.source.len = sizeof(src) - 1;
	cr_assert_eq(aqueue_add(q, &r, "sbx-policy", err, sizeof(err)), want,
	    "%s", err);
}

static void
add_dataset(struct aqueue *q, const char *id)
{
	Sbx__V1__CapabilityRequest	 r;
	char				 err[256];

	sbx__v1__capability_request__init(&r);
	r.request_id = (char *)id;
	r.task_id = (char *)"t-2";
	r.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET;
	r.dataset = (char *)"sales-2023";
	r.why = (char *)"compare years";
	cr_assert_eq(aqueue_add(q, &r, "sbx-policy", err, sizeof(err)), 1,
	    "%s", err);
}

static int
decide(struct aqueue *q, const char *id, Sbx__V1__CapabilityStatus st,
    const char *approver, const char *hash, const char **rule)
{
	Sbx__V1__CapabilityDecision	 d;
	char				 err[512];

	sbx__v1__capability_decision__init(&d);
	d.request_id = (char *)id;
	d.status = st;
	d.reason = (char *)"looks fine";
	d.approver = (char *)approver;
	d.policy_hash = (char *)hash;
	d.decided_at = 1700000100;
	return aqueue_decide(q, &d, rule, err, sizeof(err));
}

TestSuite(queue, .init = setup, .fini = teardown);

Test(queue, pending_requests_survive_a_reopen_intact)
{
	struct aqueue			*q = open_queue();
	Sbx__V1__ApprovalItems		 it;
	Sbx__V1__CapabilityRequest	*r;
	char				 err[256];

	add_host(q, "c-1", 1);
	add_dataset(q, "c-2");
	aqueue_close(q);

	q = open_queue();
	cr_assert_eq(aqueue_list(q, 1, &it, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(it.n_requests, 2);
	cr_assert_eq(it.n_decisions, 2);
	r = it.requests[0];
	cr_assert_str_eq(r->request_id, "c-1");
	cr_assert_str_eq(r->tenant, "acme");
	cr_assert_str_eq(r->user, "alice");
	cr_assert_str_eq(r->template_, "py-analytics@1");
	cr_assert_eq(r->created_at, 1700000000);
	cr_assert_eq(r->what_case, SBX__V1__CAPABILITY_REQUEST__WHAT_HOST);
	cr_assert_str_eq(r->host->host, "api.example.com");
	cr_assert_eq(r->host->n_methods, 2);
	cr_assert_str_eq(r->host->paths[0], "/v1/rates");
	/* The source is bytes: a NUL inside survives. */
	cr_assert_eq(r->source.len, 15);
	cr_assert_eq(memcmp(r->source.data + 11, "tail", 4), 0);
	cr_assert_eq(it.decisions[0]->status, PENDING);
	cr_assert_str_eq(it.requests[1]->dataset, "sales-2023");
	aqueue_items_clear(&it);
	aqueue_close(q);
}

Test(queue, the_same_request_twice_is_queued_once)
{
	struct aqueue		*q = open_queue();
	Sbx__V1__ApprovalItems	 it;
	char			 err[256];

	add_host(q, "c-1", 1);
	add_host(q, "c-1", 0);
	cr_assert_eq(aqueue_list(q, 0, &it, err, sizeof(err)), 0);
	cr_assert_eq(it.n_requests, 1);
	aqueue_items_clear(&it);
	aqueue_close(q);
}

/* More requests than the list's first allocation (aqueue_append grows
 * it): every one listed once, oldest first, with its own decision. */
Test(queue, a_long_list_keeps_every_request_in_order)
{
	struct aqueue		*q = open_queue();
	Sbx__V1__ApprovalItems	 it;
	const char		*rule;
	char			 id[16], err[256];

	for (int i = 0; i < 40; i++) {
		snprintf(id, sizeof(id), "c-%02d", i);
		add_host(q, id, 1);
	}
	cr_assert_eq(decide(q, "c-17", DENIED, "bob", "", &rule), 0);
	cr_assert_eq(aqueue_list(q, 0, &it, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(it.n_requests, 40);
	cr_assert_eq(it.n_decisions, 40);
	for (int i = 0; i < 40; i++) {
		snprintf(id, sizeof(id), "c-%02d", i);
		cr_assert_str_eq(it.requests[i]->request_id, id);
		cr_assert_str_eq(it.decisions[i]->request_id, id);
		cr_assert_eq(it.decisions[i]->status, i == 17 ? DENIED :
		    PENDING);
	}
	aqueue_items_clear(&it);
	cr_assert_eq(it.n_requests, 0);
	cr_assert_null(it.requests);
	cr_assert_eq(aqueue_list(q, 1, &it, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(it.n_requests, 39);
	cr_assert_str_eq(it.requests[17]->request_id, "c-18");
	aqueue_items_clear(&it);
	aqueue_close(q);
}

Test(queue, a_decision_is_recorded_once_and_survives_a_reopen)
{
	struct aqueue			*q = open_queue();
	Sbx__V1__ApprovalItems		 it;
	Sbx__V1__CapabilityRequest	*r;
	Sbx__V1__CapabilityDecision	*d;
	const char			*rule;
	char				 err[256];

	add_host(q, "c-1", 1);
	add_dataset(q, "c-2");
	cr_assert_eq(decide(q, "c-1", APPROVED, "bob", "ab12", &rule), 0);
	cr_assert_eq(decide(q, "c-1", DENIED, "carol", "", &rule), -1);
	cr_assert_str_eq(rule, ARULE_DECIDED);
	cr_assert_eq(decide(q, "c-9", DENIED, "carol", "", &rule), -1);
	cr_assert_str_eq(rule, ARULE_UNKNOWN);
	cr_assert_eq(decide(q, "c-2", PENDING, "carol", "", &rule), -1);
	cr_assert_str_eq(rule, ARULE_BAD_REQUEST);
	aqueue_close(q);

	q = open_queue();
	cr_assert_eq(aqueue_list(q, 1, &it, err, sizeof(err)), 0);
	cr_assert_eq(it.n_requests, 1);
	cr_assert_str_eq(it.requests[0]->request_id, "c-2");
	aqueue_items_clear(&it);
	cr_assert_eq(aqueue_get(q, "c-1", &r, &d, err, sizeof(err)), 1);
	cr_assert_eq(d->status, APPROVED);
	cr_assert_str_eq(d->approver, "bob");
	cr_assert_str_eq(d->policy_hash, "ab12");
	cr_assert_str_eq(d->reason, "looks fine");
	cr_assert_eq(d->decided_at, 1700000100);
	aqueue_item_free(r, d);
	cr_assert_eq(aqueue_get(q, "c-404", &r, &d, err, sizeof(err)), 0);
	aqueue_close(q);
}

Test(queue, decisions_cannot_be_changed_or_removed)
{
	struct aqueue	*q = open_queue();
	const char	*rule;
	sqlite3		*db;

	add_host(q, "c-1", 1);
	cr_assert_eq(decide(q, "c-1", DENIED, "bob", "", &rule), 0);
	aqueue_close(q);
	cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	cr_assert_neq(sqlite3_exec(db, "UPDATE decisions SET status = 3",
	    NULL, NULL, NULL), SQLITE_OK);
	cr_assert_neq(sqlite3_exec(db, "DELETE FROM decisions", NULL, NULL,
	    NULL), SQLITE_OK);
	sqlite3_close(db);
}

Test(queue, every_change_is_audited_and_the_chain_verifies)
{
	struct aqueue			*q = open_queue();
	Sbx__V1__AuditEvent		**v;
	Sbx__V1__AuditVerifyReply	 vr;
	const char			*rule;
	size_t				 n;

	add_host(q, "c-1", 1);
	cr_assert_eq(decide(q, "c-1", APPROVED, "bob", "ab12", &rule), 0);
	cr_assert_eq(decide(q, "c-1", APPROVED, "bob", "ab12", &rule), -1);
	cr_assert_eq(audit_query(aqueue_audit(q), NULL, 0, &v, &n), 0);
	cr_assert_eq(n, 2, "a refused decision adds no record");
	cr_assert_str_eq(v[0]->action, "submit");
	cr_assert_str_eq(v[0]->actor, "sbx-policy");
	cr_assert_str_eq(v[1]->action, "approve");
	cr_assert_str_eq(v[1]->actor, "bob");
	cr_assert_str_eq(v[1]->policy_hash, "ab12");
	cr_assert_str_eq(v[1]->task_id, "t-1");
	audit_events_free(v, n);
	sbx__v1__audit_verify_reply__init(&vr);
	cr_assert_eq(audit_verify(aqueue_audit(q), &vr), 0);
	cr_assert(vr.ok, "%s", vr.problem);
	audit_verify_clear(&vr);
	aqueue_close(q);
}

/* ---- quoting ---- */

static void
quoted(const char *in, size_t len, const char *prefix, const char *want)
{
	char	*s = aquote(in, len, prefix);

	cr_assert_str_eq(s, want);
	free(s);
}

#define Q(in, want)	quoted(in, sizeof(in) - 1, NULL, want)

Test(quote, printable_text_and_utf8_pass)
{
	Q("print('hi')", "print('hi')");
	Q("caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac");
}

Test(quote, escape_sequences_are_shown_not_obeyed)
{
	Q("\033[2J", "^[[2J");
	Q("\033]0;pwned\007", "^[]0;pwned^G");
	Q("\033P1$r\033\\", "^[P1$r^[\\\\");
	Q("a\rb\bc\x7f", "a^Mb^Hc^?");
	Q("nul\0x", "nul^@x");
}

Test(quote, c1_and_invisible_code_points_are_shown_by_number)
{
	Q("\xc2\x9b" "2J", "\\u{009B}2J");
	Q("\xe2\x80\xae" "evil", "\\u{202E}evil");
	Q("a\xe2\x80\x8b" "b", "a\\u{200B}b");
	Q("\xef\xbb\xbf", "\\u{FEFF}");
}

Test(quote, bytes_that_are_not_utf8_are_shown_as_hex)
{
	Q("\x9b" "2J", "\\x9b2J");
	Q("\xc0\x80", "\\xc0\\x80");		/* overlong NUL */
	Q("\xed\xa0\x80", "\\xed\\xa0\\x80");	/* a surrogate */
	Q("\xe2\x82", "\\xe2\\x82");		/* cut short */
	Q("back\\slash", "back\\\\slash");
}

Test(quote, lines_are_prefixed_or_escaped)
{
	quoted("a\nb\n", 4, "> ", "> a\n> b\n");
	quoted("a\tb\nc", 5, "| ", "| a\tb\n| c");
	Q("a\nb\tc", "a\\nb\\tc");
}

Test(quote, no_control_byte_survives_any_input)
{
	unsigned char	 in[512];
	char		*s;
	size_t		 i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 + (i >> 8));
	for (int pre = 0; pre < 2; pre++) {
		s = aquote(in, sizeof(in), pre ? "| " : NULL);
		for (i = 0; s[i] != '\0'; i++) {
			unsigned char c = (unsigned char)s[i];

			cr_assert(c >= 0x20 || (pre && (c == '\n' || c == '\t')),
			    "control byte 0x%02x at %zu", c, i);
			cr_assert_neq(c, 0x7f);
			/* A C1 control encoded in UTF-8 starts with 0xc2. */
			if (c == 0xc2)
				cr_assert((unsigned char)s[i + 1] >= 0xa0);
		}
		cr_assert(strstr(s, "\\x9b") != NULL || strstr(s, "\\u{009B}")
		    != NULL || memchr(in, 0x9b, sizeof(in)) == NULL);
		free(s);
	}
}

Test(quote, what_names_the_capability)
{
	Sbx__V1__CapabilityRequest	 r;
	Sbx__V1__AllowRule		 h;
	char				*methods[] = { (char *)"GET" };
	char				*s;

	sbx__v1__capability_request__init(&r);
	sbx__v1__allow_rule__init(&h);
	h.host = (char *)"evil\033[2J.example";
	h.methods = methods;
	h.n_methods = 1;
	r.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_HOST;
	r.host = &h;
	s = aquote_what(&r);
	cr_assert_str_eq(s, "host evil^[[2J.example methods GET (any path)");
	free(s);
	r.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET;
	r.dataset = (char *)"sales";
	s = aquote_what(&r);
	cr_assert_str_eq(s, "dataset sales");
	free(s);
}

/* ---- separation of duties (parse.c) ---- */

TestSuite(duties, .init = setup, .fini = teardown);

/* approvald.yaml with approvers: as given; NULL when it does not parse. */
static struct approvald_conf *
conf_with(const char *approvers, struct yerrs *errs)
{
	char	 path[160];
	FILE	*f;

	snprintf(path, sizeof(path), "%s/approvald.yaml", dir);
	cr_assert_not_null(f = fopen(path, "w"));
	fprintf(f, "state_dir: %s\npolicyd: {socket: /nonexistent, user: "
	    "\"0\"}\nsockets:\n  submit: {path: %s/s.sock, allow: {users: "
	    "[\"0\"]}}\n  console: {path: %s/c.sock, allow: {users: "
	    "[\"0\"]}}\n%s", dir, dir, dir, approvers);
	fclose(f);
	return cfg_parse(path, &aparse_table, errs);
}

Test(duties, an_approver_may_not_decide_their_own_users_task)
{
	struct yerrs		 errs = { NULL, 0 };
	struct approvald_conf	*c;
	char			 why[256];

	c = conf_with("approvers:\n  \"0\": acme/alice\n  \"1\": [acme/bob, "
	    "\"beta/*\"]\n", &errs);
	cr_assert_not_null(c, "%s", errs.n > 0 ? errs.msgs[0] : "?");
	cr_assert_eq(c->napprovers, 2);
	/* uid 0 is acme/alice: not alice's tasks, anyone else's. */
	cr_assert_eq(aparse_own_task(c, 0, "root", "acme", "alice", why,
	    sizeof(why)), 1);
	cr_assert(strstr(why, "approvers: maps 0 to acme/alice") != NULL,
	    "%s", why);
	cr_assert_eq(aparse_own_task(c, 0, "root", "acme", "bob", why,
	    sizeof(why)), 0);
	cr_assert_eq(aparse_own_task(c, 0, "root", "acmex", "alice", why,
	    sizeof(why)), 0);
	cr_assert_eq(aparse_own_task(c, 0, "root", "acm", "alice", why,
	    sizeof(why)), 0);
	/* uid 1: acme/bob and every user of beta. */
	cr_assert_eq(aparse_own_task(c, 1, "daemon", "acme", "bob", why,
	    sizeof(why)), 1);
	cr_assert_eq(aparse_own_task(c, 1, "daemon", "beta", "carol", why,
	    sizeof(why)), 1);
	cr_assert_eq(aparse_own_task(c, 1, "daemon", "acme", "alice", why,
	    sizeof(why)), 0);
	/* Unlisted, but the same name as the task's user. */
	cr_assert_eq(aparse_own_task(c, 2, "carol", "gamma", "carol", why,
	    sizeof(why)), 1);
	cr_assert(strstr(why, "own Unix user name") != NULL, "%s", why);
	cr_assert_eq(aparse_own_task(c, 2, "carol", "gamma", "dave", why,
	    sizeof(why)), 0);
	cfg_free(&aparse_table, c);
	yerrs_free(&errs);
}

Test(duties, bad_approvers_are_each_an_error)
{
	struct yerrs		 errs = { NULL, 0 };
	struct approvald_conf	*c;
	size_t			 i;
	int			 user = 0, slash = 0, chars = 0, empty = 0;

	c = conf_with("approvers:\n  sbx-no-such-user-x: acme/alice\n"
	    "  \"0\": acme\n  \"1\": [acme/a b]\n  \"2\": []\n", &errs);
	cr_assert_null(c);
	for (i = 0; i < errs.n; i++) {
		user += strstr(errs.msgs[i], "approvers.sbx-no-such-user-x") !=
		    NULL;
		slash += strstr(errs.msgs[i], "\"acme\" is not TENANT/USER") !=
		    NULL;
		chars += strstr(errs.msgs[i], "\"acme/a b\"") != NULL;
		empty += strstr(errs.msgs[i], "at least one") != NULL;
	}
	cr_assert(user == 1 && slash == 1 && chars == 1 && empty == 1,
	    "errors: %zu, first %s", errs.n, errs.n > 0 ? errs.msgs[0] : "");
	yerrs_free(&errs);
}
