/*
 * image.c: the image store.  state_dir/images/<hex>/ holds an OCI image
 * layout whose manifest has digest sha256:<hex>; nothing is ever pulled.
 * Before an image is first used by this process, the manifest and every
 * blob it names (config and layers) are hashed and compared with their
 * digests and sizes; then the image is unpacked once into
 * state_dir/cache/<hex>/rootfs (umoci, or tar for a single-layer image
 * without a ref name), every mount point the spec needs is created in it,
 * and the directory is renamed into place, so a cache entry exists only
 * complete; a rootfs holding a FIFO or a socket is refused.  The rootfs is mounted read-only and shared between
 * executions: the mount points exist so the runtime never writes into it.
 * The launcher unpacks as its own user when it is not root (umoci
 * --rootless, tar --no-same-owner): the files are then the launcher's,
 * with the image's modes, which is all the sandbox user (never their
 * owner either way) sees of them.
 *
 * Verification and unpacking take seconds for a real image, so they never
 * run in the event loop: at start-up (and on SIGHUP, and for an image
 * installed later, at its first launch) each image is prepared in a child
 * process whose exit status and one-line error come back through SIGCHLD
 * and a pipe.  Until then a launch for it waits, queued, and every other
 * launch proceeds.  An image whose check failed is refused until a rescan.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "log.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

#define IMAGE_MANIFEST_MAX	(4 * 1024 * 1024)
#define IMAGE_UNPACK_SECONDS	600

enum image_state {
	IMAGE_PREPARING,
	IMAGE_READY,
	IMAGE_FAILED,
};

/* One image of the store, as this process knows it. */
struct image_prep {
	struct image_prep	*next;
	char			 hex[65];
	enum image_state	 state;
	pid_t			 pid;		/* the preparing child */
	int			 fd;		/* its error line */
	char			*err;		/* IMAGE_FAILED: why */
};

/* What the spec mounts over (spec.h): they must exist in the rootfs. */
static const char *const image_mountpoints[] = {
	"proc", "dev", "sys", "tmp", "scratch", "in", "code", "run",
	"run/sbx", NULL
};

/* The runsc tier binds a file over these (spec.c): the gofer would
 * otherwise create them in the shared rootfs at the first launch. */
static const char *const image_mountfiles[] = {
	"dev/fuse", NULL
};

static int
image_hex_ok(const char *s)
{
	size_t	 i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return i == 64;
}

static struct image_prep *
image_find(const struct launchd *ld, const char *hex)
{
	for (struct image_prep *ip = ld->images; ip != NULL; ip = ip->next)
		if (strcmp(ip->hex, hex) == 0)
			return ip;
	return NULL;
}

static int
image_is_verified(const struct launchd *ld, const char *hex)
{
	const struct image_prep	*ip = image_find(ld, hex);

	return ip != NULL && ip->state == IMAGE_READY;
}

/* SHA-256 of a file as hex, and its size.  0 or -1 with errno. */
static int
image_sha256(const char *path, char hex[65], uint64_t *size)
{
	unsigned char	 buf[65536], md[32];
	struct sha256	*ctx;
	ssize_t		 r;
	int		 fd, rc = -1, saved = 0;

	*size = 0;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if ((ctx = sha256_new()) == NULL) {
		saved = ENOMEM;
		goto out;
	}
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		if (sha256_update(ctx, buf, (size_t)r) == -1) {
			saved = EIO;
			goto out;
		}
		*size += (uint64_t)r;
	}
	if (r == -1) {
		saved = errno;
		goto out;
	}
	rc = sha256_final(ctx, md);
	ctx = NULL;
	if (rc == -1) {
		saved = EIO;
		goto out;
	}
	hex_encode(md, 32, hex);
out:
	sha256_free(ctx);
	close(fd);
	if (rc == -1)
		errno = saved;
	return rc;
}

