/* The protocol state machine (engine.h), line for line the rules of hostlib/engine.py. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double lesser(double a, double b) { return b < a ? b : a; }

/* ------------------------------------------------------------------ memory */

static int out_reserve(struct p4r_out *out, size_t count) {
    if (count <= out->capacity) return 0;
    size_t capacity = out->capacity ? out->capacity : 64;
    while (capacity < count) capacity *= 2;
    uint8_t *data = realloc(out->data, capacity * out->frame);
    if (data == NULL) return -1;
    out->data = data;
    uint16_t *length = realloc(out->length, capacity * sizeof *length);
    if (length == NULL) return -1;
    out->length = length;
    out->capacity = capacity;
    return 0;
}

void p4r_out_clear(struct p4r_out *out) { out->count = 0; }

int p4r_engine_init(struct p4r_engine *e, uint16_t job_id, uint8_t rank, uint32_t key, int world_size,
                    int pool_size, int k, double progress_timeout, int congestion_control) {
    memset(e, 0, sizeof *e);
    e->job_id = job_id;
    e->rank = rank;
    e->key = key;
    e->world_size = world_size;
    e->pool_size = pool_size;
    e->k = k;
    e->half_slots = pool_size / 2;
    e->frame = (size_t)p4r_payload_bytes(k);
    e->progress_timeout = progress_timeout;
    e->congestion_control = congestion_control;
    e->cwnd = e->half_slots;
    e->cwnd_step = p4r_window_step(k);
    e->cwnd_floor = p4r_window_floor(k);
    e->stats.cwnd = (uint64_t)e->cwnd;
    e->rto = P4R_RTO_INITIAL;
    e->backed_off = -INFINITY;
    e->loss_seen = -INFINITY;
    e->base_rtt = INFINITY;
    e->least[0] = e->least[1] = e->least_ever = INFINITY;
    e->lone_rto = INFINITY;
    e->out.frame = e->frame;
    size_t w = (size_t)e->half_slots;
    struct p4r_call *c = &e->call;
    c->current = malloc(w * sizeof *c->current);
    c->sent_at = malloc(w * sizeof(double));
    c->deadline = malloc(w * sizeof(double));
    c->retries = malloc(w * sizeof *c->retries);
    c->asked_at = malloc(w * P4R_QUESTION_MEMORY * sizeof(double));
    c->asks = malloc(w * sizeof *c->asks);
    c->held = malloc(w * sizeof *c->held);
    c->fast_first = malloc(w * sizeof *c->fast_first);
    c->waiting = malloc(w * sizeof *c->waiting);
    c->agreed = malloc(w * sizeof *c->agreed);
    c->serial = malloc(w * sizeof *c->serial);
    c->delivered_at = malloc(w * sizeof *c->delivered_at);
    c->questions = malloc(w * sizeof *c->questions);
    c->data_asked = malloc(w * sizeof *c->data_asked);
    c->buffers = malloc(w * e->frame);
    c->lost = malloc(w * sizeof *c->lost);
    c->expired = malloc(w * sizeof *c->expired);
    if (!c->current || !c->sent_at || !c->deadline || !c->retries || !c->data_asked || !c->asked_at ||
        !c->asks || !c->held || !c->fast_first || !c->questions || !c->waiting || !c->agreed || !c->serial ||
        !c->delivered_at || !c->buffers || !c->lost || !c->expired ||
        p4r_overtaking_init(&c->overtaking, e->half_slots) || out_reserve(&e->out, 2 * w + 8)) {
        p4r_engine_free(e);
        return -1;
    }
    return 0;
}

void p4r_engine_free(struct p4r_engine *e) {
    struct p4r_call *c = &e->call;
    free(c->current);
    free(c->sent_at);
    free(c->deadline);
    free(c->retries);
    free(c->asked_at);
    free(c->asks);
    free(c->held);
    free(c->fast_first);
    free(c->waiting);
    free(c->agreed);
    free(c->serial);
    free(c->delivered_at);
    free(c->questions);
    free(c->data_asked);
    free(c->buffers);
    free(c->lost);
    free(c->expired);
    p4r_overtaking_free(&c->overtaking);
    free(e->out.data);
    free(e->out.length);
    memset(c, 0, sizeof *c);
    memset(&e->out, 0, sizeof e->out);
}

static void out_of_memory(struct p4r_engine *e) {
    if (e->active) e->call.error.kind = P4R_ERR_MEMORY;
}

/* ------------------------------------------------------------------ sending */

static void emit(struct p4r_engine *e, const uint8_t *packet, size_t size) {
    struct p4r_out *out = &e->out;
    if (out_reserve(out, out->count + 1)) {
        out_of_memory(e);
        return;
    }
    memcpy(out->data + out->count * out->frame, packet, size);
    out->length[out->count++] = (uint16_t)size;
    e->stats.packets_sent += 1;
    e->stats.bytes_sent += size;
}

static void set_deadline(struct p4r_engine *e, int slot, double at) {
    e->call.deadline[slot] = at;
    e->wake = lesser(e->wake, at);
}

/* The smoothed data round trip, or before any sample the one RTO_INITIAL assumes. */
static double data_rtt(const struct p4r_engine *e) {
    return e->have_srtt ? e->srtt : P4R_RTO_INITIAL / P4R_RTO_SRTT_MULTIPLE;
}

/* The reordering window: a share of the data round trip while results come back in about this rank's
 * order, the whole of it once they are seen out of step (hostlib.engine.Engine._reordering). */
static double reordering(const struct p4r_engine *e) {
    return e->out_of_step ? data_rtt(e) : data_rtt(e) / P4R_REORDER_SHARE;
}

