/* The socket loop: one call of a p4r_engine over a connected UDP socket, with no Python in it.
 *
 * Datagrams move in batches (udp.h: recvmmsg with UDP GRO, sendmmsg of UDP GSO runs); ppoll
 * sleeps until a datagram, the engine's next deadline, or a write to wake_fd (Engine.fail from
 * another thread), whichever comes first. The caller releases the GIL around p4r_drive. */
#ifndef P4R_DRIVER_H
#define P4R_DRIVER_H

#include "clock.h"
#include "engine.h"
#include "lanes.h"
#include "udp.h"

/* A shared-memory lane to the switch (contracts/lanes.h), where one was granted: datagrams go into its
 * up ring and come out of its down ring; UDP still carries what does not fit and the doorbells. */
struct p4r_lane_link {
    struct p4r_lane *lane; /* mapped; NULL: no lane, UDP alone */
    struct p4r_ring_end up, down;
    int lease;         /* the Unix socket the lane was granted on: it hangs up when the switch is gone */
    int udp_ready;     /* the socket may hold datagrams: read it (ppoll said so, or not yet found empty) */
    unsigned udp_skip; /* loop turns since the socket was last read */
};

/* What a socket loop keeps between calls: its buffers, and its lane. */
struct p4r_transport {
    struct p4r_udp_receiver receiver;
    struct p4r_udp_sender sender;
    const uint8_t **packets; /* the engine's output (what the lane did not take) as a list, for p4r_udp_send */
    uint16_t *lengths;       /* and their lengths */
    size_t capacity;
    struct p4r_lane_link link;
    /* datagrams carried, by way (read while `run` works on another thread: loaded atomically) */
    uint64_t lane_sent, lane_received, udp_sent, udp_received;
};

int p4r_transport_init(struct p4r_transport *t); /* 0, or -1 out of memory */
void p4r_transport_free(struct p4r_transport *t);
/* Map the switch's lane in memfd `fd` (the caller may close fd after), granted on the
 * connection `lease` (the caller keeps it open while the lane is attached; when it hangs up, the loop lets
 * the lane go): 0, or an errno (EPROTO: not the layout this build knows). A lane already attached is let
 * go first. */
int p4r_transport_attach(struct p4r_transport *t, int fd, int lease);
/* Let the lane go: UDP alone from now on. */
void p4r_transport_detach(struct p4r_transport *t);

/* Feeds the engine one receive buffer: `length` bytes holding datagrams of `segment` bytes each (the
 * last may be shorter), as UDP GRO hands them over; segment = length for a single datagram. */
void p4r_receive_buffer(struct p4r_engine *e, const uint8_t *buffer, size_t length, size_t segment, double now,
                        uint8_t tos);

/* Runs the call begun on e until it is done. *pending_fail (read atomically) is set by
 * another thread to 1 (or 2 for an AllreduceAborted) to fail the call. Returns 0 or the errno
 * of a socket error the protocol cannot recover from. */
int p4r_drive(struct p4r_engine *e, struct p4r_transport *t, int fd, int wake_fd, int *pending_fail);

#endif
