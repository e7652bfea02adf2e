/* libFuzzer target for the shared-memory lanes' rings (contracts/lanes.h; make fuzz).
 *
 * The other side of a lane is another process, so everything it writes is input: its index (the tail
 * of a ring it produces, the head of one it consumes) and each slot's length. The input is a script
 * of 9-byte steps (an operation and two words) that plays a hostile peer against an honest reader and
 * an honest writer of one lane. Built with AddressSanitizer and UBSan: a read outside a slot or past
 * the lane stops the run, and the rings' own promises are checked after every step:
 *   - a datagram read is in the slot at the reader's index and no longer than a slot's room;
 *   - a full ring takes nothing, and a ring whose consumer index is impossible is reported broken;
 *   - what a push published is, byte for byte, what it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lanes.h"

static struct p4r_lane lane; /* 2 MiB: one lane, as a memfd would hold it */
static uint8_t datagram[P4R_LANE_PAYLOAD + 64];

static uint32_t word(const uint8_t *at) {
    uint32_t w;
    memcpy(&w, at, sizeof w);
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    memset(&lane.up, 0, offsetof(struct p4r_ring, slots)); /* indices only: the slots' bytes carry over */
    memset(&lane.down, 0, offsetof(struct p4r_ring, slots));
    struct p4r_ring_end reader = {0}, writer = {0};
    int up_broken = 0, down_broken = 0;
    for (size_t at = 0; at + 9 <= size; at += 9) {
        uint8_t op = data[at];
        uint32_t a = word(data + at + 1), b = word(data + at + 5);
        switch (op % 5) {
        case 0: /* the peer publishes on the up ring: any tail */
            __atomic_store_n(&lane.up.tail, a, __ATOMIC_RELEASE);
            break;
        case 1: /* the peer writes a slot's length, any length, in any slot */
            lane.up.slots[b & (P4R_LANE_SLOTS - 1)].length = a;
            break;
        case 2: { /* the honest reader takes what it finds */
            if (up_broken) break;
            const uint8_t *got;
            uint32_t length;
            uint8_t tos;
            int r = p4r_ring_peek(&lane.up, &reader, &got, &length, &tos);
            if (r < 0) {
                up_broken = 1; /* the reader lets the lane go */
                break;
            }
            if (r == 0) {
                if (p4r_ring_waiting(&lane.up, &reader)) abort(); /* empty, yet waiting */
                break;
            }
            if (length > P4R_LANE_PAYLOAD) abort();
            if (got != lane.up.slots[reader.next & (P4R_LANE_SLOTS - 1)].data) abort();
            memcpy(datagram, got, length); /* every byte it may read, read */
            p4r_ring_pop(&lane.up, &reader);
            if (lane.up.head != reader.next) abort();
            break;
        }
        case 3: /* the peer consumes on the down ring: any head */
            __atomic_store_n(&lane.down.head, a, __ATOMIC_RELEASE);
            break;
        case 4: { /* the honest writer publishes a datagram of a fuzzed length */
            if (down_broken) break;
            uint32_t length = b % (P4R_LANE_PAYLOAD + 64);
            memset(datagram, (int)(a & 0xff), length);
            uint32_t used = writer.next - lane.down.head, before = writer.next;
            int r = p4r_ring_push(&lane.down, &writer, datagram, length, (uint8_t)a);
            if (r < 0) {
                if (used <= P4R_LANE_SLOTS) abort(); /* broken only for an impossible head */
                down_broken = 1;
                break;
            }
            if (r == 0) {
                if (used < P4R_LANE_SLOTS && length <= P4R_LANE_PAYLOAD) abort(); /* room, yet refused */
                if (writer.next != before) abort();
                break;
            }
            if (used >= P4R_LANE_SLOTS || length > P4R_LANE_PAYLOAD) abort(); /* full or too long, yet taken */
            const struct p4r_lane_slot *s = &lane.down.slots[before & (P4R_LANE_SLOTS - 1)];
            if (s->length != length || s->tos != (uint8_t)a || memcmp(s->data, datagram, length) != 0) abort();
            if (lane.down.tail != writer.next || writer.next != before + 1) abort();
            break;
        }
        }
    }
    return 0;
}
