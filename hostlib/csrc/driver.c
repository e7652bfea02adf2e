/* The socket loop (driver.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "driver.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TIMER_EVERY 16    /* batches read in a row before the timers are looked at anyway */
#define LONGEST_SLEEP 1.0 /* seconds; the eventfd wakes it sooner for fail() */

int p4r_transport_init(struct p4r_transport *t) {
    memset(t, 0, sizeof *t);
    t->sender.gso = 1;
    return p4r_udp_receiver_init(&t->receiver);
}

void p4r_transport_free(struct p4r_transport *t) {
    p4r_udp_receiver_free(&t->receiver);
    free(t->packets);
    t->packets = NULL;
}

static struct timespec timespec_of(double seconds) {
    if (!(seconds > 0)) seconds = 0;
    if (seconds > LONGEST_SLEEP) seconds = LONGEST_SLEEP;
    struct timespec t;
    t.tv_sec = (time_t)seconds;
    t.tv_nsec = (long)((seconds - (double)t.tv_sec) * 1e9);
    return t;
}

/* Sends what the engine emitted, in order, and clears it. */
static int send_out(struct p4r_engine *e, struct p4r_transport *t, int fd) {
    struct p4r_out *out = &e->out;
    if (out->count == 0) return 0;
    if (out->count > t->capacity) {
        const uint8_t **packets = realloc(t->packets, out->count * sizeof *packets);
        if (packets == NULL) return ENOMEM;
        t->packets = packets;
        t->capacity = out->count;
    }
    for (size_t i = 0; i < out->count; i++) t->packets[i] = out->data + i * out->frame;
    int error = p4r_udp_send(&t->sender, fd, t->packets, out->length, out->count, NULL, &e->stats.refused);
    p4r_out_clear(out);
    return error;
}

static void apply_pending_fail(struct p4r_engine *e, int *pending_fail) {
    int pending = __atomic_exchange_n(pending_fail, 0, __ATOMIC_ACQ_REL);
    if (pending) p4r_engine_fail(e, pending == 2);
}

static void drain(int wake_fd) {
    uint64_t count;
    while (read(wake_fd, &count, sizeof count) > 0) {
    }
}

void p4r_receive_buffer(struct p4r_engine *e, const uint8_t *buffer, size_t length, size_t segment, double now,
                        uint8_t tos) {
    if (length == 0 || segment == 0 || segment > length) segment = length;
    if (length == 0) p4r_engine_receive(e, buffer, 0, now, tos); /* an empty datagram is one too */
    for (size_t at = 0; at < length; at += segment) {
        p4r_engine_receive(e, buffer + at, length - at < segment ? length - at : segment, now, tos);
    }
}

int p4r_drive(struct p4r_engine *e, struct p4r_transport *t, int fd, int wake_fd, int *pending_fail) {
    struct p4r_udp_receiver *r = &t->receiver;
    p4r_udp_enable_gro(fd); /* where the kernel has no UDP GRO, datagrams come one per buffer */
    p4r_udp_enable_tos(fd); /* CE reaches the engine (the kernel's GRO merges only equal TOS bytes) */
    int error = send_out(e, t, fd);
    int busy = 0; /* batches read since the timers were last looked at */
    while (!error && !p4r_engine_done(e)) {
        apply_pending_fail(e, pending_fail);
        /* What has arrived goes first: after this thread was descheduled, the results waiting in the
         * socket answer the uses whose timers would otherwise fire for nothing. The timers are looked
         * at once the socket is empty, or every few batches under a steady stream. */
        int received = p4r_udp_receive(fd, r);
        if (received > 0) {
            double now = p4r_monotonic();
            for (int m = 0; m < received; m++) {
                p4r_receive_buffer(e, r->buffers + (size_t)m * P4R_UDP_BUFFER, r->messages[m].msg_len,
                                   p4r_udp_segment(r, m), now, p4r_udp_tos(r, m));
            }
            if ((error = send_out(e, t, fd))) break;
            if (++busy < TIMER_EVERY) continue;
        } else if (received < 0 && errno == ECONNREFUSED) {
            e->stats.refused += 1; /* ICMP port unreachable: no switch listening (yet) */
            continue;
        } else if (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            error = errno;
            break;
        }
        busy = 0;
        double now = p4r_monotonic();
        p4r_engine_poll(e, now);
        if ((error = send_out(e, t, fd)) || p4r_engine_done(e) || received > 0) continue;
        struct pollfd watch[2] = {{.fd = fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
        struct timespec timeout = timespec_of(p4r_engine_wake_time(e) - p4r_monotonic());
        if (ppoll(watch, 2, &timeout, NULL) > 0 && (watch[1].revents & POLLIN)) drain(wake_fd);
    }
    apply_pending_fail(e, pending_fail);
    return error;
}