/* One descriptor ({digest, size}): the blob must exist and match. */
static int
image_check_blob(const char *layout, const json_t *desc, const char *what,
    char *err, size_t errlen)
{
	const char	*digest = json_string_value(json_object_get(desc,
			    "digest"));
	json_t		*jsize = json_object_get(desc, "size");
	char		 path[PATH_MAX], hex[65];
	uint64_t	 size;

	if (digest == NULL || strncmp(digest, "sha256:", 7) != 0 ||
	    !image_hex_ok(digest + 7) || !json_is_integer(jsize)) {
		bufprintf(err, errlen, "%s: %s descriptor has no sha256 digest "
		    "and size", layout, what);
		return -1;
	}
	bufprintf(path, sizeof(path), "%s/blobs/sha256/%s", layout, digest + 7);
	if (image_sha256(path, hex, &size) == -1) {
		bufprintf(err, errlen, "%s: %s blob %s: %s", layout, what,
		    digest, strerror(errno));
		return -1;
	}
	if (strcmp(hex, digest + 7) != 0) {
		bufprintf(err, errlen, "%s: %s blob %s has digest sha256:%s",
		    layout, what, digest, hex);
		return -1;
	}
	if ((json_int_t)size != json_integer_value(jsize)) {
		bufprintf(err, errlen, "%s: %s blob %s is %llu bytes, the "
		    "manifest says %lld", layout, what, digest,
		    (unsigned long long)size,
		    (long long)json_integer_value(jsize));
		return -1;
	}
	return 0;
}

/* Verify manifest <hex> and every blob it names; the manifest's parsed
 * JSON is returned for the unpack. */
