/*
 * channel_test.c: who egressd lets onto a channel (invariant 11).  The
 * cgroup match reads /proc/PID/cgroup text the way the kernel writes it,
 * in a hybrid (cgroup v1 with an empty v2 mount) and a v2-only layout;
 * the peer check refuses a peer outside the sandbox's cgroup, and one
 * with another group unless it is root.
 */
#include <criterion/criterion.h>

#include <sys/socket.h>
#include <unistd.h>

#include "egressd/egressd.h"

#define HYBRID(pids) \
	"12:misc:/\n11:rdma:/\n9:name=systemd:/sbx/abc\n" \
	"8:pids:" pids "\n7:blkio:/sbx/abc\n4:memory:/sbx/abc\n" \
	"2:cpu,cpuacct:/sbx/abc\n0::/\n"

Test(channel, cgroup_match_hybrid_uses_the_pids_line)
{
	cr_assert(proxy_cgroup_match(HYBRID("/sbx/abc"), "/sbx/abc"));
	/* Below the sandbox's cgroup (runsc may make children). */
	cr_assert(proxy_cgroup_match(HYBRID("/sbx/abc/sub"), "/sbx/abc"));
	/* A sibling whose name starts the same is not it. */
	cr_assert(!proxy_cgroup_match(HYBRID("/sbx/abcd"), "/sbx/abc"));
	cr_assert(!proxy_cgroup_match(HYBRID("/sbx"), "/sbx/abc"));
	cr_assert(!proxy_cgroup_match(HYBRID("/"), "/sbx/abc"));
	/* Other hierarchies naming it do not count: the pids line decides. */
	cr_assert(!proxy_cgroup_match(HYBRID("/user.slice"), "/sbx/abc"));
}

Test(channel, cgroup_match_unified_only)
{
	cr_assert(proxy_cgroup_match("0::/sbx/abc\n", "/sbx/abc"));
	cr_assert(proxy_cgroup_match("0::/sbx/abc", "/sbx/abc"));
	cr_assert(!proxy_cgroup_match("0::/sbx/ab\n", "/sbx/abc"));
	cr_assert(!proxy_cgroup_match("0::/user.slice/sbx/abc\n",
	    "/sbx/abc"));
	/* A controller list holding pids, as some layouts mount it. */
	cr_assert(proxy_cgroup_match("3:cpu,pids:/sbx/abc\n0::/\n",
	    "/sbx/abc"));
}

Test(channel, cgroup_match_refuses_nonsense)
{
	cr_assert(!proxy_cgroup_match("", "/sbx/abc"));
	cr_assert(!proxy_cgroup_match("garbage\n", "/sbx/abc"));
	/* The root cgroup is nobody's sandbox. */
	cr_assert(!proxy_cgroup_match("0::/\n", "/"));
	cr_assert(!proxy_cgroup_match(HYBRID("/sbx/abc"), "sbx/abc"));
}

/* A socketpair's peer is ourselves: in no sandbox cgroup. */
Test(channel, peer_outside_the_cgroup_is_refused)
{
	int	 sv[2];
	char	 why[256];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	cr_assert_eq(proxy_peer_check("/sbx/no-such-sandbox", getgid(),
	    sv[0], why, sizeof(why)), -1);
	cr_assert(strstr(why, "not in the sandbox's cgroup") != NULL, "%s",
	    why);
	close(sv[0]);
	close(sv[1]);
}

Test(channel, peer_with_another_group_is_refused_unless_root)
{
	int	 sv[2], rc;
	char	 why[256];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	rc = proxy_peer_check("/sbx/no-such-sandbox", getgid() + 1, sv[0],
	    why, sizeof(why));
	cr_assert_eq(rc, -1);
	if (getuid() != 0)
		cr_assert(strstr(why, "is not the sandbox") != NULL, "%s",
		    why);
	close(sv[0]);
	close(sv[1]);
}
