/*
 * render.c: `sbxctl render k8s TASKFILE`, the compiled signed policy of a
 * task rendered as Kubernetes objects: a ConfigMap holding the code, a Pod
 * that runs it under the policy's restrictions, and a NetworkPolicy that
 * denies that Pod all ingress and egress.
 *
 * The render trusts nothing it did not verify.  It asks policyd for a
 * preview compile (no execution consumed), checks the grant's Ed25519
 * signature with the trusted public key as launchd-sbx does, its expiry,
 * that it is the preview of this very task (id, tenant, user), and then
 * renders from the policy bytes inside the signed grant, never from the
 * unsigned copy beside it in the reply nor from a template.  What a Pod
 * cannot express faithfully is refused with a sentence naming it: the
 * render is never weaker than the policy (DESIGN.md invariants 3 and 5).
 * Output is deterministic: the same policy and task give the same bytes
 * (nothing from the clock, the execution id or the key goes in).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <yaml.h>

#include "frame.h"
#include "log.h"
#include "policy.h"
#include "sign.h"
#include "util.h"
#include "yaml.h"
#include "sbxctl.h"

#define RENDER_REPLY_MAX	(4 * 1024 * 1024)
/* A ConfigMap holds at most 1 MiB; the code goes in base64 (4/3). */
#define RENDER_CODE_MAX		(700 * 1024)
#define RENDER_DNS_LABEL_MAX	63

/* Node-side paths the deploy/k8s DaemonSet provides (deploy/k8s/README). */
#define RENDER_INIT_HOST	"/var/lib/sbx/k8s/sbx-init"
#define RENDER_EGRESS_HOST	"/run/sbx/k8s/egress"
#define RENDER_SECCOMP		"sbx/sandbox.json"
#define RENDER_INIT		"/run/sbx/init"
#define RENDER_EGRESS_DIR	"/run/sbx/egress"
#define RENDER_PROXY		"http://127.0.0.1:3128"
/* A node label whose value is the kubelet's podPidsLimit there. */
#define RENDER_PIDS_LABEL	"sbx/pod-pids-limit"
#define RENDER_NODE_LABEL	"sbx/node"

struct render {
	const Sbx__V1__Task		*task;
	const Sbx__V1__PolicyGrant	*grant;
	const Sbx__V1__Policy		*pol;
	const char			*interp;
	char				 err[512];
};

static const char render_usage[] =
    "render takes k8s, then [-o yaml|json] [--key pubfile] and one task file";

static int
render_refuse(struct render *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
render_refuse(struct render *r, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* 1 if s is a Kubernetes DNS label of at most max characters:
 * [a-z0-9]([-a-z0-9]*[a-z0-9])?. */
static int
render_dns_label(const char *s, size_t max)
{
	size_t	 n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char	 c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    (c == '-' && i != 0 && i != n - 1)))
			return 0;
	}
	return 1;
}

/* 1 if s is a Kubernetes DNS subdomain: dot-separated labels, at most
 * 253 characters. */
static int
render_dns_subdomain(const char *s)
{
	char	*copy, *p, *lab;
	int	 ok = 1;

	if (strlen(s) == 0 || strlen(s) > 253)
		return 0;
	copy = xstrdup(s);
	for (p = copy; ok && (lab = strsep(&p, ".")) != NULL;)
		ok = render_dns_label(lab, RENDER_DNS_LABEL_MAX);
	free(copy);
	return ok;
}

static const char *
render_interpreter(const char *code_name)
{
	const char	*dot = strrchr(code_name, '.');

	/* The same two launchd-sbx runs (run.c). */
	if (dot != NULL && strcmp(dot, ".py") == 0)
		return "python3";
	if (dot != NULL && strcmp(dot, ".sh") == 0)
		return "/bin/sh";
	return NULL;
}

static int
render_has_egress(const Sbx__V1__Policy *p)
{
	return p->network != NULL && p->network->n_allow > 0;
}

/*
 * Everything a Pod cannot carry as the policy says is refused here, before
 * anything is built.  0, or -1 with r->err set.
 */
