/*
 * secret.c: `sbxctl secret put [--minted] NAME` and `sbxctl secret list`,
 * against brokerd's admin socket.  A value is read from standard input,
 * never from the command line (argv is visible to every user through
 * /proc); on a terminal it is read with echo off.  The value lives in
 * sodium_malloc memory and is wiped as soon as it is sent.  `list` prints
 * names only: brokerd never returns a value to an operator.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "sbxctl/sbxctl.h"

#define SECRET_VALUE_MAX	(64 * 1024)	/* brokerd's BROKERD_VALUE_MAX */
#define SECRET_REPLY_MAX	(4 * 1024 * 1024)

static int
secret_usage(const char *why)
{
	if (why != NULL)
		fprintf(stderr, "sbxctl: %s\n", why);
	fprintf(stderr, "usage: sbxctl secret put [--minted] name "
	    "(the value is read from standard input)\n"
	    "       sbxctl secret list\n");
	return SBXCTL_USAGE;
}

/*
 * Read the value into sodium_malloc memory: a line with echo off from a
 * terminal, else all of stdin.  One trailing newline is the terminal's or
 * the shell's, not the secret's.  0, or -1 after saying why.
 */
static int
secret_read(const char *name, unsigned char **out, size_t *outlen)
{
	struct termios	 old, quiet;
	unsigned char	*buf;
	size_t		 len = 0;
	ssize_t		 r;
	int		 tty = isatty(STDIN_FILENO), echo_off = 0;

	if ((buf = sodium_malloc(SECRET_VALUE_MAX + 1)) == NULL) {
		log_warnx("cannot allocate secure memory for the value");
		return -1;
	}
	if (tty) {
		if (tcgetattr(STDIN_FILENO, &old) == 0) {
			quiet = old;
			quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
			quiet.c_lflag |= ICANON;
			if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0)
				echo_off = 1;
		}
		if (!echo_off) {
			log_warnx("cannot turn terminal echo off; refusing to "
			    "read secret %s where it would show", name);
			sodium_free(buf);
			return -1;
		}
		fprintf(stderr, "value for secret %s: ", name);
		fflush(stderr);
	}
	for (;;) {
		r = read(STDIN_FILENO, buf + len, SECRET_VALUE_MAX + 1 - len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			log_warn("reading the value from standard input");
			break;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		/* A terminal line ends the value. */
		if (tty && buf[len - 1] == '\n')
			break;
		if (len > SECRET_VALUE_MAX)
			break;
	}
	if (echo_off) {
		(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	if (r == -1) {
		sodium_free(buf);
		return -1;
	}
	if (len > SECRET_VALUE_MAX) {
		log_warnx("the value of secret %s is over %d bytes", name,
		    SECRET_VALUE_MAX);
		sodium_free(buf);
		return -1;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	*out = buf;
	*outlen = len;
	return 0;
}

/* One request, one reply of type want; an exit status. */
static int
secret_call(const char *path, Sbx__V1__Envelope *req,
    Sbx__V1__Envelope__BodyCase want, Sbx__V1__Envelope **reply)
{
	Sbx__V1__Envelope	*rep = NULL;
	const Sbx__V1__Error	*e;
	int			 fd, r;

	*reply = NULL;
	if ((fd = frame_client_connect(path)) == -1) {
		log_warnx("brokerd unreachable: cannot connect to %s: %s",
		    path, strerror(errno));
		return SBXCTL_UNREACHABLE;
	}
	r = frame_client_call(fd, req, &rep, SECRET_REPLY_MAX);
	close(fd);
	if (r == -2) {
		log_warnx("brokerd at %s sent a reply that does not decode",
		    path);
		return SBXCTL_ERR;
	}
	if (r == -1) {
		log_warnx("brokerd unreachable: %s closed the connection "
		    "without a reply (is uid %u allowed on it?)", path,
		    (unsigned)getuid());
		return SBXCTL_UNREACHABLE;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR &&
	    (e = rep->error) != NULL) {
		if (e->rule != NULL && e->rule[0] != '\0')
			log_warnx("brokerd: %s (%s)", e->message, e->rule);
		else
			log_warnx("brokerd: %s", e->message);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_ERR;
	}
	if (rep->body_case != want) {
		log_warnx("brokerd at %s answered with an unexpected message "
		    "(body %d, expected %d)", path, (int)rep->body_case,
		    (int)want);
		sbx__v1__envelope__free_unpacked(rep, NULL);
		return SBXCTL_ERR;
	}
	*reply = rep;
	return SBXCTL_OK;
}

static int
secret_put(int argc, char **argv, const char *admin_sock)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__SecretPut	 put = SBX__V1__SECRET_PUT__INIT;
	unsigned char		*value = NULL;
	const char		*name = NULL;
	size_t			 len = 0;
	int			 i, minted = 0, rc;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--minted") == 0 ||
		    strcmp(argv[i], "-m") == 0)
			minted = 1;
		else if (argv[i][0] == '-')
			return secret_usage("secret put takes --minted and a "
			    "name; the value comes from standard input");
		else if (name == NULL)
			name = argv[i];
		else
			return secret_usage("secret put takes one name; the "
			    "value comes from standard input, never the "
			    "command line");
	}
	if (name == NULL)
		return secret_usage("secret put needs a name");
	if (!name_ok(name))
		return secret_usage("bad secret name: want 1..128 of "
		    "[A-Za-z0-9._@:-]");
	if (sodium_init() < 0) {
		log_warnx("libsodium could not be initialised");
		return SBXCTL_ERR;
	}
	/* A minted secret's key is made by brokerd: nothing to read. */
	if (!minted) {
		if (secret_read(name, &value, &len) == -1)
			return SBXCTL_ERR;
		if (len == 0) {
			sodium_free(value);
			log_warnx("secret %s: the value is empty", name);
			return SBXCTL_ERR;
		}
	}
	put.name = (char *)name;
	put.value.data = value;
	put.value.len = len;
	put.kind = minted ? SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED :
	    SBX__V1__CREDENTIAL_KIND__CREDENTIAL_STATIC;
	frame_env_init(&req, ((uint64_t)getpid() << 32) | 1);
	req.body_case = SBX__V1__ENVELOPE__BODY_SECRET_PUT;
	req.secret_put = &put;
	rc = secret_call(admin_sock, &req, SBX__V1__ENVELOPE__BODY_ACK, &rep);
	if (value != NULL)
		sodium_free(value);	/* wipes first */
	if (rc != SBXCTL_OK)
		return rc;
	printf("%s\n", rep->ack->detail);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}

