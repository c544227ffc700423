/*
 * queue_item.c: a request and its decision as the queue hands them out,
 * and the list of them, whichever store they came from: queue.c (SQLite)
 * and queue_pg.c (the fleet's PostgreSQL) both build them here, below
 * both (queue.c calls queue_pg.c, never the other way round).
 */
#include <stdlib.h>

#include "util.h"
#include "approvald/approvald.h"

void
aqueue_item_free(Sbx__V1__CapabilityRequest *r,
    Sbx__V1__CapabilityDecision *d)
{
	if (r != NULL)
		sbx__v1__capability_request__free_unpacked(r, NULL);
	if (d != NULL) {
		free(d->request_id);
		free(d->reason);
		free(d->approver);
		free(d->policy_hash);
		free(d);
	}
}

void
aqueue_append(Sbx__V1__ApprovalItems *it, size_t *cap,
    Sbx__V1__CapabilityRequest *r, Sbx__V1__CapabilityDecision *d)
{
	if (it->n_requests == *cap) {
		*cap = *cap == 0 ? 16 : *cap * 2;
		it->requests = xreallocarray(it->requests, *cap,
		    sizeof(*it->requests));
		it->decisions = xreallocarray(it->decisions, *cap,
		    sizeof(*it->decisions));
	}
	it->requests[it->n_requests++] = r;
	it->decisions[it->n_decisions++] = d;
}

void
aqueue_items_clear(Sbx__V1__ApprovalItems *it)
{
	for (size_t i = 0; i < it->n_requests; i++)
		aqueue_item_free(it->requests[i], it->decisions[i]);
	free(it->requests);
	free(it->decisions);
	it->requests = NULL;
	it->decisions = NULL;
	it->n_requests = 0;
	it->n_decisions = 0;
}