static int
render_check(struct render *r)
{
	const Sbx__V1__Policy	*p = r->pol;
	const Sbx__V1__Task	*t = r->task;
	const Sbx__V1__Limits	*l = p->limits;
	const char		*at;

	if (!render_dns_label(t->id, RENDER_DNS_LABEL_MAX - 4))
		return render_refuse(r, "task id \"%s\" is not a Kubernetes "
		    "name: lower-case letters, digits and '-', at most %d "
		    "characters, a letter or digit at each end", t->id,
		    RENDER_DNS_LABEL_MAX - 4);
	if (p->isolation != SBX__V1__ISOLATION__ISOLATION_CONTAINER &&
	    p->isolation != SBX__V1__ISOLATION__ISOLATION_GVISOR &&
	    p->isolation != SBX__V1__ISOLATION__ISOLATION_MICROVM)
		return render_refuse(r, "policy %s@%u: isolation %d has no "
		    "RuntimeClass", p->name, (unsigned)p->isolation,
		    (int)p->isolation);
	/* Kata runs the pod in a VM: a Unix socket on a host path does
	 * not reach through its shared file system, so the egress channel
	 * cannot be the way out, and a pod without it would not be this
	 * policy. */
	if (p->isolation == SBX__V1__ISOLATION__ISOLATION_MICROVM &&
	    render_has_egress(p))
		return render_refuse(r, "policy %s@%u: isolation microvm with "
		    "network rules: kata cannot carry the node's egress socket "
		    "into the VM, so this policy cannot be rendered",
		    p->name, (unsigned)p->version);
	if ((at = strstr(p->image, "@sha256:")) == NULL ||
	    strlen(at + 8) != 64)
		return render_refuse(r, "policy %s@%u: image \"%s\" is not "
		    "pinned by a sha256 digest", p->name, (unsigned)p->version,
		    p->image);
	if (l == NULL || l->cpus_milli == 0 || l->memory_mb == 0 ||
	    l->pids == 0 || l->wall_seconds == 0 || l->scratch_mb == 0)
		return render_refuse(r, "policy %s@%u: a limit (cpus, "
		    "memory_mb, pids, wall_seconds, scratch_mb) is zero or "
		    "missing; a pod without it would be unlimited", p->name,
		    (unsigned)p->version);
	if (l->pids == UINT32_MAX)
		return render_refuse(r, "policy %s@%u: pids limit too large",
		    p->name, (unsigned)p->version);
	for (size_t i = 0; i < p->n_inputs; i++) {
		const char	*d = p->inputs[i]->dataset;

		if (strlen(d) > 253 - 12 || !render_dns_subdomain(d))
			return render_refuse(r, "dataset \"%s\" is not a "
			    "Kubernetes name (its volume claim is "
			    "sbx-dataset-%s): lower-case letters, digits, "
			    "'-' and '.'", d, d);
	}
	if (t->code_name == NULL || *t->code_name == '\0' ||
	    (r->interp = render_interpreter(t->code_name)) == NULL)
		return render_refuse(r, "code \"%s\" is neither .py nor .sh",
		    t->code_name ? t->code_name : "");
	/* The file's name is the ConfigMap's key: [-._a-zA-Z0-9]. */
	if (strspn(t->code_name, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") !=
	    strlen(t->code_name))
		return render_refuse(r, "code file name \"%s\" is not a "
		    "ConfigMap key: letters, digits, '-', '_' and '.'",
		    t->code_name);
	if (t->code.len > RENDER_CODE_MAX)
		return render_refuse(r, "code %s is %zu bytes: a ConfigMap "
		    "holds at most %d", t->code_name, t->code.len,
		    RENDER_CODE_MAX);
	return 0;
}

/* ---- building the objects (jansson keeps keys in insertion order) ---- */

static void
render_set(json_t *o, const char *k, json_t *v)
{
	if (json_object_set_new(o, k, v) == -1)
		fatalx("render: out of memory");
}

static void
render_setstr(json_t *o, const char *k, const char *v)
{
	render_set(o, k, json_string(v));
}

static void
render_push(json_t *a, json_t *v)
{
	if (json_array_append_new(a, v) == -1)
		fatalx("render: out of memory");
}

static json_t *
render_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static json_t *
render_strf(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;
	json_t	*v;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		fatalx("render: out of memory");
	va_end(ap);
	v = json_string(s);
	free(s);
	return v;
}

static const char *
render_runtime_class(Sbx__V1__Isolation i)
{
	switch (i) {
	case SBX__V1__ISOLATION__ISOLATION_GVISOR:
		return "gvisor";
	case SBX__V1__ISOLATION__ISOLATION_MICROVM:
		return "kata";
	default:
		return "runc";
	}
}

static json_t *
render_labels(struct render *r)
{
	json_t	*l = json_object();
	char	 h[33];

	render_setstr(l, "app.kubernetes.io/name", "sbx-sandbox");
	render_setstr(l, "sbx/task", r->task->id);
	/* A label value holds 63 characters; the full hash is in the
	 * annotations, its first 128 bits here for selection. */
	memcpy(h, r->grant->policy_hash, 32);
	h[32] = '\0';
	render_setstr(l, "sbx/policy-hash-128", h);
	return l;
}

static json_t *
render_annotations(struct render *r)
{
	json_t	*a = json_object();

	render_setstr(a, "sbx/policy-hash", r->grant->policy_hash);
	render_setstr(a, "sbx/policy-name", r->pol->name);
	render_set(a, "sbx/policy-version", render_strf("%u",
	    (unsigned)r->pol->version));
	render_setstr(a, "sbx/isolation",
	    policy_isolation_name(r->pol->isolation));
	render_setstr(a, "sbx/task-id", r->task->id);
	render_setstr(a, "sbx/tenant", r->grant->tenant);
	render_setstr(a, "sbx/user", r->grant->user);
	render_set(a, "sbx/pids-limit", render_strf("%u",
	    (unsigned)r->pol->limits->pids));
	return a;
}

static json_t *
render_meta(struct render *r, const char *prefix)
{
	json_t	*m = json_object();

	render_set(m, "name", render_strf("%s%s", prefix, r->task->id));
	render_set(m, "labels", render_labels(r));
	render_set(m, "annotations", render_annotations(r));
	return m;
}

static json_t *
render_configmap(struct render *r)
{
	json_t	*o = json_object(), *bd = json_object();
	size_t	 blen;
	char	*b64;

	render_setstr(o, "apiVersion", "v1");
	render_setstr(o, "kind", "ConfigMap");
	render_set(o, "metadata", render_meta(r, "sbx-code-"));
	render_set(o, "immutable", json_true());
	blen = sodium_base64_encoded_len(r->task->code.len,
	    sodium_base64_VARIANT_ORIGINAL);
	b64 = xmalloc(blen);
	sodium_bin2base64(b64, blen, r->task->code.data, r->task->code.len,
	    sodium_base64_VARIANT_ORIGINAL);
	render_setstr(bd, r->task->code_name, b64);
	free(b64);
	render_set(o, "binaryData", bd);
	return o;
}

static json_t *
render_seccomp(void)
{
	json_t	*s = json_object();

	render_setstr(s, "type", "Localhost");
	render_setstr(s, "localhostProfile", RENDER_SECCOMP);
	return s;
}

static json_t *
render_env(const char *name, const char *value)
{
	json_t	*e = json_object();

	render_setstr(e, "name", name);
	render_setstr(e, "value", value);
	return e;
}

static json_t *
render_mount(const char *name, const char *path, const char *sub)
{
	json_t	*m = json_object();

	render_setstr(m, "name", name);
	render_setstr(m, "mountPath", path);
	if (sub != NULL)
		render_setstr(m, "subPath", sub);
	render_set(m, "readOnly", json_true());
	return m;
}

static json_t *
render_host_path(const char *name, const char *path, const char *type)
{
	json_t	*v = json_object(), *hp = json_object();

	render_setstr(hp, "path", path);
	render_setstr(hp, "type", type);
	render_setstr(v, "name", name);
	render_set(v, "hostPath", hp);
	return v;
}

/* requests equal to limits: the pod is Guaranteed, and nothing above the
 * policy is ever granted. */
static json_t *
render_resources(struct render *r)
{
	const Sbx__V1__Limits	*l = r->pol->limits;
	json_t			*res = json_object(), *lim = json_object();

	render_set(lim, "cpu", render_strf("%um", (unsigned)l->cpus_milli));
	render_set(lim, "memory", render_strf("%uMi", (unsigned)l->memory_mb));
	render_set(lim, "ephemeral-storage", render_strf("%uMi",
	    (unsigned)l->scratch_mb));
	render_set(res, "limits", lim);
	render_set(res, "requests", json_deep_copy(lim));
	return res;
}

static json_t *
render_container(struct render *r)
{
	json_t	*c = json_object(), *cmd = json_array(), *env = json_array();
	json_t	*sc = json_object(), *caps = json_object(), *drop;
	json_t	*mounts = json_array();
	int	 egress = render_has_egress(r->pol);

	render_setstr(c, "name", "sandbox");
	render_setstr(c, "image", r->pol->image);
	/* sbx never pulls (DESIGN.md step 4): the image must be on the node
	 * by digest already. */
	render_setstr(c, "imagePullPolicy", "Never");

	render_push(cmd, json_string(RENDER_INIT));
	if (egress) {
		render_push(cmd, json_string("-s"));
		render_push(cmd, json_string(RENDER_EGRESS_DIR "/egress.sock"));
		render_push(cmd, json_string("-c"));
		render_push(cmd, json_string(RENDER_EGRESS_DIR "/ca.pem"));
	}
	render_push(cmd, json_string("--"));
	render_push(cmd, json_string(r->interp));
	render_push(cmd, render_strf("/code/%s", r->task->code_name));
	render_set(c, "command", cmd);
	render_setstr(c, "workingDir", "/scratch");

	render_push(env, render_env("PATH",
	    "/usr/local/bin:/usr/bin:/bin"));
	render_push(env, render_env("HOME", "/scratch"));
	render_push(env, render_env("TMPDIR", "/scratch"));
	render_push(env, render_env("LANG", "C.UTF-8"));
	render_push(env, render_env("SBX_TASK_ID", r->task->id));
	render_push(env, render_env("SBX_POLICY_HASH", r->grant->policy_hash));
	if (egress) {
		/* sbx-init sets these too; here they are visible in the
		 * manifest a reviewer reads. */
		render_push(env, render_env("HTTP_PROXY", RENDER_PROXY));
		render_push(env, render_env("HTTPS_PROXY", RENDER_PROXY));
		render_push(env, render_env("NO_PROXY", ""));
	}
	render_set(c, "env", env);
	render_set(c, "resources", render_resources(r));

	render_set(sc, "runAsUser", json_integer(65534));
	render_set(sc, "runAsGroup", json_integer(65534));
	render_set(sc, "runAsNonRoot", json_true());
	render_set(sc, "readOnlyRootFilesystem", json_true());
	render_set(sc, "allowPrivilegeEscalation", json_false());
	render_set(sc, "privileged", json_false());
	drop = json_array();
	render_push(drop, json_string("ALL"));
	render_set(caps, "drop", drop);
	render_set(sc, "capabilities", caps);
	render_set(sc, "seccompProfile", render_seccomp());
	render_set(c, "securityContext", sc);

	render_push(mounts, render_mount("sbx-init", RENDER_INIT, NULL));
	if (egress)
		render_push(mounts, render_mount("egress", RENDER_EGRESS_DIR,
		    NULL));
	render_push(mounts, render_mount("code", "/code", NULL));
	for (size_t i = 0; i < r->pol->n_inputs; i++) {
		const char	*d = r->pol->inputs[i]->dataset;
		char		 path[300];
		json_t		*name = render_strf("in-%zu", i);

		bufprintf(path, sizeof(path), "/in/%s", d);
		render_push(mounts, render_mount(json_string_value(name),
		    path, d));
		json_decref(name);
	}
	{
		json_t	*m = json_object();

		render_setstr(m, "name", "scratch");
		render_setstr(m, "mountPath", "/scratch");
		render_push(mounts, m);
	}
	render_set(c, "volumeMounts", mounts);
	return c;
}

static json_t *
render_volumes(struct render *r)
{
	json_t	*vols = json_array(), *v, *o;

	render_push(vols, render_host_path("sbx-init", RENDER_INIT_HOST,
	    "File"));
	/* Directory, not DirectoryOrCreate: the kubelet never makes it, so
	 * a node whose egressd has not opened this task's channel does not
	 * start the pod (fail closed, invariant 7). */
	if (render_has_egress(r->pol)) {
		char	 path[256];

		bufprintf(path, sizeof(path), "%s/%s", RENDER_EGRESS_HOST,
		    r->task->id);
		render_push(vols, render_host_path("egress", path,
		    "Directory"));
	}
	v = json_object();
	o = json_object();
	render_setstr(v, "name", "code");
	render_set(o, "name", render_strf("sbx-code-%s", r->task->id));
	render_set(o, "defaultMode", json_integer(0444));
	render_set(v, "configMap", o);
	render_push(vols, v);
	for (size_t i = 0; i < r->pol->n_inputs; i++) {
		v = json_object();
		o = json_object();
		render_set(v, "name", render_strf("in-%zu", i));
		render_set(o, "claimName", render_strf("sbx-dataset-%s",
		    r->pol->inputs[i]->dataset));
		render_set(o, "readOnly", json_true());
		render_set(v, "persistentVolumeClaim", o);
		render_push(vols, v);
	}
	v = json_object();
	o = json_object();
	render_setstr(v, "name", "scratch");
	render_setstr(o, "medium", "Memory");
	render_set(o, "sizeLimit", render_strf("%uMi",
	    (unsigned)r->pol->limits->scratch_mb));
	render_set(v, "emptyDir", o);
	render_push(vols, v);
	return vols;
}

/* Only nodes that run the sbx DaemonSet, and whose kubelet caps a pod's
 * processes at or below the policy's pids limit (a Pod cannot carry one
 * itself): label value < pids + 1. */
static json_t *
render_affinity(struct render *r)
{
	json_t	*aff = json_object(), *na = json_object(), *req = json_object();
	json_t	*terms = json_array(), *term = json_object(), *exprs;
	json_t	*e, *vals;

	exprs = json_array();
	e = json_object();
	render_setstr(e, "key", RENDER_NODE_LABEL);
	render_setstr(e, "operator", "In");
	vals = json_array();
	render_push(vals, json_string("true"));
	render_set(e, "values", vals);
	render_push(exprs, e);
	e = json_object();
	render_setstr(e, "key", RENDER_PIDS_LABEL);
	render_setstr(e, "operator", "Lt");
	vals = json_array();
	render_push(vals, render_strf("%" PRIu64,
	    (uint64_t)r->pol->limits->pids + 1));
	render_set(e, "values", vals);
	render_push(exprs, e);
	render_set(term, "matchExpressions", exprs);
	render_push(terms, term);
	render_set(req, "nodeSelectorTerms", terms);
	render_set(na, "requiredDuringSchedulingIgnoredDuringExecution", req);
	render_set(aff, "nodeAffinity", na);
	return aff;
}

static json_t *
render_pod(struct render *r)
{
	json_t	*o = json_object(), *spec = json_object(), *psc = json_object();
	json_t	*dns = json_object(), *ns = json_array(), *cs = json_array();

	render_setstr(o, "apiVersion", "v1");
	render_setstr(o, "kind", "Pod");
	render_set(o, "metadata", render_meta(r, "sbx-"));

	render_setstr(spec, "runtimeClassName",
	    render_runtime_class(r->pol->isolation));
	render_setstr(spec, "restartPolicy", "Never");
	render_set(spec, "activeDeadlineSeconds",
	    json_integer(r->pol->limits->wall_seconds));
	render_set(spec, "terminationGracePeriodSeconds", json_integer(0));
	render_set(spec, "automountServiceAccountToken", json_false());
	render_set(spec, "enableServiceLinks", json_false());
	render_set(spec, "hostNetwork", json_false());
	render_set(spec, "hostPID", json_false());
	render_set(spec, "hostIPC", json_false());
	render_set(spec, "shareProcessNamespace", json_false());
	render_setstr(spec, "hostname", "sandbox");
	/* Names are resolved by egressd; nothing in the pod asks a DNS
	 * server, and the NetworkPolicy would drop it anyway. */
	render_setstr(spec, "dnsPolicy", "None");
	render_push(ns, json_string("127.0.0.1"));
	render_set(dns, "nameservers", ns);
	render_set(spec, "dnsConfig", dns);
	render_set(spec, "affinity", render_affinity(r));

	render_set(psc, "runAsUser", json_integer(65534));
	render_set(psc, "runAsGroup", json_integer(65534));
	render_set(psc, "runAsNonRoot", json_true());
	render_set(psc, "seccompProfile", render_seccomp());
	render_set(spec, "securityContext", psc);

	render_push(cs, render_container(r));
	render_set(spec, "containers", cs);
	render_set(spec, "volumes", render_volumes(r));
	render_set(o, "spec", spec);
	return o;
}

static json_t *
render_netpol(struct render *r)
{
	json_t	*o = json_object(), *spec = json_object(), *sel = json_object();
	json_t	*ml = json_object(), *types = json_array();

	render_setstr(o, "apiVersion", "networking.k8s.io/v1");
	render_setstr(o, "kind", "NetworkPolicy");
	render_set(o, "metadata", render_meta(r, "sbx-deny-"));
	render_setstr(ml, "sbx/task", r->task->id);
	render_set(sel, "matchLabels", ml);
	render_set(spec, "podSelector", sel);
	/* Both types and no rule of either: nothing in, nothing out. */
	render_push(types, json_string("Ingress"));
	render_push(types, json_string("Egress"));
	render_set(spec, "policyTypes", types);
	render_set(spec, "ingress", json_array());
	render_set(spec, "egress", json_array());
	render_set(o, "spec", spec);
	return o;
}

/* ---- output ---- */

/* 1 when a plain YAML scalar of s would read back as something other than
 * that string (a number, a bool, null, or YAML syntax). */
static int
render_yaml_needs_quotes(const char *s)
{
	static const char *const words[] = { "y", "n", "yes", "no", "on",
	    "off", "true", "false", "null", "~", NULL };

	if (*s == '\0')
		return 1;
	for (size_t i = 0; words[i] != NULL; i++)
		if (strcasecmp(s, words[i]) == 0)
			return 1;
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
	    *s == '/'))
		return 1;
	for (const char *p = s; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("/._-@", *p) != NULL))
			return 1;
	return 0;
}

