/* The protocol state of one rank, with no I/O: the native twin of hostlib.engine.Engine.
 *
 * Same inputs (begin, receive, poll with explicit times), same packets out in the same order,
 * same counters: tests/hostlib/test_native_engine.py runs both side by side on the same traces.
 * Packets to send are appended to `out`; the caller sends and clears them. Errors are recorded
 * as data (struct p4r_error) and turned into Python exceptions by the module, with the
 * messages hostlib.engine builds, so both engines say the same thing. */
#ifndef P4R_ENGINE_H
#define P4R_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "overtaking.h"
#include "plan.h"
#include "protocol.h"

enum p4r_error_kind {
    P4R_OK = 0,
    P4R_ERR_MISMATCH = 1,  /* AllreduceMismatch: an ABORT for this call */
    P4R_ERR_ABANDONED = 2, /* AllreduceAborted: a STALE for an outstanding use */
    P4R_ERR_TIMEOUT = 3,   /* AllreduceTimeout: no progress for progress_timeout */
    P4R_ERR_EXTERNAL = 4,  /* Engine.fail: the error the caller gave */
    P4R_ERR_MEMORY = 5,    /* out of memory */
};

struct p4r_error {
    int kind;
    int aborted;        /* EXTERNAL: the caller's error is an AllreduceAborted */
    uint32_t rank, offender, held; /* MISMATCH: the ABORT's rank, call and aux; ABANDONED: held = aux */
    double idle;        /* TIMEOUT: what the message reports */
    int outstanding;
    uint64_t retransmissions, refused;
};

struct p4r_stats {
    uint64_t packets_sent, packets_received, bytes_sent, bytes_received;
    uint64_t retransmissions, queries, fast_retransmissions, timeouts, missing_received;
    uint64_t missing_resends, ignored, needless_questions, forged, refused, calls, aborted_calls;
    uint64_t ce_marks, window_decreases, random_losses, cwnd; /* docs/protocol.md, *Congestion* */
    double busy_seconds;
    size_t rtt_count;
    double rtt_samples[P4R_RTT_SAMPLES];
};

struct p4r_abort_seen {
    uint32_t number, rank, offender, held;
};

/* Packets to send, each copied at the moment the engine emits it. */
struct p4r_out {
    uint8_t *data; /* count frames of `frame` bytes */
    uint16_t *length;
    size_t count, capacity, frame;
};

struct p4r_call {
    uint32_t number, descriptor;
    struct p4r_plan *plan;
    int base, width, outstanding;
    long uses;
    long *current; /* use outstanding on each slot, -1 when the slot is done */
    long *fast_first; /* the slot's latest use asked after, if a fast suspicion asked first; else -1 */
    double *sent_at, *deadline;
    double *asked_at;     /* width x QUESTION_MEMORY: when the current use's latest QUERYs were asked */
    uint32_t *questions;  /* QUERYs asked about the current use (the n-th carries question_flags(n)) */
    uint32_t *data_asked; /* QUERYs asked about the current use before its latest DATA went */
    uint32_t *retries;
    uint32_t *asks; /* QUERYs and resends about the current use since the switch last answered */
    uint8_t *held;  /* its timer expired with an earlier use's, which alone was asked after */
    uint8_t *waiting; /* its current use waits for the congestion window (not sent yet) */
    uint8_t *agreed;  /* the exponent a waiting use is to be sent with */
    uint64_t *serial; /* the engine's number of the current use's first send */
    uint64_t *delivered_at; /* the engine's count of results when the current use first went */
    int waiting_count;
    int recovering; /* outstanding uses asked after (retries > 0): out of the window's count (fill()) */
    long priming; /* M: uses 0..M-1, whose results every later use waits for (fill()) */
    int lone;     /* use 0 went alone: no other use of the call is sent before its result (begin) */
    long lowest; /* L: the lowest use whose result this rank has not received */
    long edge;   /* uses below it are admitted by the window: sent once their slot is free */
    uint8_t *buffers; /* width DATA packets of `frame` bytes */
    int *lost;        /* scratch for p4r_overtaking_answered */
    int *expired;     /* scratch for poll */
    struct p4r_overtaking overtaking;
    struct p4r_error error;
};

