/* hostlib._reflector: a native stand-in for the switch, and the native UDP loop it is measured with.
 *
 * serve(fd, stop_fd, workers) answers on a bound UDP socket as a p4reduce switch does for one job
 * of `workers` ranks: it sums each use's DATA into the copy its set/slot names (wrapping int32
 * adds, the exponents' max), sends the RESULT to every rank (each with its own key, to the address
 * its DATA came from) when the last contribution arrives, drops a DATA of a use behind the copy's,
 * replays a completed use to a rank that QUERYs it, answers a QUERY behind the copy with STALE
 * and MISSING otherwise. With workers = 1 it is hostlib.reflector.Reflector: a RESULT is the DATA
 * itself. It checks neither keys nor calls (no ABORT): it is for benchmarks, where the switch must
 * not be the bottleneck.
 *
 * blast(fd, packets, window, size, gso=False) is what the engine is compared with: `window`
 * datagrams of `size` bytes in flight on a connected socket, one sent per one received, with
 * sendmmsg/recvmmsg and nothing else (gso=True: with UDP GSO runs and UDP GRO, as the engine
 * sends and receives); returns the seconds `packets` round trips took.
 *
 * Both run without the GIL. */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <Python.h>

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "udp.h"
#include "protocol.h"

#define BATCH 64
#define COPIES 65536 /* every set|slot word */
#define BUFFER (P4R_MAX_PAYLOAD + 64)
#define OUTBOX 1024  /* answers held per destination before they are sent */

struct copy {
    uint32_t seq, bitmap;
    int remaining, complete;
    uint8_t exp;
    int32_t sums[P4R_MAX_VALUES];
};

/* Answers to one destination, sent as GSO runs (udp.h). */
struct outbox {
    struct sockaddr_in to;
    uint32_t key;
    size_t count;
    uint8_t data[OUTBOX][P4R_MAX_PAYLOAD];
    uint16_t length[OUTBOX];
    const uint8_t *packets[OUTBOX];
};

struct reflector {
    int fd, workers;
    struct copy *copies;
    struct outbox *ranks; /* one per rank: its address and key, learned from its packets */
    struct p4r_udp_sender sender;
    unsigned long long received, sent;
    uint64_t refused;
};

static void flush(struct reflector *t, struct outbox *out) {
    if (out->count == 0) return;
    /* a rank that cannot be reached loses these answers, as a switch port would: it will ask again */
    p4r_udp_send(&t->sender, t->fd, out->packets, out->length, out->count, &out->to, &t->refused);
    t->sent += out->count;
    out->count = 0;
}

static void post(struct reflector *t, struct outbox *out, const uint8_t *packet, size_t length) {
    if (out->to.sin_port == 0) return; /* a rank not heard from yet: no address to answer to */
    if (out->count == OUTBOX) flush(t, out);
    memcpy(out->data[out->count], packet, length);
    p4r_store32(out->data[out->count] + 12, out->key);
    out->packets[out->count] = out->data[out->count];
    out->length[out->count++] = (uint16_t)length;
}

static void data_in(struct reflector *t, uint8_t *packet, size_t length, size_t *frame) {
    struct p4r_header h = p4r_parse_header(packet);
    size_t k = (length - P4R_HEADER_BYTES) / 4;
    if (k == 0 || k > P4R_MAX_VALUES || length != P4R_HEADER_BYTES + 4 * k) return;
    *frame = length;
    struct copy *c = &t->copies[h.set_slot];
    uint32_t bit = 1u << h.rank, age = h.seq - c->seq;
    if (c->bitmap != 0 && age >= 0x80000000u && t->workers > 1) return; /* a use behind the copy's: stale */
    /* the first contribution of a use; with one worker every DATA is (as hostlib.reflector answers) */
    if (c->bitmap == 0 || age != 0 || t->workers == 1) {
        c->seq = h.seq;
        c->bitmap = bit;
        c->remaining = t->workers - 1;
        c->complete = 0;
        c->exp = h.exp;
        for (size_t i = 0; i < k; i++) c->sums[i] = (int32_t)p4r_load32(packet + P4R_HEADER_BYTES + 4 * i);
    } else if (c->complete || (c->bitmap & bit)) {
        return; /* a duplicate */
    } else {
        c->bitmap |= bit;
        c->remaining -= 1;
        c->exp = h.exp > c->exp ? h.exp : c->exp;
        for (size_t i = 0; i < k; i++) {
            uint32_t sum = (uint32_t)c->sums[i] + p4r_load32(packet + P4R_HEADER_BYTES + 4 * i);
            c->sums[i] = (int32_t)sum;
        }
    }
    if (c->remaining > 0) return;
    c->complete = 1;
    packet[0] = P4R_RESULT;
    packet[6] = c->exp;
    for (size_t i = 0; i < k; i++) p4r_store32(packet + P4R_HEADER_BYTES + 4 * i, (uint32_t)c->sums[i]);
    for (int r = 0; r < t->workers; r++) post(t, &t->ranks[r], packet, length);
}