static int
render_yaml_scalar(yaml_emitter_t *em, const char *s, const char *tag,
    int quoted)
{
	yaml_event_t	 ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, (yaml_char_t *)tag,
	    (yaml_char_t *)s, (int)strlen(s), !quoted, quoted,
	    quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE))
		return -1;
	return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

static int
render_yaml_node(yaml_emitter_t *em, json_t *v)
{
	yaml_event_t	 ev;
	const char	*k;
	json_t		*x;
	size_t		 i;
	char		 num[32];

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
		    json_object_size(v) ? YAML_BLOCK_MAPPING_STYLE :
		    YAML_FLOW_MAPPING_STYLE) || !yaml_emitter_emit(em, &ev))
			return -1;
		json_object_foreach(v, k, x) {
			if (render_yaml_scalar(em, k, YAML_STR_TAG,
			    render_yaml_needs_quotes(k)) == -1 ||
			    render_yaml_node(em, x) == -1)
				return -1;
		}
		if (!yaml_mapping_end_event_initialize(&ev) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		return 0;
	case JSON_ARRAY:
		if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
		    json_array_size(v) ? YAML_BLOCK_SEQUENCE_STYLE :
		    YAML_FLOW_SEQUENCE_STYLE) || !yaml_emitter_emit(em, &ev))
			return -1;
		json_array_foreach(v, i, x) {
			if (render_yaml_node(em, x) == -1)
				return -1;
		}
		if (!yaml_sequence_end_event_initialize(&ev) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		return 0;
	case JSON_STRING:
		return render_yaml_scalar(em, json_string_value(v),
		    YAML_STR_TAG, render_yaml_needs_quotes(json_string_value(v)));
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		return render_yaml_scalar(em, num, YAML_INT_TAG, 0);
	case JSON_TRUE:
		return render_yaml_scalar(em, "true", YAML_BOOL_TAG, 0);
	case JSON_FALSE:
		return render_yaml_scalar(em, "false", YAML_BOOL_TAG, 0);
	default:
		return render_yaml_scalar(em, "null", YAML_NULL_TAG, 0);
	}
}

