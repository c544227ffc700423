/*
 * jsonw.h: a small JSON writer for the runtime spec, in plain libc, so
 * that the root monitor can render config.json without a JSON library.
 * It writes what jansson's json_dumps(JSON_INDENT(1) | JSON_SORT_KEYS)
 * writes for the same document: one space of indent per level, ": "
 * after a key, [] and {} when empty, and jansson's escaping.
 *
 * The caller writes an object's keys in sorted (strcmp) order; the writer
 * checks that, and that every string is well-formed UTF-8, and remembers
 * the first failure: jw_finish() then returns NULL with that sentence.
 */
#ifndef SBX_LAUNCHD_JSONW_H
#define SBX_LAUNCHD_JSONW_H

#include <stddef.h>

#define JW_DEPTH	16	/* the spec nests 6 deep */

struct jw {
	char		*buf;
	size_t		 len, cap;
	int		 depth;		/* containers open */
	int		 empty[JW_DEPTH];	/* nothing in it yet */
	const char	*key[JW_DEPTH];	/* its last key; NULL: none */
	int		 afterkey;	/* a key waits for its value */
	char		 error[160];	/* the first failure; "": none */
};

void	 jw_init(struct jw *);
/* Free the text of a writer not finished (or that failed). */
void	 jw_free(struct jw *);
/* The text with a final "\n", malloc'd and NUL-terminated (the caller
 * frees it), its length in *len; or NULL with the first failure in err.
 * The writer is empty afterwards either way. */
char	*jw_finish(struct jw *, size_t *len, char *err, size_t errlen);

void	 jw_obj(struct jw *);
void	 jw_obj_end(struct jw *);
void	 jw_arr(struct jw *);
void	 jw_arr_end(struct jw *);
/* The next key of the open object: after the one before it in strcmp
 * order, as jansson's JSON_SORT_KEYS would put it. */
void	 jw_key(struct jw *, const char *);
void	 jw_str(struct jw *, const char *);
void	 jw_strf(struct jw *, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
void	 jw_int(struct jw *, long long);
void	 jw_bool(struct jw *, int);
/* An array of the strings of a NULL-terminated vector. */
void	 jw_strings(struct jw *, const char *const *);

/* 1 if s is well-formed UTF-8 (what jansson accepts in a string). */
int	 jw_utf8_ok(const char *s);

#endif
