/*
 * channel_test.c: who egressd lets onto a channel (invariant 11).  The
 * membership test reads cgroup.procs the way the kernel lists it (one pid
 * a line), in the sandbox's cgroup and one level below it; the peer check
 * refuses a peer outside the sandbox's cgroup, and one with another group
 * unless it is root.
 */
#include <criterion/criterion.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "egressd/egressd.h"

static char	 dir[] = "/tmp/channel_test.XXXXXX";

static void
setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void
teardown(void)
{
	char	*cmd;

	xasprintf(&cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
}

static void
procs(const char *sub, const char *text)
{
	char	*p;
	FILE	*f;

	xasprintf(&p, "%s%s", dir, sub);
	cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST);
	free(p);
	xasprintf(&p, "%s%s/cgroup.procs", dir, sub);
	cr_assert_not_null(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
	free(p);
}

static int
member(const char *sub, pid_t pid)
{
	char	*p;
	int	 r;

	xasprintf(&p, "%s%s", dir, sub);
	r = proxy_peer_member(p, pid);
	free(p);
	return r;
}

TestSuite(channel, .init = setup, .fini = teardown);

Test(channel, member_of_the_cgroup)
{
	procs("/abc", "17\n4242\n99\n");
	cr_assert_eq(member("/abc", 4242), 1);
	cr_assert_eq(member("/abc", 424), 0);
	cr_assert_eq(member("/abc", 42420), 0);
	cr_assert_eq(member("/abc", 1), 0);
}

Test(channel, member_one_level_below)
{
	procs("/abc", "17\n");
	procs("/abc/gofer", "555\n");
	procs("/abcd", "777\n");
	cr_assert_eq(member("/abc", 555), 1);
	/* A sibling whose name starts the same is not it. */
	cr_assert_eq(member("/abc", 777), 0);
}

Test(channel, unreadable_cgroup_is_no_member)
{
	cr_assert_eq(member("/nothing-here", 17), -1);
}

/* A socketpair's peer is ourselves: in no sandbox cgroup here. */
Test(channel, peer_outside_the_cgroup_is_refused)
{
	int	 sv[2];
	char	 why[256], *d;

	procs("/sbx", "1\n");
	xasprintf(&d, "%s/sbx", dir);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_eq(proxy_peer_check(d, getgid(), sv[0], why,
	    sizeof(why)), -1);
	cr_assert(strstr(why, "not in the sandbox's cgroup") != NULL, "%s",
	    why);
	close(sv[0]);
	close(sv[1]);
	free(d);
}

/* ... and in it once listed there. */
Test(channel, peer_in_the_cgroup_is_accepted)
{
	int	 sv[2];
	char	 why[256], *d, pid[32];

	snprintf(pid, sizeof(pid), "1\n%ld\n", (long)getpid());
	procs("/sbx", pid);
	xasprintf(&d, "%s/sbx", dir);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_eq(proxy_peer_check(d, getgid(), sv[0], why,
	    sizeof(why)), 0, "%s", why);
	close(sv[0]);
	close(sv[1]);
	free(d);
}

Test(channel, peer_with_another_group_is_refused_unless_root)
{
	int	 sv[2], rc;
	char	 why[256] = "", *d, pid[32];

	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	procs("/sbx", pid);
	xasprintf(&d, "%s/sbx", dir);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	rc = proxy_peer_check(d, getgid() + 1, sv[0], why, sizeof(why));
	if (getuid() != 0) {
		cr_assert_eq(rc, -1);
		cr_assert(strstr(why, "is not the sandbox") != NULL, "%s",
		    why);
	} else
		cr_assert_eq(rc, 0, "root passes the group check: %s", why);
	close(sv[0]);
	close(sv[1]);
	free(d);
}
