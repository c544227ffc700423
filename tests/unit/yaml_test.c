/*
 * yaml_test.c: the YAML loader and its accessors.  Every error an operator
 * sees names the file, line, column and key; every error in a file is
 * reported, not only the first; anchors, aliases, tags, duplicate keys,
 * extra documents, deep nesting and huge inputs are refused; numbers are
 * read strictly.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "yaml.h"

static struct ydoc *
load(const char *text, struct yerrs *e)
{
	return yaml_load_buf("t.yaml", text, strlen(text), e);
}

/* 1 if some message in e contains needle. */
static int
has(const struct yerrs *e, const char *needle)
{
	for (size_t i = 0; i < e->n; i++)
		if (strstr(e->msgs[i], needle) != NULL)
			return 1;
	return 0;
}

Test(yaml, tree_remembers_positions)
{
	struct yerrs	 e = { 0 };
	struct ydoc	*d;
	struct ynode	*lim, *pids, *seq;

	d = load("name: x\nlimits:\n  pids: 128\nlist: [a, \"b\"]\n", &e);
	cr_assert_not_null(d);
	cr_assert_eq(e.n, 0);
	cr_assert_eq(d->root->type, YN_MAP);
	lim = ymap_get(d->root, "limits");
	cr_assert_not_null(lim);
	cr_assert_eq(lim->type, YN_MAP);
	pids = ymap_get(lim, "pids");
	cr_assert_str_eq(pids->scalar, "128");
	cr_assert_eq(pids->line, 3);
	cr_assert_eq(pids->col, 9);
	seq = ymap_get(d->root, "list");
	cr_assert_eq(seq->type, YN_SEQ);
	cr_assert_eq(seq->n, 2);
	cr_assert_eq(seq->items[0]->quoted, 0);
	cr_assert_eq(seq->items[1]->quoted, 1);
	cr_assert_null(ymap_get(d->root, "absent"));
	ydoc_free(d);
}

Test(yaml, empty_document_has_no_root)
{
	struct yerrs	 e = { 0 };
	struct ydoc	*d = load("# only a comment\n", &e);

	cr_assert_not_null(d);
	cr_assert_null(d->root);
	cr_assert_eq(e.n, 0);
	ydoc_free(d);
}

Test(yaml, syntax_error_names_file_line_col)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(load("a: 1\nb: [1, 2\nc: 3\n", &e));
	cr_assert_eq(e.n, 1);
	cr_assert(strncmp(e.msgs[0], "t.yaml:", 7) == 0, "%s", e.msgs[0]);
	cr_assert(strstr(e.msgs[0], "syntax error") != NULL, "%s", e.msgs[0]);
	yerrs_free(&e);
	cr_assert_eq(e.n, 0);
	cr_assert_null(e.msgs);
}

Test(yaml, anchors_and_aliases_refused)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(load("base: &b {cpus: 1}\nother: *b\n", &e));
	cr_assert(has(&e, "t.yaml:1:7: base: anchors (&b) are not allowed"));
	cr_assert(has(&e, "t.yaml:2:8: other: aliases (*b) are not allowed"));
	cr_assert_eq(e.n, 2);
	yerrs_free(&e);
}

Test(yaml, tags_refused)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(load("a: !!python/object foo\n", &e));
	cr_assert(has(&e, "t.yaml:1:4: a: tags"));
	yerrs_free(&e);
}

Test(yaml, duplicate_key_names_key_and_first_line)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(load("limits:\n  pids: 1\n  pids: 2\n", &e));
	cr_assert_eq(e.n, 1);
	cr_assert_str_eq(e.msgs[0],
	    "t.yaml:3:3: limits.pids: duplicate key (first at line 2)");
	yerrs_free(&e);
}

Test(yaml, non_scalar_key_refused)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(load("? [a, b]\n: 1\n", &e));
	cr_assert(has(&e, "mapping keys must be plain strings"));
	yerrs_free(&e);
}

Test(yaml, second_document_refused)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(load("a: 1\n---\nb: 2\n", &e));
	cr_assert(has(&e, "t.yaml:2:1: only one YAML document is allowed"));
	yerrs_free(&e);
}

Test(yaml, over_one_mebibyte_refused)
{
	struct yerrs	 e = { 0 };
	size_t		 n = 1024 * 1024 + 1;
	char		*big = xmalloc(n + 1);

	memset(big, '#', n);
	big[n] = '\0';
	cr_assert_null(yaml_load_buf("big.yaml", big, n, &e));
	cr_assert(has(&e, "big.yaml: larger than"));
	/* Exactly 1 MiB is still accepted. */
	yerrs_free(&e);
	big[0] = '#';
	{
		struct ydoc	*d = yaml_load_buf("big.yaml", big, n - 1, &e);

		cr_assert_not_null(d);
		ydoc_free(d);
	}
	free(big);
	yerrs_free(&e);
}