/* How long after it went an overtaken transmission is taken as lost: a data round trip and the reordering
 * window (hostlib.engine.Engine._rack_wait). */
static double rack_wait(const struct p4r_engine *e) { return data_rtt(e) + reordering(e); }

/* The switch answers a QUERY at once, so its round trip is the network's, without the wait for the
 * slowest rank that data round trips include. */
static double question_rtt(const struct p4r_engine *e) { return e->have_qsrtt ? e->qsrtt : data_rtt(e); }

/* How long to wait for the switch's answer to a question (or for a use it said is collecting): three
 * question round trips, doubled per unanswered one, QUESTION_BACKOFFS times or up to three data round
 * trips, within [QUESTION_MIN, RTO_MAX]. Silence is the normal answer for a rank whose contribution is
 * in, and it must ask again soon after the use completes in case its RESULT was lost: hence the early
 * stop. But a question estimate far too small (taken on an empty queue, before one built up) must not
 * keep the questions coming faster than their answers: the data round trip, timed by DATA through the
 * same queues, bounds how soon the backoff may stop. (Not the data timeout itself, which a call's start
 * or end may have backed off to a second.) Both estimates stop when results stop: Karn's rule takes no
 * sample from a use asked after, and a rank whose contribution is in gets no answers. So the doubling
 * also goes on up to a QUESTION_WAIT_SHARE of the time since the last result, as TCP's backed-off timer
 * does while nothing comes back: a switch short of a core, whose answers came later than four questions,
 * kept every waiting rank asking at the rate of round trips timed before the wait, and those questions
 * were its backlog (60 s without progress). */
static double question_timeout(const struct p4r_engine *e, uint32_t asks, double now) {
    double base = P4R_RTO_SRTT_MULTIPLE * question_rtt(e);
    if (P4R_QUESTION_MIN > base) base = P4R_QUESTION_MIN;
    double cap = ldexp(base, P4R_QUESTION_BACKOFFS);
    double data = P4R_RTO_SRTT_MULTIPLE * data_rtt(e);
    if (data > cap) cap = data;
    double waited = (now - e->last_progress) / P4R_QUESTION_WAIT_SHARE;
    if (waited > cap) cap = waited;
    int doublings = asks > 1 ? (int)lesser(asks - 1, 30) : 0;
    return lesser(lesser(ldexp(base, doublings), cap), P4R_RTO_MAX);
}

/* Whether the slot's use is a call's opening use sent alone, timed by its shorter timeout
 * (hostlib.engine.Engine._probing). */
static int probing(const struct p4r_engine *e, int slot) {
    return e->call.lone && e->call.current[slot] == 0 && e->lone_rto < e->rto;
}

/* The data timeout of the slot's current use: a call's opening use sent alone has its own estimate, as its
 * round trip has no queue of this rank's window in it (hostlib.engine.Engine._timeout). */
static double use_timeout(const struct p4r_engine *e, int slot) { return probing(e, slot) ? e->lone_rto : e->rto; }

/* RFC 6298's smoothing of one round-trip sample into a mean and a deviation, with its gains 1/8 and 1/4
 * divided by the samples a round trip brings (RFC 7323, Appendix G). */
static void smooth(int *have, double *srtt, double *rttvar, double sample, int samples_per_rtt) {
    if (!*have) {
        *have = 1;
        *srtt = sample;
        *rttvar = sample / 2;
    } else {
        double alpha = 0.125 / samples_per_rtt, beta = 0.25 / samples_per_rtt;
        *rttvar = (1 - beta) * *rttvar + beta * fabs(*srtt - sample);
        *srtt = (1 - alpha) * *srtt + alpha * sample;
    }
}

/* The `flags` of the n-th QUERY about a use (n >= 1): 1 .. 255, never the 0 of a DATA, which a multicast
 * RESULT keeps. The switch copies it into its answer, so an answer names the question it answers. */
static uint8_t question_flags(uint32_t n) { return (uint8_t)((n - 1) % 255 + 1); }

/* Which of the slot's questions (1, 2, ...) an answer echoes, or 0 when the echo names none (a multicast
 * RESULT's 0, or no question asked yet about the current use). */
static uint32_t question_number(const struct p4r_call *c, int slot, uint8_t echo) {
    uint32_t n = c->questions[slot];
    if (echo == 0 || n == 0) return 0;
    uint32_t back = (uint32_t)(question_flags(n) + 255 - echo) % 255;
    return back < n ? n - back : 0;
}

/* When the slot's question `number` was asked, if it is among the latest QUESTION_MEMORY; if it is older,
 * when the oldest of them was, so that its answer's sample is a lower bound of its round trip. An answer
 * later than the memory is exactly what a question estimate taken before a queue built up must learn
 * from: ignored, it left the questions coming faster than their answers for good. */
static double asked_time(const struct p4r_call *c, int slot, uint32_t number) {
    uint32_t n = c->questions[slot];
    uint32_t oldest = n >= P4R_QUESTION_MEMORY ? n - P4R_QUESTION_MEMORY + 1 : 1;
    if (number < oldest) number = oldest;
    return c->asked_at[(size_t)slot * P4R_QUESTION_MEMORY + number % P4R_QUESTION_MEMORY];
}

static void sample_question(struct p4r_engine *e, double rtt) {
    smooth(&e->have_qsrtt, &e->qsrtt, &e->qrttvar, rtt, 1);
    if (rtt < e->base_rtt) e->base_rtt = rtt;
}

/* The switch answered a question about the slot's use: its round trip is a sample, since the echo says
 * which question it answers (Karn's ambiguity does not arise). */
