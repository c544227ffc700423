/*
 * print.c: how sbxctl shows what the daemons answered: YAML for documents
 * a person may feed back (policies, entitlements in the import format),
 * aligned tables for lists, and JSON (-j) for programs.  Every string that
 * came from a daemon is escaped on the way out, so a task id or a detail
 * cannot forge lines in a terminal or break a JSON reader.  A run's
 * result is one JSON object (DESIGN.md), built with jansson.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <sodium.h>

#include "policy.h"
#include "util.h"
#include "sbxctl.h"

void
print_iso_time(char *buf, size_t len, int64_t sec, long nsec)
{
	struct tm	 tm;
	time_t		 t = (time_t)sec;
	char		 base[32];

	if (gmtime_r(&t, &tm) == NULL) {
		snprintf(buf, len, "%" PRId64, sec);
		return;
	}
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	if (nsec < 0)
		snprintf(buf, len, "%sZ", base);
	else
		snprintf(buf, len, "%s.%03ldZ", base, nsec / 1000000);
}

/* Plain when it is unambiguous in YAML, double-quoted otherwise. */
void
print_yaml_scalar(FILE *fp, const char *s)
{
	int	 plain = *s != '\0';

	for (const char *p = s; *p != '\0' && plain; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		    *p == '-' || (*p == '@' && p != s) || *p == '/'))
			plain = 0;
	if (*s == '-' || *s == '.')
		plain = 0;
	if (plain) {
		fputs(s, fp);
		return;
	}
	print_json_string(fp, s);	/* a JSON string is a YAML scalar */
}

void
print_json_string(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", fp);
			break;
		case '\\':
			fputs("\\\\", fp);
			break;
		case '\n':
			fputs("\\n", fp);
			break;
		case '\t':
			fputs("\\t", fp);
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(fp, "\\u%04x", *p);
			else
				fputc(*p, fp);
		}
	}
	fputc('"', fp);
}

/* Table cells: control characters become '?', empty becomes '-'. */
static void
print_cell(FILE *fp, const char *s, int width)
{
	int	 n = 0;

	if (s == NULL || *s == '\0')
		s = "-";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++)
		fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, fp);
	for (; n < width; n++)
		fputc(' ', fp);
}

static void
print_yaml_list(FILE *fp, char **v, size_t n)
{
	fputc('[', fp);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			fputs(", ", fp);
		print_yaml_scalar(fp, v[i]);
	}
	fputc(']', fp);
}

static void
print_json_list(FILE *fp, char **v, size_t n)
{
	fputc('[', fp);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			fputs(", ", fp);
		print_json_string(fp, v[i]);
	}
	fputc(']', fp);
}

static void
print_cpus(FILE *fp, uint32_t milli)
{
	if (milli % 1000 == 0)
		fprintf(fp, "%u", milli / 1000);
	else {
		char	 buf[32];
		size_t	 n;

		snprintf(buf, sizeof(buf), "%u.%03u", milli / 1000,
		    milli % 1000);
		n = strlen(buf);
		while (buf[n - 1] == '0')
			buf[--n] = '\0';
		fputs(buf, fp);
	}
}

void
print_compiled(FILE *fp, const Sbx__V1__CompileReply *r, int json)
{
	char	*yaml = NULL, when[64];

	if (r->policy != NULL)
		yaml = policy_to_yaml(r->policy);
	print_iso_time(when, sizeof(when), r->expires_at, -1);
	if (json) {
		fputs("{\"policy\": {\"name\": ", fp);
		print_json_string(fp, r->policy ? r->policy->name : "");
		fprintf(fp, ", \"version\": %u, \"hash\": ",
		    r->policy ? r->policy->version : 0);
		print_json_string(fp, r->policy_hash);
		fputs("}, \"execution_id\": ", fp);
		print_json_string(fp, r->execution_id);
		fputs(", \"expires\": ", fp);
		print_json_string(fp, when);
		fputs(", \"policy_yaml\": ", fp);
		print_json_string(fp, yaml ? yaml : "");
		fputs("}\n", fp);
	} else {
		if (yaml != NULL) {
			fputs(yaml, fp);
			if (*yaml != '\0' && yaml[strlen(yaml) - 1] != '\n')
				fputc('\n', fp);
		}
		fprintf(fp, "hash: %s\n", r->policy_hash);
		fprintf(fp, "execution: %s\n", r->execution_id);
		fprintf(fp, "expires: %s\n", when);
	}
	free(yaml);
}

