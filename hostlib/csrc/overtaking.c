/* Overtaking (overtaking.h): O(1) per packet, amortized. */
#include "overtaking.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int p4r_overtaking_init(struct p4r_overtaking *o, int slots) {
    memset(o, 0, sizeof *o);
    o->latest = calloc((size_t)(slots > 0 ? slots : 1), sizeof *o->latest);
    o->capacity = 64;
    o->order = malloc(o->capacity * sizeof *o->order);
    o->answered_at = -INFINITY;
    if (o->latest == NULL || o->order == NULL) {
        p4r_overtaking_free(o);
        return -1;
    }
    return 0;
}

void p4r_overtaking_reset(struct p4r_overtaking *o, int slots) {
    memset(o->latest, 0, (size_t)slots * sizeof *o->latest);
    o->head = o->length = 0;
    o->sent = 0;
    memset(o->newest, 0, sizeof o->newest);
    o->answered_at = -INFINITY;
}

void p4r_overtaking_free(struct p4r_overtaking *o) {
    free(o->latest);
    free(o->order);
    o->latest = NULL;
    o->order = NULL;
}

int p4r_overtaking_sent(struct p4r_overtaking *o, int slot, double now) {
    if (o->length == o->capacity) {
        size_t capacity = o->capacity * 2;
        struct p4r_sent *order = malloc(capacity * sizeof *order);
        if (order == NULL) return -1;
        for (size_t i = 0; i < o->length; i++) order[i] = o->order[(o->head + i) % o->capacity];
        free(o->order);
        o->order = order;
        o->capacity = capacity;
        o->head = 0;
    }
    o->sent += 1;
    o->latest[slot] = o->sent;
    o->order[(o->head + o->length) % o->capacity] = (struct p4r_sent){o->sent, slot, now};
    o->length += 1;
    return 0;
}

void p4r_overtaking_withdraw(struct p4r_overtaking *o, int slot) { o->latest[slot] = 0; }

static size_t smallest(const uint64_t *newest) {
    size_t at = 0;
    for (size_t i = 1; i < P4R_FAST_RETRANSMIT_AFTER; i++) {
        if (newest[i] < newest[at]) at = i;
    }
    return at;
}

int p4r_overtaking_answered(struct p4r_overtaking *o, int slot, int first_send, double sent_at, double reorder,
                            int by_count, int *lost) {
    uint64_t number = o->latest[slot];
    o->latest[slot] = 0;
    if (!first_send) return 0; /* a resend's result may answer the first send: no evidence */
    size_t at = smallest(o->newest);
    if (number > o->newest[at]) o->newest[at] = number;
    uint64_t threshold = by_count ? o->newest[smallest(o->newest)] : 0;
    if (sent_at > o->answered_at) o->answered_at = sent_at;
    double before = o->answered_at - reorder; /* a transmission sent earlier than this was overtaken */
    int count = 0;
    while (o->length && (o->order[o->head].number < threshold || o->order[o->head].at < before)) {
        struct p4r_sent older = o->order[o->head];
        o->head = (o->head + 1) % o->capacity;
        o->length -= 1;
        if (o->latest[older.slot] == older.number) lost[count++] = older.slot; /* unanswered, not resent */
    }
    return count;
}

/* RACK's reordering timer (hostlib.engine.Overtaking.overdue). */
int p4r_overtaking_overdue(struct p4r_overtaking *o, double now, double wait, int *lost) {
    int count = 0;
    while (o->length) {
        struct p4r_sent older = o->order[o->head];
        int unanswered = o->latest[older.slot] == older.number;
        if (unanswered && !(older.at < o->answered_at && older.at + wait <= now)) break;
        o->head = (o->head + 1) % o->capacity;
        o->length -= 1;
        if (unanswered) lost[count++] = older.slot;
    }
    return count;
}

double p4r_overtaking_due(struct p4r_overtaking *o, double wait) {
    while (o->length && o->latest[o->order[o->head].slot] != o->order[o->head].number) {
        o->head = (o->head + 1) % o->capacity;
        o->length -= 1;
    }
    if (o->length && o->order[o->head].at < o->answered_at) return o->order[o->head].at + wait;
    return INFINITY;
}
