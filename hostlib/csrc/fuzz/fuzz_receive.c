/* libFuzzer target for the native engine's receive path (make fuzz; hostlib/csrc/fuzz/README.md).
 *
 * The input is a job (world size, rank, pool, K, dtype, operation, size), then a script of
 * events: raw datagrams, answers made from what the engine sent (RESULT, MISSING, ABORT, STALE
 * with fuzzed fields, lengths and values), replays of earlier datagrams (whole, or cut into UDP GRO
 * segments of a fuzzed size as the socket loop cuts them), time passing, new calls and fail(). Built with AddressSanitizer and UBSan, so any out-of-bounds read of a datagram, any
 * write outside the caller's output buffer and any undefined arithmetic stops the run; the
 * engine's own invariants are checked after every event. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../driver.h"
#include "../engine.h"
#include "../plan.h"
#include "../protocol.h"
#include "../udp.h"

#define JOB 21
#define KEY 0x5EED0021u
#define REMEMBERED 64

struct input {
    const uint8_t *data;
    size_t size, at;
};

static int more(const struct input *in) { return in->at < in->size; }

static uint8_t byte(struct input *in) { return in->at < in->size ? in->data[in->at++] : 0; }

static uint32_t word(struct input *in) {
    uint32_t w = 0;
    for (int i = 0; i < 4; i++) w = w << 8 | byte(in);
    return w;
}

struct call_buffers {
    struct p4r_plan plan;
    void *in, *out;
};

static void make_call(struct call_buffers *call, struct input *in, int world, int k) {
    static const int kinds[] = {P4R_PLAN_INT, P4R_PLAN_FLOAT, P4R_PLAN_FLOAT, P4R_PLAN_REFUSED};
    static const int outputs[] = {P4R_FLOAT32, P4R_FLOAT16, P4R_FLOAT64};
    uint8_t shape = byte(in);
    static const int halves[] = {P4R_FLOAT16, P4R_BFLOAT16};
    uint8_t seed = byte(in);
    int kind = kinds[shape & 3];
    int input = kind == P4R_PLAN_INT ? P4R_INT32 : (shape & 4 ? halves[seed >> 7] : P4R_FLOAT32);
    int output = kind == P4R_PLAN_INT ? P4R_INT32 : outputs[(shape >> 3) % 3];
    int bits = seed & 2 ? 16 : 32; /* the plan keeps 32 for int and refused plans */
    size_t size = (size_t)byte(in) << 4 | (shape >> 5);
    size_t width = input == P4R_FLOAT16 || input == P4R_BFLOAT16 ? 2 : 4, out_width = output == P4R_FLOAT64 ? 8 : output == P4R_FLOAT16 ? 2 : 4;
    call->in = malloc(size * width + 1);
    call->out = malloc(size * out_width + 1);
    for (size_t i = 0; i < size; i++) { /* values of every magnitude, with NaN and Inf now and then */
        uint32_t bits = (uint32_t)(i * 2654435761u) ^ (uint32_t)seed * 16777619u;
        if (width == 2) {
            ((uint16_t *)call->in)[i] = (uint16_t)bits;
        } else {
            memcpy((uint8_t *)call->in + 4 * i, &bits, 4);
        }
    }
    p4r_plan_init(&call->plan, kind, input, call->in, output, call->out, size, k, world, shape & 0x10,
                  seed & 1, bits);
}

static void free_call(struct call_buffers *call) {
    p4r_plan_free(&call->plan);
    free(call->in);
    free(call->out);
}

/* The engine's state must stay coherent whatever arrives. */
static void check(const struct p4r_engine *e) {
    const struct p4r_call *c = &e->call;
    if (!e->active) return;
    int outstanding = 0;
    for (int s = 0; s < c->width; s++) {
        if (c->current[s] >= 0) outstanding++;
        if (c->current[s] >= c->uses) abort();
    }
    if (outstanding != c->outstanding || c->width > e->half_slots) abort();
    long smallest = P4R_CWND_MIN < e->half_slots ? P4R_CWND_MIN : e->half_slots;
    if (e->cwnd < smallest || e->cwnd > e->half_slots) abort(); /* the congestion window's bounds */
    int waiting = 0;
    for (int s = 0; s < c->width; s++) {
        if (c->waiting[s] && c->current[s] < 0) abort(); /* a waiting slot holds a use */
        waiting += c->waiting[s];
    }
    if (waiting != c->waiting_count || c->lowest > c->uses) abort();
    if (!(e->rto >= P4R_RTO_MIN && e->rto <= P4R_RTO_MAX)) abort();
}

struct sent_log {
    uint8_t packets[REMEMBERED][P4R_MAX_PAYLOAD];
    uint16_t lengths[REMEMBERED];
    size_t count;
};

static void remember(struct sent_log *log, struct p4r_engine *e) {
    for (size_t i = 0; i < e->out.count; i++) {
        size_t at = log->count++ % REMEMBERED;
        memcpy(log->packets[at], e->out.data + i * e->out.frame, e->out.length[i]);
        log->lengths[at] = e->out.length[i];
    }
    p4r_out_clear(&e->out);
}

