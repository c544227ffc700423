/*
 * yaml.h: configuration and template loading on libyaml.  A document is
 * read into a small tree that remembers each node's line and column; the
 * accessors below check types and ranges and record an error for every
 * problem (never only the first), each as "file:line:col: key: message".
 * Unknown keys are errors, so a misspelt limit is never silently ignored.
 */
#ifndef SBX_YAML_H
#define SBX_YAML_H

#include <stddef.h>
#include <stdint.h>

enum ynode_type {
	YN_SCALAR,
	YN_MAP,
	YN_SEQ,
};

struct ynode {
	enum ynode_type	  type;
	int		  line;		/* 1-based */
	int		  col;		/* 1-based */
	char		 *scalar;	/* YN_SCALAR: NUL-terminated value */
	int		  quoted;	/* YN_SCALAR: written in quotes */
	/* YN_MAP: keys[i] -> items[i]; YN_SEQ: items[i] */
	struct ynode	**keys;
	struct ynode	**items;
	size_t		  n;
};

struct yerrs {
	char		**msgs;
	size_t		  n;
};

struct ydoc {
	char		 *file;		/* name used in messages */
	struct ynode	 *root;		/* NULL for an empty document */
	struct yerrs	 *errs;		/* where accessor errors go */
};

/*
 * Load one YAML document.  Syntax errors, aliases/anchors (refused: they
 * can blow up), duplicate keys, non-scalar keys and more than one document
 * are recorded in errs and give NULL.  Inputs over 1 MiB are refused.
 */
struct ydoc	*yaml_load_file(const char *path, struct yerrs *);
struct ydoc	*yaml_load_buf(const char *name, const char *buf, size_t len,
		    struct yerrs *);
void		 ydoc_free(struct ydoc *);

void		 yerrs_add(struct yerrs *, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
void		 yerrs_free(struct yerrs *);
/* Record "file:line:col: key: message" for node n (n may be NULL). */
void		 yerr(struct ydoc *, const struct ynode *, const char *key,
		    const char *fmt, ...)
		    __attribute__((format(printf, 4, 5)));

/* Map lookup; NULL if absent or map is not a map. */
struct ynode	*ymap_get(const struct ynode *map, const char *key);
/*
 * Check that node is a map whose keys are all in allowed (NULL-terminated)
 * and that every key in required (NULL-terminated, may be NULL) is
 * present.  `what` names the map in messages ("limits", "network.allow[2]").
 * Returns the number of errors recorded.
 */
int		 ymap_check(struct ydoc *, const struct ynode *, const char *what,
		    const char *const allowed[], const char *const required[]);

/*
 * Typed reads.  Each takes the node holding the value (may be NULL: then
 * nothing is written and 0 is returned, unless the caller made the key
 * required through ymap_check) and the key path for messages.  Return 0 on
 * success, -1 after recording an error.
 */
int	yget_str(struct ydoc *, const struct ynode *, const char *key,
	    const char **out);
int	yget_uint(struct ydoc *, const struct ynode *, const char *key,
	    uint64_t min, uint64_t max, uint64_t *out);
/* Decimal with up to 3 fractional digits, returned in thousandths:
 * "1.5" -> 1500.  Used for cpus. */
int	yget_milli(struct ydoc *, const struct ynode *, const char *key,
	    uint64_t min_milli, uint64_t max_milli, uint64_t *out);
int	yget_bool(struct ydoc *, const struct ynode *, const char *key,
	    int *out);
/* One of choices (NULL-terminated); *out is its index. */
int	yget_enum(struct ydoc *, const struct ynode *, const char *key,
	    const char *const choices[], int *out);
/* A sequence of scalars (a single scalar is NOT accepted). */
int	yget_strseq(struct ydoc *, const struct ynode *, const char *key,
	    const char ***out, size_t *n);	/* *out: malloc'd array of
						   pointers into the doc */

#endif
