/*
 * Shared-memory lanes: the datagrams between the embedded switch and the ranks on its own host, carried
 * through memory the two processes share instead of through the kernel (docs/softswitch.md, *Lanes*).
 *
 * Why: on one host every byte of an all-reduce crossed the kernel four times (docs/performance.md, *The
 * floor of a design that copies through the kernel*), with a system call and often a wake-up for each
 * batch. A lane is two single-producer, single-consumer rings of fixed slots, one each way, in a memfd
 * of its own that the switch creates when a rank asks and hands to that rank alone over a Unix socket:
 * a rank can see and spoil no other rank's datagrams, and the memfd is sealed against resizing, so no
 * rank can make the switch fault on a page it cut away. The datagrams are the same
 * ones UDP would carry (the P4 program, the pipeline's frames and the protocol see no difference); only
 * the system calls and the kernel's copies are gone. A sleeping peer is woken by an empty UDP datagram,
 * a doorbell, sent only when its `sleeping` flag says it waits.
 *
 * This header is the layout both sides compile (hostlib/csrc/driver.c for the ranks,
 * softswitch/dataplane/native/loop.c for the switch): one place that knows it. Everything read from
 * the other side is checked before use: a ring whose indices are more than P4R_LANE_SLOTS apart, or a
 * slot whose length exceeds its room, makes the lane broken for the reader, which then falls back to UDP.
 */
#ifndef P4R_LANES_H
#define P4R_LANES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define P4R_LANES_MAGIC 0x314e414c52345050ull /* "PP4RLAN1", little-endian */
#define P4R_LANES_VERSION 1
#define P4R_LANES 16             /* lanes per UDP port of the switch: ranks on one host at once */
#define P4R_LANE_SLOTS 256       /* slots per ring, a power of two: a rank's window of uses fits */
#define P4R_LANE_SLOT_BYTES 4224 /* one slot: its 16-byte head and a K = 1024 datagram (4,120 bytes) */
#define P4R_LANE_PAYLOAD (P4R_LANE_SLOT_BYTES - 16)

struct p4r_lane_slot {
    uint32_t length; /* the datagram's bytes in data[] */
    uint8_t tos;     /* its IPv4 DSCP/ECN byte (switch to rank: a CE mark reaches the engine) */
    uint8_t unused[11];
    uint8_t data[P4R_LANE_PAYLOAD];
};

/* tail: slots published by the producer; head: slots released by the consumer; both count forever. */
struct p4r_ring {
    uint32_t tail;
    uint8_t pad0[60];
    uint32_t head;
    uint8_t pad1[60];
    struct p4r_lane_slot slots[P4R_LANE_SLOTS];
};

/* One lane: one memfd, mapped by the switch and by the one rank it was granted to. */
struct p4r_lane {
    uint64_t magic;
    uint32_t version, slots, slot_bytes;
    uint8_t pad0[44];
    uint32_t switch_sleeping; /* the switch waits in epoll_wait: the rank rings its doorbell after it publishes */
    uint32_t closed;          /* the switch let the lane go (it reads and writes it no more): UDP alone */
    uint8_t pad1[56];
    uint32_t rank_sleeping; /* the rank waits in ppoll: the switch rings its doorbell after it publishes */
    uint8_t pad2[60];
    struct p4r_ring up;   /* rank to switch */
    struct p4r_ring down; /* switch to rank */
};

/* A producer's or consumer's own index: never read back from the shared ring, which the peer could
 * overwrite. */
struct p4r_ring_end {
    uint32_t next;
};

/* Copies one datagram into the ring: 1, 0 when it is full or the datagram too long for a slot, -1 when
 * the consumer's index is impossible (the lane is broken). Publishes it at once. */
static inline int p4r_ring_push(struct p4r_ring *r, struct p4r_ring_end *end, const uint8_t *data,
                                uint32_t length, uint8_t tos) {
    if (length > P4R_LANE_PAYLOAD) return 0;
    uint32_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    uint32_t used = end->next - head;
    if (used > P4R_LANE_SLOTS) return -1;
    if (used == P4R_LANE_SLOTS) return 0;
    struct p4r_lane_slot *s = &r->slots[end->next & (P4R_LANE_SLOTS - 1)];
    s->length = length;
    s->tos = tos;
    memcpy(s->data, data, length);
    end->next++;
    __atomic_store_n(&r->tail, end->next, __ATOMIC_RELEASE);
    return 1;
}

/* The next datagram, left in place until p4r_ring_pop: 1 with *data, *length and *tos set, 0 when the
 * ring is empty, -1 when the producer's index or the slot's length is impossible. */
static inline int p4r_ring_peek(const struct p4r_ring *r, const struct p4r_ring_end *end, const uint8_t **data,
                                uint32_t *length, uint8_t *tos) {
    uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    uint32_t ready = tail - end->next;
    if (ready == 0) return 0;
    if (ready > P4R_LANE_SLOTS) return -1;
    const struct p4r_lane_slot *s = &r->slots[end->next & (P4R_LANE_SLOTS - 1)];
    uint32_t n = __atomic_load_n(&s->length, __ATOMIC_RELAXED);
    if (n > P4R_LANE_PAYLOAD) return -1;
    *data = s->data;
    *length = n;
    *tos = s->tos;
    return 1;
}

/* Hands the slot p4r_ring_peek returned back to the producer. */
static inline void p4r_ring_pop(struct p4r_ring *r, struct p4r_ring_end *end) {
    end->next++;
    __atomic_store_n(&r->head, end->next, __ATOMIC_RELEASE);
}

/* Whether the ring holds a datagram for the consumer at `end` (impossible indices count as one, so that
 * the reader looks, finds the lane broken and stops using it). */
static inline int p4r_ring_waiting(const struct p4r_ring *r, const struct p4r_ring_end *end) {
    return __atomic_load_n(&r->tail, __ATOMIC_SEQ_CST) != end->next;
}

/* The waiting side's half of the doorbell: set the flag, then look once more before sleeping. The
 * publishing side stores its tail, then (p4r_lanes_should_ring) reads the flag: with a full fence on both
 * sides at least one of the two sees the other's store, so no datagram is left unseen by a sleeper. */
static inline void p4r_lanes_sleep_flag(uint32_t *sleeping, uint32_t value) {
    __atomic_store_n(sleeping, value, __ATOMIC_SEQ_CST);
}

static inline int p4r_lanes_should_ring(const uint32_t *sleeping) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return __atomic_load_n(sleeping, __ATOMIC_SEQ_CST) != 0;
}

/* Fills in a new lane's header (its rings start empty: a new memfd is zeros). */
static inline void p4r_lane_init(struct p4r_lane *l) {
    l->version = P4R_LANES_VERSION;
    l->slots = P4R_LANE_SLOTS;
    l->slot_bytes = P4R_LANE_SLOT_BYTES;
    __atomic_store_n(&l->magic, P4R_LANES_MAGIC, __ATOMIC_RELEASE);
}

/* Whether a mapped lane of `size` bytes has the layout this build expects. */
static inline int p4r_lane_valid(const struct p4r_lane *l, size_t size) {
    return size >= sizeof *l && l->magic == P4R_LANES_MAGIC && l->version == P4R_LANES_VERSION &&
           l->slots == P4R_LANE_SLOTS && l->slot_bytes == P4R_LANE_SLOT_BYTES;
}

#endif
