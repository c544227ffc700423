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
	struct idn_lib	 lib;
	void		*h, *f;
	const char	*e;

	/* RTLD_NOW: a missing symbol is found here; RTLD_LOCAL: its
	 * symbols resolve nothing else of ours. */
	if ((h = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		e = dlerror();
		snprintf(err, errlen, "cannot load %s (Debian's libidn2-0), "
		    "which internationalised host names need: %s", soname,
		    e != NULL ? e : "unknown error");
		return -1;
	}
	if ((f = dlsym(h, "idn2_lookup_u8")) == NULL) {
		snprintf(err, errlen, "%s has no idn2_lookup_u8: not "
		    "libidn2", soname);
		goto fail;
	}
	memcpy(&lib.lookup_u8, &f, sizeof(f));
	if ((f = dlsym(h, "idn2_free")) == NULL) {
		snprintf(err, errlen, "%s has no idn2_free: not libidn2",
		    soname);
		goto fail;
	}
	memcpy(&lib.free, &f, sizeof(f));
	if (!keep) {
		dlclose(h);
		return 0;
	}
	idn_lib = lib;
	idn_lib_ok = 1;
	return 0;
fail:
	dlclose(h);
	return -1;
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
