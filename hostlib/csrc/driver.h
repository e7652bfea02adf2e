/* The socket loop: one call of a p4r_engine over a connected UDP socket, with no Python in it.
 *
 * recvmmsg and sendmmsg move packets in batches, ppoll sleeps until a datagram, the engine's
 * next deadline, or a write to wake_fd (Engine.fail from another thread) - whichever comes
 * first. The caller releases the GIL around p4r_drive. */
#ifndef P4R_DRIVER_H
#define P4R_DRIVER_H

#include "engine.h"

double p4r_monotonic(void);

/* Sends what the engine emitted (and clears it); returns 0 or an errno. */
int p4r_send_out(struct p4r_engine *e, int fd);

/* Runs the call begun on e until it is done. *pending_fail (read atomically) is set by
 * another thread to 1 (or 2 for an AllreduceAborted) to fail the call. Returns 0 or the errno
 * of a socket error the protocol cannot recover from. */
int p4r_drive(struct p4r_engine *e, int fd, int wake_fd, int *pending_fail);

#endif