/* The same shape `entitlement import` reads, so a list can be edited and
 * imported back. */
void
print_entitlements(FILE *fp, const Sbx__V1__Entitlements *es, int json)
{
	static const char *const names[] = {
		"memory_mb", "pids", "wall_seconds", "scratch_mb"
	};

	if (json)
		fputs("{\"entitlements\": [", fp);
	else
		fputs(es->n_entitlements ? "entitlements:\n" :
		    "entitlements: []\n", fp);
	for (size_t i = 0; i < es->n_entitlements; i++) {
		const Sbx__V1__Entitlement	*e = es->entitlements[i];
		const Sbx__V1__Limits		*l = e->max_limits;
		uint32_t			 vals[4] = { 0 };
		int				 any = 0;

		if (l != NULL) {
			vals[0] = l->memory_mb;
			vals[1] = l->pids;
			vals[2] = l->wall_seconds;
			vals[3] = l->scratch_mb;
		}
		if (json) {
			fputs(i ? ",\n  {\"tenant\": " : "\n  {\"tenant\": ",
			    fp);
			print_json_string(fp, e->tenant);
			fputs(", \"user\": ", fp);
			print_json_string(fp, e->user);
			fputs(", \"datasets\": ", fp);
			print_json_list(fp, e->datasets, e->n_datasets);
			fputs(", \"hosts\": ", fp);
			print_json_list(fp, e->hosts, e->n_hosts);
			fputs(", \"plan\": {", fp);
			if (l != NULL && l->cpus_milli) {
				fputs("\"cpus\": ", fp);
				print_cpus(fp, l->cpus_milli);
				any = 1;
			}
			for (size_t k = 0; k < 4; k++)
				if (vals[k]) {
					fprintf(fp, "%s\"%s\": %u",
					    any ? ", " : "", names[k],
					    vals[k]);
					any = 1;
				}
			fputs("}}", fp);
			continue;
		}
		fputs("  - tenant: ", fp);
		print_yaml_scalar(fp, e->tenant);
		fputs("\n    user: ", fp);
		print_yaml_scalar(fp, e->user);
		fputs("\n    datasets: ", fp);
		print_yaml_list(fp, e->datasets, e->n_datasets);
		fputs("\n    hosts: ", fp);
		print_yaml_list(fp, e->hosts, e->n_hosts);
		fputs("\n    plan: {", fp);
		if (l != NULL && l->cpus_milli) {
			fputs("cpus: ", fp);
			print_cpus(fp, l->cpus_milli);
			any = 1;
		}
		for (size_t k = 0; k < 4; k++)
			if (vals[k]) {
				fprintf(fp, "%s%s: %u", any ? ", " : "",
				    names[k], vals[k]);
				any = 1;
			}
		fputs("}\n", fp);
	}
	if (json)
		fputs(es->n_entitlements ? "\n]}\n" : "]}\n", fp);
}

