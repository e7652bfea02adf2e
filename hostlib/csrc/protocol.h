/* The wire protocol's numbers as the native engine needs them (docs/protocol.md, version 2).
 *
 * contracts/protocol.py is the authority for Python and p4src/common/constants.p4 for P4;
 * the extension exports these values and tests/hostlib/test_native_engine.py checks that they
 * equal contracts.protocol's and hostlib.engine's, so a change on one side alone fails a test. */
#ifndef P4R_PROTOCOL_H
#define P4R_PROTOCOL_H

#include <stdint.h>
#include <string.h>

#define P4R_HEADER_BYTES 24
#define P4R_MAX_VALUES 1024 /* the largest supported K */
#define P4R_MAX_PAYLOAD (P4R_HEADER_BYTES + 4 * P4R_MAX_VALUES)
#define P4R_MAX_WORKERS 32
#define P4R_EXP_BIAS 128
#define P4R_EXP_NONE 0
#define P4R_EXP_NONFINITE 255
#define P4R_USE_BITS 16
#define P4R_USE_MASK 0xFFFFu
#define P4R_MAX_USES_PER_CALL (1 << P4R_USE_BITS)
#define P4R_CALL_NUMBERS (1u << (32 - P4R_USE_BITS))
#define P4R_SET_BIT 0x8000u
#define P4R_SLOT_MASK 0x7FFFu

/* Loops over a packet's values are compiled twice on x86-64, for AVX2 (byte swaps and conversions
 * 8 at a time) and for the baseline, and the loader picks one: the same IEEE operations either way,
 * and -ffp-contract=off keeps them unfused, so results are bit for bit the same. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define P4R_VECTORIZED __attribute__((target_clones("avx2", "default")))
#else
#define P4R_VECTORIZED
#endif

enum p4r_msg { P4R_DATA = 1, P4R_RESULT = 2, P4R_MISSING = 3, P4R_ABORT = 4, P4R_STALE = 5, P4R_QUERY = 6 };

/* The engine's timing rules (hostlib/engine.py has the same names). */
#define P4R_RTO_MIN 0.001
#define P4R_QUESTION_MIN 0.0002 /* a question's timer never fires sooner (the switch answers at once) */
#define P4R_RTO_MAX 1.0
#define P4R_RTO_INITIAL 0.2
#define P4R_RTO_SRTT_MULTIPLE 3
#define P4R_FAST_RETRANSMIT_AFTER 3
#define P4R_REORDER_SHARE 4 /* a transmission is lost once one sent 1/this of the data round trip later is answered */
#define P4R_CWND_MIN (P4R_FAST_RETRANSMIT_AFTER + 1) /* the smallest congestion window (docs/protocol.md) */
#define P4R_TCP_SEGMENT 1448      /* a TCP flow's growth per round trip: the window's step (hostlib/engine.py) */
#define P4R_DATAGRAM_HEADERS 28   /* IPv4 and UDP */
#define P4R_ECN_MASK 0x03 /* the ECN field of the IPv4 DSCP/ECN byte (contracts/protocol.py ECN_*) */
#define P4R_ECN_ECT0 0x02
#define P4R_ECN_CE 0x03
#define P4R_REMEMBERED_ABORTS 64
#define P4R_QUESTION_BACKOFFS 2 /* an unanswered question's wait doubles this often, or up to 3 data RTTs */
#define P4R_QUESTION_MEMORY 4  /* a use's latest QUERYs whose times are kept to time their answers */
#define P4R_QUESTION_WAIT_SHARE 4 /* an unanswered question's wait doubles on up to 1/this of the wait */
#define P4R_RTT_SAMPLES 10000
#define P4R_LOSS_MEMORY 1.0 /* seconds a lost DATA makes timeouts ask after every late use (not hold) */
#define P4R_QUEUE_DELAY 0.001 /* seconds of queueing, at least, a loss must come with to be congestion */
#define P4R_QUEUE_TARGET 0.02 /* seconds of its own uses beyond the path's round trip a window may queue */
#define P4R_QUESTION_BUDGET 8  /* a timeout under loss asks after the late uses below L + this at once */

/* The 24-byte header, decoded: every field read with explicit big-endian loads. */
struct p4r_header {
    uint8_t msg_type, rank;
    uint16_t job_id, set_slot;
    uint8_t exp, flags;
    uint32_t seq, key, call, aux;
};

static inline uint16_t p4r_load16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static inline void p4r_store16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* 32-bit big-endian loads and stores through memcpy and a byte swap: loops over values vectorize. */
static inline uint32_t p4r_load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline void p4r_store32(uint8_t *p, uint32_t v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(p, &v, 4);
}

/* Callers check that at least P4R_HEADER_BYTES are readable. */
static inline struct p4r_header p4r_parse_header(const uint8_t *p) {
    struct p4r_header h;
    h.msg_type = p[0];
    h.rank = p[1];
    h.job_id = p4r_load16(p + 2);
    h.set_slot = p4r_load16(p + 4);
    h.exp = p[6];
    h.flags = p[7];
    h.seq = p4r_load32(p + 8);
    h.key = p4r_load32(p + 12);
    h.call = p4r_load32(p + 16);
    h.aux = p4r_load32(p + 20);
    return h;
}

static inline void p4r_write_header(uint8_t *p, const struct p4r_header *h) {
    p[0] = h->msg_type;
    p[1] = h->rank;
    p4r_store16(p + 2, h->job_id);
    p4r_store16(p + 4, h->set_slot);
    p[6] = h->exp;
    p[7] = h->flags;
    p4r_store32(p + 8, h->seq);
    p4r_store32(p + 12, h->key);
    p4r_store32(p + 16, h->call);
    p4r_store32(p + 20, h->aux);
}

static inline int p4r_payload_bytes(int k) { return P4R_HEADER_BYTES + 4 * k; }

/* Uses the congestion window grows by per window of results: one TCP segment of DATA datagrams. */
static inline long p4r_window_step(int k) {
    long datagram = p4r_payload_bytes(k) + P4R_DATAGRAM_HEADERS;
    return (P4R_TCP_SEGMENT + datagram - 1) / datagram;
}

/* The smallest congestion window: two TCP segments' worth, never below P4R_CWND_MIN. */
static inline long p4r_window_floor(int k) {
    long two = 2 * p4r_window_step(k);
    return two > P4R_CWND_MIN ? two : P4R_CWND_MIN;
}

#endif
