/*
 * compile.c: a task into a policy, exactly as the reference text's
 * compile_policy: the task type selects a template, the task's datasets
 * become the inputs only where the user may read them (else a policy error
 * and nothing runs), network rules stay only where the user may call the
 * host, credentials go with their host, limits are clamped to the plan.
 *
 * The invariant: compilation only removes capabilities.  Every step below
 * copies the template and then filters or lowers; nothing is ever added
 * that the template (after ${task.*} substitution) did not grant, and the
 * values substituted are checked names, so they cannot smuggle in a
 * placeholder or a path.  compile_policy() is the pure part; compile_task()
 * adds the task binding, the execution count, the signature and the
 * records, which go into the store's open batch.
 *
 * The one exception is a grant (capability.c): a capability request that
 * the user's entitlements covered or an approver approved, recorded for
 * one task id.  compile_policy_grants() lets a granted dataset be read and
 * adds a granted host's rule, for that task only; with no grants it is
 * exactly compile_policy().  The grant list (struct cap_grants) is this
 * file's, as compile_policy_grants() reads it; capability.c, above, fills
 * it, and compile_task() gets a task's through pd->grants, so this file
 * calls nothing above it (only store.c, entitle.c, template.c, and
 * rollout.c, which picks the version of a task type being rolled out
 * and counts a refusal against the version chosen).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "trace.h"
#include "util.h"
#include "yaml.h"
#include "policyd.h"

#define DATASET_REF	"${task.dataset_ref}"

void
compile_error(Sbx__V1__Error *err, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;

	compile_error_clear(err);
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	err->code = code;
	err->message = msg;
	err->rule = xstrdup(rule != NULL ? rule : "");
}

void
compile_error_clear(Sbx__V1__Error *err)
{
	if (err->message != NULL && err->message != protobuf_c_empty_string)
		free(err->message);
	if (err->rule != NULL && err->rule != protobuf_c_empty_string)
		free(err->rule);
	sbx__v1__error__init(err);
}

void
compile_count_denial(struct policyd_metrics *m, const char *rule)
{
	size_t	 i;

	for (i = 0; i < m->ndenials; i++) {
		if (strcmp(m->denials[i].rule, rule) == 0) {
			m->denials[i].n++;
			return;
		}
	}
	if (m->ndenials == sizeof(m->denials) / sizeof(m->denials[0]))
		return;
	/* Rule ids are the RULE_* literals, which live forever. */
	m->denials[m->ndenials].rule = rule;
	m->denials[m->ndenials].n = 1;
	m->ndenials++;
}

static int
compile_field_ok(const char *what, const char *v, Sbx__V1__Error *err)
{
	if (name_ok(v))
		return 1;
	compile_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
	    "%s \"%.128s\" is not a valid name: want 1..128 of "
	    "[A-Za-z0-9._@:-]", what, v != NULL ? v : "");
	return 0;
}

int
compile_validate(const Sbx__V1__Task *t, Sbx__V1__Error *err)
{
	char	 what[64], msg[256];
	size_t	 i;

	if (t == NULL) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "request has no task");
		return -1;
	}
	if (!compile_field_ok("task.id", t->id, err) ||
	    !compile_field_ok("task.type", t->type, err) ||
	    !compile_field_ok("task.tenant", t->tenant, err) ||
	    !compile_field_ok("task.user", t->user, err))
		return -1;
	for (i = 0; i < t->n_datasets; i++) {
		snprintf(what, sizeof(what), "task.datasets[%zu]", i);
		if (!compile_field_ok(what, t->datasets[i], err))
			return -1;
	}
	for (i = 0; i < t->n_outputs; i++) {
		snprintf(what, sizeof(what), "task.outputs[%zu]", i);
		if (!compile_field_ok(what, t->outputs[i], err))
			return -1;
	}
	/* Never part of the policy: it only labels the execution. */
	if (trace_parent_check(t->traceparent, msg, sizeof(msg)) == -1) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "task.traceparent: %s", msg);
		return -1;
	}
	return 0;
}

