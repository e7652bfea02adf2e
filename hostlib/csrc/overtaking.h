/* Which unanswered uses to take as lost: the native twin of hostlib.engine.Overtaking (RFC 6675's
 * IsLost: a transmission older than the FAST_RETRANSMIT_AFTER-th newest one answered; RFC 8985's RACK:
 * one sent more than a reordering window before a transmission answered). */
#ifndef P4R_OVERTAKING_H
#define P4R_OVERTAKING_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

struct p4r_sent {
    uint64_t number; /* transmission number, 1, 2, ... */
    int slot;
    double at; /* when it went */
};

struct p4r_overtaking {
    uint64_t *latest;       /* per slot: its last transmission's number; 0 once answered */
    struct p4r_sent *order; /* ring buffer, oldest first */
    size_t head, length, capacity;
    uint64_t sent;
    uint64_t newest[P4R_FAST_RETRANSMIT_AFTER]; /* the newest transmissions answered (a multiset) */
    double answered_at; /* when the latest-sent transmission answered so far went */
};

int p4r_overtaking_init(struct p4r_overtaking *o, int slots);
void p4r_overtaking_reset(struct p4r_overtaking *o, int slots);
void p4r_overtaking_free(struct p4r_overtaking *o);
/* A transmission of the slot's current use; returns -1 when out of memory. */
int p4r_overtaking_sent(struct p4r_overtaking *o, int slot, double now);
/* A question was asked about the slot's use: no longer watched (its timer watches it). */
void p4r_overtaking_withdraw(struct p4r_overtaking *o, int slot);
/* The slot's result arrived: writes the slots now taken as lost to `lost`, returns how many. `sent_at`:
 * when the answered (first) transmission went; `reorder`: the reordering window, seconds (INFINITY: by
 * count alone); `by_count`: whether FAST_RETRANSMIT_AFTER later results mark a transmission lost (0: by the
 * window alone, once results are seen out of step). */
int p4r_overtaking_answered(struct p4r_overtaking *o, int slot, int first_send, double sent_at, double reorder,
                            int by_count, int *lost);
/* RACK's reordering timer: a transmission sent before one answered, but within the reordering window of
 * it, is lost once `wait` (a data round trip and the window) has passed since it went. Writes the slots
 * now taken as lost to `lost`, returns how many. */
int p4r_overtaking_overdue(struct p4r_overtaking *o, double now, double wait, int *lost);
/* When p4r_overtaking_overdue will next find a loss, or INFINITY; forgets answered transmissions at the
 * front of the order first. */
double p4r_overtaking_due(struct p4r_overtaking *o, double wait);

#endif