static void answered(struct p4r_engine *e, int slot, uint8_t echo, double now) {
    struct p4r_call *c = &e->call;
    uint32_t number = question_number(c, slot, echo);
    if (number) sample_question(e, now - asked_time(c, slot, number));
    c->asks[slot] = 0;
}


static void sent(struct p4r_engine *e, int slot, double now) {
    if (p4r_overtaking_sent(&e->call.overtaking, slot, now)) out_of_memory(e);
}

static void send_use(struct p4r_engine *e, int slot, long use, uint8_t agreed_exp, double now) {
    struct p4r_call *c = &e->call;
    uint8_t *buffer = c->buffers + (size_t)slot * e->frame;
    struct p4r_header h = {
        .msg_type = P4R_DATA,
        .rank = e->rank,
        .job_id = e->job_id,
        .set_slot = (uint16_t)(((use / c->width) % 2 ? P4R_SET_BIT : 0) | (unsigned)(c->base + slot)),
        .exp = p4r_plan_payload(c->plan, use, agreed_exp, buffer + P4R_HEADER_BYTES),
        .flags = 0,
        .seq = (c->number % P4R_CALL_NUMBERS) << P4R_USE_BITS | (uint32_t)use,
        .key = e->key,
        .call = c->descriptor,
        .aux = 0,
    };
    p4r_write_header(buffer, &h);
    c->current[slot] = use;
    c->waiting[slot] = 0;
    c->serial[slot] = e->serial++;
    c->delivered_at[slot] = e->delivered;
    c->sent_at[slot] = now;
    c->retries[slot] = c->asks[slot] = 0;
    c->questions[slot] = c->data_asked[slot] = 0;
    c->held[slot] = 0;
    set_deadline(e, slot, now + e->rto);
    sent(e, slot, now);
    emit(e, buffer, e->frame);
}

/* A second (third, ...) transmission about a slot's use: Karn's rule for the data round trip, and a
 * question timer that doubles with every question the switch leaves unanswered. */
static void again(struct p4r_engine *e, int slot, const uint8_t *packet, size_t size, double now) {
    struct p4r_call *c = &e->call;
    c->recovering += c->retries[slot] == 0;
    c->retries[slot] += 1;
    c->asks[slot] += 1;
    set_deadline(e, slot, now + question_timeout(e, c->asks[slot], now));
    emit(e, packet, size);
}

static void resend(struct p4r_engine *e, int slot, double now) {
    struct p4r_call *c = &e->call;
    c->data_asked[slot] = c->questions[slot];
    e->stats.retransmissions += 1;
    sent(e, slot, now);
    again(e, slot, c->buffers + (size_t)slot * e->frame, e->frame, now);
}

static void query(struct p4r_engine *e, int slot, double now) {
    struct p4r_call *c = &e->call;
    uint8_t packet[P4R_HEADER_BYTES];
    memcpy(packet, c->buffers + (size_t)slot * e->frame, P4R_HEADER_BYTES);
    uint32_t n = ++c->questions[slot];
    c->asked_at[(size_t)slot * P4R_QUESTION_MEMORY + n % P4R_QUESTION_MEMORY] = now;
    packet[0] = P4R_QUERY;
    packet[7] = question_flags(n);
    e->stats.queries += 1;
    p4r_overtaking_withdraw(&c->overtaking, slot);
    again(e, slot, packet, sizeof packet, now);
}

/* The slot's use may be lost, its DATA or its RESULT: ask at once (the switch answers only a rank that
 * has something to do). */
static void suspect(struct p4r_engine *e, int slot, double now, int fast) {
    struct p4r_call *c = &e->call;
    if (c->current[slot] < 0 || c->waiting[slot]) return;
    e->stats.fast_retransmissions += (uint64_t)fast;
    if (c->questions[slot] == 0) c->fast_first[slot] = fast ? c->current[slot] : -1; /* needless() */
    query(e, slot, now);
}

/* ------------------------------------------------------------------ congestion window
 * docs/protocol.md, *Congestion*; hostlib.engine.Engine's _limited, _wait, _advance_lowest, _fill,
 * _decrease and _grow, step for step. */

/* Whether the window, not slot pacing alone, decides when a use is sent. */
static int limited(const struct p4r_engine *e) {
    return e->congestion_control && e->cwnd < e->call.width;
}

/* The slot's next use, not sent until the window admits it (fill()). */
static void wait_use(struct p4r_engine *e, int slot, long use, uint8_t agreed_exp) {
    struct p4r_call *c = &e->call;
    c->current[slot] = use;
    c->agreed[slot] = agreed_exp;
    c->held[slot] = 0;
    c->waiting[slot] = 1;
    c->waiting_count += 1;
    c->deadline[slot] = INFINITY;
}

/* L moves past every use whose result is in: its slot has moved on, or is done. O(1) amortized. */
static void advance_lowest(struct p4r_call *c) {
    while (c->lowest < c->uses) {
        long held = c->current[c->lowest % c->width];
        if (held >= 0 && held <= c->lowest) break;
        c->lowest += 1;
    }
}

/* Send the waiting uses the window admits, lowest use first: without a limit a free slot sends at once;
 * with one, use u goes when its slot is free and u < L + cwnd + R, R the outstanding uses asked after
 * (found lost, out of the network: hostlib.engine.Engine._fill). */
