/*
 * store_fixture.h: what the unit tests that open policyd's store share: a
 * temporary directory (dir) holding policyd.db (db), made before each test
 * and removed after, and a template text whose version and memory_mb are
 * printf arguments.
 */
#ifndef SBX_STORE_FIXTURE_H
#define SBX_STORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

static char	dir[64], db[128];

#define FIXTURE_TMPL(name)						\
    "policy: " name "\n"						\
    "version: %u\n"							\
    "isolation: gvisor\n"						\
    "image: sandbox/py@sha256:"						\
    "a2297711e96bea7cb00cd4dfdd083b1a568acfbf7c8e991512f488901936caed\n"	\
    "limits: {cpus: 1, memory_mb: %u, pids: 64, wall_seconds: 60,"	\
    " scratch_mb: 64}\n"						\
    "network:\n"							\
    "  default: deny\n"							\
    "outputs:\n"							\
    "  allowed_types: [text/csv]\n"					\
    "  max_total_kb: 64\n"						\
    "  destination: agent\n"						\
    "executions_per_task: 3\n"

static void
fixture_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/store_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(db, sizeof(db), "%s/policyd.db", dir);
}

static void
fixture_teardown(void)
{
	char	 cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

#endif