static int
render_yaml_write(void *data, unsigned char *buf, size_t len)
{
	return fwrite(buf, 1, len, data) == len;
}

/* One YAML document per object, in a stream kubectl applies as is. */
static int
render_emit_yaml(FILE *fp, json_t *items)
{
	yaml_emitter_t	 em;
	yaml_event_t	 ev;
	json_t		*x;
	size_t		 i;
	int		 rc = -1;

	if (!yaml_emitter_initialize(&em))
		return -1;
	yaml_emitter_set_output(&em, render_yaml_write, fp);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	yaml_emitter_set_indent(&em, 2);
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
	    !yaml_emitter_emit(&em, &ev))
		goto done;
	json_array_foreach(items, i, x) {
		if (!yaml_document_start_event_initialize(&ev, NULL, NULL,
		    NULL, 0) || !yaml_emitter_emit(&em, &ev))
			goto done;
		if (render_yaml_node(&em, x) == -1)
			goto done;
		if (!yaml_document_end_event_initialize(&ev, 1) ||
		    !yaml_emitter_emit(&em, &ev))
			goto done;
	}
	if (!yaml_stream_end_event_initialize(&ev) ||
	    !yaml_emitter_emit(&em, &ev))
		goto done;
	rc = 0;
done:
	if (rc == -1)
		log_warnx("render: YAML emitter: %s",
		    em.problem ? em.problem : "failed");
	yaml_emitter_delete(&em);
	return rc;
}

