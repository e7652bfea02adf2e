/* The socket loop (driver.h). */
#define _GNU_SOURCE
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

#define BATCH 64          /* datagrams per recvmmsg */
#define SEND_BATCH 1024   /* UIO_MAXIOV: datagrams per sendmmsg */
#define RECEIVE_SLACK 64  /* a longer datagram than a RESULT is read truncated, and ignored */
#define SPINS 64          /* empty receives before sleeping in ppoll */
#define LONGEST_SLEEP 1.0 /* seconds; the eventfd wakes it sooner for fail() */

double p4r_monotonic(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct timespec timespec_of(double seconds) {
    if (!(seconds > 0)) seconds = 0;
    if (seconds > LONGEST_SLEEP) seconds = LONGEST_SLEEP;
    struct timespec t;
    t.tv_sec = (time_t)seconds;
    t.tv_nsec = (long)((seconds - (double)t.tv_sec) * 1e9);
    return t;
}

static void wait_writable(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    struct timespec t = timespec_of(0.01);
    ppoll(&p, 1, &t, NULL);
}

int p4r_send_out(struct p4r_engine *e, int fd) {
    struct p4r_out *out = &e->out;
    struct mmsghdr messages[SEND_BATCH];
    struct iovec vectors[SEND_BATCH];
    size_t next = 0;
    int refused_here = 0; /* ECONNREFUSED already met at packet `next` */
    while (next < out->count) {
        size_t batch = out->count - next < SEND_BATCH ? out->count - next : SEND_BATCH;
        for (size_t i = 0; i < batch; i++) {
            vectors[i].iov_base = out->data + (next + i) * out->frame;
            vectors[i].iov_len = out->length[next + i];
            memset(&messages[i], 0, sizeof messages[i]);
            messages[i].msg_hdr.msg_iov = &vectors[i];
            messages[i].msg_hdr.msg_iovlen = 1;
        }
        int sent = sendmmsg(fd, messages, (unsigned)batch, MSG_DONTWAIT);
        if (sent > 0) {
            next += (size_t)sent;
            refused_here = 0;
            continue;
        }
        if (sent == 0 || errno == EINTR) continue;
        if (errno == ECONNREFUSED) {
            /* an earlier datagram bounced off a closed port (ICMP): the error is reported once; the
             * packet goes once more, and is given up if that is refused too (as PacketEngine did) */
            e->stats.refused += 1;
            if (refused_here) {
                next += 1;
                refused_here = 0;
            } else {
                refused_here = 1;
            }
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
            wait_writable(fd);
            continue;
        }
        int error = errno;
        p4r_out_clear(out);
        return error;
    }
    p4r_out_clear(out);
    return 0;
}

struct receiver {
    uint8_t *buffers;
    size_t size;
    struct mmsghdr messages[BATCH];
    struct iovec vectors[BATCH];
};

static int receiver_init(struct receiver *r, size_t frame) {
    r->size = frame + RECEIVE_SLACK;
    r->buffers = malloc(r->size * BATCH);
    if (r->buffers == NULL) return -1;
    for (int i = 0; i < BATCH; i++) {
        r->vectors[i].iov_base = r->buffers + (size_t)i * r->size;
        r->vectors[i].iov_len = r->size;
    }
    return 0;
}

static void receiver_arm(struct receiver *r) {
    for (int i = 0; i < BATCH; i++) {
        memset(&r->messages[i], 0, sizeof r->messages[i]);
        r->messages[i].msg_hdr.msg_iov = &r->vectors[i];
        r->messages[i].msg_hdr.msg_iovlen = 1;
    }
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

int p4r_drive(struct p4r_engine *e, int fd, int wake_fd, int *pending_fail) {
    struct receiver r;
    if (receiver_init(&r, e->frame)) {
        e->call.error.kind = P4R_ERR_MEMORY;
        return 0;
    }
    int error = p4r_send_out(e, fd);
    int idle = 0;
    while (!error && !p4r_engine_done(e)) {
        apply_pending_fail(e, pending_fail);
        double now = p4r_monotonic();
        p4r_engine_poll(e, now);
        if ((error = p4r_send_out(e, fd)) || p4r_engine_done(e)) break;
        receiver_arm(&r);
        int received = recvmmsg(fd, r.messages, BATCH, MSG_DONTWAIT, NULL);
        if (received > 0) {
            idle = 0;
            now = p4r_monotonic();
            for (int i = 0; i < received; i++) {
                p4r_engine_receive(e, r.buffers + (size_t)i * r.size, r.messages[i].msg_len, now);
            }
            error = p4r_send_out(e, fd);
            continue;
        }
        if (received < 0 && errno == ECONNREFUSED) {
            e->stats.refused += 1; /* ICMP port unreachable: no switch listening (yet) */
            continue;
        }
        if (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            error = errno;
            break;
        }
        if (++idle < SPINS) continue; /* a datagram is usually microseconds away: no sleep yet */
        idle = 0;
        struct pollfd watch[2] = {{.fd = fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
        struct timespec timeout = timespec_of(p4r_engine_wake_time(e) - p4r_monotonic());
        if (ppoll(watch, 2, &timeout, NULL) > 0 && (watch[1].revents & POLLIN)) drain(wake_fd);
    }
    apply_pending_fail(e, pending_fail);
    free(r.buffers);
    return error;
}