static void fill(struct p4r_engine *e, int freed, double now) {
    struct p4r_call *c = &e->call;
    if (c->waiting_count == 0) return;
    int limit = limited(e);
    /* while the priming is incomplete (L < M) the window ends at M: a float call's chunks wait for the
     * exponents it agrees */
    long gate = c->lowest < c->priming ? c->priming : c->uses;
    if (!limit && gate == c->uses && c->waiting_count == 1 && freed >= 0 && c->waiting[freed]) {
        c->waiting_count = 0;
        send_use(e, freed, c->current[freed], c->agreed[freed], now);
        return;
    }
    long use, end;
    if (limit) {
        if (freed >= 0 && c->waiting[freed] && c->current[freed] < c->edge) {
            c->waiting_count -= 1;
            send_use(e, freed, c->current[freed], c->agreed[freed], now);
        }
        use = c->edge > c->lowest ? c->edge : c->lowest;
        long window = c->lowest + e->cwnd + c->recovering;
        end = window < gate ? window : gate;
        if (end > c->edge) c->edge = end;
    } else {
        use = c->lowest;
        end = gate;
        c->edge = gate;
    }
    for (; use < end && c->waiting_count; use++) {
        int slot = (int)(use % c->width);
        if (c->waiting[slot] && c->current[slot] == use) {
            c->waiting_count -= 1;
            send_use(e, slot, use, c->agreed[slot], now);
        }
    }
    if (!limit) return;
    /* beyond the window, uses go on while fewer than cwnd are in flight (sent and unanswered, less those
     * asked after: RFC 6675's pipe, as R above), lowest first, each as soon as its slot is free; the walk
     * passes over every use it cannot send (already sent or answered, or its slot still holds an earlier
     * use: stopping there held every slot behind a use in recovery at L; the edge stays at the first of
     * those) and ends past the last waiting use (hostlib.engine.Engine._fill) */
    use = c->edge > c->lowest ? c->edge : c->lowest;
    long flight = c->outstanding - c->waiting_count - c->recovering;
    long ahead = 0, held = -1; /* held: the first use passed over because its slot holds an earlier one */
    for (int s = 0; s < c->width; s++) ahead += c->waiting[s] && c->current[s] >= use;
    for (; flight < e->cwnd && use < gate && ahead; use++) {
        int slot = (int)(use % c->width);
        if (c->waiting[slot] && c->current[slot] == use) {
            c->waiting_count -= 1;
            ahead -= 1;
            send_use(e, slot, use, c->agreed[slot], now);
            flight += 1;
        } else if (held < 0 && c->current[slot] >= 0 && c->current[slot] < use) {
            held = use;
        }
    }
    if (held >= 0) use = held; /* not let out: it goes by the walk, within the flight, when its slot frees */
    if (use > c->edge) c->edge = use;
}

/* Whether a CE mark or a loss about the use first sent as `serial` is a new congestion event: one per
 * window (a signal about a use sent before the last decrease is part of the same event). */
static int new_event(const struct p4r_engine *e, uint64_t serial) {
    return e->congestion_control && e->active && serial >= e->recover;
}

/* A smaller window takes effect at once: the edge comes down to its end. */
static void shrink(struct p4r_engine *e, long cwnd) {
    struct p4r_call *c = &e->call;
    e->cwnd = cwnd;
    if (c->lowest + e->cwnd + c->recovering < c->edge) c->edge = c->lowest + e->cwnd + c->recovering;
    __atomic_store_n(&e->stats.cwnd, (uint64_t)e->cwnd, __ATOMIC_RELAXED);
}

/* The most uses the window holds: the highest delivery rate times the least data round trip and
 * QUEUE_TARGET, both over this call and the last; H until a call has measured a rate, and while another
 * flow keeps a queue standing (the least of these two calls QUEUE_TARGET above the least ever seen)
 * (hostlib/engine.py, Engine._cap). */
static long cap(const struct p4r_engine *e) {
    double least = fmin(e->least[0], e->least[1]);
    if (!e->congestion_control || e->rate[1] <= 0.0 || least - e->least_ever >= P4R_QUEUE_TARGET)
        return e->half_slots;
    double want = ceil(fmax(e->rate[0], e->rate[1]) * (least + P4R_QUEUE_TARGET));
    long most = want < (double)e->half_slots ? (long)want : e->half_slots;
    return most > e->cwnd_floor ? most : e->cwnd_floor;
}

/* The cap, with the window brought within it (as a decrease does, edge included). */
static long within_cap(struct p4r_engine *e) {
    long most = cap(e);
    if (e->cwnd > most) shrink(e, most);
    return most;
}

/* A use's round trip (first send) and the results that arrived within it, its own included: a delivery
 * rate and the least round trip, for the cap. */
static void sample_rate(struct p4r_engine *e, double rtt, uint64_t delivered) {
    if (rtt > 0.0) {
        e->rate[0] = fmax(e->rate[0], (double)delivered / rtt);
        e->least[0] = fmin(e->least[0], rtt);
        e->least_ever = fmin(e->least_ever, rtt);
    }
}

/* CE or a loss about the use first sent as `serial`: halve the window in use, once per window. */
static void decrease(struct p4r_engine *e, uint64_t serial) {
    struct p4r_call *c = &e->call;
    if (!new_event(e, serial)) return;
    e->recover = e->serial;
    e->acked = 0;
    long in_use = e->cwnd < c->width ? e->cwnd : c->width;
    long cwnd = in_use / 2 > e->cwnd_floor ? in_use / 2 : e->cwnd_floor;
    shrink(e, cwnd < e->half_slots ? cwnd : e->half_slots);
    e->stats.window_decreases += 1;
}

/* A loss of this rank's DATA (a MISSING, or a timeout within LOSS_MEMORY of one): a decrease only while
 * the smoothed question round trip lies QUEUE_DELAY or more above the least round trip seen, a queue. A
 * loss without one is the link's or a switch's own (hostlib/engine.py, Engine._lost). */
static void lost(struct p4r_engine *e, uint64_t serial) {
    if (!new_event(e, serial)) return;
    if (question_rtt(e) - e->base_rtt < P4R_QUEUE_DELAY) {
        e->stats.random_losses += 1;
        return;
    }
    decrease(e, serial);
}

