/*
 * name.h: what a safe name is.  Plain libc (no allocation, no logging),
 * so that launchd-sbx's root monitor, which links nothing else, checks
 * names by the same rule as every daemon.
 */
#ifndef SBX_NAME_H
#define SBX_NAME_H

/* 1 if s is 1..128 chars of [A-Za-z0-9._@:-] and not "." or "..": safe as
 * an identifier, a file name component, and inside ${task.*}. */
int	 name_ok(const char *s);
/* 1 if some '/'-separated component of the path p is "..". */
int	 path_has_dotdot(const char *p);

#endif