/* Replace every ${task.id|type|tenant|user} in *s.  Values are name_ok,
 * so the result cannot contain a new placeholder. */
static void
compile_subst_str(char **s, const Sbx__V1__Task *t)
{
	static const char *const keys[] = {
		"${task.id}", "${task.type}", "${task.tenant}", "${task.user}"
	};
	const char	*vals[4] = { t->id, t->type, t->tenant, t->user };
	const char	*p, *q;
	char		*out;
	size_t		 len, cap, i, k;

	if (strstr(*s, "${task.") == NULL)
		return;
	cap = strlen(*s) + 1;
	for (i = 0; i < 4; i++)
		cap += strlen(vals[i]) * 4;	/* grown below when needed */
	out = xmalloc(cap);
	len = 0;
	for (p = *s; *p != '\0'; ) {
		const char	*val = NULL;
		size_t		 klen = 0, vlen;

		if (p[0] == '$' && p[1] == '{') {
			for (k = 0; k < 4; k++) {
				klen = strlen(keys[k]);
				if (strncmp(p, keys[k], klen) == 0) {
					val = vals[k];
					break;
				}
			}
		}
		if (val == NULL) {
			q = p;
			klen = 1;
			vlen = 1;
		} else {
			q = val;
			vlen = strlen(val);
		}
		if (len + vlen + 1 > cap) {
			cap = (len + vlen + 1) * 2;
			out = xreallocarray(out, cap, 1);
		}
		memcpy(out + len, q, vlen);
		len += vlen;
		p += klen;
	}
	out[len] = '\0';
	free(*s);
	*s = out;
}

static Sbx__V1__Input *
compile_input(const char *dataset)
{
	Sbx__V1__Input	*in = xmalloc(sizeof(*in));

	sbx__v1__input__init(in);
	in->dataset = xstrdup(dataset);
	return in;
}

int
compile_substitute(Sbx__V1__Policy *pol, const Sbx__V1__Task *t,
    Sbx__V1__Error *err)
{
	Sbx__V1__Input	**inputs = NULL;
	size_t		  n = 0, i, j;
	int		  expanded = 0;

	for (i = 0; i < pol->network->n_allow; i++) {
		Sbx__V1__AllowRule *r = pol->network->allow[i];

		for (j = 0; j < r->n_paths; j++)
			compile_subst_str(&r->paths[j], t);
	}
	for (i = 0; i < pol->n_credentials; i++)
		compile_subst_str(&pol->credentials[i]->secret, t);

	for (i = 0; i < pol->n_inputs; i++)
		if (strcmp(pol->inputs[i]->dataset, DATASET_REF) == 0)
			expanded = 1;
	if (t->n_datasets > 0 && !expanded) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
		    RULE_NOT_READABLE, "template %s@%u takes no task "
		    "datasets, and the task names %zu", pol->name,
		    pol->version, t->n_datasets);
		return -1;
	}
	if (!expanded)
		return 0;
	inputs = xreallocarray(NULL, pol->n_inputs + t->n_datasets + 1,
	    sizeof(*inputs));
	expanded = 0;
	for (i = 0; i < pol->n_inputs; i++) {
		if (strcmp(pol->inputs[i]->dataset, DATASET_REF) != 0) {
			inputs[n++] = pol->inputs[i];
			continue;
		}
		/* One ${task.dataset_ref} stands for all the task's
		 * datasets; a second one adds nothing. */
		if (!expanded)
			for (j = 0; j < t->n_datasets; j++)
				inputs[n++] = compile_input(t->datasets[j]);
		expanded = 1;
		sbx__v1__input__free_unpacked(pol->inputs[i], NULL);
	}
	free(pol->inputs);
	pol->inputs = inputs;
	pol->n_inputs = n;
	return 0;
}

static uint32_t
compile_clamp(uint32_t tmpl, uint32_t plan)
{
	/* The plan caps where it sets a value; the template is the ceiling
	 * everywhere else. */
	if (plan != 0 && (tmpl == 0 || tmpl > plan))
		return plan;
	return tmpl;
}