static json_t *
image_verify(const char *layout, const char *hex, char *err, size_t errlen)
{
	char		 path[PATH_MAX], got[65];
	json_t		*m, *layers, *l;
	json_error_t	 je;
	uint64_t	 size;
	size_t		 i;

	bufprintf(path, sizeof(path), "%s/blobs/sha256/%s", layout, hex);
	if (image_sha256(path, got, &size) == -1) {
		bufprintf(err, errlen, "%s: manifest: %s", path,
		    strerror(errno));
		return NULL;
	}
	if (strcmp(got, hex) != 0) {
		bufprintf(err, errlen, "%s: manifest has digest sha256:%s",
		    path, got);
		return NULL;
	}
	if (size > IMAGE_MANIFEST_MAX ||
	    (m = json_load_file(path, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		bufprintf(err, errlen, "%s: manifest does not parse: %s", path,
		    size > IMAGE_MANIFEST_MAX ? "too large" : je.text);
		return NULL;
	}
	if (image_check_blob(layout, json_object_get(m, "config"), "config",
	    err, errlen) == -1)
		goto bad;
	layers = json_object_get(m, "layers");
	if (!json_is_array(layers) || json_array_size(layers) == 0) {
		bufprintf(err, errlen, "%s: manifest names no layers", path);
		goto bad;
	}
	json_array_foreach(layers, i, l) {
		if (image_check_blob(layout, l, "layer", err, errlen) == -1)
			goto bad;
	}
	return m;
bad:
	json_decref(m);
	return NULL;
}

/* The ref name index.json gives manifest <hex>, or NULL. */
static char *
image_ref_name(const char *layout, const char *hex)
{
	char		 path[PATH_MAX], want[80];
	json_t		*idx, *ms, *e;
	const char	*d, *name;
	char		*out = NULL;
	size_t		 i;

	bufprintf(path, sizeof(path), "%s/index.json", layout);
	bufprintf(want, sizeof(want), "sha256:%s", hex);
	if ((idx = json_load_file(path, 0, NULL)) == NULL)
		return NULL;
	ms = json_object_get(idx, "manifests");
	json_array_foreach(ms, i, e) {
		d = json_string_value(json_object_get(e, "digest"));
		name = json_string_value(json_object_get(json_object_get(e,
		    "annotations"), "org.opencontainers.image.ref.name"));
		if (d != NULL && strcmp(d, want) == 0 && name != NULL &&
		    name[0] != '\0' && strchr(name, '/') == NULL) {
			out = xstrdup(name);
			break;
		}
	}
	json_decref(idx);
	return out;
}

/* Create the mount points, refusing a symlink on the way (it could point
 * the runtime's mkdir outside the rootfs). */
static int
image_mountpoints_make(const char *rootfs, char *err, size_t errlen)
{
	char		 path[PATH_MAX];
	struct stat	 st;

	for (size_t i = 0; image_mountpoints[i] != NULL; i++) {
		bufprintf(path, sizeof(path), "%s/%s", rootfs,
		    image_mountpoints[i]);
		if (lstat(path, &st) == 0) {
			if (S_ISDIR(st.st_mode))
				continue;
			bufprintf(err, errlen, "image: /%s is not a directory "
			    "(a mount point the sandbox needs)",
			    image_mountpoints[i]);
			return -1;
		}
		/* chmod: the daemon's umask is 077, and the sandbox user
		 * must be able to reach what is mounted there. */
		if (mkdir(path, 0755) == -1 || chmod(path, 0755) == -1) {
			bufprintf(err, errlen, "image: mkdir /%s: %s",
			    image_mountpoints[i], strerror(errno));
			return -1;
		}
	}
	for (size_t i = 0; image_mountfiles[i] != NULL; i++) {
		int	fd;

		bufprintf(path, sizeof(path), "%s/%s", rootfs,
		    image_mountfiles[i]);
		if (lstat(path, &st) == 0) {
			if (S_ISREG(st.st_mode))
				continue;
			bufprintf(err, errlen, "image: /%s is not a regular "
			    "file (a mount point the sandbox needs)",
			    image_mountfiles[i]);
			return -1;
		}
		if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0444)) == -1 || fchmod(fd, 0444) == -1) {
			bufprintf(err, errlen, "image: create /%s: %s",
			    image_mountfiles[i], strerror(errno));
			if (fd != -1)
				close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

/*
 * A FIFO or a socket in a rootfs that sandboxes share would be a channel
 * between them: a FIFO on a read-only mount still opens for writing, and
 * a pool entry's runsc opens host FIFOs (mon_ops.c).  Such an image is
 * refused; device nodes are left to the device cgroup and gVisor.  nftw
 * has no argument for its callback: the child is single-threaded.
 */
static char	image_special_path[PATH_MAX];
static size_t	image_special_root;

static int
image_special_cb(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)flag;
	(void)ftw;
	if (!S_ISFIFO(st->st_mode) && !S_ISSOCK(st->st_mode))
		return 0;
	bufprintf(image_special_path, sizeof(image_special_path), "%s%s",
	    path[image_special_root] == '/' ? "" : "/",
	    path + image_special_root);
	return S_ISFIFO(st->st_mode) ? 1 : 2;
}

static int
image_no_special(const char *rootfs, char *err, size_t errlen)
{
	int	 rc;

	image_special_root = strlen(rootfs);
	if ((rc = nftw(rootfs, image_special_cb, 32, FTW_PHYS | FTW_MOUNT)) ==
	    0)
		return 0;
	if (rc == -1)
		bufprintf(err, errlen, "image: reading %s: %s", rootfs,
		    strerror(errno));
	else
		bufprintf(err, errlen, "image: %s is a %s, a channel between "
		    "the sandboxes that share the image", image_special_path,
		    rc == 1 ? "FIFO" : "socket");
	return -1;
}

static int
image_unpack(struct launchd *ld, const char *layout, const char *hex,
    const json_t *manifest, const char *cache, char *err, size_t errlen)
{
	char		 tmp[PATH_MAX], rootfs[PATH_MAX], image[PATH_MAX * 2];
	char		*ref;
	const json_t	*layers = json_object_get(manifest, "layers");
	const char	*lhex;
	int		 st;

	(void)ld;
	bufprintf(tmp, sizeof(tmp), "%s.tmp", cache);
	bufprintf(rootfs, sizeof(rootfs), "%s/rootfs", tmp);
	(void)runtime_rmtree(tmp);
	if ((ref = image_ref_name(layout, hex)) != NULL) {
		char *argv[] = { "umoci", "--log", "error", "unpack",
		    "--image", image, tmp, NULL, NULL };

		/* Not root: the files become ours (umoci(1) --rootless). */
		if (geteuid() != 0) {
			argv[6] = "--rootless";
			argv[7] = tmp;
		}
		bufprintf(image, sizeof(image), "%s:%s", layout, ref);
		st = runtime_cmd(argv, IMAGE_UNPACK_SECONDS, NULL, 0);
		free(ref);
		if (st != 0) {
			bufprintf(err, errlen, "image sha256:%s: umoci unpack "
			    "failed (status %d)", hex, st);
			goto bad;
		}
	} else {
		if (json_array_size(layers) != 1) {
			bufprintf(err, errlen, "image sha256:%s: no ref name in "
			    "index.json and %zu layers: cannot unpack without "
			    "umoci", hex, json_array_size(layers));
			goto bad;
		}
		lhex = json_string_value(json_object_get(json_array_get(layers,
		    0), "digest")) + 7;
		bufprintf(image, sizeof(image), "%s/blobs/sha256/%s", layout,
		    lhex);
		if (mkdir(tmp, 0700) == -1 || mkdir(rootfs, 0755) == -1) {
			bufprintf(err, errlen, "mkdir %s: %s", rootfs,
			    strerror(errno));
			goto bad;
		}
		char *argv[] = { "tar", "--numeric-owner", geteuid() == 0 ?
		    "--same-owner" : "--no-same-owner", "-xzpf", image, "-C",
		    rootfs, NULL };
		if ((st = runtime_cmd(argv, IMAGE_UNPACK_SECONDS, NULL, 0)) != 0) {
			bufprintf(err, errlen, "image sha256:%s: tar failed "
			    "(status %d)", hex, st);
			goto bad;
		}
	}
	if (image_mountpoints_make(rootfs, err, errlen) == -1 ||
	    image_no_special(rootfs, err, errlen) == -1)
		goto bad;
	if (rename(tmp, cache) == -1) {
		bufprintf(err, errlen, "rename %s: %s", cache, strerror(errno));
		goto bad;
	}
	return 0;
bad:
	(void)runtime_rmtree(tmp);
	return -1;
}

/* The child: verify, unpack if not cached, make the mount points.  The
 * exit status says whether it worked; err goes to fd. */
static void __attribute__((noreturn))
image_child(struct launchd *ld, const char *hex, int fd)
{
	char		 layout[PATH_MAX], cache[PATH_MAX], rootfs[PATH_MAX];
	char		 err[1024];
	struct stat	 st;
	json_t		*m;
	int		 rc = 1;

	/* libevent's SIGCHLD handler would wake the parent's loop; the
	 * monitor's socket is the parent's. */
	signal(SIGCHLD, SIG_DFL);
	mon_client_child(ld);
	/* Nothing else of the parent's either: a listening socket kept
	 * here would outlive a launcher killed meanwhile, and its next
	 * start would find "another server is listening there". */
	if (fd != 3 && (dup2(fd, 3) == -1 || close(fd) == -1))
		_exit(1);
	fd = 3;
	(void)close_range(4, ~0U, 0);
	bufprintf(layout, sizeof(layout), "%s/images/%s",
	    ld->conf->common.state_dir, hex);
	bufprintf(cache, sizeof(cache), "%s/cache/%s",
	    ld->conf->common.state_dir, hex);
	bufprintf(rootfs, sizeof(rootfs), "%s/rootfs", cache);
	err[0] = '\0';
	if ((m = image_verify(layout, hex, err, sizeof(err))) == NULL)
		goto out;
	if (stat(cache, &st) == -1) {
		if (image_unpack(ld, layout, hex, m, cache, err,
		    sizeof(err)) == -1)
			goto out;
	} else if (image_mountpoints_make(rootfs, err, sizeof(err)) == -1 ||
	    image_no_special(rootfs, err, sizeof(err)) == -1) {
		/* A cache from an older version may lack a mount point, and
		 * was not checked for FIFOs. */
		goto out;
	}
	rc = 0;
out:
	if (m != NULL)
		json_decref(m);
	if (rc != 0)
		(void)!write(fd, err, strlen(err));
	close(fd);
	/* _exit: the parent's atexit handlers and buffers are not ours. */
	_exit(rc);
}

static void
image_prepare(struct launchd *ld, struct image_prep *ip)
{
	int	 p[2];
	pid_t	 pid;

	free(ip->err);
	ip->err = NULL;
	if (pipe2(p, O_CLOEXEC) == -1 || (pid = fork()) == -1) {
		ip->state = IMAGE_FAILED;
		xasprintf(&ip->err, "cannot start preparing: %s",
		    strerror(errno));
		return;
	}
	if (pid == 0) {
		close(p[0]);
		image_child(ld, ip->hex, p[1]);
	}
	close(p[1]);
	ip->state = IMAGE_PREPARING;
	ip->pid = pid;
	ip->fd = p[0];
	log_info("image sha256:%s: verifying and unpacking (pid %ld)",
	    ip->hex, (long)pid);
}

static struct image_prep *
image_add(struct launchd *ld, const char *hex)
{
	struct image_prep	*ip;

	ip = xcalloc(1, sizeof(*ip));
	bufprintf(ip->hex, sizeof(ip->hex), "%s", hex);
	ip->fd = -1;
	ip->next = ld->images;
	ld->images = ip;
	image_prepare(ld, ip);
	return ip;
}

void
image_scan(struct launchd *ld, int retry_failed)
{
	char		 path[PATH_MAX];
	DIR		*d;
	struct dirent	*de;
	struct image_prep *ip;

	bufprintf(path, sizeof(path), "%s/images", ld->conf->common.state_dir);
	if ((d = opendir(path)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!image_hex_ok(de->d_name))
			continue;
		if ((ip = image_find(ld, de->d_name)) == NULL)
			(void)image_add(ld, de->d_name);
		else if (retry_failed && ip->state == IMAGE_FAILED)
			image_prepare(ld, ip);
	}
	closedir(d);
}

void
image_reap_unpacks(struct launchd *ld)
{
	char		 path[PATH_MAX], sub[PATH_MAX];
	DIR		*d;
	struct dirent	*de;
	size_t		 n;

	bufprintf(path, sizeof(path), "%s/cache", ld->conf->common.state_dir);
	if ((d = opendir(path)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		n = strlen(de->d_name);
		if (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0) {
			bufprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			if (runtime_rmtree(sub) == -1)
				log_warn("cannot remove leftover %s", sub);
		}
	}
	closedir(d);
}

int
image_reaped(struct launchd *ld, pid_t pid, int status)
{
	struct image_prep	*ip;
	char			 err[1024];
	ssize_t			 n;

	for (ip = ld->images; ip != NULL; ip = ip->next)
		if (ip->state == IMAGE_PREPARING && ip->pid == pid)
			break;
	if (ip == NULL)
		return 0;
	/* The child wrote at most one short line and has exited. */
	n = read(ip->fd, err, sizeof(err) - 1);
	err[n > 0 ? n : 0] = '\0';
	close(ip->fd);
	ip->fd = -1;
	ip->pid = 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		ip->state = IMAGE_READY;
		log_info("image sha256:%s verified and unpacked", ip->hex);
	} else {
		ip->state = IMAGE_FAILED;
		xasprintf(&ip->err, "%s", err[0] != '\0' ? err :
		    "verification or unpacking failed");
		log_warnx("image sha256:%s refused: %s", ip->hex, ip->err);
	}
	/* The layers above wait for it (main() set the hook). */
	if (ld->image_ready != NULL)
		ld->image_ready(ld, ip->hex);
	return 1;
}

void
image_stop(struct launchd *ld)
{
	struct image_prep	*ip;

	while ((ip = ld->images) != NULL) {
		ld->images = ip->next;
		if (ip->state == IMAGE_PREPARING && ip->pid > 0) {
			/* Its unpack goes to <digest>.tmp: reaped at the
			 * next start. */
			kill(ip->pid, SIGKILL);
			(void)waitpid(ip->pid, NULL, 0);
		}
		if (ip->fd != -1)
			close(ip->fd);
		free(ip->err);
		free(ip);
	}
}

int
image_rootfs(struct launchd *ld, const char *ref, char rootfs[PATH_MAX],
    char hexout[65], const char **rule, char *err, size_t errlen)
{
	const char		*at, *hex;
	char			 layout[PATH_MAX];
	struct stat		 st;
	struct image_prep	*ip;

	*rule = RULE_IMAGE_UNKNOWN;
	if (ref == NULL || (at = strstr(ref, "@sha256:")) == NULL ||
	    !image_hex_ok(at + 8)) {
		bufprintf(err, errlen, "image \"%s\" is not pinned as "
		    "name@sha256:<64 hex digits>", ref != NULL ? ref : "");
		*rule = RULE_BAD_REQUEST;
		return -1;
	}
	hex = at + 8;
	bufprintf(hexout, 65, "%s", hex);
	bufprintf(layout, sizeof(layout), "%s/images/%s",
	    ld->conf->common.state_dir, hex);
	if (stat(layout, &st) == -1 || !S_ISDIR(st.st_mode)) {
		bufprintf(err, errlen, "image %s: not in the image store "
		    "(images are installed, never pulled)", ref);
		return -1;
	}
	*rule = RULE_IMAGE_CORRUPT;
	/* Installed since the last scan: prepare it now, in a child. */
	if ((ip = image_find(ld, hex)) == NULL)
		ip = image_add(ld, hex);
	switch (ip->state) {
	case IMAGE_PREPARING:
		*rule = NULL;
		return 1;
	case IMAGE_FAILED:
		bufprintf(err, errlen, "image %s: %s", ref, ip->err != NULL ?
		    ip->err : "verification failed");
		return -1;
	case IMAGE_READY:
		break;
	}
	bufprintf(rootfs, PATH_MAX, "%s/cache/%s/rootfs",
	    ld->conf->common.state_dir, hex);
	if (stat(rootfs, &st) == -1 || !S_ISDIR(st.st_mode)) {
		bufprintf(err, errlen, "image %s: cache %s is gone", ref,
		    rootfs);
		return -1;
	}
	*rule = NULL;
	return 0;
}

int
image_list(struct launchd *ld, Sbx__V1__ImageInfos *out)
{
	char		 path[PATH_MAX];
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;

	sbx__v1__image_infos__init(out);
	bufprintf(path, sizeof(path), "%s/images", ld->conf->common.state_dir);
	if ((d = opendir(path)) == NULL)
		return errno == ENOENT ? 0 : -1;
	while ((de = readdir(d)) != NULL) {
		Sbx__V1__ImageInfo *ii;

		if (!image_hex_ok(de->d_name))
			continue;
		ii = xcalloc(1, sizeof(*ii));
		sbx__v1__image_info__init(ii);
		xasprintf(&ii->digest, "sha256:%s", de->d_name);
		ii->verified = image_is_verified(ld, de->d_name);
		bufprintf(path, sizeof(path), "%s/cache/%s/rootfs",
		    ld->conf->common.state_dir, de->d_name);
		ii->unpacked = stat(path, &st) == 0;
		out->images = xreallocarray(out->images, out->n_images + 1,
		    sizeof(*out->images));
		out->images[out->n_images++] = ii;
	}
	closedir(d);
	return 0;
}

void
image_list_clear(Sbx__V1__ImageInfos *l)
{
	for (size_t i = 0; i < l->n_images; i++) {
		free(l->images[i]->digest);
		free(l->images[i]);
	}
	free(l->images);
	l->images = NULL;
	l->n_images = 0;
}
