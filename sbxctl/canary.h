/*
 * canary.h: what canary.c (the probes) and canary_channel.c (the check
 * that no one else rides a live task's channel) share, in canary_probe.c
 * below them both.
 */
#ifndef SBXCTL_CANARY_H
#define SBXCTL_CANARY_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/v1/envelope.pb-c.h"

#define CANARY_REPLY_MAX	(64 * 1024 * 1024)
#define CANARY_MAX_EXPECT	8

struct canary_opts {
	const char	*state;
	const char	*orch_sock;
	const char	*dir;
	const char	*type;
	const char	*tenant;
	const char	*user;
	const char	*target;
	const char	*host_port;
	const char	*intruder;	/* --intruder-user: who plays the
					 * other host user (root only) */
	char		 host_dns[64];
	int		 hold;		/* --hold: seconds the holding task
					 * keeps its channel after its request */
	int		 verbose;
};

struct canary_probe {
	char	*name;			/* file name without .py */
	char	*code;			/* with the placeholders filled in */
	size_t	 len;
	char	*egress[CANARY_MAX_EXPECT];	/* rules expected at egressd */
	size_t	 negress;
	char	*limit;			/* "# sbx-expect: limit X": reported */
};

/* canary.c */
uint64_t	 canary_next_id(void);
char		*canary_strndup(const char *, size_t);
void		 canary_subst(char **s, size_t *len, const char *key,
		    const char *val);
int		 canary_load(const struct canary_opts *, const char *path,
		    const char *name, struct canary_probe *);
void		 canary_probe_free(struct canary_probe *);
/* One call and its reply of body `want`, or NULL with why. */
Sbx__V1__Envelope *canary_call(const char *path, Sbx__V1__Envelope *req,
		    Sbx__V1__Envelope__BodyCase want, char *why,
		    size_t whylen);
void		 canary_scan(const ProtobufCBinaryData *out, size_t *denied,
		    char *allowed, size_t allowedlen, int *done);

/* canary_channel.c: 0 denied, 1 allowed, 2 could not run or tell. */
#define CANARY_CHANNEL		"channel"
int		 canary_channel(const struct canary_opts *, const char *dir);

#endif