Test(yaml, big_file_refused_by_path)
{
	struct yerrs	 e = { 0 };
	char		 path[] = "/tmp/yaml_test.XXXXXX";
	int		 fd = mkstemp(path);
	char		 buf[4096];

	cr_assert(fd >= 0);
	memset(buf, '#', sizeof(buf));
	for (int i = 0; i < 257; i++)
		cr_assert_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
	cr_assert_null(yaml_load_file(path, &e));
	cr_assert(has(&e, "larger than"));
	unlink(path);
	yerrs_free(&e);
	cr_assert_null(yaml_load_file("/nonexistent/t.yaml", &e));
	cr_assert(has(&e, "/nonexistent/t.yaml: No such file"));
	yerrs_free(&e);
}

static char *
nested(int depth)
{
	char	*s = xmalloc((size_t)depth * 2 + 8);
	char	*p = s;

	for (int i = 0; i < depth; i++)
		*p++ = '[';
	*p++ = '1';
	for (int i = 0; i < depth; i++)
		*p++ = ']';
	*p = '\0';
	return s;
}

Test(yaml, nesting_capped_at_32)
{
	struct yerrs	 e = { 0 };
	struct ydoc	*d;
	char		*ok = nested(32), *deep = nested(33);

	d = load(ok, &e);
	cr_assert_not_null(d);
	ydoc_free(d);
	cr_assert_null(load(deep, &e));
	cr_assert(has(&e, "nested deeper than 32 levels"));
	free(ok);
	free(deep);
	yerrs_free(&e);
}

Test(yaml, uint_error_has_file_line_col_key)
{
	struct yerrs	 e = { 0 };
	struct ydoc	*d;
	uint64_t	 v = 7;

	d = load("policy: x\nversion: 1\nlimits:\n  pids:    lots\n", &e);
	cr_assert_not_null(d);
	cr_assert_eq(yget_uint(d, ymap_get(ymap_get(d->root, "limits"),
	    "pids"), "limits.pids", 1, 65536, &v), -1);
	cr_assert_eq(v, 7, "nothing written on error");
	cr_assert_eq(e.n, 1);
	cr_assert_str_eq(e.msgs[0], "t.yaml:4:12: limits.pids: must be an "
	    "integer from 1 to 65536, got \"lots\"");
	ydoc_free(d);
	yerrs_free(&e);
}

Test(yaml, uint_is_strict)
{
	static const char *const bad[] = {
		"-1", "+1", "0x10", "007", "1e3", "1.0", "18446744073709551616",
		"99999999999999999999", " 1", "", NULL
	};
	struct yerrs	 e = { 0 };
	struct ynode	 n = { .type = YN_SCALAR, .line = 1, .col = 1 };
	struct ydoc	 d = { .file = "t.yaml", .errs = &e };
	uint64_t	 v;

	for (size_t i = 0; bad[i] != NULL; i++) {
		n.scalar = (char *)bad[i];
		cr_assert_eq(yget_uint(&d, &n, "k", 0, UINT64_MAX, &v), -1,
		    "accepted \"%s\"", bad[i]);
	}
	cr_assert_eq(e.n, 10);
	n.scalar = "18446744073709551615";
	cr_assert_eq(yget_uint(&d, &n, "k", 0, UINT64_MAX, &v), 0);
	cr_assert_eq(v, UINT64_MAX);
	n.scalar = "0";
	cr_assert_eq(yget_uint(&d, &n, "k", 0, 5, &v), 0);
	cr_assert_eq(v, 0);
	n.scalar = "6";
	cr_assert_eq(yget_uint(&d, &n, "k", 0, 5, &v), -1, "range");
	/* A quoted number is a string. */
	n.scalar = "5";
	n.quoted = 1;
	cr_assert_eq(yget_uint(&d, &n, "k", 0, 5, &v), -1);
	/* Absent: nothing written, no error. */
	v = 42;
	cr_assert_eq(yget_uint(&d, NULL, "k", 0, 5, &v), 0);
	cr_assert_eq(v, 42);
	yerrs_free(&e);
}

Test(yaml, milli_reads_up_to_three_decimals)
{
	static const struct {
		const char	*in;
		int		 ok;
		uint64_t	 want;
	} cases[] = {
		{ "1", 1, 1000 }, { "1.5", 1, 1500 }, { "0.001", 1, 1 },
		{ "0.25", 1, 250 }, { "64", 1, 64000 }, { "64.001", 0, 0 },
		{ "0", 0, 0 }, { "1.", 0, 0 }, { ".5", 0, 0 },
		{ "1.0005", 0, 0 }, { "-1", 0, 0 }, { "1,5", 0, 0 },
		{ "01.5", 0, 0 }, { "1.5.1", 0, 0 },
	};
	struct yerrs	 e = { 0 };
	struct ynode	 n = { .type = YN_SCALAR, .line = 2, .col = 9 };
	struct ydoc	 d = { .file = "t.yaml", .errs = &e };
	uint64_t	 v;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n.scalar = (char *)cases[i].in;
		v = 0;
		cr_assert_eq(yget_milli(&d, &n, "limits.cpus", 1, 64000, &v),
		    cases[i].ok ? 0 : -1, "\"%s\"", cases[i].in);
		if (cases[i].ok)
			cr_assert_eq(v, cases[i].want, "\"%s\"", cases[i].in);
	}
	cr_assert(has(&e, "t.yaml:2:9: limits.cpus: must be a number from "
	    "0.001 to 64 with at most 3 decimals, got \"64.001\""));
	yerrs_free(&e);
}

