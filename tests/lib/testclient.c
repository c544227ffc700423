/*
 * testclient.c: output shared by the daemons' test clients
 * (testclient.h).  Tests only: nothing here is installed.
 */
#include <stdio.h>

#include "log.h"
#include "sign.h"
#include "tests/lib/testclient.h"

int
tc_print_error(const Sbx__V1__Envelope *rep)
{
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_ERROR)
		return 0;
	printf("error code=%d rule=%s: %s\n", (int)rep->error->code,
	    rep->error->rule, rep->error->message);
	return 1;
}

int
tc_print_admin(const Sbx__V1__Envelope *rep, int audit_hash)
{
	if (tc_print_error(rep))
		return 3;
	switch (rep->body_case) {
	case SBX__V1__ENVELOPE__BODY_METRICS:
		fputs(rep->metrics->text, stdout);
		return 0;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFIED:
		printf("verify ok=%d records=%llu problem=%s\n",
		    rep->audit_verified->ok,
		    (unsigned long long)rep->audit_verified->records,
		    rep->audit_verified->problem);
		return 0;
	case SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS:
		for (size_t i = 0; i < rep->audit_records->n_events; i++) {
			const Sbx__V1__AuditEvent *e =
			    rep->audit_records->events[i];

			printf("audit action=%s rule=%s task=%s exe=%s ",
			    e->action, e->rule[0] ? e->rule : "-",
			    e->task_id[0] ? e->task_id : "-",
			    e->execution_id[0] ? e->execution_id : "-");
			if (audit_hash)
				printf("hash=%s ", e->policy_hash[0] ?
				    e->policy_hash : "-");
			printf("actor=%s detail=%s\n", e->actor, e->detail);
		}
		return 0;
	default:
		return 5;
	}
}

int
tc_keygen(int argc, char **argv)
{
	char	 err[512];

	if (argc != 3)
		return -1;
	if (sign_keygen(argv[1], argv[2], err, sizeof(err)) == -1)
		fatalx("%s", err);
	return 0;
}
