/*
 * version.h: the one version string of sbx, which every program's
 * --version prints ("policyd 0.13.0").  Raise it here when a release is
 * cut; nothing else names a version.
 */
#ifndef SBX_VERSION_H
#define SBX_VERSION_H

#define SBX_VERSION	"0.13.0"

#endif