void
print_templates(FILE *fp, const Sbx__V1__Templates *ts, int json)
{
	int	 wname = 4;

	if (json) {
		fputs("{\"templates\": [", fp);
		for (size_t i = 0; i < ts->n_templates; i++) {
			const Sbx__V1__TemplateInfo	*t = ts->templates[i];

			fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", fp);
			print_json_string(fp, t->name);
			fprintf(fp, ", \"version\": %u, \"hash\": ",
			    t->version);
			print_json_string(fp, t->hash);
			fputs(", \"file\": ", fp);
			print_json_string(fp, t->file);
			fputs(", \"active_for\": ", fp);
			print_json_list(fp, t->active_for, t->n_active_for);
			fputc('}', fp);
		}
		fputs(ts->n_templates ? "\n]}\n" : "]}\n", fp);
		return;
	}
	for (size_t i = 0; i < ts->n_templates; i++)
		if ((int)strlen(ts->templates[i]->name) > wname)
			wname = (int)strlen(ts->templates[i]->name);
	fprintf(fp, "%-*s  %-7s  %-16s  %-16s  %s\n", wname, "NAME", "VERSION",
	    "HASH", "ACTIVE-FOR", "FILE");
	for (size_t i = 0; i < ts->n_templates; i++) {
		const Sbx__V1__TemplateInfo	*t = ts->templates[i];
		char				 active[256] = "", hash[17];
		size_t				 off = 0;

		for (size_t k = 0; k < t->n_active_for &&
		    off < sizeof(active); k++) {
			int	 w = snprintf(active + off,
			    sizeof(active) - off, "%s%s", k ? "," : "",
			    t->active_for[k]);

			if (w < 0)
				break;
			off += (size_t)w;
		}
		snprintf(hash, sizeof(hash), "%s", t->hash);
		print_cell(fp, t->name, wname);
		fprintf(fp, "  %-7u  ", t->version);
		print_cell(fp, hash, 16);
		fputs("  ", fp);
		print_cell(fp, active, 16);
		fputs("  ", fp);
		print_cell(fp, t->file, 0);
		fputc('\n', fp);
	}
}

void
print_template(FILE *fp, const Sbx__V1__TemplateReply *r)
{
	char	*yaml;

	if (r->info != NULL) {
		fprintf(fp, "# template %s version %u\n", r->info->name,
		    r->info->version);
		fprintf(fp, "# hash %s\n", r->info->hash);
		if (r->info->file[0] != '\0')
			fprintf(fp, "# file %s\n", r->info->file);
		for (size_t k = 0; k < r->info->n_active_for; k++)
			fprintf(fp, "# active for task type %s\n",
			    r->info->active_for[k]);
	}
	if (r->policy == NULL)
		return;
	yaml = policy_to_yaml(r->policy);
	fputs(yaml, fp);
	if (*yaml != '\0' && yaml[strlen(yaml) - 1] != '\n')
		fputc('\n', fp);
	free(yaml);
}

void
print_audit(FILE *fp, Sbx__V1__AuditEvent *const *ev, size_t n, int json)
{
	char	 when[64];

	if (json) {
		fputs("{\"events\": [", fp);
		for (size_t i = 0; i < n; i++) {
			const Sbx__V1__AuditEvent	*e = ev[i];

			print_iso_time(when, sizeof(when),
			    e->time_ns / 1000000000,
			    (long)(e->time_ns % 1000000000));
			fputs(i ? ",\n  {\"time\": " : "\n  {\"time\": ", fp);
			print_json_string(fp, when);
			fprintf(fp, ", \"seq\": %" PRIu64 ", \"daemon\": ",
			    e->seq);
			print_json_string(fp, e->daemon);
			fputs(", \"action\": ", fp);
			print_json_string(fp, e->action);
			fputs(", \"rule\": ", fp);
			print_json_string(fp, e->rule);
			fputs(", \"task_id\": ", fp);
			print_json_string(fp, e->task_id);
			fputs(", \"execution_id\": ", fp);
			print_json_string(fp, e->execution_id);
			fputs(", \"policy_hash\": ", fp);
			print_json_string(fp, e->policy_hash);
			fputs(", \"actor\": ", fp);
			print_json_string(fp, e->actor);
			fputs(", \"traceparent\": ", fp);
			print_json_string(fp, e->traceparent);
			fputs(", \"detail\": ", fp);
			print_json_string(fp, e->detail);
			fputc('}', fp);
		}
		fputs(n ? "\n]}\n" : "]}\n", fp);
		return;
	}
	/* The hash is shown in full: it is what a reader greps for. */
	fprintf(fp, "%-24s  %-11s  %-11s  %-20s  %-26s  %-64s  %s\n", "TIME",
	    "DAEMON", "ACTION", "RULE", "EXECUTION", "HASH", "DETAIL");
	for (size_t i = 0; i < n; i++) {
		const Sbx__V1__AuditEvent	*e = ev[i];

		print_iso_time(when, sizeof(when), e->time_ns / 1000000000,
		    (long)(e->time_ns % 1000000000));
		print_cell(fp, when, 24);
		fputs("  ", fp);
		print_cell(fp, e->daemon, 11);	/* "launchd-sbx" */
		fputs("  ", fp);
		print_cell(fp, e->action, 11);
		fputs("  ", fp);
		print_cell(fp, e->rule, 20);
		fputs("  ", fp);
		print_cell(fp, e->execution_id, 26);
		fputs("  ", fp);
		print_cell(fp, e->policy_hash, 64);
		fputs("  ", fp);
		print_cell(fp, e->detail, 0);
		/* Last, so the columns before it stay where they were. */
		if (e->traceparent[0] != '\0') {
			fputs("  traceparent ", fp);
			print_cell(fp, e->traceparent, 0);
		}
		fputc('\n', fp);
	}
}

