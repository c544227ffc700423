/*
 * testclient.h: what the daemons' test clients (tests/broker, tests/gate,
 * tests/launch, tests/egress) print the same way, so their run scripts can
 * read every client alike.
 */
#ifndef SBX_TESTCLIENT_H
#define SBX_TESTCLIENT_H

#include "sbx/v1/envelope.pb-c.h"

/* "error code=N rule=R: message" and 1 for an Error reply, else 0. */
int	tc_print_error(const Sbx__V1__Envelope *);
/*
 * An admin socket's reply: an error (3), metrics text, "verify ok=..."
 * or one "audit action=..." line per record (with hash= when
 * audit_hash), else 5 for an unexpected body; 0 otherwise.
 */
int	tc_print_admin(const Sbx__V1__Envelope *, int audit_hash);
/* `CLIENT keygen SK PK`: argv[0] is "keygen".  0, or -1 on bad usage;
 * fatal if the keys cannot be written. */
int	tc_keygen(int argc, char **argv);

#endif