static int
compile_has_rule(const Sbx__V1__Network *net, const char *host)
{
	for (size_t i = 0; i < net->n_allow; i++)
		if (strcmp(net->allow[i]->host, host) == 0)
			return 1;
	return 0;
}

void
compile_grants_clear(struct cap_grants *g)
{
	strv_free(g->datasets, g->ndatasets);
	for (size_t i = 0; i < g->nrules; i++)
		sbx__v1__allow_rule__free_unpacked(g->rules[i], NULL);
	free(g->rules);
	memset(g, 0, sizeof(*g));
}

static int
compile_granted(const struct cap_grants *g, const char *dataset)
{
	if (g == NULL)
		return 0;
	for (size_t i = 0; i < g->ndatasets; i++)
		if (strcmp(g->datasets[i], dataset) == 0)
			return 1;
	return 0;
}

/* The template's rule for host (after the entitlement filter), or NULL. */
static Sbx__V1__AllowRule *
compile_rule_for(const Sbx__V1__Network *net, const char *host)
{
	for (size_t i = 0; i < net->n_allow; i++)
		if (strcasecmp(net->allow[i]->host, host) == 0)
			return net->allow[i];
	return NULL;
}

/* Add what v lacks of add (strings the policy frees as its own). */
static void
compile_strv_union(char ***v, size_t *n, char *const *add, size_t nadd)
{
	for (size_t i = 0; i < nadd; i++) {
		size_t	 j;

		for (j = 0; j < *n; j++)
			if (strcmp((*v)[j], add[i]) == 0)
				break;
		if (j < *n)
			continue;
		*v = xreallocarray(*v, *n + 1, sizeof(**v));
		(*v)[(*n)++] = xstrdup(add[i]);
	}
}

/*
 * A grant for a host the template already has goes into the template's
 * rule, not beside it: egressd takes the first rule that names a host, so
 * a second rule could take the template's place -- its port, CIDRs and
 * size caps gone, the credential still added -- or never be reached (a
 * granted method on a rule the proxy does not take).  The grant brings
 * methods and paths only (capability.c refuses a request for anything
 * else); the template's port, CIDRs and caps stay.  A grant of no paths
 * is any path, as it was granted.
 */
static void
compile_rule_merge(Sbx__V1__AllowRule *mine, const Sbx__V1__AllowRule *gr)
{
	compile_strv_union(&mine->methods, &mine->n_methods, gr->methods,
	    gr->n_methods);
	if (mine->n_paths == 0)
		return;			/* any path already */
	if (gr->n_paths == 0) {
		strv_free(mine->paths, mine->n_paths);
		mine->paths = NULL;
		mine->n_paths = 0;
		return;
	}
	compile_strv_union(&mine->paths, &mine->n_paths, gr->paths,
	    gr->n_paths);
}

/* A copy of a granted rule, allocated as an unpacked message so the
 * policy frees it like its own. */
static Sbx__V1__AllowRule *
compile_rule_dup(const Sbx__V1__AllowRule *r)
{
	Sbx__V1__AllowRule	*c;
	uint8_t			*buf;
	size_t			 len;

	len = sbx__v1__allow_rule__get_packed_size(r);
	buf = xmalloc(len + 1);
	sbx__v1__allow_rule__pack(r, buf);
	c = sbx__v1__allow_rule__unpack(NULL, len, buf);
	free(buf);
	if (c == NULL)
		fatalx("a granted rule does not decode");
	return c;
}

Sbx__V1__Policy *
compile_policy(const struct tmpl *tm, const Sbx__V1__Task *t,
    const struct entitle_eff *eff, Sbx__V1__Error *err)
{
	return compile_policy_grants(tm, t, eff, NULL, err);
}

