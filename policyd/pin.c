/*
 * pin.c: template versions are immutable (issue 13 item 1).  Once policyd
 * has loaded a template version, its content is fixed by its canonical
 * hash: the first hash seen for NAME@VERSION is pinned in policyd.db
 * (table template_pins) and survives restarts, and a template file whose
 * content has changed under an already-known version is refused -- at
 * start, where policyd then does not start, and on SIGHUP, where the
 * running templates stay -- with an error naming the file, the version and
 * both hashes.  Changing a policy means a new version, so every execution
 * recorded under NAME@VERSION ran under one policy.
 *
 * A connection of its own to policyd.db, used only at start and on
 * SIGHUP, on the event loop, with a busy timeout: the store's writer
 * thread may hold the write lock for a moment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "log.h"
#include "util.h"
#include "yaml.h"
#include "policyd/policyd.h"

#define PIN_BUSY_MS	5000

struct pin {
	sqlite3		*db;
	sqlite3_stmt	*get;
	sqlite3_stmt	*put;
};

static const char pin_schema[] =
    "CREATE TABLE IF NOT EXISTS template_pins("
    " name TEXT NOT NULL,"
    " version INTEGER NOT NULL,"
    " hash TEXT NOT NULL,"
    " file TEXT NOT NULL,"
    " pinned_ns INTEGER NOT NULL,"
    " PRIMARY KEY(name, version)) WITHOUT ROWID;";

struct pin *
pin_open(const char *path, char *err, size_t errlen)
{
	struct pin	*p = xcalloc(1, sizeof(*p));
	char		*msg = NULL;

	if (sqlite3_open_v2(path, &p->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
	    sqlite3_busy_timeout(p->db, PIN_BUSY_MS) != SQLITE_OK ||
	    sqlite3_exec(p->db, pin_schema, NULL, NULL, &msg) != SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "SELECT hash, file FROM template_pins "
	    "WHERE name = ?1 AND version = ?2", -1, &p->get, NULL) !=
	    SQLITE_OK ||
	    sqlite3_prepare_v2(p->db, "INSERT OR IGNORE INTO template_pins"
	    "(name, version, hash, file, pinned_ns) VALUES(?1, ?2, ?3, ?4, "
	    "?5)", -1, &p->put, NULL) != SQLITE_OK) {
		bufprintf(err, errlen, "template pins: %s", msg != NULL ? msg :
		    p->db != NULL ? sqlite3_errmsg(p->db) : "out of memory");
		sqlite3_free(msg);
		pin_close(p);
		return NULL;
	}
	return p;
}

void
pin_close(struct pin *p)
{
	if (p == NULL)
		return;
	sqlite3_finalize(p->get);
	sqlite3_finalize(p->put);
	sqlite3_close(p->db);
	free(p);
}

/* The pinned hash (and the file it came from) of NAME@VERSION: 1, 0 if
 * none, -1 on a database error (err). */
static int
pin_get(struct pin *p, const struct tmpl *t, char hash[POLICY_HASH_HEX],
    char *file, size_t filelen, char *err, size_t errlen)
{
	int	 rc, ret;

	sqlite3_bind_text(p->get, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(p->get, 2, t->version);
	rc = sqlite3_step(p->get);
	if (rc == SQLITE_ROW) {
		bufprintf(hash, POLICY_HASH_HEX, "%s",
		    (const char *)sqlite3_column_text(p->get, 0));
		bufprintf(file, filelen, "%s",
		    (const char *)sqlite3_column_text(p->get, 1));
		ret = 1;
	} else if (rc == SQLITE_DONE)
		ret = 0;
	else {
		bufprintf(err, errlen, "template pins: %s",
		    sqlite3_errmsg(p->db));
		ret = -1;
	}
	sqlite3_reset(p->get);
	sqlite3_clear_bindings(p->get);
	return ret;
}

int
pin_check(struct pin *p, const struct tmpl_registry *reg, struct yerrs *errs)
{
	char	 hash[POLICY_HASH_HEX], file[1024], err[512];
	size_t	 nerr = errs->n;
	int	 rc;

	for (size_t i = 0; i < reg->n; i++) {
		const struct tmpl	*t = reg->t[i];

		if ((rc = pin_get(p, t, hash, file, sizeof(file), err,
		    sizeof(err))) == -1) {
			yerrs_add(errs, "%s", err);
			continue;
		}
		if (rc == 1 && strcmp(hash, t->hash) != 0)
			yerrs_add(errs, "%s: template %s version %u has "
			    "changed: it now hashes to %s, but version %u was "
			    "loaded before as %s (from %s); a changed policy "
			    "needs a new version", t->file, t->name,
			    t->version, t->hash, t->version, hash, file);
	}
	return errs->n == nerr ? 0 : -1;
}

int
pin_record(struct pin *p, const struct tmpl_registry *reg, char *err,
    size_t errlen)
{
	int64_t		 ns = now_ns();
	int		 ok = 1;

	if (sqlite3_exec(p->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		bufprintf(err, errlen, "template pins: %s",
		    sqlite3_errmsg(p->db));
		return -1;
	}
	for (size_t i = 0; ok && i < reg->n; i++) {
		const struct tmpl	*t = reg->t[i];

		sqlite3_bind_text(p->put, 1, t->name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(p->put, 2, t->version);
		sqlite3_bind_text(p->put, 3, t->hash, -1, SQLITE_STATIC);
		sqlite3_bind_text(p->put, 4, t->file, -1, SQLITE_STATIC);
		sqlite3_bind_int64(p->put, 5, ns);
		if (sqlite3_step(p->put) != SQLITE_DONE)
			ok = 0;
		sqlite3_reset(p->put);
		sqlite3_clear_bindings(p->put);
	}
	if (!ok || sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		bufprintf(err, errlen, "template pins: %s",
		    sqlite3_errmsg(p->db));
		(void)sqlite3_exec(p->db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	return 0;
}
