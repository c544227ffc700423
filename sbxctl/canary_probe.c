/*
 * canary_probe.c: what both halves of `sbxctl canary` use -- the probes
 * (canary.c) and the channel check (canary_channel.c): load a probe
 * program and substitute its targets, submit it through policyd's
 * orchestrator socket and wait for the result, and scan what it printed
 * for its ALLOWED and DENIED lines.  It calls neither half back.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "sbxctl/sbxctl.h"
#include "sbxctl/canary.h"

static uint64_t	canary_request_id;

uint64_t
canary_next_id(void)
{
	return ++canary_request_id;
}

char *
canary_strndup(const char *s, size_t n)
{
	char	*p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* Replace every occurrence of key in *s with val. */
void
canary_subst(char **s, size_t *len, const char *key, const char *val)
{
	size_t	 kl = strlen(key), vl = strlen(val), n = 0;
	char	*p, *out, *w;

	for (p = *s; (p = strstr(p, key)) != NULL; p += kl)
		n++;
	if (n == 0)
		return;
	out = w = xmalloc(*len + n * vl + 1);
	for (p = *s;;) {
		char	*q = strstr(p, key);

		if (q == NULL) {
			strcpy(w, p);
			w += strlen(p);
			break;
		}
		memcpy(w, p, (size_t)(q - p));
		w += q - p;
		memcpy(w, val, vl);
		w += vl;
		p = q + kl;
	}
	free(*s);
	*s = out;
	*len = (size_t)(w - out);
}

void
canary_probe_free(struct canary_probe *p)
{
	free(p->name);
	free(p->code);
	for (size_t i = 0; i < p->negress; i++)
		free(p->egress[i]);
	free(p->limit);
}

/* Read one probe, its expectations from its header comments. */
int
canary_load(const struct canary_opts *o, const char *path,
    const char *name, struct canary_probe *p)
{
	const char	*pre = "# sbx-expect: ";
	char		*line, *save = NULL, *copy;
	size_t		 len;

	memset(p, 0, sizeof(*p));
	if ((p->code = read_file(path, SBXCTL_CODE_MAX, &len)) == NULL) {
		log_warn("canary: %s", path);
		return -1;
	}
	p->name = xstrdup(name);
	p->len = len;
	copy = xstrdup(p->code);
	for (line = strtok_r(copy, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char	 kind[16], what[128];

		if (strncmp(line, pre, strlen(pre)) != 0)
			continue;
		if (sscanf(line + strlen(pre), "%15s %127s", kind, what) != 2) {
			log_warnx("canary: %s: bad expectation \"%s\"", path,
			    line);
			free(copy);
			return -1;
		}
		if (strcmp(kind, "egress") == 0 &&
		    p->negress < CANARY_MAX_EXPECT)
			p->egress[p->negress++] = xstrdup(what);
		else if (strcmp(kind, "limit") == 0 && p->limit == NULL)
			p->limit = xstrdup(what);
		else {
			log_warnx("canary: %s: unknown expectation \"%s\"",
			    path, line);
			free(copy);
			return -1;
		}
	}
	free(copy);
	canary_subst(&p->code, &p->len, "@TARGET@", o->target);
	canary_subst(&p->code, &p->len, "@HOSTPORT@", o->host_port);
	canary_subst(&p->code, &p->len, "@HOSTDNS@", o->host_dns);
	return 0;
}

/* One call; on failure the daemon's words go to *why. */
Sbx__V1__Envelope *
canary_call(const char *path, Sbx__V1__Envelope *req,
    Sbx__V1__Envelope__BodyCase want, char *why, size_t whylen)
{
	Sbx__V1__Envelope	*rep = NULL;
	int			 fd, r;

	req->version = SBX_PROTO_VERSION;
	req->request_id = canary_next_id();
	if ((fd = frame_client_connect(path)) == -1) {
		snprintf(why, whylen, "cannot connect to %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	r = frame_client_call(fd, req, &rep, CANARY_REPLY_MAX);
	close(fd);
	if (r != 0) {
		snprintf(why, whylen, "%s: %s", path, r == -2 ?
		    "reply does not decode" : "closed without a reply "
		    "(is this user allowed on it?)");
		return NULL;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR &&
	    rep->error != NULL) {
		snprintf(why, whylen, "%s%s%s", rep->error->message,
		    rep->error->rule[0] != '\0' ? ": rule " : "",
		    rep->error->rule);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return NULL;
	}
	if (rep->body_case != want) {
		snprintf(why, whylen, "%s: unexpected reply (body %d)", path,
		    (int)rep->body_case);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return NULL;
	}
	return rep;
}

/*
 * Read the probe's stdout: count its DENIED attempts, keep the first
 * ALLOWED line, and whether it reached PROBE-DONE.
 */
void
canary_scan(const ProtobufCBinaryData *out, size_t *denied, char *allowed,
    size_t allowedlen, int *done)
{
	char	*copy = canary_strndup((const char *)out->data, out->len);
	char	*line, *save = NULL;

	*denied = 0;
	*done = 0;
	allowed[0] = '\0';
	for (line = strtok_r(copy, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "PROBE-DONE", 10) == 0)
			*done = 1;
		else if (strncmp(line, "CHECK ", 6) == 0) {
			if (strstr(line, " ALLOWED ") != NULL) {
				if (allowed[0] == '\0')
					snprintf(allowed, allowedlen, "%s",
					    line + 6);
			} else if (strstr(line, " DENIED ") != NULL)
				(*denied)++;
		}
	}
	free(copy);
}
