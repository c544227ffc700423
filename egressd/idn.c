/*
 * idn.c: libidn2, for the one thing egressd asks of it: a host name
 * written in Unicode turned into its punycode (xn--) form, the spelling
 * every rule is written in (decide_host_canon).  The library is loaded
 * at the first such host, not linked: an egressd whose sandboxes only
 * ever name ASCII hosts, which is most of them, never maps libidn2 and
 * the libunistring it brings (200 KiB of its RSS; bench/README.md, idle
 * RSS).  egressd checks at start-up that it loads (idn_check), as the
 * dynamic linker did when it was linked, and unloads it again.  A host
 * that needs it when it cannot be loaded is refused, never passed on
 * unconverted.  The library is named by its soname, never by a path from
 * the configuration or the environment, and the types of the calls are
 * idn2.h's own.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <idn2.h>

#include "log.h"
#include "util.h"
#include "egressd.h"

struct idn_lib {
	__typeof__(&idn2_lookup_u8)	 lookup_u8;
	__typeof__(&idn2_free)		 free;
};

static struct idn_lib	 idn_lib;
static int		 idn_lib_ok;

/* Load soname and find both calls; with keep, they stay for the
 * process's life, else the library is unloaded again. */
static int
idn_open(const char *soname, int keep, char *err, size_t errlen)
{
	static const char *const names[] = { "idn2_lookup_u8", "idn2_free" };
	void		*h, *syms[2];

	if ((h = dl_syms(soname, "(Debian's libidn2-0), which "
	    "internationalised host names need", "not libidn2", names, syms,
	    2, err, errlen)) == NULL)
		return -1;
	if (!keep) {
		dlclose(h);
		return 0;
	}
	memcpy(&idn_lib.lookup_u8, &syms[0], sizeof(syms[0]));
	memcpy(&idn_lib.free, &syms[1], sizeof(syms[1]));
	idn_lib_ok = 1;
	return 0;
}

int
idn_check(const char *soname, char *err, size_t errlen)
{
	return idn_open(soname != NULL ? soname : IDN_SONAME, 0, err, errlen);
}

int
idn_loaded(void)
{
	return idn_lib_ok;
}

int
idn_to_ascii(const char *host, char *out, size_t outlen, const char **why)
{
	static int	 logged;
	char		 err[512];
	char		*res;

	if (!idn_lib_ok && idn_open(IDN_SONAME, 1, err, sizeof(err)) == -1) {
		/* Once: a sandbox naming such hosts in a loop does not
		 * flood the log. */
		if (!logged++)
			log_warnx("%s", err);
		return (*why = "internationalised host name, and libidn2 "
		    "cannot be loaded", -1);
	}
	/* IDNA2008 with UTS#46 mapping, as browsers do. */
	if (idn_lib.lookup_u8((const uint8_t *)host, (uint8_t **)&res,
	    IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL) != IDN2_OK)
		return (*why = "invalid internationalised host name", -1);
	if (strlen(res) >= outlen) {
		idn_lib.free(res);
		return (*why = "host name too long", -1);
	}
	snprintf(out, outlen, "%s", res);
	idn_lib.free(res);
	return 0;
}