static int
secret_list(int argc, char **argv, const char *admin_sock)
{
	Sbx__V1__Envelope	 req, *rep = NULL;
	Sbx__V1__SecretList	 sl = SBX__V1__SECRET_LIST__INIT;
	int			 rc;

	(void)argv;
	if (argc != 1)
		return secret_usage("secret list takes no arguments");
	frame_env_init(&req, ((uint64_t)getpid() << 32) | 2);
	req.body_case = SBX__V1__ENVELOPE__BODY_SECRET_LIST;
	req.secret_list = &sl;
	if ((rc = secret_call(admin_sock, &req,
	    SBX__V1__ENVELOPE__BODY_SECRET_NAMES, &rep)) != SBXCTL_OK)
		return rc;
	for (size_t i = 0; i < rep->secret_names->n_names; i++)
		printf("%s\n", rep->secret_names->names[i]);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return SBXCTL_OK;
}

/* argv[0] is "secret", argv[1] the subcommand. */
int
cmd_secret(int argc, char **argv, const char *admin_sock)
{
	if (argc < 2)
		return secret_usage("secret needs put or list");
	if (strcmp(argv[1], "put") == 0)
		return secret_put(argc - 1, argv + 1, admin_sock);
	if (strcmp(argv[1], "list") == 0)
		return secret_list(argc - 1, argv + 1, admin_sock);
	return secret_usage("secret needs put or list");
}
