/*
 * parse.c: egressd.yaml into struct egressd_conf, with every check, as a
 * table common/config.c reads.  Every problem is recorded (never only the
 * first) as file:line:col: key: message; unknown keys are errors, and user
 * and group names are resolved here so a typo is reported at start-up
 * rather than when a peer connects.  Relative paths are relative to the
 * config file's directory; the pieces every daemon shares (paths,
 * sockets, peer allowlists) are common/config.c's.
 */
#include <sys/types.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util.h"
#include "yaml.h"
#include "egressd.h"

/* upstream_cas: CA files, each readable now. */
static void
parse_cas(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct egressd_conf	*c = conf;
	const char		**cas = NULL;
	size_t			 ncas = 0;

	if (yget_strseq(doc, n, key, &cas, &ncas) == 0 && ncas > 0) {
		c->upstream_cas = xcalloc(ncas, sizeof(*c->upstream_cas));
		for (size_t i = 0; i < ncas; i++) {
			c->upstream_cas[i] = cfg_path(c->common.dir, cas[i]);
			if (access(c->upstream_cas[i], R_OK) == -1)
				yerr(doc, n, key, "%s: %s",
				    c->upstream_cas[i], strerror(errno));
		}
		c->nupstream_cas = ncas;
	}
	free(cas);
}

static void
parse_cas_free(void *conf)
{
	struct egressd_conf	*c = conf;

	for (size_t i = 0; i < c->nupstream_cas; i++)
		free(c->upstream_cas[i]);
	free(c->upstream_cas);
}

static const struct cfg_key parse_broker[] = {
	CFG_PATHKEY("path", CFG_REQUIRED, struct egressd_conf, broker_path,
	    NULL),
	CFG_KEY("user", CFG_UID, CFG_REQUIRED, struct egressd_conf,
	    broker_uid, 0, 0, 0),
	CFG_END
};

static const struct cfg_key parse_limits[] = {
	CFG_U32("max_conns_per_task", 0, struct egressd_conf,
	    max_conns_per_task, 32, 1, 65536),
	CFG_U32("header_timeout", 0, struct egressd_conf, header_timeout,
	    10, 1, 3600),
	CFG_U32("idle_timeout", 0, struct egressd_conf, idle_timeout,
	    60, 1, 86400),
	CFG_U32("connect_timeout", 0, struct egressd_conf, connect_timeout,
	    10, 1, 3600),
	CFG_U32("max_header_kb", 0, struct egressd_conf, max_header_kb,
	    16, 1, 1024),
	CFG_U32("max_headers", 0, struct egressd_conf, max_headers,
	    64, 1, 1000),
	CFG_U32("denials_per_second", 0, struct egressd_conf,
	    denials_per_second, 20, 1, 100000),
	CFG_END
};

static const struct cfg_key parse_sockets[] = {
	CFG_SOCK("control", 0, struct egressd_conf, control),
	CFG_SOCK("admin", 0, struct egressd_conf, admin),
	CFG_END
};

static const struct cfg_key parse_keys[] = {
	CFG_COMMON_USER,
	CFG_COMMON_STATE_DIR,
	CFG_PATHKEY("run_dir", 0, struct egressd_conf, run_dir, NULL),
	CFG_PATHKEY("public_key", CFG_REQUIRED, struct egressd_conf,
	    public_key, NULL),
	CFG_PATHKEY("public_key_previous", 0, struct egressd_conf,
	    public_key_previous, NULL),
	CFG_PATHKEY("resolv_conf", 0, struct egressd_conf, resolv_conf,
	    NULL),
	CFG_PATHKEY("hosts_file", 0, struct egressd_conf, hosts_file, NULL),
	CFG_OWN("upstream_cas", 0, parse_cas, parse_cas_free),
	CFG_SUBMAP("broker", 0, parse_broker),
	CFG_SUBMAP("limits", 0, parse_limits),
	CFG_SUBMAP("sockets", CFG_REQUIRED, parse_sockets),
	CFG_COMMON_METRICS,
	CFG_END
};

const struct cfg_table parse_table = {
	"egressd.yaml", sizeof(struct egressd_conf), parse_keys, NULL
};