void
print_verify(FILE *fp, Sbx__V1__AuditVerifyReply *const *v, size_t n,
    int json)
{
	if (json)
		fputs("{\"chains\": [", fp);
	for (size_t i = 0; i < n; i++) {
		const Sbx__V1__AuditVerifyReply	*r = v[i];

		if (json) {
			fputs(i ? ",\n  {\"daemon\": " : "\n  {\"daemon\": ",
			    fp);
			print_json_string(fp, r->daemon);
			fprintf(fp, ", \"ok\": %s, \"records\": %" PRIu64,
			    r->ok ? "true" : "false", r->records);
			if (!r->ok) {
				fprintf(fp, ", \"first_bad_seq\": %" PRIu64
				    ", \"problem\": ", r->first_bad_seq);
				print_json_string(fp, r->problem);
			}
			fputc('}', fp);
			continue;
		}
		print_cell(fp, r->daemon, 0);
		if (r->ok)
			fprintf(fp, ": ok %" PRIu64 " records\n", r->records);
		else {
			fprintf(fp, ": BROKEN at seq %" PRIu64 ": ",
			    r->first_bad_seq);
			print_cell(fp, r->problem, 0);
			fputc('\n', fp);
		}
	}
	if (json)
		fputs(n ? "\n]}\n" : "]}\n", fp);
}

/* ---- run results (jansson) ---- */

/*
 * Bytes from the sandbox as a JSON string: JSON holds only Unicode, so
 * each byte that is not part of valid UTF-8 becomes U+FFFD (visible, and
 * never an escape the reader might take for something else).
 */
