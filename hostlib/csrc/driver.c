/* The socket loop (driver.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TIMER_EVERY 16    /* batches read in a row before the timers are looked at anyway */
#define LONGEST_SLEEP 1.0 /* seconds; the eventfd wakes it sooner for fail() */

int p4r_transport_init(struct p4r_transport *t) {
    memset(t, 0, sizeof *t);
    t->sender.gso = 1;
    return p4r_udp_receiver_init(&t->receiver);
}

int p4r_transport_attach(struct p4r_transport *t, int fd, int lease) {
    p4r_transport_detach(t);
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    if ((size_t)st.st_size < sizeof(struct p4r_lane)) return EPROTO;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) return EPROTO; /* a memfd that could shrink under us */
    struct p4r_lane *lane = mmap(NULL, sizeof *lane, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (lane == MAP_FAILED) return errno;
    if (!p4r_lane_valid(lane, (size_t)st.st_size)) {
        munmap(lane, sizeof *lane);
        return EPROTO;
    }
    struct p4r_lane_link *l = &t->link;
    l->lane = lane;
    l->lease = lease;
    l->up.next = 0; /* a new lane: both rings start empty */
    l->down.next = 0;
    l->udp_ready = 1;
    return 0;
}

void p4r_transport_detach(struct p4r_transport *t) {
    if (t->link.lane != NULL) munmap(t->link.lane, sizeof *t->link.lane);
    memset(&t->link, 0, sizeof t->link);
}

void p4r_transport_free(struct p4r_transport *t) {
    p4r_transport_detach(t);
    p4r_udp_receiver_free(&t->receiver);
    free(t->packets);
    free(t->lengths);
    t->packets = NULL;
    t->lengths = NULL;
}

static struct timespec timespec_of(double seconds) {
    if (!(seconds > 0)) seconds = 0;
    if (seconds > LONGEST_SLEEP) seconds = LONGEST_SLEEP;
    struct timespec t;
    t.tv_sec = (time_t)seconds;
    t.tv_nsec = (long)((seconds - (double)t.tv_sec) * 1e9);
    return t;
}

/* Sends what the engine emitted and clears it: into the lane's ring while it has room, the rest (all of
 * it without a lane) in order over the socket. A switch asleep is rung once the ring holds them. */
static int send_out(struct p4r_engine *e, struct p4r_transport *t, int fd) {
    struct p4r_out *out = &e->out;
    if (out->count == 0) return 0;
    if (out->count > t->capacity) {
        const uint8_t **packets = realloc(t->packets, out->count * sizeof *packets);
        uint16_t *lengths = realloc(t->lengths, out->count * sizeof *lengths);
        if (packets != NULL) t->packets = packets;
        if (lengths != NULL) t->lengths = lengths;
        if (packets == NULL || lengths == NULL) return ENOMEM;
        t->capacity = out->count;
    }
    size_t left = 0, pushed = 0;
    struct p4r_lane_link *l = &t->link;
    for (size_t i = 0; i < out->count; i++) {
        const uint8_t *packet = out->data + i * out->frame;
        if (l->lane != NULL) {
            int ok = p4r_ring_push(&l->lane->up, &l->up, packet, out->length[i], 0);
            if (ok == 1) {
                pushed++;
                continue;
            }
            if (ok < 0) p4r_transport_detach(t); /* the ring is corrupt: UDP alone from now on */
        }
        t->packets[left] = packet;
        t->lengths[left++] = out->length[i];
    }
    if (pushed > 0 && l->lane != NULL && p4r_lanes_should_ring(&l->lane->switch_sleeping) && send(fd, "", 0, MSG_DONTWAIT) < 0) {
        /* a full socket buffer or a refusal: the switch has datagrams to read there, or is gone */
    }
    int error = 0;
    if (left > 0) error = p4r_udp_send(&t->sender, fd, t->packets, t->lengths, left, NULL, &e->stats.refused);
    __atomic_fetch_add(&t->lane_sent, pushed, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->udp_sent, left, __ATOMIC_RELAXED);
    p4r_out_clear(out);
    return error;
}

/* Feeds the engine what the lane's down ring holds (up to a batch); the number fed. */
static int lane_receive(struct p4r_engine *e, struct p4r_transport *t, double now) {
    struct p4r_lane_link *l = &t->link;
    int fed = 0;
    while (l->lane != NULL && fed < P4R_UDP_MESSAGES * 8) {
        const uint8_t *data;
        uint32_t length;
        uint8_t tos;
        int got = p4r_ring_peek(&l->lane->down, &l->down, &data, &length, &tos);
        if (got < 0) p4r_transport_detach(t);
        if (got <= 0) break;
        p4r_engine_receive(e, data, length, now, tos);
        p4r_ring_pop(&l->lane->down, &l->down);
        fed++;
    }
    __atomic_fetch_add(&t->lane_received, (uint64_t)fed, __ATOMIC_RELAXED);
    return fed;
}