struct p4r_engine {
    uint16_t job_id;
    uint8_t rank;
    uint32_t key;
    int world_size, pool_size, k, half_slots;
    size_t frame;
    double progress_timeout;
    int congestion_control;
    long cwnd;         /* in uses, within [cwnd_floor, min(half_slots, cap)] */
    long cwnd_step;    /* uses it grows by per window of results: p4r_window_step(k) */
    long cwnd_floor;   /* p4r_window_floor(k) */
    long acked;        /* results without CE since the window last grew or shrank */
    uint64_t serial;   /* the number the next first send of a use takes */
    uint64_t recover;  /* a signal about a use numbered below this was answered already */
    uint32_t call_number;
    int half;
    struct p4r_stats stats;
    double rto, srtt, rttvar;
    double backed_off; /* when the data timeout last doubled */
    double loss_seen;  /* when a MISSING last made this rank resend its DATA */
    int have_srtt;
    double qsrtt, qrttvar; /* smoothed round trip of a QUERY and its answer */
    int have_qsrtt;
    double base_rtt; /* the least round trip seen, data or question: the path with no queue */
    uint64_t delivered; /* results of outstanding uses received over the engine's life (sample_rate) */
    double rate[2];     /* the highest delivery rate sampled, uses a second: this call, the last */
    double least[2];    /* the least data round trip: this call, the last (cap) */
    double least_ever;  /* the least data round trip over the engine's life: the empty path */
    int out_of_step; /* a needless question was seen: results come out of this rank's order */
    double lone_srtt, lone_rttvar; /* smoothed round trip of a call's opening use sent alone */
    int have_lone_srtt;
    double lone_rto; /* the data timeout of a call's opening use sent alone, before rto bounds it */
    int active; /* a call is in flight (begun, not finished) */
    struct p4r_call call;
    double last_progress, started;
    double wake; /* <= every slot's deadline: poll has nothing to do before it */
    struct p4r_abort_seen aborts[P4R_REMEMBERED_ABORTS + 1];
    int abort_count;
    struct p4r_out out;
};

/* Returns 0, or -1 (out of memory). The membership is checked by the caller. */
int p4r_engine_init(struct p4r_engine *e, uint16_t job_id, uint8_t rank, uint32_t key, int world_size,
                    int pool_size, int k, double progress_timeout, int congestion_control);
void p4r_engine_free(struct p4r_engine *e);

/* Start the next call (the caller checks that none is active and that uses fit a call). */
void p4r_engine_begin(struct p4r_engine *e, struct p4r_plan *plan, uint32_t descriptor, double now);
/* `tos`: the IPv4 DSCP/ECN byte the datagram arrived with (0 when unknown). */
void p4r_engine_receive(struct p4r_engine *e, const uint8_t *datagram, size_t size, double now, uint8_t tos);
void p4r_engine_poll(struct p4r_engine *e, double now);
double p4r_engine_next_deadline(struct p4r_engine *e);
/* A time at or before next_deadline, in O(1): when the socket driver must poll next. */
double p4r_engine_wake_time(const struct p4r_engine *e);
int p4r_engine_done(const struct p4r_engine *e);
/* Engine.fail's effect on the call in flight. */
void p4r_engine_fail(struct p4r_engine *e, int aborted);
/* End the call: next call number and half, counters; *error receives the call's error. */
void p4r_engine_finish(struct p4r_engine *e, double now, struct p4r_error *error);
void p4r_engine_sample_rtt(struct p4r_engine *e, double rtt);

void p4r_out_clear(struct p4r_out *out);

#endif