Test(yaml, bool_enum_str)
{
	struct yerrs	 e = { 0 };
	struct ydoc	*d;
	static const char *const iso[] = { "container", "gvisor", NULL };
	const char	*s = NULL;
	int		 b = -1, idx = -1;

	d = load("a: true\nb: yes\nc: gvisor\nd: vm\ne: hello\nf:\ng: [x]\n",
	    &e);
	cr_assert_not_null(d);
	cr_assert_eq(yget_bool(d, ymap_get(d->root, "a"), "a", &b), 0);
	cr_assert_eq(b, 1);
	cr_assert_eq(yget_bool(d, ymap_get(d->root, "b"), "b", &b), -1);
	cr_assert_eq(yget_enum(d, ymap_get(d->root, "c"), "c", iso, &idx), 0);
	cr_assert_eq(idx, 1);
	cr_assert_eq(yget_enum(d, ymap_get(d->root, "d"), "d", iso, &idx), -1);
	cr_assert_eq(yget_str(d, ymap_get(d->root, "e"), "e", &s), 0);
	cr_assert_str_eq(s, "hello");
	cr_assert_eq(yget_str(d, ymap_get(d->root, "f"), "f", &s), -1);
	cr_assert_eq(yget_str(d, ymap_get(d->root, "g"), "g", &s), -1);
	cr_assert(has(&e, "t.yaml:2:4: b: must be true or false, got \"yes\""));
	cr_assert(has(&e, "t.yaml:4:4: d: must be one of container, gvisor, "
	    "got \"vm\""));
	cr_assert(has(&e, "f: must be a string, got nothing"));
	cr_assert(has(&e, "t.yaml:7:4: g: must be a string, got a list"));
	cr_assert_eq(e.n, 4);
	ydoc_free(d);
	yerrs_free(&e);
}

Test(yaml, strseq_wants_a_list)
{
	struct yerrs	 e = { 0 };
	struct ydoc	*d;
	const char	**v = NULL;
	size_t		  n = 0;

	d = load("a: [x, y]\nb: x\nc: [x, [y]]\nd: []\n", &e);
	cr_assert_not_null(d);
	cr_assert_eq(yget_strseq(d, ymap_get(d->root, "a"), "a", &v, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(v[0], "x");
	cr_assert_str_eq(v[1], "y");
	free(v);
	cr_assert_eq(yget_strseq(d, ymap_get(d->root, "b"), "b", &v, &n), -1);
	cr_assert_eq(yget_strseq(d, ymap_get(d->root, "c"), "c", &v, &n), -1);
	cr_assert(has(&e, "t.yaml:2:4: b: must be a list of strings"));
	cr_assert(has(&e, "t.yaml:3:8: c[1]: must be a string, got a list"));
	cr_assert_eq(yget_strseq(d, ymap_get(d->root, "d"), "d", &v, &n), 0);
	cr_assert_eq(n, 0);
	ydoc_free(d);
	yerrs_free(&e);
}

Test(yaml, map_check_reports_every_unknown_and_missing_key)
{
	static const char *const allowed[] = { "cpus", "pids", "memory_mb",
		NULL };
	static const char *const required[] = { "cpus", "pids", NULL };
	struct yerrs	 e = { 0 };
	struct ydoc	*d;

	d = load("limits:\n  cpu: 1\n  memory_mb: 5\n  pidz: 3\n", &e);
	cr_assert_not_null(d);
	cr_assert_eq(ymap_check(d, ymap_get(d->root, "limits"), "limits",
	    allowed, required), 4);
	cr_assert_eq(e.n, 4);
	cr_assert(has(&e, "t.yaml:2:3: limits.cpu: unknown key \"cpu\" in "
	    "limits"));
	cr_assert(has(&e, "t.yaml:4:3: limits.pidz: unknown key \"pidz\""));
	cr_assert(has(&e, "t.yaml:2:3: limits.cpus: required key is missing"));
	cr_assert(has(&e, "t.yaml:2:3: limits.pids: required key is missing"));
	cr_assert_eq(ymap_check(d, ymap_get(ymap_get(d->root, "limits"),
	    "cpu"), "limits.cpu", allowed, NULL), 1, "a scalar is no map");
	ydoc_free(d);
	yerrs_free(&e);
}

Test(yaml, nul_byte_in_string_refused)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(load("a: \"x\\0y\"\n", &e));
	cr_assert(has(&e, "a: strings must not contain NUL bytes"));
	yerrs_free(&e);
}

Test(yaml, null_errs_still_fails)
{
	cr_assert_null(load("a: &x 1\n", NULL));
	cr_assert_null(load("a: [\n", NULL));
}