/* A result without CE: cwnd_step uses more per window of them (a TCP segment's worth), while the window
 * limits the call, and never past the cap, which comes down first if it has. */
static void grow(struct p4r_engine *e) {
    long most = within_cap(e);
    if (!limited(e)) return;
    if (++e->acked >= e->cwnd) {
        e->acked = 0;
        long grown = e->cwnd + e->cwnd_step < e->half_slots ? e->cwnd + e->cwnd_step : e->half_slots;
        e->cwnd = grown < most ? grown : most;
        __atomic_store_n(&e->stats.cwnd, (uint64_t)e->cwnd, __ATOMIC_RELAXED);
    }
}

/* An answer showed that the timeout was a loss, not a wait: a MISSING that this rank's DATA was lost, a
 * replay that its RESULT was. The uses held back with the asked one at a timeout may be lost too, and are
 * asked after at once. As at a timeout, each is a loss for the window only within LOSS_MEMORY of a lost
 * DATA: a lost RESULT alone never halved it. */
static void ask_held(struct p4r_engine *e, double now) {
    struct p4r_call *c = &e->call;
    int lossy = now - e->loss_seen < P4R_LOSS_MEMORY;
    for (int s = 0; s < c->width; s++) {
        if (c->held[s] && c->retries[s] == 0 && c->current[s] >= 0) {
            e->stats.timeouts += 1;
            if (lossy) lost(e, c->serial[s]);
            suspect(e, s, now, 0);
        }
    }
}

/* ------------------------------------------------------------------ calls */

void p4r_engine_begin(struct p4r_engine *e, struct p4r_plan *plan, uint32_t descriptor, double now) {
    struct p4r_call *c = &e->call;
    int width = p4r_plan_width(plan, e->half_slots);
    p4r_plan_start(plan, width, e->rank);
    c->number = e->call_number;
    c->descriptor = descriptor;
    c->plan = plan;
    c->base = e->half * e->half_slots;
    c->width = width;
    c->uses = plan->uses;
    c->priming = plan->priming; /* 0 for int32 and refused plans */
    c->outstanding = width;
    memset(&c->error, 0, sizeof c->error);
    for (int s = 0; s < width; s++) {
        c->current[s] = -1;
        c->sent_at[s] = 0.0;
        c->retries[s] = c->asks[s] = 0;
        c->questions[s] = c->data_asked[s] = 0;
        c->held[s] = 0;
        c->fast_first[s] = -1;
        c->waiting[s] = 0;
        c->deadline[s] = INFINITY;
    }
    c->waiting_count = 0;
    c->recovering = 0;
    c->lowest = c->edge = 0;
    c->lone = 0;
    p4r_overtaking_reset(&c->overtaking, width);
    e->wake = INFINITY;
    e->active = 1;
    e->started = e->last_progress = now;
    /* the cap's measurements span this call and the last one that made any (cap) */
    e->rate[1] = e->rate[0] > 0.0 ? e->rate[0] : e->rate[1];
    e->rate[0] = 0.0;
    e->least[1] = e->least[0] < INFINITY ? e->least[0] : e->least[1];
    e->least[0] = INFINITY;
    within_cap(e);
    for (int i = 0; i < e->abort_count; i++) {
        if (e->aborts[i].number == c->number) { /* an ABORT for this call came before it began */
            struct p4r_abort_seen known = e->aborts[i];
            memmove(&e->aborts[i], &e->aborts[i + 1], (size_t)(e->abort_count - i - 1) * sizeof known);
            e->abort_count -= 1;
            c->error = (struct p4r_error){.kind = P4R_ERR_MISMATCH, .rank = known.rank,
                                          .offender = known.offender, .held = known.held};
            return;
        }
    }
    if (c->uses == 0) {
        c->outstanding = 0;
        return;
    }
    for (int s = 0; s < width; s++) wait_use(e, s, s, 0);
    fill(e, -1, now);
    if (c->outstanding - c->waiting_count == 1) { /* the call opens with one use alone (use_timeout) */
        c->lone = 1;
        set_deadline(e, 0, now + use_timeout(e, 0));
    }
}

int p4r_engine_done(const struct p4r_engine *e) {
    return !e->active || e->call.outstanding == 0 || e->call.error.kind != P4R_OK;
}

void p4r_engine_fail(struct p4r_engine *e, int aborted) {
    if (e->active && e->call.error.kind == P4R_OK) {
        e->call.error = (struct p4r_error){.kind = P4R_ERR_EXTERNAL, .aborted = aborted};
    }
}

void p4r_engine_finish(struct p4r_engine *e, double now, struct p4r_error *error) {
    memset(error, 0, sizeof *error);
    if (!e->active) return;
    e->active = 0;
    struct p4r_call *c = &e->call;
    e->stats.busy_seconds += now - e->started;
    e->call_number = (c->number + 1) % P4R_CALL_NUMBERS;
    *error = c->error;
    int aborted = error->kind == P4R_ERR_MISMATCH || error->kind == P4R_ERR_ABANDONED ||
                  (error->kind == P4R_ERR_EXTERNAL && error->aborted);
    if (aborted) {
        e->stats.aborted_calls += 1; /* the next call reuses the aborted call's half */
    } else {
        e->half ^= 1;
        e->stats.calls += error->kind == P4R_OK;
    }
}

/* ------------------------------------------------------------------ answers */

/* RFC 6298's srtt + 4 x rttvar, never under RTO_SRTT_MULTIPLE x srtt, within [RTO_MIN, RTO_MAX]
 * (hostlib.engine.retransmission_timeout). Python's max(a, b, c) and min(x, RTO_MAX): the first of equals,
 * the same value. */
