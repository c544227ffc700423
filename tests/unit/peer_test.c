/*
 * peer_test.c: the peer check that guards every socket.  Credentials come
 * from the kernel for a socketpair, so they are ours; the allowlist admits
 * by uid, by primary gid and (run as root, where we can become someone
 * else) by a supplementary gid, and refuses everyone else.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "peer.h"

static int	sv[2];

static void
pair_open(void)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void
pair_close(void)
{
	close(sv[0]);
	close(sv[1]);
}

TestSuite(peer, .init = pair_open, .fini = pair_close);

Test(peer, socketpair_credentials_are_ours)
{
	struct ucred	cred;

	cr_assert_eq(peer_credentials(sv[0], &cred), 0);
	cr_assert_eq(cred.uid, getuid());
	cr_assert_eq(cred.gid, getgid());
	cr_assert_eq(cred.pid, getpid());
}

Test(peer, credentials_of_a_non_socket_fail)
{
	struct ucred	cred;
	int		p[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(peer_credentials(p[0], &cred), -1);
	close(p[0]);
	close(p[1]);
}

Test(peer, allowed_by_uid)
{
	struct peer_allow	pa = { 0 };
	struct ucred		cred;

	peer_allow_uid(&pa, 12345);
	peer_allow_uid(&pa, getuid());
	cr_assert_eq(peer_allowed(sv[0], &pa, &cred), 1);
	cr_assert_eq(cred.uid, getuid());
	peer_allow_free(&pa);
	cr_assert_eq(pa.nuids, 0);
	cr_assert_null(pa.uids);
}

Test(peer, allowed_by_gid)
{
	struct peer_allow	pa = { 0 };

	peer_allow_uid(&pa, 12345);
	peer_allow_gid(&pa, 12345);
	peer_allow_gid(&pa, getgid());
	cr_assert_eq(peer_allowed(sv[0], &pa, NULL), 1);
	peer_allow_free(&pa);
}

Test(peer, refused_when_nothing_matches)
{
	struct peer_allow	pa = { 0 };
	struct ucred		cred;

	cr_assert_neq(getuid(), 12345);
	cr_assert_neq(getgid(), 12346);
	peer_allow_uid(&pa, 12345);
	peer_allow_gid(&pa, 12346);
	cr_assert_eq(peer_allowed(sv[0], &pa, &cred), 0);
	/* The refused peer's credentials are still reported, for the log. */
	cr_assert_eq(cred.pid, getpid());
	peer_allow_free(&pa);
}

Test(peer, empty_or_missing_allowlist_refuses)
{
	struct peer_allow	pa = { 0 };

	cr_assert_eq(peer_allowed(sv[0], &pa, NULL), 0);
	cr_assert_eq(peer_allowed(sv[0], NULL, NULL), 0);
}

Test(peer, error_is_not_allowed)
{
	struct peer_allow	pa = { 0 };
	int			p[2];

	peer_allow_uid(&pa, getuid());
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(peer_allowed(p[0], &pa, NULL), -1);
	close(p[0]);
	close(p[1]);
	peer_allow_free(&pa);
}

Test(peer, names_resolve)
{
	struct peer_allow	pa = { 0 };

	/* root exists on every system this runs on, as uid 0 and gid 0. */
	cr_assert_eq(peer_allow_user(&pa, "root"), 0);
	cr_assert_eq(pa.nuids, 1);
	cr_assert_eq(pa.uids[0], 0);
	cr_assert_eq(peer_allow_group(&pa, "root"), 0);
	cr_assert_eq(pa.ngids, 1);
	cr_assert_eq(pa.gids[0], 0);
	cr_assert_eq(peer_allow_user(&pa, "1234"), 0);
	cr_assert_eq(pa.uids[1], 1234);

	errno = 0;
	cr_assert_eq(peer_allow_user(&pa, "no-such-user-sbx"), -1);
	cr_assert_eq(errno, ENOENT);
	errno = 0;
	cr_assert_eq(peer_allow_group(&pa, "no-such-group-sbx"), -1);
	cr_assert_eq(errno, ENOENT);
	cr_assert_eq(peer_allow_user(&pa, ""), -1);
	cr_assert_eq(pa.nuids, 2, "a failed name was added");
	cr_assert_eq(pa.ngids, 1);
	peer_allow_free(&pa);
}

/*
 * Become uid 4444, gid 4343, supplementary group 4242, make a socketpair
 * and check it against an allowlist; the exit status says the answer.
 */
static int
as_other_user(const struct peer_allow *pa)
{
	gid_t	groups[] = { 4242 };
	pid_t	pid;
	int	st, p[2], rv;

	pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		if (setgroups(1, groups) == -1 || setgid(4343) == -1 ||
		    setuid(4444) == -1)
			_exit(10);
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, p) == -1)
			_exit(11);
		rv = peer_allowed(p[0], pa, NULL);
		_exit(rv == 1 ? 0 : rv == 0 ? 1 : 12);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

Test(peer, allowed_by_supplementary_group)
{
	struct peer_allow	pa = { 0 };

	if (geteuid() != 0)
		cr_skip_test("needs root to become another user");
	peer_allow_gid(&pa, 4242);
	cr_assert_eq(as_other_user(&pa), 0, "supplementary gid not honoured");
	peer_allow_free(&pa);

	peer_allow_gid(&pa, 4343);
	cr_assert_eq(as_other_user(&pa), 0, "primary gid not honoured");
	peer_allow_free(&pa);

	peer_allow_uid(&pa, 0);
	peer_allow_gid(&pa, 0);
	peer_allow_gid(&pa, 4241);
	cr_assert_eq(as_other_user(&pa), 1, "a stranger was allowed");
	peer_allow_free(&pa);
}
