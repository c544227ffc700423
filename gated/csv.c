/*
 * csv.c: formula injection in released CSV and TSV files.  A spreadsheet
 * that opens a CSV evaluates a cell that begins with '=', '+', '-' or '@'
 * (and, in some, after a leading TAB or CR) as a formula: HYPERLINK() or
 * WEBSERVICE() to send the sheet's data to a host, DDE to run a command.
 * The sandbox writes these files and a person opens them, so gated finds
 * such cells and reports the first of them (release.c puts it in the
 * result), or, when the policy says so, neutralises them as OWASP's CSV
 * injection guidance does: the cell is quoted and its text begins with a
 * single quote, which spreadsheets read as "this is text".
 *
 * The file is parsed as RFC 4180 and as spreadsheets read it, not line by
 * line: a quoted field may hold the separator, "" for a quote and line
 * breaks, so "=cmd" on the second line of a quoted cell is inside a cell,
 * not at the start of one, and a quoted "=1+1" is a formula like an
 * unquoted one.  CRLF, LF and a lone CR end a record.  A cell that is a
 * plain number ("-5", "+1.5e3") is a number, not a formula, and is left.
 * Everything but the neutralised cells is copied byte for byte.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "gated/gated.h"

struct csv_buf {
	uint8_t	*p;
	size_t	 len;
	size_t	 cap;
};

static void
csv_put(struct csv_buf *b, const void *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		while (b->len + n + 1 > b->cap)
			b->cap = b->cap < 256 ? 256 : b->cap * 2;
		b->p = xreallocarray(b->p, b->cap, 1);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

/* 1 if the cell's text (v, n bytes) is a number: [+-]digits[.digits][e..]. */
static int
csv_number(const uint8_t *v, size_t n)
{
	size_t	i = 0, digits = 0;

	if (i < n && (v[i] == '+' || v[i] == '-'))
		i++;
	while (i < n && isdigit(v[i])) {
		i++;
		digits++;
	}
	if (i < n && v[i] == '.') {
		i++;
		while (i < n && isdigit(v[i])) {
			i++;
			digits++;
		}
	}
	if (digits == 0)
		return 0;
	if (i < n && (v[i] == 'e' || v[i] == 'E')) {
		i++;
		if (i < n && (v[i] == '+' || v[i] == '-'))
			i++;
		if (i >= n || !isdigit(v[i]))
			return 0;
		while (i < n && isdigit(v[i]))
			i++;
	}
	return i == n;
}

static int
csv_formula(const uint8_t *v, size_t n)
{
	if (n == 0)
		return 0;
	if (v[0] != '=' && v[0] != '+' && v[0] != '-' && v[0] != '@' &&
	    v[0] != '\t' && v[0] != '\r')
		return 0;
	return !csv_number(v, n);
}

uint8_t *
csv_check(const uint8_t *in, size_t len, int sep, int neutralise,
    size_t *outlen, struct csv_report *rep)
{
	struct csv_buf	 out = { NULL, 0, 0 }, val = { NULL, 0, 0 };
	size_t		 i = 0, start, copied = 0;
	uint32_t	 row = 1, col = 1;
	int		 quoted, end_record;

	memset(rep, 0, sizeof(*rep));
	while (i <= len) {
		/* One field, from start to i (its terminator, not eaten). */
		start = i;
		val.len = 0;
		quoted = i < len && in[i] == '"';
		if (quoted) {
			for (i++; i < len; i++) {
				if (in[i] != '"') {
					csv_put(&val, in + i, 1);
					continue;
				}
				if (i + 1 < len && in[i + 1] == '"') {
					csv_put(&val, "\"", 1);
					i++;
					continue;
				}
				i++;
				break;
			}
		}
		/* Unquoted, or what follows a closing quote: spreadsheets
		 * keep it as part of the cell. */
		while (i < len && in[i] != sep && in[i] != '\n' &&
		    in[i] != '\r') {
			csv_put(&val, in + i, 1);
			i++;
		}
		if (csv_formula(val.p, val.len)) {
			if (rep->cells++ == 0) {
				rep->row = row;
				rep->col = col;
			}
			if (neutralise) {
				csv_put(&out, in + copied, start - copied);
				csv_put(&out, "\"'", 2);
				for (size_t k = 0; k < val.len; k++)
					csv_put(&out, val.p[k] == '"' ? "\"\"" :
					    (const char *)val.p + k,
					    val.p[k] == '"' ? 2 : 1);
				csv_put(&out, "\"", 1);
				copied = i;
			}
		}
		if (i >= len)
			break;
		end_record = in[i] != sep;
		if (in[i] == '\r' && i + 1 < len && in[i + 1] == '\n')
			i++;
		i++;
		if (end_record) {
			row++;
			col = 1;
		} else
			col++;
	}
	free(val.p);
	if (!neutralise)
		return NULL;
	csv_put(&out, in + copied, len - copied);
	out.p[out.len] = '\0';
	*outlen = out.len;
	return out.p;
}