/* Lets the lane go when the switch did (it stopped or died, and the lease hung up; or it closed the lane,
 * a corrupt one or one this socket asked for again): what was in its rings is lost like datagrams, and
 * the engine's retransmissions go by UDP. `revents`: ppoll's answer for the lease, or 0 to ask now. */
static void check_lease(struct p4r_transport *t, short revents) {
    struct p4r_lane_link *l = &t->link;
    if (l->lane == NULL) return;
    if (__atomic_load_n(&l->lane->closed, __ATOMIC_ACQUIRE)) {
        p4r_transport_detach(t);
        return;
    }
    if (revents == 0) {
        struct pollfd watch = {.fd = l->lease, .events = POLLIN};
        if (poll(&watch, 1, 0) <= 0) return;
        revents = watch.revents;
    }
    if (revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) p4r_transport_detach(t);
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
    struct p4r_lane_link *l = &t->link;
    check_lease(t, 0); /* one look per call: a switch gone since the last call takes its lane with it */
    int error = send_out(e, t, fd);
    int busy = 0; /* batches read since the timers were last looked at */
    while (!error && !p4r_engine_done(e)) {
        apply_pending_fail(e, pending_fail);
        /* What has arrived goes first: after this thread was descheduled, the results waiting in the
         * socket (or the lane) answer the uses whose timers would otherwise fire for nothing. The timers
         * are looked at once both are empty, or every few batches under a steady stream. With a lane the
         * socket carries only overflow and doorbells: it is read when ppoll says so, or every few turns. */
        int arrived = l->lane != NULL ? lane_receive(e, t, p4r_monotonic()) : 0;
        int received = 0;
        if (l->lane == NULL || l->udp_ready || ++l->udp_skip >= TIMER_EVERY) {
            l->udp_skip = 0;
            received = p4r_udp_receive(fd, r);
            if (received > 0) {
                double now = p4r_monotonic();
                for (int m = 0; m < received; m++) {
                    size_t length = r->messages[m].msg_len;
                    if (length == 0 && l->lane != NULL) continue; /* the switch's doorbell */
                    __atomic_fetch_add(&t->udp_received, 1, __ATOMIC_RELAXED);
                    p4r_receive_buffer(e, r->buffers + (size_t)m * P4R_UDP_BUFFER, length, p4r_udp_segment(r, m),
                                       now, p4r_udp_tos(r, m));
                }
                arrived += received;
            } else if (received < 0 && errno == ECONNREFUSED) {
                e->stats.refused += 1; /* ICMP port unreachable: no switch listening (yet) */
                continue;
            } else if (received < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                error = errno;
                break;
            } else {
                l->udp_ready = 0;
            }
        }
        if (arrived > 0) {
            if ((error = send_out(e, t, fd))) break;
            if (++busy < TIMER_EVERY) continue;
        }
        busy = 0;
        double now = p4r_monotonic();
        p4r_engine_poll(e, now);
        if ((error = send_out(e, t, fd)) || p4r_engine_done(e) || arrived > 0) continue;
        if (l->lane != NULL) { /* asleep only once the switch would ring: it looks at the flag after it writes */
            p4r_lanes_sleep_flag(&l->lane->rank_sleeping, 1);
            if (p4r_ring_waiting(&l->lane->down, &l->down)) {
                p4r_lanes_sleep_flag(&l->lane->rank_sleeping, 0);
                continue;
            }
        }
        /* a lane's lease is watched too: a switch that died never rings, and its rings are read no more */
        struct pollfd watch[3] = {{.fd = fd, .events = POLLIN},
                                  {.fd = wake_fd, .events = POLLIN},
                                  {.fd = l->lane != NULL ? l->lease : -1, .events = POLLIN}};
        struct timespec timeout = timespec_of(p4r_engine_wake_time(e) - p4r_monotonic());
        if (ppoll(watch, 3, &timeout, NULL) > 0) {
            if (watch[1].revents & POLLIN) drain(wake_fd);
            if (watch[0].revents) l->udp_ready = 1;
        }
        if (l->lane != NULL) p4r_lanes_sleep_flag(&l->lane->rank_sleeping, 0);
        check_lease(t, watch[2].revents);
    }
    apply_pending_fail(e, pending_fail);
    return error;
}
