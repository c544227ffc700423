/*
 * mkspec.c: write an OCI bundle's config.json with launchd-sbx's spec.c,
 * for tests/probe/run-spec, which runs it under the real runtimes.  The
 * parameters are what spec.c reads of a policy; the hash is a fixed
 * stand-in since nothing is signed.
 *
 *   mkspec -b BUNDLE -r ROOTFS -i IN -c CODE -I INIT [-e SOCK] [-a CA]
 *       [-g CGROUP] [-t runc|runsc] [-x EXECID] [-C MILLICPUS] [-m MB]
 *       [-p PIDS] [-s SCRATCH_MB] [-S SCRATCH_DIR] -- PROGRAM [ARGS...]
 *
 * -S binds a host directory (a noexec tmpfs, as launchd-sbx mounts) at
 * /scratch instead of the sandbox's own tmpfs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launchd-sbx/spec.h"
#include "log.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: mkspec -b BUNDLE -r ROOTFS -i IN -c CODE "
	    "-I INIT [-e SOCK] [-a CA] [-g CGROUP]\n"
	    "    [-t runc|runsc] [-x EXECID] [-C MILLICPUS] [-m MB] [-p PIDS] "
	    "[-s SCRATCH_MB]\n    [-S SCRATCH_DIR] -- PROGRAM [ARGS...]\n");
	exit(2);
}

static uint32_t
num(const char *s)
{
	char		*end;
	unsigned long	 v = strtoul(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v > UINT32_MAX)
		usage();
	return (uint32_t)v;
}

int
main(int argc, char **argv)
{
	struct spec_params	 sp;
	const char		*bundle = NULL, *cgroup = NULL;
	char			 cg[256], err[512], *text;
	size_t			 len;
	int			 ch, rc;

	log_init("mkspec", 1, 0);
	memset(&sp, 0, sizeof(sp));
	sp.cpus_milli = 1000;
	sp.memory_mb = 256;
	sp.pids = 64;
	sp.scratch_mb = 16;
	sp.policy_name = "probe";
	sp.policy_version = 1;
	sp.policy_hash = "0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef";
	sp.task_id = "task-probe";
	sp.execution_id = "exec-probe";
	sp.flavor = SPEC_RUNC;

	while ((ch = getopt(argc, argv, "a:b:c:C:e:g:i:I:m:p:r:s:S:t:x:")) != -1) {
		switch (ch) {
		case 'a': sp.ca_file = optarg; break;
		case 'b': bundle = optarg; break;
		case 'c': sp.code_dir = optarg; break;
		case 'C': sp.cpus_milli = num(optarg); break;
		case 'e': sp.egress_sock = optarg; break;
		case 'g': cgroup = optarg; break;
		case 'i': sp.in_dir = optarg; break;
		case 'I': sp.init_path = optarg; break;
		case 'm': sp.memory_mb = num(optarg); break;
		case 'p': sp.pids = num(optarg); break;
		case 'r': sp.rootfs = optarg; break;
		case 's': sp.scratch_mb = num(optarg); break;
		case 'S': sp.scratch_dir = optarg; break;
		case 't':
			if (strcmp(optarg, "runc") == 0)
				sp.flavor = SPEC_RUNC;
			else if (strcmp(optarg, "runsc") == 0)
				sp.flavor = SPEC_RUNSC;
			else
				usage();
			break;
		case 'x': sp.execution_id = optarg; break;
		default: usage();
		}
	}
	argv += optind;
	if (bundle == NULL || argv[0] == NULL)
		usage();
	snprintf(cg, sizeof(cg), "/sbx-test/%s", sp.execution_id);
	sp.cgroups_path = cgroup != NULL ? cgroup : cg;
	sp.argv = argv;

	if ((text = spec_render(&sp, &len, err, sizeof(err))) == NULL) {
		fprintf(stderr, "mkspec: %s\n", err);
		return 1;
	}
	rc = spec_write(bundle, text, len, err, sizeof(err));
	free(text);
	if (rc == -1) {
		fprintf(stderr, "mkspec: %s\n", err);
		return 1;
	}
	return 0;
}