static double retransmission_timeout(double srtt, double rttvar) {
    double floor = srtt + 4 * rttvar, b = P4R_RTO_SRTT_MULTIPLE * srtt;
    if (b > floor) floor = b;
    if (P4R_RTO_MIN > floor) floor = P4R_RTO_MIN;
    return P4R_RTO_MAX < floor ? P4R_RTO_MAX : floor;
}

/* RFC 6298's estimate, with `samples_per_rtt` dividing its gains (see result()). */
static void sample_rtt(struct p4r_engine *e, double rtt, int samples_per_rtt) {
    smooth(&e->have_srtt, &e->srtt, &e->rttvar, rtt, samples_per_rtt);
    if (rtt < e->base_rtt) e->base_rtt = rtt;
    e->rto = retransmission_timeout(e->srtt, e->rttvar);
    if (e->stats.rtt_count < P4R_RTT_SAMPLES) { /* the sample first, then the count that shows it */
        e->stats.rtt_samples[e->stats.rtt_count] = rtt;
        __atomic_store_n(&e->stats.rtt_count, e->stats.rtt_count + 1, __ATOMIC_RELEASE);
    }
}

void p4r_engine_sample_rtt(struct p4r_engine *e, double rtt) { sample_rtt(e, rtt, 1); }

/* A round trip of a call's opening use sent alone: RFC 6298's timeout on its own estimate. */
static void sample_lone(struct p4r_engine *e, double rtt) {
    smooth(&e->have_lone_srtt, &e->lone_srtt, &e->lone_rttvar, rtt, 1);
    e->lone_rto = retransmission_timeout(e->lone_srtt, e->lone_rttvar);
}

/* The slot of the current call that a packet names (within the call's width), or -1; `use` gets the use it
 * names (hostlib.engine.Engine._named). */
static int named_slot(const struct p4r_engine *e, uint32_t seq, uint16_t set_slot, long *use) {
    const struct p4r_call *c = &e->call;
    if (!e->active || seq >> P4R_USE_BITS != c->number) return -1;
    *use = (long)(seq & P4R_USE_MASK);
    int slot = (int)(set_slot & P4R_SLOT_MASK) - c->base;
    return slot < 0 || slot >= c->width ? -1 : slot;
}

/* The call's slot whose outstanding use the packet names exactly, or -1. */
static int outstanding_slot(const struct p4r_engine *e, uint32_t seq, uint16_t set_slot) {
    const struct p4r_call *c = &e->call;
    long use;
    int slot = named_slot(e, seq, set_slot, &use);
    if (slot < 0 || c->current[slot] != use || c->waiting[slot]) return -1;
    if ((set_slot >> 15) != (use / c->width) % 2) return -1;
    return slot;
}

/* Whether a round trip is longer than both the smoothed one and RTO_SRTT_MULTIPLE question round trips.
 * Under loss a use's round trip includes the slowest rank's recovery of it (a peer's lost DATA, found by
 * that peer's timers); at TCP's gains the timers followed recovery times, which follow the timers, and at
 * 20 % loss each call's estimate lengthened the next call's recovery (hostlib/engine.py,
 * Engine._lengthens; docs/performance.md, Heavy loss). A question's round trip is the network's, queues
 * included, without any rank's recovery: a data round trip far beyond it moves the estimate by W samples
 * per round trip, as while quiet; one within it (a queue on a slow link), or shorter, at TCP's gains. */
static int lengthens(const struct p4r_engine *e, double rtt) {
    return e->have_srtt && rtt > fmax(e->srtt, P4R_RTO_SRTT_MULTIPLE * question_rtt(e));
}

static void result(struct p4r_engine *e, int slot, const uint8_t *values, uint8_t exp, uint8_t echo,
                   double now, int ce) {
    struct p4r_call *c = &e->call;
    long use = c->current[slot];
    uint64_t serial = c->serial[slot];
    int first_send = c->retries[slot] == 0;
    c->recovering -= !first_send;
    e->delivered += 1;
    if (first_send) { /* Karn: only unambiguous samples */
        /* A call has W uses in flight and so W samples per round trip where TCP has one. While no loss was
         * seen (LOSS_MEMORY) the gains are divided by W (RFC 7323, Appendix G): a wait that held a whole
         * window (a rank or the switch waiting for a core) is then not forgotten within a round trip.
         * Under loss TCP's gains stay, to follow the queues that recovery builds and drains, but for a round
         * trip that a peer's recovery lengthened, divided by W as while quiet (lengthens). */
        double rtt = now - c->sent_at[slot];
        sample_rate(e, rtt, e->delivered - c->delivered_at[slot]);
        int quiet = now - e->loss_seen >= P4R_LOSS_MEMORY;
        sample_rtt(e, rtt, quiet || lengthens(e, rtt) ? c->width : 1);
    }
    /* The multicast RESULT of the opening use's only DATA: a probe asked nothing of the DATA, so the
     * sample stands (a peer that started the call late is in it, as the timer must learn). */
    if (c->lone && use == 0 && echo == 0 && c->data_asked[slot] == 0) sample_lone(e, now - c->sent_at[slot]);
    int replay = question_number(c, slot, echo) != 0; /* an answer to a question, not the multicast */
    if (c->asks[slot]) answered(e, slot, echo, now);
    int lost = p4r_overtaking_answered(&c->overtaking, slot, first_send, c->sent_at[slot], reordering(e),
                                       !e->out_of_step, c->lost);
    e->wake = lesser(e->wake, p4r_overtaking_due(&c->overtaking, rack_wait(e)));
    p4r_plan_deliver(c->plan, use, values);
    e->last_progress = now;
    long following = use + c->width;
    if (following < c->uses) {
        wait_use(e, slot, following, exp);
    } else {
        c->current[slot] = -1;
        c->deadline[slot] = INFINITY;
        c->outstanding -= 1;
    }
    advance_lowest(c);
    if (ce) {
        e->stats.ce_marks += 1;
        decrease(e, serial);
    } else {
        grow(e);
    }
    for (int i = 0; i < lost; i++) suspect(e, c->lost[i], now, 1);
    /* The switch answered a question with the RESULT: the use was complete, and its multicast, which left
     * before the answer, was lost. The timeout was a loss, as a MISSING shows for a DATA: held on, each use
     * held with it cost a doubled timeout more (a second each once backed off) while a lost RESULT or DATA
     * behind it kept every other rank waiting. */
    if (replay) ask_held(e, now);
    fill(e, slot, now); /* after the questions: they go out ahead of new DATA, and widen the window */
}