/* A v1 List, which kubectl applies like the YAML stream. */
static int
render_emit_json(FILE *fp, json_t *items)
{
	json_t	*list = json_object();
	int	 rc;

	render_setstr(list, "apiVersion", "v1");
	render_setstr(list, "kind", "List");
	render_set(list, "items", json_incref(items));
	rc = json_dumpf(list, fp, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (rc == 0)
		fputc('\n', fp);
	json_decref(list);
	return rc;
}

/* ---- the signed policy ---- */

/*
 * The trusted keys: keyfile, else the state directory's policyd.pub and,
 * during a rotation, policyd-previous.pub.  Returns how many were loaded
 * (1 or 2), or -1 (said).
 */
static int
render_keys(const char *state, const char *keyfile, unsigned char pk[2][32])
{
	char	*path, err[512];
	int	 n = 0;

	if (keyfile != NULL)
		path = xstrdup(keyfile);
	else
		xasprintf(&path, "%s/etc/policyd.pub", state);
	if (sign_pubkey_load(path, pk[0], err, sizeof(err)) == -1) {
		log_warnx("%s", err);
		free(path);
		return -1;
	}
	n = 1;
	free(path);
	if (keyfile == NULL) {
		xasprintf(&path, "%s/etc/policyd-previous.pub", state);
		if (access(path, F_OK) == 0) {
			if (sign_pubkey_load(path, pk[1], err,
			    sizeof(err)) == -1) {
				log_warnx("%s", err);
				free(path);
				return -1;
			}
			n = 2;
		}
		free(path);
	}
	return n;
}

/*
 * The grant inside a compile reply, verified: signature by a trusted key,
 * key id and hash (sign_verify_bytes), not expired, a preview, and issued
 * for this task, tenant and user (a valid grant of another task, relayed,
 * is not this one's).  NULL with err set otherwise.
 */
static Sbx__V1__PolicyGrant *
render_verify(const Sbx__V1__CompileReply *cr, const Sbx__V1__Task *t,
    unsigned char pk[2][32], int nkeys, char *err, size_t errlen)
{
	Sbx__V1__PolicyGrant	*g = NULL;

	if (cr->signed_ == NULL || cr->signed_->signature.len == 0) {
		snprintf(err, errlen, "policyd's reply carries no signed "
		    "policy: an unsigned policy is never rendered");
		return NULL;
	}
	for (int i = 0; i < nkeys && g == NULL; i++)
		g = sign_verify_bytes(pk[i], cr->signed_, err, errlen);
	if (g == NULL)
		return NULL;
	if (g->policy == NULL) {
		snprintf(err, errlen, "signed grant carries no policy");
		goto bad;
	}
	if (now_s() >= g->expires_at) {
		snprintf(err, errlen, "signed policy expired");
		goto bad;
	}
	if (!sign_is_preview(g)) {
		snprintf(err, errlen, "signed policy is not a preview (execution "
		    "%s): render asks for one and accepts no other", g->execution_id);
		goto bad;
	}
	if (strcmp(g->task_id, t->id) != 0 || strcmp(g->tenant, t->tenant) != 0 ||
	    strcmp(g->user, t->user) != 0) {
		snprintf(err, errlen, "signed policy was issued for task %s "
		    "(tenant %s, user %s), not this task file's %s (%s, %s)",
		    g->task_id, g->tenant, g->user, t->id, t->tenant, t->user);
		goto bad;
	}
	return g;
bad:
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	return NULL;
}

/* Ask policyd for a preview compile: SBXCTL_OK with *rep set, or a status. */
static int
render_compile(const char *orch_sock, Sbx__V1__Task *t,
    Sbx__V1__Envelope **repp)
{
	Sbx__V1__Envelope	 req = SBX__V1__ENVELOPE__INIT, *rep = NULL;
	Sbx__V1__CompileRequest	 creq = SBX__V1__COMPILE_REQUEST__INIT;
	int			 fd, r;

	*repp = NULL;
	creq.task = t;
	creq.preview = 1;
	frame_env_init(&req, ((uint64_t)getpid() << 32) | 1);
	req.body_case = SBX__V1__ENVELOPE__BODY_COMPILE;
	req.compile = &creq;
	if ((fd = frame_client_connect(orch_sock)) == -1) {
		log_warnx("policyd unreachable: cannot connect to %s: %s",
		    orch_sock, strerror(errno));
		return SBXCTL_UNREACHABLE;
	}
	r = frame_client_call(fd, &req, &rep, RENDER_REPLY_MAX);
	close(fd);
	if (r == -2) {
		log_warnx("policyd at %s sent a reply that does not decode",
		    orch_sock);
		return SBXCTL_ERR;
	}
	if (r == -1) {
		log_warnx("policyd unreachable: %s closed the connection "
		    "without a reply (is uid %u allowed on it?)", orch_sock,
		    (unsigned)getuid());
		return SBXCTL_UNREACHABLE;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR &&
	    rep->error != NULL) {
		log_warnx("policyd refused: %s: %s", rep->error->rule ?
		    rep->error->rule : "", rep->error->message ?
		    rep->error->message : "");
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_POLICY;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_COMPILED ||
	    rep->compiled == NULL) {
		log_warnx("policyd answered with an unexpected message "
		    "(body %d, expected a compile reply)", (int)rep->body_case);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_ERR;
	}
	*repp = rep;
	return SBXCTL_OK;
}

/* sbxctl render k8s [-o yaml|json] [--key pubfile] taskfile */
int
cmd_render(int argc, char **argv, const char *state, const char *orch_sock,
    int json)
{
	struct render		 r;
	struct yerrs		 errs = { 0 };
	Sbx__V1__Task		*t;
	Sbx__V1__Envelope	*rep = NULL;
	Sbx__V1__PolicyGrant	*g = NULL;
	unsigned char		 pk[2][32];
	const char		*keyfile = NULL, *file = NULL;
	json_t			*items = NULL;
	int			 nkeys, rc, i;

	if (argc < 2 || strcmp(argv[1], "k8s") != 0) {
		log_warnx("usage: %s", render_usage);
		return SBXCTL_USAGE;
	}
	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			if (strcmp(argv[i + 1], "json") == 0)
				json = 1;
			else if (strcmp(argv[i + 1], "yaml") == 0)
				json = 0;
			else {
				log_warnx("render: -o takes yaml or json, not "
				    "\"%s\"", argv[i + 1]);
				return SBXCTL_USAGE;
			}
			i++;
		} else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
			keyfile = argv[++i];
		else if (file == NULL && argv[i][0] != '-')
			file = argv[i];
		else {
			log_warnx("usage: %s", render_usage);
			return SBXCTL_USAGE;
		}
	}
	if (file == NULL) {
		log_warnx("usage: %s", render_usage);
		return SBXCTL_USAGE;
	}
	if ((nkeys = render_keys(state, keyfile, pk)) == -1)
		return SBXCTL_ERR;
	if ((t = parse_task_file(file, &errs)) == NULL) {
		for (size_t j = 0; j < errs.n; j++)
			fprintf(stderr, "%s\n", errs.msgs[j]);
		yerrs_free(&errs);
		log_warnx("%s: task file not sent", file);
		return SBXCTL_ERR;
	}
	yerrs_free(&errs);
	if ((rc = render_compile(orch_sock, t, &rep)) != SBXCTL_OK)
		goto done;
	memset(&r, 0, sizeof(r));
	if ((g = render_verify(rep->compiled, t, pk, nkeys, r.err,
	    sizeof(r.err))) == NULL) {
		log_warnx("render refused: %s", r.err);
		rc = SBXCTL_ERR;
		goto done;
	}
	r.task = t;
	r.grant = g;
	r.pol = g->policy;
	if (render_check(&r) == -1) {
		log_warnx("render refused: %s", r.err);
		rc = SBXCTL_POLICY;
		goto done;
	}
	items = json_array();
	render_push(items, render_configmap(&r));
	render_push(items, render_pod(&r));
	render_push(items, render_netpol(&r));
	if ((json ? render_emit_json(stdout, items) :
	    render_emit_yaml(stdout, items)) == -1 || fflush(stdout) == EOF) {
		log_warnx("render: cannot write the output");
		rc = SBXCTL_ERR;
		goto done;
	}
	rc = SBXCTL_OK;
done:
	json_decref(items);
	if (g != NULL)
		sbx__v1__policy_grant__free_unpacked(g, NULL);
	if (rep != NULL)
		sbx__v1__envelope__free_unpacked(rep, NULL);
	sbx__v1__task__free_unpacked(t, NULL);
	return rc;
}