/* An answer to one of the packets the engine sent, with the fields the input chooses. */
static void answer(struct p4r_engine *e, struct sent_log *log, struct input *in, double now) {
    if (log->count == 0) return;
    size_t available = log->count < REMEMBERED ? log->count : REMEMBERED;
    size_t pick = (log->count - 1 - byte(in) % available) % REMEMBERED;
    uint8_t packet[P4R_MAX_PAYLOAD + 8];
    memcpy(packet, log->packets[pick], log->lengths[pick]);
    uint8_t how = byte(in);
    static const uint8_t types[] = {P4R_RESULT, P4R_RESULT, P4R_MISSING, P4R_ABORT, P4R_STALE, P4R_DATA, P4R_QUERY, 9};
    packet[0] = types[how & 7];
    size_t length = packet[0] == P4R_RESULT ? e->frame : P4R_HEADER_BYTES;
    if (how & 8) length = byte(in) % (e->frame + 8);
    if (length > log->lengths[pick]) memset(packet + log->lengths[pick], byte(in), length - log->lengths[pick]);
    if (how & 16) p4r_store32(packet + 20, word(in));   /* aux */
    if (how & 32) packet[6] = byte(in);                 /* exp */
    if (how & 64) p4r_store32(packet + 8, p4r_load32(packet + 8) + (byte(in) % 5) - 2); /* a nearby use */
    if (how & 128) p4r_store32(packet + P4R_HEADER_BYTES, word(in));                   /* a value */
    p4r_engine_receive(e, packet, length, now, byte(in)); /* any DSCP/ECN byte: CE shrinks the window */
}

/* Every outstanding DATA answered as a one-worker switch would: progress through whole calls. */
static void answer_round(struct p4r_engine *e, double now) {
    struct p4r_call *c = &e->call;
    if (!e->active) return;
    for (int s = 0; s < c->width; s++) {
        if (c->current[s] < 0) continue;
        uint8_t packet[P4R_MAX_PAYLOAD];
        memcpy(packet, c->buffers + (size_t)s * e->frame, e->frame);
        packet[0] = P4R_RESULT;
        p4r_engine_receive(e, packet, e->frame, now, (uint8_t)(s & 1 ? P4R_ECN_CE : P4R_ECN_ECT0));
    }
}

/* The receive path's ancillary data as the kernel could hand it over, up to the buffer's size: the TOS
 * and segment size parsers must stay inside it. */
static void control_messages(struct input *in) {
    static struct p4r_udp_receiver r;
    struct msghdr *h = &r.messages[0].msg_hdr;
    size_t room = sizeof r.control[0].bytes, length = byte(in) % (room + 1);
    for (size_t i = 0; i < length; i++) r.control[0].bytes[i] = (char)byte(in);
    h->msg_control = r.control[0].bytes;
    h->msg_controllen = length;
    r.messages[0].msg_len = byte(in);
    if (p4r_udp_segment(&r, 0) > r.messages[0].msg_len && r.messages[0].msg_len) abort();
    (void)p4r_udp_tos(&r, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int ks[] = {32, 64, 128, 256};
    struct input in = {data, size, 0};
    int world = 1 + byte(&in) % P4R_MAX_WORKERS;
    int rank = byte(&in) % world;
    int pool = 2 + byte(&in) % 127;
    int k = ks[byte(&in) % 4];
    struct p4r_engine *e = malloc(sizeof *e);
    if (e == NULL || p4r_engine_init(e, JOB, (uint8_t)rank, KEY, world, pool, k, 10.0, 1)) {
        free(e);
        return 0;
    }
    struct sent_log *log = calloc(1, sizeof *log);
    struct call_buffers call;
    make_call(&call, &in, world, k);
    double now = 0.0;
    p4r_plan_start(&call.plan, p4r_plan_width(&call.plan, e->half_slots), e->rank);
    if (call.plan.uses <= P4R_MAX_USES_PER_CALL) p4r_engine_begin(e, &call.plan, 0x20000040u, now);
    remember(log, e);
    uint8_t previous[P4R_MAX_PAYLOAD + 8];
    size_t previous_length = 0;
    while (more(&in)) {
        uint8_t op = byte(&in);
        now += ldexp((double)(op >> 4), (int)(op >> 4) - 16); /* from nothing to seconds */
        switch (op & 7) {
        case 0: { /* a raw datagram, job and key patched in or not */
            size_t length = byte(&in) % (e->frame + 8);
            for (size_t i = 0; i < length; i++) previous[i] = byte(&in);
            if ((op & 8) && length >= P4R_HEADER_BYTES) {
                p4r_store16(previous + 2, JOB);
                p4r_store32(previous + 12, KEY);
                p4r_store32(previous + 8, (e->call_number << 16) | (p4r_load32(previous + 8) & 0xFFFF));
            }
            previous_length = length;
            p4r_engine_receive(e, previous, length, now, op & 8 ? P4R_ECN_CE : 0);
            break;
        }
        case 1:
            answer(e, log, &in, now);
            break;
        case 2:
        case 3:
            p4r_engine_poll(e, now);
            if (!(p4r_engine_next_deadline(e) >= p4r_engine_wake_time(e))) abort(); /* wake is a lower bound */
            break;
        case 4: { /* the call ends, the next begins */
            struct p4r_error error;
            p4r_engine_finish(e, now, &error);
            free_call(&call);
            make_call(&call, &in, world, k);
            p4r_plan_start(&call.plan, p4r_plan_width(&call.plan, e->half_slots), e->rank);
            if (call.plan.uses <= P4R_MAX_USES_PER_CALL) p4r_engine_begin(e, &call.plan, word(&in), now);
            break;
        }
        case 5:
            p4r_engine_fail(e, op & 8);
            break;
        case 6: /* the last raw datagram again, or as a GRO buffer cut into segments of a fuzzed size */
            p4r_receive_buffer(e, previous, previous_length, op & 8 ? byte(&in) : previous_length, now, byte(&in));
            if (op & 128) control_messages(&in);
            break;
        default:
            answer_round(e, now);
            break;
        }
        remember(log, e);
        check(e);
    }
    struct p4r_error error;
    p4r_engine_finish(e, now, &error);
    free_call(&call);
    p4r_engine_free(e);
    free(e);
    free(log);
    return 0;
}