static void query_in(struct reflector *t, uint8_t *packet, size_t frame) {
    struct p4r_header h = p4r_parse_header(packet);
    struct copy *c = &t->copies[h.set_slot];
    if (c->bitmap != 0 && h.seq - c->seq >= 0x80000000u) { /* behind: the copy has moved on */
        packet[0] = P4R_STALE;
        p4r_store32(packet + 20, c->seq);
        post(t, &t->ranks[h.rank], packet, P4R_HEADER_BYTES);
        return;
    }
    if (c->bitmap && c->seq == h.seq && c->complete && frame) { /* replay to the asker */
        uint8_t result[P4R_MAX_PAYLOAD];
        memcpy(result, packet, P4R_HEADER_BYTES);
        result[0] = P4R_RESULT;
        result[6] = c->exp;
        size_t k = (frame - P4R_HEADER_BYTES) / 4;
        for (size_t i = 0; i < k; i++) p4r_store32(result + P4R_HEADER_BYTES + 4 * i, (uint32_t)c->sums[i]);
        post(t, &t->ranks[h.rank], result, frame);
        return;
    }
    packet[0] = P4R_MISSING;
    p4r_store32(packet + 20, c->bitmap && c->seq == h.seq ? c->bitmap : 0);
    for (int r = 0; r < t->workers; r++) post(t, &t->ranks[r], packet, P4R_HEADER_BYTES);
}

/* One datagram from `from`. */
static void one(struct reflector *t, uint8_t *packet, size_t length, const struct sockaddr_in *from,
                size_t *frame) {
    t->received++;
    if (length < P4R_HEADER_BYTES || packet[1] >= t->workers) return;
    struct outbox *rank = &t->ranks[packet[1]];
    if (rank->count && memcmp(&rank->to, from, sizeof *from)) flush(t, rank); /* a new address */
    rank->to = *from;
    rank->key = p4r_load32(packet + 12);
    if (packet[0] == P4R_DATA) {
        data_in(t, packet, length, frame);
    } else if (packet[0] == P4R_QUERY && length == P4R_HEADER_BYTES) {
        query_in(t, packet, *frame);
    }
}