/* The answer to one of this rank's QUERYs: its contribution to the use was missing when that QUERY
 * arrived. Resend the DATA if the question was asked after its latest transmission (it should have
 * arrived first: it was lost); a younger transmission answers for itself, and its timer stands. Which
 * came first is counted in questions, not read from their times, so that an answer later than the
 * QUESTION_MEMORY latest questions still counts: ignored, the MISSING of a rank whose questions came
 * faster than their answers was never acted on. An answer naming no question is ignored. */
static void missing(struct p4r_engine *e, int slot, uint32_t contributors, uint8_t echo, double now) {
    struct p4r_call *c = &e->call;
    uint32_t number = question_number(c, slot, echo);
    if (!number) {
        e->stats.ignored += 1;
        return;
    }
    e->stats.missing_received += 1;
    sample_question(e, now - asked_time(c, slot, number));
    if (contributors >> e->rank & 1) {
        /* In already (the switch answers so only a rank whose contribution is missing): ask again later. */
        c->asks[slot] = 0;
        set_deadline(e, slot, now + question_timeout(e, 1, now));
    } else if (number > c->data_asked[slot]) {
        c->asks[slot] = 0;
        e->stats.missing_resends += 1;
        lost(e, c->serial[slot]);
        resend(e, slot, now);
        e->loss_seen = now;
        ask_held(e, now);
        fill(e, -1, now);
    }
}

static void abort_seen(struct p4r_engine *e, uint32_t seq, struct p4r_abort_seen abort) {
    uint32_t number = seq >> P4R_USE_BITS;
    struct p4r_call *c = &e->call;
    if (e->active && number == c->number) {
        if (c->error.kind == P4R_OK) {
            c->error = (struct p4r_error){.kind = P4R_ERR_MISMATCH, .rank = abort.rank,
                                          .offender = abort.offender, .held = abort.held};
        }
        return;
    }
    uint32_t ahead = (number - e->call_number) % P4R_CALL_NUMBERS;
    if ((!e->active && ahead == 0) || (ahead > 0 && ahead < P4R_CALL_NUMBERS / 2)) {
        for (int i = 0; i < e->abort_count; i++) {
            if (e->aborts[i].number == number) return; /* the first ABORT for a call is kept */
        }
        abort.number = number;
        e->aborts[e->abort_count++] = abort;
        if (e->abort_count > P4R_REMEMBERED_ABORTS) { /* forget the oldest */
            memmove(&e->aborts[0], &e->aborts[1], (size_t)(e->abort_count - 1) * sizeof abort);
            e->abort_count -= 1;
        }
    } else {
        e->stats.ignored += 1; /* an old call's abort, duplicated or late */
    }
}

/* A replay answering this rank's first question about a use whose multicast RESULT had already come, when
 * a fast suspicion asked it: the question was needless, results come out of this rank's order. A timer's
 * question says nothing of order: the rank may have waited for a core (hostlib.engine.Engine._needless). */
static void needless(struct p4r_engine *e, uint32_t seq, uint16_t set_slot) {
    const struct p4r_call *c = &e->call;
    long use;
    int slot = named_slot(e, seq, set_slot, &use);
    if (slot < 0 || use % c->width != slot || use >= c->uses) return;
    int delivered = c->current[slot] < 0 || use < c->current[slot];
    if (delivered && c->fast_first[slot] == use) {
        e->stats.needless_questions += 1;
        e->out_of_step = 1;
    }
}

void p4r_engine_receive(struct p4r_engine *e, const uint8_t *datagram, size_t size, double now, uint8_t tos) {
    e->stats.packets_received += 1;
    e->stats.bytes_received += size;
    if (size < P4R_HEADER_BYTES) {
        e->stats.ignored += 1;
        return;
    }
    struct p4r_header h = p4r_parse_header(datagram);
    if (h.job_id != e->job_id) {
        e->stats.ignored += 1;
        return;
    }
    if (h.key != e->key) {
        e->stats.forged += 1;
        return;
    }
    int notice = size == P4R_HEADER_BYTES;
    if (h.msg_type == P4R_ABORT && notice) {
        abort_seen(e, h.seq, (struct p4r_abort_seen){.rank = h.rank, .offender = h.call, .held = h.aux});
        return;
    }
    int slot = outstanding_slot(e, h.seq, h.set_slot);
    if (slot < 0) {
        e->stats.ignored += 1;
        if (h.msg_type == P4R_RESULT && h.flags == 1) needless(e, h.seq, h.set_slot);
    } else if (h.msg_type == P4R_RESULT && size == e->frame) {
        result(e, slot, datagram + P4R_HEADER_BYTES, h.exp, h.flags, now, (tos & P4R_ECN_MASK) == P4R_ECN_CE);
    } else if (h.msg_type == P4R_MISSING && notice) {
        missing(e, slot, h.aux, h.flags, now);
    } else if (h.msg_type == P4R_STALE && notice) {
        e->call.error = (struct p4r_error){.kind = P4R_ERR_ABANDONED, .held = h.aux};
    } else {
        e->stats.ignored += 1;
    }
}