Sbx__V1__Policy *
compile_policy_grants(const struct tmpl *tm, const Sbx__V1__Task *t,
    const struct entitle_eff *eff, const struct cap_grants *g,
    Sbx__V1__Error *err)
{
	Sbx__V1__Policy		*pol;
	Sbx__V1__Network	*net;
	Sbx__V1__Limits		*l;
	Sbx__V1__Task		 tg;
	char			**ds = NULL;
	size_t			 i, n;

	if (!eff->found) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
		    RULE_NO_ENTITLEMENT, "%s/%s has no entitlement (neither a "
		    "user row nor a tenant-wide \"*\" row)", t->tenant,
		    t->user);
		return NULL;
	}
	/* The template's bytes were packed once, when it was loaded. */
	if ((pol = policy_unpack(tm->packed, tm->packedlen)) == NULL) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "template %s@%u cannot be copied", tm->name, tm->version);
		return NULL;
	}
	/* Granted datasets join the task's own where the template takes
	 * task datasets at all; a template that takes none stays so. */
	if (g != NULL && g->ndatasets > 0 && tm->takes_datasets) {
		tg = *t;
		ds = xreallocarray(NULL, t->n_datasets + g->ndatasets + 1,
		    sizeof(*ds));
		for (i = 0; i < t->n_datasets; i++)
			ds[i] = t->datasets[i];
		n = t->n_datasets;
		for (i = 0; i < g->ndatasets; i++)
			ds[n++] = g->datasets[i];
		tg.datasets = ds;
		tg.n_datasets = n;
		t = &tg;
	}
	if (compile_substitute(pol, t, err) == -1)
		goto fail;

	/* Inputs: every one readable (by entitlement, or granted to this
	 * task), or nothing runs. */
	for (i = 0; i < pol->n_inputs; i++) {
		if (!entitle_can_read(eff, pol->inputs[i]->dataset) &&
		    !compile_granted(g, pol->inputs[i]->dataset)) {
			compile_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
			    RULE_NOT_READABLE, "dataset \"%s\" is not readable "
			    "by %s/%s", pol->inputs[i]->dataset, t->tenant,
			    t->user);
			goto fail;
		}
	}

	/* Network: keep a rule only where the user may call its host. */
	net = pol->network;
	for (i = n = 0; i < net->n_allow; i++) {
		if (entitle_can_call(eff, net->allow[i]->host))
			net->allow[n++] = net->allow[i];
		else
			sbx__v1__allow_rule__free_unpacked(net->allow[i],
			    NULL);
	}
	net->n_allow = n;

	/* A credential is bound to a host; without the host it goes. */
	for (i = n = 0; i < pol->n_credentials; i++) {
		if (compile_has_rule(net, pol->credentials[i]->host))
			pol->credentials[n++] = pol->credentials[i];
		else
			sbx__v1__credential__free_unpacked(
			    pol->credentials[i], NULL);
	}
	pol->n_credentials = n;

	/* The widening path: a granted host's rule, even where the template
	 * has none.  After the credential filter, so a grant never brings a
	 * template's credential back. */
	if (g != NULL && g->nrules > 0) {
		net->allow = xreallocarray(net->allow, net->n_allow + g->nrules,
		    sizeof(*net->allow));
		for (i = 0; i < g->nrules; i++) {
			Sbx__V1__AllowRule	*mine;

			if ((mine = compile_rule_for(net, g->rules[i]->host)) !=
			    NULL)
				compile_rule_merge(mine, g->rules[i]);
			else
				net->allow[net->n_allow++] = compile_rule_dup(
				    g->rules[i]);
		}
	}

	l = pol->limits;
	l->cpus_milli = compile_clamp(l->cpus_milli, eff->plan.cpus_milli);
	l->memory_mb = compile_clamp(l->memory_mb, eff->plan.memory_mb);
	l->pids = compile_clamp(l->pids, eff->plan.pids);
	l->wall_seconds = compile_clamp(l->wall_seconds,
	    eff->plan.wall_seconds);
	l->scratch_mb = compile_clamp(l->scratch_mb, eff->plan.scratch_mb);

	policy_normalize(pol);
	free(ds);
	return pol;