static PyObject *serve(PyObject *module, PyObject *args) {
    int fd, stop_fd, workers;
    if (!PyArg_ParseTuple(args, "iii", &fd, &stop_fd, &workers)) return NULL;
    if (workers < 1 || workers > P4R_MAX_WORKERS) {
        PyErr_Format(PyExc_ValueError, "workers must be 1..%d", P4R_MAX_WORKERS);
        return NULL;
    }
    struct reflector *t = calloc(1, sizeof *t);
    struct p4r_udp_receiver r;
    if (t == NULL || p4r_udp_receiver_init(&r)) {
        free(t);
        return PyErr_NoMemory();
    }
    t->fd = fd;
    t->workers = workers;
    t->sender.gso = 1;
    t->copies = calloc(COPIES, sizeof *t->copies);
    t->ranks = calloc((size_t)workers, sizeof *t->ranks);
    if (t->copies == NULL || t->ranks == NULL) {
        free(t->copies), free(t->ranks), free(t);
        p4r_udp_receiver_free(&r);
        return PyErr_NoMemory();
    }
    size_t frame = 0; /* the job's DATA size, learned from its DATA */
    Py_BEGIN_ALLOW_THREADS;
    p4r_udp_enable_gro(fd);
    int idle = 0;
    for (;;) {
        int count = p4r_udp_receive(fd, &r);
        if (count <= 0) {
            if (++idle < 64) continue;
            idle = 0;
            struct pollfd watch[2] = {{.fd = fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
            if (poll(watch, 2, 1000) > 0 && (watch[1].revents & (POLLIN | POLLHUP))) break;
            continue;
        }
        idle = 0;
        for (int m = 0; m < count; m++) {
            uint8_t *buffer = r.buffers + (size_t)m * P4R_UDP_BUFFER;
            size_t length = r.messages[m].msg_len, segment = p4r_udp_segment(&r, m);
            for (size_t at = 0; at < length; at += segment) {
                one(t, buffer + at, length - at < segment ? length - at : segment, &r.from[m], &frame);
            }
        }
        for (int rank = 0; rank < workers; rank++) flush(t, &t->ranks[rank]);
    }
    Py_END_ALLOW_THREADS;
    unsigned long long received = t->received, sent = t->sent;
    free(t->copies), free(t->ranks), free(t);
    p4r_udp_receiver_free(&r);
    return Py_BuildValue("(KK)", received, sent);
}

/* Keeps `window` datagrams in flight: one sent for each one received. */
static int blast_loop(int fd, long long packets, int window, int size, int gso, double *elapsed) {
    struct p4r_udp_receiver r;
    struct p4r_udp_sender *s = calloc(1, sizeof *s);
    uint8_t *payload = calloc(1, P4R_MAX_PAYLOAD);
    const uint8_t **packets_out = malloc((size_t)P4R_UDP_MESSAGES * P4R_UDP_BUFFER / P4R_HEADER_BYTES * sizeof *packets_out);
    uint16_t *lengths = malloc((size_t)P4R_UDP_MESSAGES * P4R_UDP_BUFFER / P4R_HEADER_BYTES * sizeof *lengths);
    if (s == NULL || payload == NULL || packets_out == NULL || lengths == NULL || p4r_udp_receiver_init(&r)) {
        free(s), free(payload), free(packets_out), free(lengths);
        return ENOMEM;
    }
    size_t most = (size_t)P4R_UDP_MESSAGES * P4R_UDP_BUFFER / P4R_HEADER_BYTES;
    for (size_t i = 0; i < most; i++) packets_out[i] = payload, lengths[i] = (uint16_t)size;
    payload[0] = P4R_DATA;
    s->gso = gso;
    if (gso) p4r_udp_enable_gro(fd);
    uint64_t refused = 0;
    int error = 0;
    double started = p4r_monotonic();
    long long sent = (long long)window < packets ? window : packets, answered = 0;
    error = p4r_udp_send(s, fd, packets_out, lengths, (size_t)sent, NULL, &refused);
    while (answered < packets && !error) {
        int got = p4r_udp_receive(fd, &r);
        if (got < 0) {
            struct pollfd watch = {.fd = fd, .events = POLLIN};
            if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) error = errno;
            else if (poll(&watch, 1, 1000) == 0) error = ETIMEDOUT; /* a datagram was lost: no retries here */
            continue;
        }
        long long datagrams = 0;
        for (int m = 0; m < got; m++) {
            size_t segment = p4r_udp_segment(&r, m), length = r.messages[m].msg_len;
            datagrams += segment ? (long long)((length + segment - 1) / segment) : 1;
        }
        answered += datagrams;
        long long more = packets - sent < datagrams ? packets - sent : datagrams;
        if (more > 0) error = p4r_udp_send(s, fd, packets_out, lengths, (size_t)more, NULL, &refused);
        sent += more > 0 ? more : 0;
    }
    *elapsed = p4r_monotonic() - started;
    p4r_udp_receiver_free(&r);
    free(s), free(payload), free(packets_out), free(lengths);
    return error;
}

static PyObject *blast(PyObject *module, PyObject *args) {
    int fd, window, size, gso = 0;
    long long packets;
    if (!PyArg_ParseTuple(args, "iLii|p", &fd, &packets, &window, &size, &gso)) return NULL;
    if (window < 1 || window > 4096 || size < P4R_HEADER_BYTES || size > P4R_MAX_PAYLOAD || packets < 0) {
        PyErr_SetString(PyExc_ValueError, "window 1..4096, size 24..1048 bytes, packets >= 0");
        return NULL;
    }
    int big = 8 << 20; /* a window of datagrams must fit the socket's buffer, or they are lost */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    double elapsed = 0;
    int error;
    Py_BEGIN_ALLOW_THREADS;
    error = blast_loop(fd, packets, window, size, gso, &elapsed);
    Py_END_ALLOW_THREADS;
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyFloat_FromDouble(elapsed);
}

static PyMethodDef methods[] = {
    {"serve", serve, METH_VARARGS, "serve(fd, stop_fd, workers) -> (received, sent): answer until stop_fd is readable"},
    {"blast", blast, METH_VARARGS,
     "blast(fd, packets, window, size, gso=False) -> seconds: the native sendmmsg/recvmmsg loop"},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "hostlib._reflector", NULL, -1, methods};

PyMODINIT_FUNC PyInit__reflector(void) { return PyModule_Create(&module); }
