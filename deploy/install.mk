# deploy/install.mk: `make install-deploy`, the systemd deployment
# (deploy/README.md): the units, sysusers.d and tmpfiles.d files, and the
# example /etc/sbx.  Included by the top-level Makefile, which defines
# PREFIX (default /usr/local) and DESTDIR.
#
# The units and launchd-sbx.yaml name the programs where PREFIX=/usr puts
# them (/usr/sbin, /usr/bin, /usr/libexec/sbx); for another PREFIX they are
# rewritten on the way in.  Configuration is never overwritten: a file
# already in $(DESTDIR)/etc/sbx is the operator's, and is left alone.

SBX_UNITS     = $(wildcard deploy/systemd/*.service deploy/systemd/*.timer \
                deploy/systemd/*.target)
SBX_CONFS     = $(wildcard deploy/etc/sbx/*.yaml)
SBX_TEMPLATES = $(wildcard deploy/etc/sbx/templates/*.yaml)

# Debian keeps packaged units in /lib/systemd/system; anything else under
# PREFIX (systemd also searches /usr/local/lib/systemd/system).
ifeq ($(PREFIX),/usr)
SYSTEMDUNITDIR ?= /lib/systemd/system
else
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
endif
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR    ?= $(PREFIX)/lib/tmpfiles.d
SBX_ETCDIR     ?= /etc/sbx

SBX_PATHS_SED = -e 's|/usr/sbin/|$(PREFIX)/sbin/|g' \
                -e 's|/usr/bin/|$(PREFIX)/bin/|g' \
                -e 's|/usr/libexec/sbx/|$(PREFIX)/libexec/sbx/|g'

.PHONY: install-deploy
install-deploy:
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
	    $(DESTDIR)$(TMPFILESDIR)
	for f in $(SBX_UNITS); do \
		sed $(SBX_PATHS_SED) "$$f" >"$(DESTDIR)$(SYSTEMDUNITDIR)/$${f##*/}.tmp" && \
		chmod 0644 "$(DESTDIR)$(SYSTEMDUNITDIR)/$${f##*/}.tmp" && \
		mv "$(DESTDIR)$(SYSTEMDUNITDIR)/$${f##*/}.tmp" \
		    "$(DESTDIR)$(SYSTEMDUNITDIR)/$${f##*/}" || exit 1; \
	done
	install -m 0644 deploy/sysusers.d/sbx.conf $(DESTDIR)$(SYSUSERSDIR)/sbx.conf
	install -m 0644 deploy/tmpfiles.d/sbx.conf $(DESTDIR)$(TMPFILESDIR)/sbx.conf
	install -d -m 0755 $(DESTDIR)$(SBX_ETCDIR) $(DESTDIR)$(SBX_ETCDIR)/templates
	for f in $(SBX_CONFS) $(SBX_TEMPLATES); do \
		d="$(DESTDIR)$(SBX_ETCDIR)/$${f#deploy/etc/sbx/}"; \
		if [ -e "$$d" ]; then \
			echo "install-deploy: $$d exists, left alone"; \
		else \
			sed $(SBX_PATHS_SED) "$$f" >"$$d.tmp" && chmod 0644 "$$d.tmp" && \
			mv "$$d.tmp" "$$d" || exit 1; \
		fi; \
	done