static json_t *
print_json_bytes(const uint8_t *p, size_t len)
{
	json_t	*j;
	char	*s;
	size_t	 i = 0, o = 0, need, k;
	uint32_t cp;

	s = xmalloc(len * 3 + 1);
	while (i < len) {
		uint8_t	b = p[i];

		if (b < 0x80) {
			/* NUL cannot live in a C string: replace it too. */
			if (b == 0)
				goto bad;
			s[o++] = (char)b;
			i++;
			continue;
		}
		if ((b & 0xe0) == 0xc0) {
			need = 1;
			cp = b & 0x1f;
		} else if ((b & 0xf0) == 0xe0) {
			need = 2;
			cp = b & 0x0f;
		} else if ((b & 0xf8) == 0xf0) {
			need = 3;
			cp = b & 0x07;
		} else
			goto bad;
		if (need >= len - i)
			goto bad;
		for (k = 1; k <= need; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				goto bad;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		/* Overlong forms, surrogates and values past U+10FFFF. */
		if ((need == 1 && cp < 0x80) || (need == 2 && cp < 0x800) ||
		    (need == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			goto bad;
		memcpy(s + o, p + i, need + 1);
		o += need + 1;
		i += need + 1;
		continue;
	bad:
		memcpy(s + o, "\xef\xbf\xbd", 3);
		o += 3;
		i++;
	}
	s[o] = '\0';
	j = json_stringn(s, o);
	free(s);
	return j != NULL ? j : json_string("");
}

static int
print_is_text(const char *type)
{
	return strncmp(type, "text/", 5) == 0 ||
	    strcmp(type, "application/json") == 0;
}

static json_t *
print_json_base64(const uint8_t *p, size_t n)
{
	size_t	 len = sodium_base64_encoded_len(n,
	    sodium_base64_VARIANT_ORIGINAL);
	char	*b = xmalloc(len);
	json_t	*j;

	sodium_bin2base64(b, len, p, n, sodium_base64_VARIANT_ORIGINAL);
	j = json_string(b);
	free(b);
	return j;
}

static json_t *
print_json_strv(char **v, size_t n)
{
	json_t	*a = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

/* What gated took out of a text, as a JSON object (NULL: nothing). */
static json_t *
print_text_report(const Sbx__V1__TextReport *t)
{
	json_t	*o;

	if (t == NULL)
		return NULL;
	o = json_object();
	json_object_set_new(o, "controls_removed",
	    json_integer(t->controls_removed));
	json_object_set_new(o, "invisible_removed",
	    json_integer(t->invisible_removed));
	json_object_set_new(o, "invalid_replaced",
	    json_integer(t->invalid_replaced));
	json_object_set_new(o, "links_neutralised",
	    json_integer(t->links_neutralised));
	return o;
}

void
print_result(FILE *fp, const Sbx__V1__ExecutionResult *r)
{
	json_t		*o, *pol, *u, *outs, *drop, *den, *e;
	const Sbx__V1__Usage *us = r->usage;
	char		*text;

	o = json_object();
	json_object_set_new(o, "task_id", json_string(r->task_id));
	json_object_set_new(o, "execution_id", json_string(r->execution_id));
	if (r->traceparent[0] != '\0')
		json_object_set_new(o, "traceparent",
		    json_string(r->traceparent));
	pol = json_object();
	if (r->policy != NULL) {
		json_object_set_new(pol, "name", json_string(r->policy->name));
		json_object_set_new(pol, "version",
		    json_integer(r->policy->version));
		json_object_set_new(pol, "hash", json_string(r->policy->hash));
	}
	json_object_set_new(o, "policy", pol);
	json_object_set_new(o, "exit_code", json_integer(r->exit_code));
	json_object_set_new(o, "signal", json_integer(r->signal));
	json_object_set_new(o, "limits_hit",
	    print_json_strv(r->limits_hit, r->n_limits_hit));
	u = json_object();
	json_object_set_new(u, "cpu_ms", json_integer(us ?
	    (json_int_t)us->cpu_ms : 0));
	json_object_set_new(u, "peak_memory_kb", json_integer(us ?
	    (json_int_t)us->peak_memory_kb : 0));
	json_object_set_new(u, "wall_ms", json_integer(us ?
	    (json_int_t)us->wall_ms : 0));
	json_object_set_new(u, "egress_bytes_out", json_integer(us ?
	    (json_int_t)us->egress_bytes_out : 0));
	json_object_set_new(u, "egress_bytes_in", json_integer(us ?
	    (json_int_t)us->egress_bytes_in : 0));
	json_object_set_new(u, "egress_requests", json_integer(us ?
	    (json_int_t)us->egress_requests : 0));
	/* egressd never said what the run sent: its task counts the whole
	 * allowance as spent (policyd). */
	if (us != NULL && us->egress_unknown)
		json_object_set_new(u, "egress_unknown", json_true());
	json_object_set_new(o, "usage", u);
	json_object_set_new(o, "stdout", print_json_bytes(r->stdout.data,
	    r->stdout.len));
	json_object_set_new(o, "stderr", print_json_bytes(r->stderr.data,
	    r->stderr.len));
	json_object_set_new(o, "stdout_truncated",
	    json_boolean(r->stdout_truncated));
	json_object_set_new(o, "stderr_truncated",
	    json_boolean(r->stderr_truncated));
	if (r->stdout_report != NULL)
		json_object_set_new(o, "stdout_report",
		    print_text_report(r->stdout_report));
	if (r->stderr_report != NULL)
		json_object_set_new(o, "stderr_report",
		    print_text_report(r->stderr_report));
	outs = json_array();
	for (size_t i = 0; i < r->n_outputs; i++) {
		const Sbx__V1__ReleasedOutput *ro = r->outputs[i];

		e = json_object();
		json_object_set_new(e, "name", json_string(ro->name));
		json_object_set_new(e, "type", json_string(ro->type));
		json_object_set_new(e, "bytes", json_integer(
		    (json_int_t)ro->bytes));
		json_object_set_new(e, "where", json_string(ro->where));
		if (ro->sha256[0] != '\0')
			json_object_set_new(e, "sha256",
			    json_string(ro->sha256));
		if (ro->truncated)
			json_object_set_new(e, "truncated", json_true());
		if (ro->text != NULL)
			json_object_set_new(e, "text",
			    print_text_report(ro->text));
		if (ro->csv != NULL) {
			json_t	*c = json_object();

			json_object_set_new(c, "formula_cells",
			    json_integer(ro->csv->formula_cells));
			json_object_set_new(c, "first_row",
			    json_integer(ro->csv->first_row));
			json_object_set_new(c, "first_column",
			    json_integer(ro->csv->first_column));
			json_object_set_new(c, "neutralised",
			    json_boolean(ro->csv->neutralised));
			json_object_set_new(e, "csv_formulas", c);
		}
		/* Content delivered to the agent: text as gated labelled it,
		 * anything else in base64. */
		if (ro->content.len > 0 && print_is_text(ro->type))
			json_object_set_new(e, "content",
			    print_json_bytes(ro->content.data, ro->content.len));
		else if (ro->content.len > 0)
			json_object_set_new(e, "content_base64",
			    print_json_base64(ro->content.data,
			    ro->content.len));
		json_array_append_new(outs, e);
	}
	json_object_set_new(o, "outputs", outs);
	drop = json_array();
	for (size_t i = 0; i < r->n_dropped; i++) {
		e = json_object();
		json_object_set_new(e, "name", json_string(r->dropped[i]->name));
		json_object_set_new(e, "reason",
		    json_string(r->dropped[i]->reason));
		if (r->dropped[i]->name_truncated)
			json_object_set_new(e, "name_truncated", json_true());
		json_array_append_new(drop, e);
	}
	json_object_set_new(o, "dropped", drop);
	if (r->dropped_unlisted != NULL) {
		e = json_object();
		json_object_set_new(e, "entries",
		    json_integer(r->dropped_unlisted->entries));
		json_object_set_new(e, "name_bytes", json_integer(
		    (json_int_t)r->dropped_unlisted->name_bytes));
		json_object_set_new(e, "bytes", json_integer(
		    (json_int_t)r->dropped_unlisted->bytes));
		json_object_set_new(o, "dropped_unlisted", e);
	}
	den = json_array();
	for (size_t i = 0; i < r->n_denials; i++) {
		const Sbx__V1__Denial	*d = r->denials[i];

		e = json_object();
		json_object_set_new(e, "rule", json_string(d->rule));
		json_object_set_new(e, "boundary", json_string(d->boundary));
		json_object_set_new(e, "detail", json_string(d->detail));
		json_array_append_new(den, e);
	}
	json_object_set_new(o, "denials", den);
	text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text != NULL) {
		fputs(text, fp);
		fputc('\n', fp);
		free(text);
	}
	json_decref(o);
}

/* A rate as a percentage with one decimal, or "-" with no executions. */
static void
print_rate(char *buf, size_t len, uint64_t den, uint64_t exec)
{
	if (exec == 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * (double)den /
		    (double)exec);
}

static void
print_rollout_json(FILE *fp, const Sbx__V1__Rollout *r)
{
	fputs("{\"type\": ", fp);
	print_json_string(fp, r->type);
	fputs(", \"template\": ", fp);
	print_json_string(fp, r->template_);
	fprintf(fp, ", \"stable\": %u, \"canary\": %u, \"percent\": %u, "
	    "\"halted\": %s, \"promoted\": %s, \"reason\": ", r->stable,
	    r->canary, r->percent, r->halted ? "true" : "false",
	    r->promoted ? "true" : "false");
	print_json_string(fp, r->reason);
	fprintf(fp, ", \"threshold\": %.3f, \"min_executions\": %u, "
	    "\"stable_executions\": %llu, \"canary_executions\": %llu, "
	    "\"rules\": [", r->threshold, r->min_executions,
	    (unsigned long long)r->stable_executions,
	    (unsigned long long)r->canary_executions);
	for (size_t k = 0; k < r->n_rules; k++) {
		const Sbx__V1__RolloutRule	*u = r->rules[k];

		fputs(k ? ", {\"rule\": " : "{\"rule\": ", fp);
		print_json_string(fp, u->rule);
		fprintf(fp, ", \"stable_denied\": %llu, \"canary_denied\": "
		    "%llu", (unsigned long long)u->stable_denied,
		    (unsigned long long)u->canary_denied);
		if (r->stable_executions > 0)
			fprintf(fp, ", \"stable_rate\": %.4f",
			    (double)u->stable_denied /
			    (double)r->stable_executions);
		if (r->canary_executions > 0)
			fprintf(fp, ", \"canary_rate\": %.4f",
			    (double)u->canary_denied /
			    (double)r->canary_executions);
		fputc('}', fp);
	}
	fputs("]}", fp);
}

void
print_rollouts(FILE *fp, const Sbx__V1__Rollouts *rs, int json)
{
	char	 a[32], b[32];
	int	 w;

	if (json) {
		fputs("{\"rollouts\": [", fp);
		for (size_t i = 0; i < rs->n_rollouts; i++) {
			fputs(i ? ",\n  " : "\n  ", fp);
			print_rollout_json(fp, rs->rollouts[i]);
		}
		fputs(rs->n_rollouts ? "\n]}\n" : "]}\n", fp);
		return;
	}
	if (rs->n_rollouts == 0)
		fputs("no rollouts configured\n", fp);
	for (size_t i = 0; i < rs->n_rollouts; i++) {
		const Sbx__V1__Rollout	*r = rs->rollouts[i];

		if (i > 0)
			fputc('\n', fp);
		fputs("rollout ", fp);
		print_cell(fp, r->type, 0);
		fputs(": template ", fp);
		print_cell(fp, r->template_, 0);
		if (r->promoted)
			fprintf(fp, ", stable %u (promoted)\n", r->stable);
		else
			fprintf(fp, ", stable %u, canary %u at %u%%%s\n",
			    r->stable, r->canary, r->percent,
			    r->halted ? " (HALTED)" : "");
		if (r->reason[0] != '\0') {
			fputs("  reason: ", fp);
			print_cell(fp, r->reason, 0);
			fputc('\n', fp);
		}
		fprintf(fp, "  threshold %.3f, min_executions %u per side\n",
		    r->threshold, r->min_executions);
		w = 10;
		for (size_t k = 0; k < r->n_rules; k++)
			if ((int)strlen(r->rules[k]->rule) > w)
				w = (int)strlen(r->rules[k]->rule);
		snprintf(a, sizeof(a), "STABLE@%u", r->stable);
		if (r->canary != 0)
			snprintf(b, sizeof(b), "CANARY@%u", r->canary);
		else
			snprintf(b, sizeof(b), "CANARY");
		fprintf(fp, "  %-*s  %-22s  %s\n", w, "RULE", a, b);
		snprintf(a, sizeof(a), "%llu",
		    (unsigned long long)r->stable_executions);
		snprintf(b, sizeof(b), "%llu",
		    (unsigned long long)r->canary_executions);
		fprintf(fp, "  %-*s  %-22s  %s\n", w, "executions", a, b);
		for (size_t k = 0; k < r->n_rules; k++) {
			const Sbx__V1__RolloutRule	*u = r->rules[k];
			char	 ra[16], rb[16];

			print_rate(ra, sizeof(ra), u->stable_denied,
			    r->stable_executions);
			print_rate(rb, sizeof(rb), u->canary_denied,
			    r->canary_executions);
			snprintf(a, sizeof(a), "%llu (%s)",
			    (unsigned long long)u->stable_denied, ra);
			snprintf(b, sizeof(b), "%llu (%s)",
			    (unsigned long long)u->canary_denied, rb);
			fputs("  ", fp);
			print_cell(fp, u->rule, w);
			fprintf(fp, "  %-22s  %s\n", a, b);
		}
	}
}