/* ------------------------------------------------------------------ timers */

void p4r_engine_poll(struct p4r_engine *e, double now) {
    if (p4r_engine_done(e)) return;
    struct p4r_call *c = &e->call;
    if (now >= e->wake) { /* else no deadline can have come */
        int overdue = p4r_overtaking_overdue(&c->overtaking, now, rack_wait(e), c->lost);
        for (int i = 0; i < overdue; i++) suspect(e, c->lost[i], now, 1);
        int expired = 0;
        for (int s = 0; s < c->width; s++) {
            if (c->current[s] < 0 || c->deadline[s] > now) continue;
            double restart = e->last_progress + use_timeout(e, s);
            if (c->retries[s] == 0 && restart > now) {
                /* RFC 6298 5.3: the data timer restarts whenever a result arrives. While results flow,
                 * fast retransmission finds what is lost; a use that waits in a queue behind the others
                 * (a call's first window on a slow link) is not late. */
                c->deadline[s] = restart;
            } else {
                c->expired[expired++] = s;
            }
        }
        if (expired) {
            /* RFC 6298 5.5: the data timeout backs off and stays backed off until a fresh sample, once per
             * timeout: a use sent before the last doubling was timed with the smaller value. Questions
             * that went unanswered back off on their own (question_timeout). */
            int first_sends = 0;
            for (int i = 0; i < expired; i++) {
                int s = c->expired[i];
                first_sends |= c->retries[s] == 0 && !probing(e, s) && c->sent_at[s] >= e->backed_off;
            }
            if (first_sends) {
                e->rto = lesser(e->rto * 2, P4R_RTO_MAX);
                e->backed_off = now;
            }
            /* RFC 6298 5.4: a timeout asks after the earliest use only: the lowest, as TCP's earliest segment
             * is the lowest in sequence, not the one sent first. A use sent late (its slot's previous result
             * came by a replay) is the one the other ranks' windows wait for (u < L + cwnd), and the uses
             * sent before it may lie beyond those windows: asked after first, each cost a silent question
             * and a timeout before the lost DATA was found. Uses whose timers expire together
             * (no result for a whole timeout) most often wait for a rank or the switch that waited for a
             * core, and asking after each of them would cost N x W questions that the switch, itself
             * short of a core, must drop. The others are held: asked when an answer shows that the timeout
             * was a loss (ask_held(): a MISSING, this rank's DATA was lost; a replay, its RESULT was), or
             * one by one at later timeouts while nothing arrives.
             * A rank that saw its DATA lost within LOSS_MEMORY takes timeouts for losses, as before, and
             * asks at once after every late use below L + QUESTION_BUDGET (the uses the window waits on),
             * holding the later ones: asking after every one made a stall cost a question per use out. */
            int hold = now - e->loss_seen >= P4R_LOSS_MEMORY;
            int earliest = -1;
            for (int i = 0; i < expired; i++) {
                int s = c->expired[i];
                if (c->retries[s] == 0 && (earliest < 0 || c->current[s] < c->current[earliest])) earliest = s;
            }
            for (int i = 0; i < expired; i++) {
                int s = c->expired[i];
                int beyond = c->current[s] >= c->lowest + P4R_QUESTION_BUDGET;
                if ((hold || beyond) && c->retries[s] == 0 && s != earliest) {
                    c->held[s] = 1;
                    c->deadline[s] = now + e->rto;
                } else if (c->retries[s] == 0 && probing(e, s)) {
                    /* A call's opening use sent alone is asked after at its own, shorter timeout: a probe,
                     * as RFC 8985's tail loss probe is, not a loss. The answer shows what was lost; silence
                     * backs the probe's timeout off, not the data timer. */
                    e->stats.timeouts += 1;
                    e->lone_rto *= 2;
                    suspect(e, s, now, 0);
                } else {
                    e->stats.timeouts += 1;
                    if (!hold) lost(e, c->serial[s]); /* a loss only after a loss, as for holding */
                    suspect(e, s, now, 0);
                }
            }
        }
        if (expired || overdue) fill(e, -1, now); /* the uses asked after leave the window's count */
        double wake = p4r_overtaking_due(&c->overtaking, rack_wait(e));
        for (int s = 0; s < c->width; s++) wake = lesser(wake, c->deadline[s]);
        e->wake = wake;
    }
    if (now >= e->last_progress + e->progress_timeout) {
        c->error = (struct p4r_error){.kind = P4R_ERR_TIMEOUT, .idle = now - e->last_progress,
                                      .outstanding = c->outstanding,
                                      .retransmissions = e->stats.retransmissions,
                                      .refused = e->stats.refused};
    }
}

double p4r_engine_next_deadline(struct p4r_engine *e) {
    if (p4r_engine_done(e)) return INFINITY;
    struct p4r_call *c = &e->call;
    double deadline = p4r_overtaking_due(&c->overtaking, rack_wait(e));
    for (int s = 0; s < c->width; s++) deadline = lesser(deadline, c->deadline[s]);
    return lesser(deadline, e->last_progress + e->progress_timeout);
}

double p4r_engine_wake_time(const struct p4r_engine *e) {
    if (p4r_engine_done(e)) return INFINITY;
    return lesser(e->wake, e->last_progress + e->progress_timeout);
}
