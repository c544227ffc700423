/*
 * scrape.h: a daemon's opt-in Prometheus scrape endpoint (scrape.c):
 * `GET /metrics` over HTTP on a loopback TCP address, answered with the
 * daemon's metrics text, for peers whose user is on an allowlist (checked
 * through the kernel's socket table before a byte is read).  The daemon
 * skeleton (daemon.c) opens it when the configuration has metrics.listen.
 */
#ifndef SBX_SCRAPE_H
#define SBX_SCRAPE_H

struct event_base;
struct peer_allow;
struct scrape;
struct ucred;

/* Listen on listen ("127.0.0.1:9417", "[::1]:9417"); text(arg) gives the
 * body (malloc'd, freed here); a refused peer is passed to refused (may
 * be NULL) with why.  NULL (logged) when it cannot listen. */
struct scrape	*scrape_listen(struct event_base *, const char *listen,
		    const struct peer_allow *allow, char *(*text)(void *),
		    void *arg,
		    void (*refused)(const struct ucred *, const char *, void *),
		    void *refused_arg);
/* Close the listener and every connection (NULL is fine). */
void		 scrape_free(struct scrape *);

#endif