fail:
	free(ds);
	policy_free(pol);
	return NULL;
}

void
compile_out_clear(struct compile_out *out)
{
	policy_free(out->policy);
	free(out->template);
	sign_signed_clear(&out->signed_);
	memset(out, 0, sizeof(*out));
}

/* A denial: its audit event joins the open batch, so the refusal is on
 * disk before the client hears it (invariant 6).  tm: the version the
 * task got, once chosen; the refusal counts against it (rollout.c). */
static int
compile_deny(struct policyd *pd, const Sbx__V1__Task *t, const char *actor,
    const struct tmpl *tm, const char *hash, Sbx__V1__Error *err)
{
	struct store_denial	 d;

	store_add_deny(pd->store, t->id, hash, err->rule, err->message,
	    actor);
	if (tm != NULL && pd->roll != NULL) {
		memset(&d, 0, sizeof(d));
		snprintf(d.rule, sizeof(d.rule), "%s", err->rule);
		snprintf(d.boundary, sizeof(d.boundary), "policy");
		rollout_count(pd->roll, t->id, NULL, hash, tm->name,
		    tm->version, &d, 1);
	}
	log_ctx_rule(err->rule);
	log_debug("task %s: denied: %s: %s", t->id, err->rule, err->message);
	return -1;
}

/* Nothing has been recorded when this is called, so nothing is undone. */
static int
compile_internal(const Sbx__V1__Task *t, Sbx__V1__Error *err,
    const char *what)
{
	compile_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
	    "task %s: %s", t->id, what);
	return -1;
}

/*
 * Reserve the execution in the fleet's database (fleet.c): the cap and
 * the binding hold across replicas there, whatever this host's
 * policyd.db says.  *used becomes what the task's runs used fleet-wide.
 * An unreachable database refuses the compile (fail closed); a refusal
 * is recorded like any other.  0, or -1 with err and out cleared.
 */
static int
compile_fleet(struct policyd *pd, const Sbx__V1__Task *t, const char *actor,
    const struct tmpl *tm, int run, uint64_t budget, uint64_t *used,
    struct compile_out *out, Sbx__V1__Error *err)
{
	struct fleet_res	 fr;
	struct yerrs		 errs = { NULL, 0 };
	char			 ferr[512];
	int			 rc;

	/* The loaded versions must be the fleet's before any compile. */
	if (!pd->tmpl_fleet_ok) {
		if ((rc = fleet_templates(pd->fleet, pd->reg,
		    pd->conf->store.host, &errs, ferr, sizeof(ferr))) == 0)
			pd->tmpl_fleet_ok = 1;
		else if (rc == -2) {
			for (size_t i = 0; i < errs.n; i++)
				log_warnx("%s", errs.msgs[i]);
			compile_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
			    RULE_TEMPLATE_CONFLICT, "task %s: nothing compiled:"
			    " %s", t->id, errs.msgs[0]);
			yerrs_free(&errs);
			tm = NULL;
			goto refused;
		} else {
			log_warnx("task %s: %s", t->id, ferr);
			compile_error(err, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
			    RULE_STORE_UNAVAILABLE, "task %s: the fleet's store "
			    "is unavailable, nothing compiled: %s", t->id,
			    ferr);
			tm = NULL;
			goto refused;
		}
	}
	switch (fleet_reserve(pd->fleet, t, out->execution_id,
	    pd->conf->store.host, out->policy->executions_per_task,
	    run == COMPILE_RUN ? (int64_t)budget : -1, &fr, ferr,
	    sizeof(ferr))) {
	case FLEET_RESERVED:
		*used = fr.egress_used;
		return 0;
	case FLEET_EXHAUSTED:
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_LIMIT,
		    RULE_EXHAUSTED, "task %s has used its %u execution%s "
		    "across the fleet (executions_per_task of %s@%u)", t->id,
		    out->policy->executions_per_task,
		    out->policy->executions_per_task == 1 ? "" : "s",
		    tm->name, tm->version);
		break;
	case FLEET_MISMATCH:
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
		    RULE_TASK_MISMATCH, "task %s was compiled for %s/%s type "
		    "%s in the fleet; this request says %s/%s type %s", t->id,
		    fr.tenant, fr.user, fr.type, t->tenant, t->user, t->type);
		break;
	default:
		log_warnx("task %s: %s", t->id, ferr);
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    RULE_STORE_UNAVAILABLE, "task %s: the fleet's store is "
		    "unavailable, nothing compiled: %s", t->id, ferr);
		/* An outage is not the template's: no rollout counts it. */
		tm = NULL;
		break;
	}
refused:
	compile_deny(pd, t, actor, tm, out->hash, err);
	compile_out_clear(out);
	return -1;
}

int
compile_task(struct policyd *pd, const Sbx__V1__Task *t, const char *actor,
    int run, struct compile_out *out, Sbx__V1__Error *err)
{
	const struct tmpl	*tm, *rtm;
	struct store_task	 bound;
	const struct entitle_eff *eff;
	struct cap_grants	 grants = { NULL, 0, NULL, 0 };
	Sbx__V1__PolicyGrant	 grant;
	int			 known, rc;
	char			*detail;
	uint8_t			*canon = NULL;
	size_t			 canonlen = 0;
	uint64_t		 budget, used;

	memset(out, 0, sizeof(*out));
	if (compile_validate(t, err) == -1)
		return -1;
	/* Lines and records from here on are about this task. */
	log_ctx_set(t->id, NULL, NULL, t->traceparent);

	if ((tm = template_active(pd->reg, t->type)) == NULL) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
		    RULE_UNKNOWN_TASK_TYPE, "no template for task type "
		    "\"%s\"", t->type);
		return compile_deny(pd, t, actor, NULL, NULL, err);
	}

	if ((known = store_task_get(pd->store, t->id, &bound)) == -1)
		return compile_internal(t, err, "cannot read the task");
	if (known && (strcmp(bound.tenant, t->tenant) != 0 ||
	    strcmp(bound.user, t->user) != 0 ||
	    strcmp(bound.type, t->type) != 0)) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
		    RULE_TASK_MISMATCH, "task %s was compiled for %s/%s type "
		    "%s; this request says %s/%s type %s", t->id, bound.tenant,
		    bound.user, bound.type, t->tenant, t->user, t->type);
		return compile_deny(pd, t, actor, NULL, NULL, err);
	}
	/* A rollout chooses between its stable and canary versions, by
	 * the task id and the version the task already has. */
	if ((rtm = rollout_pick(pd->roll, pd->reg, t, known)) != NULL)
		tm = rtm;

	if ((eff = entitle_lookup(pd->ent, t->tenant, t->user)) == NULL) {
		if (pd->fleet == NULL)
			return compile_internal(t, err,
			    "cannot read the entitlements");
		/* Fail closed: no compile without the fleet's. */
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    RULE_STORE_UNAVAILABLE, "task %s: the fleet's store is "
		    "unavailable, nothing compiled: its entitlements cannot "
		    "be read", t->id);
		return compile_deny(pd, t, actor, NULL, NULL, err);
	}
	/* Only a bound task can have grants; in a fleet it may have been
	 * bound, and granted, on another host. */
	if ((known || pd->fleet != NULL) && pd->cap != NULL && pd->grants != NULL &&
	    pd->grants(pd->cap, t->id, &grants) == -1) {
		if (pd->fleet == NULL)
			return compile_internal(t, err,
			    "cannot read the grants");
		/* Fail closed, and say why (the error is logged). */
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    RULE_STORE_UNAVAILABLE, "task %s: the fleet's store is "
		    "unavailable, nothing compiled", t->id);
		return -1;
	}
	out->policy = compile_policy_grants(tm, t, eff, &grants, err);
	compile_grants_clear(&grants);
	if (out->policy == NULL) {
		if (err->code == SBX__V1__ERROR_CODE__ERROR_INTERNAL)
			return -1;
		return compile_deny(pd, t, actor, tm, NULL, err);
	}
	/* Encoded once: its hash is policy_hash()'s and these very bytes
	 * are what sign_grant_canonical() signs. */
	if (policy_canonical_in_place(out->policy, &canon, &canonlen) == -1) {
		compile_out_clear(out);
		return compile_internal(t, err, "cannot hash the policy");
	}
	sign_bytes_hash(canon, canonlen, out->hash);

	/* The count includes executions not committed yet, so compiles
	 * in flight cannot overrun the cap. */
	if ((known ? bound.executions : 0) >=
	    (int64_t)out->policy->executions_per_task) {
		compile_error(err, SBX__V1__ERROR_CODE__ERROR_LIMIT,
		    RULE_EXHAUSTED, "task %s has used its %u execution%s "
		    "(executions_per_task of %s@%u)", t->id,
		    out->policy->executions_per_task,
		    out->policy->executions_per_task == 1 ? "" : "s",
		    tm->name, tm->version);
		compile_deny(pd, t, actor, tm, out->hash, err);
		compile_out_clear(out);
		free(canon);
		return -1;
	}

	/* A preview's id says so inside the signed bytes: every daemon
	 * refuses its grant (sign_verify). */
	random_id(run == COMPILE_PREVIEW ? "preview" : "x", out->execution_id,
	    sizeof(out->execution_id));
	log_ctx_set(t->id, out->execution_id, out->hash, t->traceparent);
	budget = (uint64_t)(out->policy->network != NULL &&
	    out->policy->network->max_out_kb != 0 ?
	    out->policy->network->max_out_kb : POLICY_DEFAULT_MAX_OUT_KB) *
	    1024;
	used = known ? bound.egress_used : 0;
	/* In a fleet the count and the budget are the database's: the
	 * execution is reserved there, committed, before it is signed. */
	if (pd->fleet != NULL && run != COMPILE_PREVIEW &&
	    compile_fleet(pd, t, actor, tm, run, budget, &used, out,
	    err) == -1) {
		free(canon);
		return -1;
	}
	xasprintf(&out->template, "%s@%u", tm->name, tm->version);
	out->issued_at = now_s();
	out->expires_at = out->issued_at + pd->ttl;
	sbx__v1__policy_grant__init(&grant);
	grant.policy = out->policy;
	grant.policy_hash = out->hash;
	grant.task_id = t->id;
	grant.execution_id = out->execution_id;
	grant.tenant = t->tenant;
	grant.user = t->user;
	grant.issued_at = out->issued_at;
	grant.expires_at = out->expires_at;
	/* max_out_kb is the task's: what its earlier executions spent (or,
	 * not known, were allowed) is signed in, and egressd lets this one
	 * send only the rest.  A run's rest is counted as spent until its
	 * result says what it sent. */
	grant.egress_spent = used;
	out->egress_spent = used;
	rc = sign_grant_canonical(pd->key, &grant, canon, canonlen,
	    &out->signed_);
	free(canon);
	if (rc == -1) {
		compile_out_clear(out);
		return compile_internal(t, err, "cannot sign the policy");
	}

	if (run == COMPILE_PREVIEW) {
		/* Nothing recorded, nothing consumed, the task not bound. */
		log_debug("task %s: preview %s policy %s hash %s", t->id,
		    out->execution_id, out->template, out->hash);
		return 0;
	}
	/* The audit record is the execution record: task, execution,
	 * hash, template and time. */
	xasprintf(&detail, "template %s", out->template);
	store_add_execution(pd->store, t, known ? &bound : NULL,
	    out->execution_id, out->hash, detail, actor,
	    run == COMPILE_RUN ? (int64_t)(used >= budget ? 0 :
	    budget - used) : -1);
	free(detail);
	log_debug("task %s: execution %s policy %s hash %s", t->id,
	    out->execution_id, out->template, out->hash);
	return 0;
}
