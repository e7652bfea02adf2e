/*
 * The native packet loop of p4reduce-switch: ports in, pipeline, ports (or the controller) out,
 * in a thread of its own that never takes Python's GIL.
 *
 * softswitch/dataplane/native.py builds this file once (cached like the programs), opens the
 * sockets in Python (so that every error message stays the daemon's) and hands their descriptors
 * here. The loop waits on all of them with epoll, drains a ready socket in a batch of up to 64
 * frames with recvmmsg, runs the batch through the pipeline under `lock` (the lock P4Runtime
 * writes take: a packet never sees half an update), and, once every ready socket has been read,
 * sends what came out with sendmmsg, a batch per port, outside the lock. The pipeline is
 * whatever the loader made: the C backend's p4_process, or a callback into a Python pipeline with
 * the same signature.
 *
 * Port kinds, as softswitch/dataplane/ports.py defines them:
 *  - UDP: each datagram becomes an Ethernet/IPv4/UDP frame (switch MAC 02:50:52:00:<port>, host
 *    MAC 02:00:<sender IPv4>, IPv4 with DF, TTL 64 and a valid checksum, UDP checksum 0); a frame
 *    sent out of it must be IPv4/UDP and leaves as a datagram to its IPv4/UDP destination.
 *    Datagrams cross the kernel in bulk where it can: the socket takes GRO buffers (datagrams a
 *    host sent as one GSO message arrive as one buffer, split here into one frame each), and runs
 *    of equal-sized frames to one address leave as one GSO message. What the pipeline sees, and
 *    what the receiver gets, is the same datagrams one by one; only the system calls are fewer.
 *  - raw (AF_PACKET): frames as they are; the kernel keeps our own transmissions from us
 *    (PACKET_IGNORE_OUTGOING, set in ports.py), and older kernels' PACKET_OUTGOING are skipped.
 *
 * Fault injection draws from Python's own generator (MT19937 seeded as random.Random(seed) seeds
 * it, random() as it computes it), in the same order as the Python loop: one draw per received
 * frame when the ingress rate is set, one per produced frame when the egress rate is set. So the
 * same seed and the same traffic drop the same frames on both loops.
 *
 * A UDP port on a loopback address may also carry shared-memory lanes (contracts/lanes.h): the same
 * datagrams, to and from ranks on this host, through rings in a memfd per lane instead of the socket.
 * Python hands each lane's memfd to its rank and closes lanes (softswitch/dataplane/lanes.py); this loop drains each
 * open lane's ring as it drains a socket (the frames built alike, so the pipeline cannot tell), puts a
 * frame for a lane's address into its ring rather than the socket, falls back to the socket when the
 * ring is full, and rings a sleeping rank's doorbell (an empty datagram) after publishing. While lanes
 * carry traffic the loop looks at them between non-blocking epoll_waits; it sleeps only after it has
 * set each lane's `switch_sleeping` flag and found the rings empty once more, so a rank rings it when it writes.
 *
 * Frames to the CPU port are queued for the PacketIn thread; captures are queued for a writer
 * thread (pcap off the hot path; when its queue is full a capture record is dropped and counted).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lanes.h" /* contracts/lanes.h: softswitch/dataplane/native.py puts its text here */

#define EXPORT __attribute__((visibility("default")))
#define BATCH 64
#define MAX_FRAME 65536
#define MAX_PORTS 256
#define UDP_HEADERS 42 /* Ethernet 14 + IPv4 20 + UDP 8 */
#define RX_FRAMES 1024                 /* frames handed to the pipeline at once, once GRO buffers are split */
#define SPLIT_BYTES (1u << 20)         /* where the datagrams of a GRO buffer become frames */
#define GSO_SEGMENTS 64                /* datagrams per GSO send (the kernel's oldest limit) */
#define GSO_BYTES 60000                /* and their bytes, under the 65507 one datagram may carry */

/* Room for one int-sized control message (UDP_GRO's segment size, UDP_SEGMENT's). */
typedef union {
    char bytes[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
} control_t;
#define DIGEST_PORT_BASE (1ull << 32) /* softswitch.runtime.pipeline.DIGEST_PORT_BASE */

/* Counters, by index; names in softswitch/dataplane/native.py (STATS) in this order. */
enum {
    S_RX, S_TX, S_CONSUMED, S_NO_PIPELINE, S_NO_PORT, S_UNSENDABLE, S_FAULT_IN, S_FAULT_OUT,
    S_PIPELINE_ERROR, S_PACKET_IN_QUEUE_FULL, S_PCAP_DROPPED, S_LANE_RX, S_LANE_TX, S_LANE_FULL, S_LANE_CORRUPT, S_COUNT
};
/* Per-port counters, in the order of native.py's PORT_STATS. */
enum { P_FRAMES_IN, P_BYTES_IN, P_FRAMES_OUT, P_BYTES_OUT, P_COUNT
};

typedef int (*process_fn)(void *ctx, uint64_t port, const uint8_t *frame, uint32_t length);
typedef struct {
    uint64_t port;
    uint32_t offset, length;
} out_t;
typedef const out_t *(*outputs_fn)(void *ctx);
typedef const uint8_t *(*arena_fn)(void *ctx);
typedef const char *(*error_fn)(void *ctx);

/* ------------------------------------------------------------------ Python's random.Random */

typedef struct {
    uint32_t mt[624];
    int index;
} mt_t;

static void mt_init(mt_t *m, uint32_t seed) {
    m->mt[0] = seed;
    for (int i = 1; i < 624; i++) m->mt[i] = 1812433253u * (m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) + (uint32_t)i;
    m->index = 624;
}

/* As random.Random(seed) for an int seed: init_by_array with |seed| as 32-bit words, least first. */
static void mt_seed(mt_t *m, const uint32_t *key, int n) {
    mt_init(m, 19650218u);
    int i = 1, j = 0;
    for (int k = 624 > n ? 624 : n; k; k--) {
        m->mt[i] = (m->mt[i] ^ ((m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++, j++;
        if (i >= 624) { m->mt[0] = m->mt[623]; i = 1; }
        if (j >= n) j = 0;
    }
    for (int k = 623; k; k--) {
        m->mt[i] = (m->mt[i] ^ ((m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= 624) { m->mt[0] = m->mt[623]; i = 1; }
    }
    m->mt[0] = 0x80000000u;
    m->index = 624;
}

static uint32_t mt_next(mt_t *m) {
    if (m->index >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->mt[k] & 0x80000000u) | (m->mt[(k + 1) % 624] & 0x7fffffffu);
            m->mt[k] = m->mt[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->index = 0;
    }
    uint32_t y = m->mt[m->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* random.random(): 53 random bits in [0, 1). */
static double mt_random(mt_t *m) {
    uint32_t a = mt_next(m) >> 5, b = mt_next(m) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------------------ queues */

/* A bounded queue of records (a header and bytes), for PacketIn and for captures. */
typedef struct {
    uint8_t *buf;
    size_t cap, head, tail; /* bytes; records never wrap: a record that does not fit the end waits */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} queue_t;

typedef struct {
    uint32_t length; /* bytes after this header; 0xFFFFFFFF: skip to the start of the buffer */
    uint32_t port;
    uint32_t direction; /* pcap: 0 in, 1 out */
    uint32_t sec, usec;
} record_t;

static int queue_init(queue_t *q, size_t cap) {
    q->buf = malloc(cap);
    q->cap = cap;
    q->head = q->tail = 0;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    return q->buf ? 0 : -1;
}

static void queue_free(queue_t *q) {
    free(q->buf);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

/* Append a record; 0 when there is no room (the caller counts the drop). head == tail: empty. */
static int queue_push(queue_t *q, uint32_t port, uint32_t direction, const uint8_t *data, uint32_t length) {
    size_t need = sizeof(record_t) + ((length + 7u) & ~7u);
    int ok = 0;
    pthread_mutex_lock(&q->mu);
    if (q->tail >= q->head) {
        if (q->cap - q->tail >= need + sizeof(record_t)) {
            ok = 1;
        } else if (q->head > need) { /* wrap: mark the rest of the buffer skipped */
            record_t skip = {0xFFFFFFFFu, 0, 0, 0, 0};
            memcpy(q->buf + q->tail, &skip, sizeof skip);
            q->tail = 0;
            ok = 1;
        }
    } else if (q->head - q->tail > need) {
        ok = 1;
    }
    if (ok) {
        struct timeval now;
        gettimeofday(&now, NULL);
        record_t r = {length, port, direction, (uint32_t)now.tv_sec, (uint32_t)now.tv_usec};
        memcpy(q->buf + q->tail, &r, sizeof r);
        memcpy(q->buf + q->tail + sizeof r, data, length);
        q->tail += need;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}

/* Take the oldest record into `out` (cap bytes); its length, or -1 when empty (after waiting up to `ms`). */
static long queue_pop(queue_t *q, record_t *hdr, uint8_t *out, size_t cap, int ms) {
    long n = -1;
    pthread_mutex_lock(&q->mu);
    if (q->head == q->tail && ms > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ms / 1000;
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&q->cv, &q->mu, &until);
    }
    while (q->head != q->tail) {
        record_t r;
        memcpy(&r, q->buf + q->head, sizeof r);
        if (r.length == 0xFFFFFFFFu) {
            q->head = 0;
            continue;
        }
        *hdr = r;
        n = r.length;
        memcpy(out, q->buf + q->head + sizeof r, r.length < cap ? r.length : cap);
        q->head += sizeof r + ((r.length + 7u) & ~7u);
        if (q->head == q->tail) q->head = q->tail = 0;
        break;
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

/* ------------------------------------------------------------------ the data plane */

/* A lane as the loop sees it: whose it is and where each ring's end of the loop stands. */
typedef struct {
    int open;
    int corrupt;             /* found corrupt mid-turn: carries nothing more, freed once the turn is over */
    struct p4r_lane *shared; /* its memfd, mapped (while open) */
    int fd;                  /* the memfd (while open): handed to its rank */
    uint32_t ip;   /* the rank's UDP address, network order: its frames' source, its results' destination */
    uint16_t port; /* network order */
    int ring;      /* a datagram went into its ring since the last doorbell check */
    struct p4r_ring_end up, down;
} lane_t;

typedef struct {
    uint32_t number;
    int fd, udp, enabled;
    int lanes; /* UDP on loopback: ranks may ask for shared-memory lanes */
    lane_t lane[P4R_LANES];
    int gso;           /* UDP: runs of datagrams to one address leave as one GSO send (until one fails) */
    uint32_t local_ip; /* UDP: network order */
    uint16_t udp_port; /* UDP: host order */
    /* frames and bytes in and out (P_*), for metrics; a UDP port counts its frames' 42 header bytes too */
    volatile uint64_t counts[P_COUNT];
} port_t;

/* Frames on their way out of one port, sent together with sendmmsg (UDP: runs joined by GSO). */
typedef struct {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in to[BATCH];
    uint32_t pending;
    struct mmsghdr joined[BATCH]; /* UDP with GSO: one message per run */
    struct iovec runs_iov[BATCH]; /* the frames of the runs, run after run */
    control_t control[BATCH];
    struct mmsghdr plain[BATCH];  /* the runs again, a datagram each, where GSO is refused */
} batch_t;

typedef struct {
    uint64_t port;
    size_t offset;
    uint32_t length;
} planned_t;

/* Who sends: the loop thread, or a PacketOut injection; each has its own bytes and batches. */
typedef struct {
    uint8_t *tx;
    size_t used, cap;
    planned_t *planned;
    size_t nplanned, planned_cap;
    batch_t batches[MAX_PORTS];
} sender_t;

typedef struct {
    pthread_mutex_t lock;
    pthread_mutex_t lanes_lock; /* held by the loop except while it waits: lanes open and close between */
    int lanes_wanted;           /* atomic: threads waiting for lanes_lock, which the busy loop lets in first */
    int any_lanes;
    port_t ports[MAX_PORTS];
    uint32_t nports;
    int64_t cpu_port; /* -1: none */
    int epfd, wakefd;
    volatile int running;
    pthread_t thread, writer;
    int writer_running;
    /* the pipeline (changed under the lock) */
    process_fn process;
    outputs_fn outputs;
    arena_fn arena;
    error_fn error;
    void *ctx;
    /* faults */
    double drop_in, drop_out;
    mt_t rng;
    uint32_t fault_ports[MAX_PORTS]; /* nfault_ports == 0: faults apply to every port */
    uint32_t nfault_ports;
    /* counters (written under the lock, or by the loop thread alone) */
    volatile uint64_t stats[S_COUNT];
    char last_error[256];
    uint64_t errors_reported;
    uint8_t *rx; /* receive buffers: BATCH * (UDP_HEADERS + MAX_FRAME) */
    control_t rx_control[BATCH];
    uint8_t *split;  /* SPLIT_BYTES: the datagrams of GRO buffers, each behind its own headers */
    uint8_t **frames; /* RX_FRAMES frames for the pipeline, and their lengths */
    uint32_t *lens;
    sender_t *loop_sender, *inject_sender;
    pthread_mutex_t inject;
    queue_t packet_in, pcap;
    int capture;
    char pcap_dir[4096];
    FILE *pcap_files[MAX_PORTS][2];
} dp_t;

static void count(dp_t *d, int which, uint64_t n) { __atomic_add_fetch(&d->stats[which], n, __ATOMIC_RELAXED); }

static void count_port(port_t *p, int which, uint64_t n) {
    __atomic_add_fetch(&p->counts[which], n, __ATOMIC_RELAXED);
}

/* Frames a port sent: their payload bytes, plus the headers a UDP port took off. */
static void count_sent(port_t *p, uint64_t frames, uint64_t bytes) {
    count_port(p, P_FRAMES_OUT, frames);
    count_port(p, P_BYTES_OUT, bytes + (p->udp ? frames * UDP_HEADERS : 0));
}

/* Whether fault injection applies to frames in from, or out to, port `number`. */
static int faulty(const dp_t *d, uint64_t number) {
    if (d->nfault_ports == 0) return 1;
    for (uint32_t i = 0; i < d->nfault_ports; i++)
        if (d->fault_ports[i] == number) return 1;
    return 0;
}

static port_t *find_port(dp_t *d, uint64_t number) {
    for (uint32_t i = 0; i < d->nports; i++)
        if (d->ports[i].number == number) return &d->ports[i];
    return NULL;
}

EXPORT dp_t *dp_create(int64_t cpu_port, double drop_in, double drop_out, const uint32_t *seed_words, int nwords) {
    dp_t *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutex_init(&d->lock, &attr);
    pthread_mutex_init(&d->lanes_lock, NULL);
    d->cpu_port = cpu_port;
    d->drop_in = drop_in;
    d->drop_out = drop_out;
    mt_seed(&d->rng, seed_words, nwords > 0 ? nwords : 1);
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&d->inject, NULL);
    d->rx = malloc((size_t)BATCH * (UDP_HEADERS + MAX_FRAME));
    d->split = malloc(SPLIT_BYTES);
    d->frames = malloc(RX_FRAMES * sizeof *d->frames);
    d->lens = malloc(RX_FRAMES * sizeof *d->lens);
    d->loop_sender = calloc(1, sizeof *d->loop_sender);
    d->inject_sender = calloc(1, sizeof *d->inject_sender);
    if (d->epfd < 0 || d->wakefd < 0 || !d->rx || !d->split || !d->frames || !d->lens || !d->loop_sender ||
        !d->inject_sender || queue_init(&d->packet_in, 16u << 20) || queue_init(&d->pcap, 64u << 20)) {
        free(d->rx);
        free(d->split);
        free(d->frames);
        free(d->lens);
        free(d->loop_sender);
        free(d->inject_sender);
        free(d);
        return NULL;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->wakefd, &ev);
    return d;
}

/* Add a port whose socket Python opened (non-blocking). udp: local IPv4 (network order) and port. */
EXPORT int dp_add_port(dp_t *d, uint32_t number, int fd, int udp, uint32_t local_ip, uint16_t udp_port) {
    if (d->nports == MAX_PORTS) return -1;
    port_t *p = &d->ports[d->nports];
    memset(p, 0, sizeof *p);
    p->number = number;
    p->fd = fd;
    p->udp = udp;
    p->enabled = 1;
    p->local_ip = local_ip;
    p->udp_port = udp_port;
    if (udp) { /* datagrams that came as one GSO send stay one buffer: split here, not by the kernel */
        int on = 1;
        if (setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) != 0) { /* an old kernel: one per buffer */ }
        p->gso = 1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = d->nports};
    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) return -1;
    d->nports++;
    return 0;
}

/* Limit fault injection to the ports named so far (call before dp_start); -1 when the list is full. */
EXPORT int dp_fault_port(dp_t *d, uint32_t number) {
    if (d->nfault_ports >= MAX_PORTS) return -1;
    d->fault_ports[d->nfault_ports++] = number;
    return 0;
}

/* Let ranks ask UDP port `number` for shared-memory lanes: 0, or -EINVAL (not a UDP port). Call before
 * dp_start. */
EXPORT int dp_lanes_create(dp_t *d, uint32_t number) {
    port_t *p = find_port(d, number);
    if (!p || !p->udp) return -EINVAL;
    p->lanes = 1;
    d->any_lanes = 1;
    return 0;
}

/* Take and give back the lanes lock from another thread than the loop. A busy loop lets go of the lock
 * only for a moment at each turn, and a mutex is not fair: so a waiter says it waits, and the loop gives
 * way before it takes the lock again (a rank's request is answered within a turn, not starved). */
static void lanes_enter(dp_t *d) {
    __atomic_add_fetch(&d->lanes_wanted, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&d->lanes_lock);
    __atomic_sub_fetch(&d->lanes_wanted, 1, __ATOMIC_ACQ_REL);
}

static void lanes_leave(dp_t *d) { pthread_mutex_unlock(&d->lanes_lock); }

/* Closes an open lane (with the lanes lock held, or before the loop runs): unmapped, its memfd closed. */
static void lane_free(lane_t *l) {
    if (!l->open) return;
    __atomic_store_n(&l->shared->closed, 1, __ATOMIC_RELEASE); /* its rank, if alive, goes on by UDP */
    munmap(l->shared, sizeof *l->shared);
    close(l->fd);
    *l = (lane_t){0};
}

/* A new lane's memfd, sealed at its size (no rank can shrink it under the loop), mapped at *shared;
 * -errno when one cannot be made. */
static int lane_create(struct p4r_lane **shared) {
    int fd = memfd_create("p4reduce-lane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    int error = 0;
    if (ftruncate(fd, (off_t)sizeof **shared) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        error = -errno;
    } else {
        *shared = mmap(NULL, sizeof **shared, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (*shared == MAP_FAILED) error = -errno;
    }
    if (error) {
        close(fd);
        return error;
    }
    p4r_lane_init(*shared);
    /* asleep until the loop says otherwise: a rank's first datagrams ring, whether or not the loop
     * sleeps in epoll_wait right now (it set the flags of the lanes open then, not this one's) */
    (*shared)->switch_sleeping = 1;
    return fd;
}

/* Open a lane of port `number` for the rank at ip:port (network order), in a memfd of its own: its index,
 * -1 when every lane is taken (the rank then uses UDP alone), -errno when no memfd can be made. A rank
 * that asks again (a new engine on the same socket) gets a new lane in place of its old one. */
EXPORT int dp_lane_open(dp_t *d, uint32_t number, uint32_t ip, uint16_t port) {
    port_t *p = find_port(d, number);
    if (!p || !p->lanes) return -EINVAL;
    struct p4r_lane *shared = NULL;
    int fd = lane_create(&shared); /* made before the lock: the loop is not kept waiting for it */
    if (fd < 0) return fd;
    int found = -1;
    lanes_enter(d);
    for (int i = 0; i < P4R_LANES; i++)
        if (p->lane[i].open && p->lane[i].ip == ip && p->lane[i].port == port) lane_free(&p->lane[i]);
    for (int i = 0; i < P4R_LANES && found < 0; i++) {
        if (p->lane[i].open) continue;
        p->lane[i] = (lane_t){.open = 1, .shared = shared, .fd = fd, .ip = ip, .port = port};
        found = i;
    }
    lanes_leave(d);
    if (found < 0) {
        munmap(shared, sizeof *shared);
        close(fd);
    }
    return found;
}

/* A copy of the memfd of port `number`'s open lane `index`, for the caller to hand to its rank and close
 * (a copy: the loop may close the lane meanwhile), or -1. */
EXPORT int dp_lane_fd(dp_t *d, uint32_t number, int index) {
    port_t *p = find_port(d, number);
    if (!p || index < 0 || index >= P4R_LANES) return -1;
    lanes_enter(d);
    int fd = p->lane[index].open ? fcntl(p->lane[index].fd, F_DUPFD_CLOEXEC, 0) : -1;
    lanes_leave(d);
    return fd;
}

/* Close lane `index` of port `number` (its rank left, or died: its Unix socket closed). */
EXPORT void dp_lane_close(dp_t *d, uint32_t number, int index) {
    port_t *p = find_port(d, number);
    if (!p || !p->lanes || index < 0 || index >= P4R_LANES) return;
    lanes_enter(d);
    lane_free(&p->lane[index]);
    lanes_leave(d);
}

/* The open lane of port p whose rank is at ip:port (network order), or NULL. */
static lane_t *find_lane(port_t *p, uint32_t ip, uint16_t port) {
    for (int i = 0; i < P4R_LANES; i++) {
        lane_t *l = &p->lane[i];
        if (l->open && !l->corrupt && l->ip == ip && l->port == port) return l;
    }
    return NULL;
}

/* A lane whose ring holds an impossible index or length: counted, and carrying nothing from now on. It
 * is only marked here, in the middle of a turn (the pipeline may be running on a batch that reads its
 * ring, or sending to it); free_corrupt_lanes unmaps it once the turn is over. */
static void lane_corrupt(dp_t *d, port_t *p, lane_t *l) {
    if (l->corrupt) return;
    l->corrupt = 1;
    snprintf(d->last_error, sizeof d->last_error, "port %u: lane %d's ring is corrupt; closed", p->number,
             (int)(l - p->lane));
    count(d, S_LANE_CORRUPT, 1);
}

EXPORT void dp_lock(dp_t *d) { pthread_mutex_lock(&d->lock); }
EXPORT void dp_unlock(dp_t *d) { pthread_mutex_unlock(&d->lock); }

/* Install a pipeline (NULL process: none). Call with the lock held. */
EXPORT void dp_set_pipeline(dp_t *d, process_fn process, outputs_fn outputs, arena_fn arena, error_fn error,
                            void *ctx) {
    d->process = process;
    d->outputs = outputs;
    d->arena = arena;
    d->error = error;
    d->ctx = ctx;
}

EXPORT uint64_t dp_stat(dp_t *d, int which) { return which >= 0 && which < S_COUNT ? d->stats[which] : 0; }

/* Port `index` (in the order added): its number, or -1 past the last port. */
EXPORT int64_t dp_port_number(dp_t *d, uint32_t index) { return index < d->nports ? d->ports[index].number : -1; }

EXPORT uint64_t dp_port_stat(dp_t *d, uint32_t index, int which) {
    return index < d->nports && which >= 0 && which < P_COUNT ? d->ports[index].counts[which] : 0;
}

/* The latest pipeline failure (for the log) and how many there were. */
EXPORT uint64_t dp_last_error(dp_t *d, char *out, size_t cap) {
    pthread_mutex_lock(&d->lock);
    snprintf(out, cap, "%s", d->last_error);
    uint64_t n = d->stats[S_PIPELINE_ERROR];
    pthread_mutex_unlock(&d->lock);
    return n;
}

/* ------------------------------------------------------------------ frames of a UDP port */

static uint16_t ipv4_checksum(const uint8_t *h) {
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += (uint32_t)(h[i] << 8 | h[i + 1]);
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (uint16_t)~sum;
}

/* The Ethernet/IPv4/UDP headers in front of a datagram's payload at `frame + UDP_HEADERS`. */
static void udp_frame(const port_t *p, uint8_t *f, const struct sockaddr_in *from, uint32_t payload) {
    static const uint8_t switch_oui[4] = {0x02, 0x50, 0x52, 0x00};
    memcpy(f, switch_oui, 4);
    f[4] = (uint8_t)(p->number >> 8), f[5] = (uint8_t)p->number;
    f[6] = 0x02, f[7] = 0x00;
    memcpy(f + 8, &from->sin_addr.s_addr, 4);
    f[12] = 0x08, f[13] = 0x00;
    uint8_t *ip = f + 14;
    uint32_t udp_len = 8 + payload, total = 20 + udp_len;
    ip[0] = 0x45, ip[1] = 0;
    ip[2] = (uint8_t)(total >> 8), ip[3] = (uint8_t)total;
    ip[4] = ip[5] = 0;
    ip[6] = 0x40, ip[7] = 0;
    ip[8] = 64, ip[9] = 17, ip[10] = ip[11] = 0;
    memcpy(ip + 12, &from->sin_addr.s_addr, 4);
    memcpy(ip + 16, &p->local_ip, 4);
    uint16_t c = ipv4_checksum(ip);
    ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
    uint8_t *udp = ip + 20;
    uint16_t sport = ntohs(from->sin_port);
    udp[0] = (uint8_t)(sport >> 8), udp[1] = (uint8_t)sport;
    udp[2] = (uint8_t)(p->udp_port >> 8), udp[3] = (uint8_t)p->udp_port;
    udp[4] = (uint8_t)(udp_len >> 8), udp[5] = (uint8_t)udp_len;
    udp[6] = udp[7] = 0;
}

/* ------------------------------------------------------------------ sending */

/* Send m messages of one frame each. */
static void send_plain(dp_t *d, port_t *p, struct mmsghdr *msgs, uint32_t m) {
    for (uint32_t done = 0; done < m;) {
        int n = sendmmsg(p->fd, msgs + done, m - done, MSG_DONTWAIT);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            count(d, S_UNSENDABLE, m - done); /* the socket refused them (buffer full, no route) */
            return;
        }
        count(d, S_TX, (uint64_t)n);
        uint64_t bytes = 0;
        for (int k = 0; k < n; k++) bytes += msgs[done + (uint32_t)k].msg_hdr.msg_iov[0].iov_len;
        count_sent(p, (uint64_t)n, bytes);
        done += (uint32_t)n;
    }
}

static int same_destination(const batch_t *b, uint32_t i, uint32_t j) {
    return b->to[i].sin_addr.s_addr == b->to[j].sin_addr.s_addr && b->to[i].sin_port == b->to[j].sin_port;
}

/* Send runs [from, runs) one datagram per message (a kernel without UDP GSO refused a run). */
static void send_runs_plain(dp_t *d, port_t *p, batch_t *b, uint32_t from, uint32_t runs) {
    uint32_t m = 0;
    for (uint32_t r = from; r < runs; r++) {
        const struct msghdr *run = &b->joined[r].msg_hdr;
        for (size_t k = 0; k < run->msg_iovlen; k++) {
            struct msghdr *h = &b->plain[m++].msg_hdr;
            memset(h, 0, sizeof *h);
            h->msg_name = run->msg_name;
            h->msg_namelen = run->msg_namelen;
            h->msg_iov = run->msg_iov + k;
            h->msg_iovlen = 1;
        }
    }
    send_plain(d, p, b->plain, m);
}

/*
 * Send a UDP port's frames as few messages as GSO allows: the frames to one address, in their
 * order, of one size (the last of a run may be shorter), leave as one message that the kernel cuts
 * into the same datagrams (on loopback a receiver with GRO may take them as one buffer). Frames
 * to different addresses may change places (a multicast's copies to several hosts through one
 * port alternate); frames to one address never do. A kernel or device without UDP GSO refuses the
 * first run: the port sends plainly from then on.
 */
static void send_joined(dp_t *d, port_t *p, batch_t *b) {
    uint8_t taken[BATCH] = {0};
    uint32_t runs = 0, joined = 0; /* messages built, iovecs used */
    for (uint32_t i = 0; i < b->pending; i++) {
        if (taken[i]) continue;
        uint32_t first = joined;
        size_t segment = b->iov[i].iov_len, bytes = 0, last = 0;
        for (uint32_t j = i; j < b->pending; j++) {
            if (taken[j] || !same_destination(b, i, j)) continue;
            size_t len = b->iov[j].iov_len;
            uint32_t n = joined - first;
            if (n > 0 && (segment == 0 || len == 0 || len > segment || last != segment || n == GSO_SEGMENTS ||
                          bytes + len > GSO_BYTES))
                break; /* the next frame to this address starts the next run */
            taken[j] = 1;
            b->runs_iov[joined++] = b->iov[j];
            bytes += len, last = len;
        }
        struct msghdr *h = &b->joined[runs].msg_hdr;
        memset(h, 0, sizeof *h);
        h->msg_name = &b->to[i];
        h->msg_namelen = sizeof b->to[i];
        h->msg_iov = &b->runs_iov[first];
        h->msg_iovlen = joined - first;
        if (joined - first > 1) {
            uint16_t size = (uint16_t)segment;
            h->msg_control = b->control[runs].bytes;
            h->msg_controllen = sizeof b->control[runs].bytes;
            struct cmsghdr *c = CMSG_FIRSTHDR(h);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof size);
            memcpy(CMSG_DATA(c), &size, sizeof size);
            h->msg_controllen = CMSG_SPACE(sizeof size);
        }
        runs++;
    }
    for (uint32_t done = 0; done < runs;) {
        int n = sendmmsg(p->fd, b->joined + done, runs - done, MSG_DONTWAIT);
        if (n > 0) {
            for (int k = 0; k < n; k++) {
                const struct msghdr *run = &b->joined[done + (uint32_t)k].msg_hdr;
                uint64_t bytes = 0;
                for (size_t j = 0; j < run->msg_iovlen; j++) bytes += run->msg_iov[j].iov_len;
                count(d, S_TX, run->msg_iovlen);
                count_sent(p, run->msg_iovlen, bytes);
            }
            done += (uint32_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP) &&
            b->joined[done].msg_hdr.msg_iovlen > 1) {
            p->gso = 0; /* no UDP GSO here: the rest goes plainly */
            send_runs_plain(d, p, b, done, runs);
            return;
        }
        uint64_t left = 0; /* buffer full, no route: what is left is lost */
        for (uint32_t r = done; r < runs; r++) left += b->joined[r].msg_hdr.msg_iovlen;
        count(d, S_UNSENDABLE, left);
        return;
    }
}

static void flush_port(dp_t *d, port_t *p, batch_t *b) {
    if (p->udp && p->gso && b->pending > 1)
        send_joined(d, p, b);
    else
        send_plain(d, p, b->msgs, b->pending);
    b->pending = 0;
}

/* Where a frame's UDP payload lies (`*payload`, `*end`), or 0 when it is not an IPv4/UDP frame a UDP port
 * can send. */
static int udp_payload(const uint8_t *f, uint32_t len, uint32_t *payload, uint32_t *end) {
    if (len < 42 || f[12] != 0x08 || f[13] != 0x00 || f[14] >> 4 != 4 || f[23] != 17) return 0;
    uint32_t udp = 14 + (uint32_t)(f[14] & 0x0F) * 4;
    if (len < udp + 8) return 0;
    uint32_t udp_len = (uint32_t)(f[udp + 4] << 8 | f[udp + 5]);
    if (udp_len < 8) return 0;
    *payload = udp + 8;
    *end = udp + udp_len < len ? udp + udp_len : len;
    return 1;
}

/* Puts a frame the pipeline produced, straight from its arena, into the ring of its destination's lane
 * (sparing it the copy that plan makes for the socket): 1 when it went, 0 when it is for the socket (no
 * lane, or a full ring). Only the loop's own sender writes rings (one producer); it holds the lanes lock
 * all turn, so no lane opens or closes before send_frame sends the rest. */
static int send_to_lane(dp_t *d, sender_t *s, uint64_t number, const uint8_t *f, uint32_t len) {
    if (s != d->loop_sender || !d->any_lanes || number >= DIGEST_PORT_BASE ||
        (d->cpu_port >= 0 && number == (uint64_t)d->cpu_port))
        return 0;
    port_t *p = find_port(d, number);
    uint32_t payload, end;
    if (!p || !p->udp || !p->lanes || !udp_payload(f, len, &payload, &end)) return 0;
    uint32_t ip;
    uint16_t port;
    memcpy(&ip, f + 30, 4);
    memcpy(&port, f + payload - 6, 2);
    lane_t *l = find_lane(p, ip, port);
    if (!l) return 0;
    int pushed = p4r_ring_push(&l->shared->down, &l->down, f + payload, end - payload, f[15]);
    if (pushed < 0) { /* the rank's index is impossible: the lane is closed, as a corrupt up ring is */
        lane_corrupt(d, p, l);
        return 0;
    }
    if (pushed == 0) {
        count(d, S_LANE_FULL, 1); /* full: this one goes by UDP */
        return 0;
    }
    l->ring = 1;
    if (d->capture && !queue_push(&d->pcap, p->number, 1, f, len)) count(d, S_PCAP_DROPPED, 1);
    count(d, S_TX, 1);
    count(d, S_LANE_TX, 1);
    count_sent(p, 1, end - payload);
    return 1;
}

/* Queue one frame on its port (sent by flush_port); a UDP port takes only IPv4/UDP frames. Frames for a
 * lane went into its ring before (send_to_lane): those here found none, or its ring full. */
static void send_frame(dp_t *d, sender_t *s, uint64_t number, const uint8_t *f, uint32_t len) {
    if (number >= DIGEST_PORT_BASE) { /* a digest message: to Python, as PacketIns go (direction 1) */
        if (!queue_push(&d->packet_in, (uint32_t)(number - DIGEST_PORT_BASE), 1, f, len))
            count(d, S_PACKET_IN_QUEUE_FULL, 1);
        return;
    }
    if (d->cpu_port >= 0 && number == (uint64_t)d->cpu_port) {
        if (!queue_push(&d->packet_in, 0, 0, f, len)) count(d, S_PACKET_IN_QUEUE_FULL, 1);
        return;
    }
    port_t *p = find_port(d, number);
    if (!p) {
        count(d, S_NO_PORT, 1);
        return;
    }
    if (d->capture && !queue_push(&d->pcap, p->number, 1, f, len)) count(d, S_PCAP_DROPPED, 1);
    batch_t *b = &s->batches[p - d->ports];
    if (b->pending == BATCH) flush_port(d, p, b);
    uint32_t i = b->pending;
    memset(&b->msgs[i], 0, sizeof b->msgs[i]);
    if (p->udp) {
        uint32_t payload, end;
        if (!udp_payload(f, len, &payload, &end)) {
            count(d, S_UNSENDABLE, 1);
            return;
        }
        memset(&b->to[i], 0, sizeof b->to[i]);
        b->to[i].sin_family = AF_INET;
        memcpy(&b->to[i].sin_addr.s_addr, f + 30, 4);
        memcpy(&b->to[i].sin_port, f + payload - 6, 2);
        b->iov[i].iov_base = (void *)(f + payload);
        b->iov[i].iov_len = end - payload;
        b->msgs[i].msg_hdr.msg_name = &b->to[i];
        b->msgs[i].msg_hdr.msg_namelen = sizeof b->to[i];
    } else {
        b->iov[i].iov_base = (void *)f;
        b->iov[i].iov_len = len;
    }
    b->msgs[i].msg_hdr.msg_iov = &b->iov[i];
    b->msgs[i].msg_hdr.msg_iovlen = 1;
    b->pending++;
}

/* Send every port's queued frames (their bytes stay in s->tx until flush_all). */
static void flush_pending(dp_t *d, sender_t *s) {
    for (uint32_t i = 0; i < d->nports; i++)
        if (s->batches[i].pending) flush_port(d, &d->ports[i], &s->batches[i]);
}

/* Send everything queued and start the bytes over. */
static void flush_all(dp_t *d, sender_t *s) {
    flush_pending(d, s);
    s->used = 0;
}

/* Keep one produced frame (copied: the pipeline reuses its arena); 0 when out of memory. */
static int plan(dp_t *d, sender_t *s, uint64_t port, const uint8_t *data, uint32_t len) {
    if (s->used + len > s->cap) {
        flush_pending(d, s); /* queued frames point into s->tx: send them before it moves (rare: it only grows) */
        size_t cap = s->cap ? s->cap : 1 << 20;
        while (cap < s->used + len) cap *= 2;
        uint8_t *tx = realloc(s->tx, cap);
        if (!tx) return 0;
        s->tx = tx, s->cap = cap;
    }
    if (s->nplanned == s->planned_cap) {
        size_t cap = s->planned_cap ? 2 * s->planned_cap : 256;
        planned_t *planned = realloc(s->planned, cap * sizeof *planned);
        if (!planned) return 0;
        s->planned = planned, s->planned_cap = cap;
    }
    memcpy(s->tx + s->used, data, len);
    s->planned[s->nplanned++] = (planned_t){port, s->used, len};
    s->used += len;
    return 1;
}

/* ------------------------------------------------------------------ forwarding */

/*
 * Run frames from one port through the pipeline under the lock, as the Python loop's _forward
 * does (counts, fault injection, frames out in order), then send what came out after releasing it.
 */
static void forward(dp_t *d, sender_t *s, uint32_t ingress, uint8_t *const *frames, const uint32_t *lens,
                    uint32_t n) {
    if (d->capture)
        for (uint32_t i = 0; i < n; i++)
            if (!queue_push(&d->pcap, ingress, 0, frames[i], lens[i])) count(d, S_PCAP_DROPPED, 1);
    count(d, S_RX, n);
    port_t *in = find_port(d, ingress); /* NULL for the CPU port's PacketOuts */
    if (in) {
        uint64_t bytes = 0;
        for (uint32_t i = 0; i < n; i++) bytes += lens[i];
        count_port(in, P_FRAMES_IN, n);
        count_port(in, P_BYTES_IN, bytes);
    }
    pthread_mutex_lock(&d->lock);
    if (!d->process) {
        count(d, S_NO_PIPELINE, n);
        pthread_mutex_unlock(&d->lock);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (d->drop_in > 0 && faulty(d, ingress) && mt_random(&d->rng) < d->drop_in) {
            count(d, S_FAULT_IN, 1);
            continue;
        }
        int produced = d->process(d->ctx, ingress, frames[i], lens[i]);
        if (produced < 0) {
            count(d, S_PIPELINE_ERROR, 1);
            const char *why = d->error ? d->error(d->ctx) : NULL;
            snprintf(d->last_error, sizeof d->last_error, "port %u: %s", ingress, why && *why ? why : "failed");
            continue;
        }
        if (produced == 0) {
            count(d, S_CONSUMED, 1);
            continue;
        }
        const out_t *outs = d->outputs(d->ctx);
        const uint8_t *arena = d->arena(d->ctx);
        for (int k = 0; k < produced; k++) {
            if (d->drop_out > 0 && faulty(d, outs[k].port) && mt_random(&d->rng) < d->drop_out) {
                count(d, S_FAULT_OUT, 1);
                continue;
            }
            const uint8_t *frame = arena + outs[k].offset;
            if (send_to_lane(d, s, outs[k].port, frame, outs[k].length)) continue;
            if (!plan(d, s, outs[k].port, frame, outs[k].length)) count(d, S_UNSENDABLE, 1);
        }
    }
    pthread_mutex_unlock(&d->lock);
    for (size_t i = 0; i < s->nplanned; i++)
        send_frame(d, s, s->planned[i].port, s->tx + s->planned[i].offset, s->planned[i].length);
    s->nplanned = 0; /* queued on their ports: sent when full, or by flush_all */
}

/* Run one frame as if it arrived on `port` (PacketOut); what it produces is sent before it returns. */
EXPORT void dp_inject(dp_t *d, uint32_t port, const uint8_t *frame, uint32_t len) {
    uint8_t *f = (uint8_t *)frame;
    pthread_mutex_lock(&d->inject);
    forward(d, d->inject_sender, port, &f, &len, 1);
    flush_all(d, d->inject_sender);
    pthread_mutex_unlock(&d->inject);
}

/* The size of the datagrams a GRO buffer holds, or its whole length when it holds one. */
static uint32_t gro_segment(const struct msghdr *h, uint32_t length) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR((struct msghdr *)h, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int segment;
            memcpy(&segment, CMSG_DATA(c), sizeof segment);
            if (segment > 0 && (uint32_t)segment < length) return (uint32_t)segment;
        }
    }
    return length;
}

/* Frames gathered for the pipeline (d->frames, d->lens): n of them, the first `split` bytes of d->split
 * holding those that were copied there. */
typedef struct {
    uint32_t n;
    size_t split;
} gather_t;

/* One datagram from `from`, copied into d->split behind the headers its UDP datagram has, as the next
 * frame of g; a full batch goes through the pipeline first. */
static void gather(dp_t *d, port_t *p, gather_t *g, const struct sockaddr_in *from, const uint8_t *data,
                   uint32_t length) {
    size_t need = (UDP_HEADERS + length + 7u) & ~(size_t)7u;
    if (g->n == RX_FRAMES || g->split + need > SPLIT_BYTES)
        forward(d, d->loop_sender, p->number, d->frames, d->lens, g->n), g->n = 0, g->split = 0;
    uint8_t *f = d->split + g->split;
    memcpy(f + UDP_HEADERS, data, length);
    udp_frame(p, f, from, length);
    d->frames[g->n] = f;
    d->lens[g->n++] = UDP_HEADERS + length;
    g->split += need;
}

static void receive(dp_t *d, port_t *p) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_storage from[BATCH];
    gather_t g = {0, 0};
    uint32_t head = p->udp ? UDP_HEADERS : 0;
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = d->rx + (size_t)i * (UDP_HEADERS + MAX_FRAME) + head;
        iov[i].iov_len = MAX_FRAME;
        memset(&msgs[i], 0, sizeof msgs[i]);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &from[i];
        msgs[i].msg_hdr.msg_namelen = sizeof from[i];
        if (p->udp) {
            msgs[i].msg_hdr.msg_control = d->rx_control[i].bytes;
            msgs[i].msg_hdr.msg_controllen = sizeof d->rx_control[i].bytes;
        }
    }
    int got = recvmmsg(p->fd, msgs, BATCH, MSG_DONTWAIT, NULL);
    if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED) return;
        snprintf(d->last_error, sizeof d->last_error, "port %u: receive failed (%s); disabled", p->number,
                 strerror(errno));
        epoll_ctl(d->epfd, EPOLL_CTL_DEL, p->fd, NULL);
        p->enabled = 0;
        return;
    }
    for (int i = 0; i < got; i++) {
        uint8_t *frame = d->rx + (size_t)i * (UDP_HEADERS + MAX_FRAME);
        uint32_t len = msgs[i].msg_len;
        if (!p->udp) {
            const struct sockaddr_ll *ll = (const struct sockaddr_ll *)&from[i];
            if (ll->sll_pkttype == PACKET_OUTGOING) continue; /* our own transmissions (older kernels) */
        }
        if (p->lanes && len == 0) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)&from[i];
            if (find_lane(p, in->sin_addr.s_addr, in->sin_port)) continue; /* a doorbell: the ring is read anyway */
        }
        uint32_t segment = p->udp ? gro_segment(&msgs[i].msg_hdr, len) : len;
        if (segment == len) { /* one frame, in place: a UDP datagram gets its headers in front of it */
            if (g.n == RX_FRAMES) forward(d, d->loop_sender, p->number, d->frames, d->lens, g.n), g.n = 0, g.split = 0;
            if (p->udp) udp_frame(p, frame, (const struct sockaddr_in *)&from[i], len);
            d->frames[g.n] = frame;
            d->lens[g.n++] = len + head;
            continue;
        }
        /* a GRO buffer: each of its datagrams becomes a frame of its own, as if it came alone */
        for (uint32_t at = 0; at < len; at += segment) {
            uint32_t piece = len - at < segment ? len - at : segment;
            gather(d, p, &g, (const struct sockaddr_in *)&from[i], frame + UDP_HEADERS + at, piece);
        }
    }
    if (g.n) forward(d, d->loop_sender, p->number, d->frames, d->lens, g.n);
}

#define LANE_BUDGET 64 /* datagrams taken from one lane before the next lane's turn */

/* Run what the open lanes of every port brought through the pipeline, as receive() does a socket's:
 * each datagram copied out of its slot (the rank cannot change it under the pipeline) behind the headers
 * its rank's UDP datagram would have had. The number taken. */
static uint32_t take_lanes(dp_t *d) {
    uint32_t taken = 0;
    for (uint32_t k = 0; k < d->nports; k++) {
        port_t *p = &d->ports[k];
        if (!p->lanes || !p->enabled) continue;
        gather_t g = {0, 0};
        for (int i = 0; i < P4R_LANES; i++) {
            lane_t *l = &p->lane[i];
            struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = l->port, .sin_addr.s_addr = l->ip};
            for (int budget = LANE_BUDGET; l->open && !l->corrupt && budget > 0; budget--) {
                const uint8_t *data;
                uint32_t length;
                uint8_t tos;
                int got = p4r_ring_peek(&l->shared->up, &l->up, &data, &length, &tos);
                if (got < 0) lane_corrupt(d, p, l); /* its rank goes on by UDP (its lease stays) */
                if (got <= 0) break;
                /* (a batch gather() sends through the pipeline may mark this lane corrupt: it stays
                 * mapped until the turn is over, so the slot and the ring are still there to read) */
                gather(d, p, &g, &from, data, length);
                p4r_ring_pop(&l->shared->up, &l->up);
                taken++;
            }
        }
        if (g.n) forward(d, d->loop_sender, p->number, d->frames, d->lens, g.n);
    }
    count(d, S_LANE_RX, taken);
    return taken;
}

/* After a flush: wake each rank that sleeps with datagrams newly in its ring (an empty datagram to its
 * UDP address, which its ppoll watches). */
static void ring_doorbells(dp_t *d) {
    for (uint32_t k = 0; k < d->nports; k++) {
        port_t *p = &d->ports[k];
        if (!p->lanes) continue;
        for (int i = 0; i < P4R_LANES; i++) {
            lane_t *l = &p->lane[i];
            if (!l->ring) continue;
            l->ring = 0;
            if (!l->open || l->corrupt || !p4r_lanes_should_ring(&l->shared->rank_sleeping)) continue;
            struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = l->port, .sin_addr.s_addr = l->ip};
            if (sendto(p->fd, "", 0, MSG_DONTWAIT, (const struct sockaddr *)&to, sizeof to) < 0) {
                /* a full socket buffer: the rank has datagrams to read there and wakes anyway */
            }
        }
    }
}

/* Frees the lanes found corrupt in this turn (lane_corrupt), now that no frame refers to their rings. */
static void free_corrupt_lanes(dp_t *d) {
    for (uint32_t k = 0; k < d->nports; k++)
        for (int i = 0; i < P4R_LANES; i++)
            if (d->ports[k].lane[i].corrupt) lane_free(&d->ports[k].lane[i]);
}

/* Whether an open lane holds a datagram for the loop. */
static int lanes_waiting(dp_t *d) {
    for (uint32_t k = 0; k < d->nports; k++) {
        port_t *p = &d->ports[k];
        if (!p->lanes || !p->enabled) continue;
        for (int i = 0; i < P4R_LANES; i++)
            if (p->lane[i].open && !p->lane[i].corrupt && p4r_ring_waiting(&p->lane[i].shared->up, &p->lane[i].up))
                return 1;
    }
    return 0;
}

/* Set (or clear) every open lane's `switch_sleeping` flag. */
static void lanes_sleeping(dp_t *d, uint32_t value) {
    for (uint32_t k = 0; k < d->nports; k++) {
        port_t *p = &d->ports[k];
        if (!p->lanes) continue;
        for (int i = 0; i < P4R_LANES; i++)
            if (p->lane[i].open) p4r_lanes_sleep_flag(&p->lane[i].shared->switch_sleeping, value);
    }
}

static void *loop(void *arg) {
    dp_t *d = arg;
    struct epoll_event events[MAX_PORTS + 1];
    int timeout = 200;
    pthread_mutex_lock(&d->lanes_lock);
    while (d->running) {
        pthread_mutex_unlock(&d->lanes_lock);
        int n = epoll_wait(d->epfd, events, MAX_PORTS + 1, timeout);
        while (__atomic_load_n(&d->lanes_wanted, __ATOMIC_ACQUIRE)) sched_yield(); /* a lane opens or closes */
        pthread_mutex_lock(&d->lanes_lock);
        if (d->any_lanes && timeout != 0) lanes_sleeping(d, 0);
        for (int i = 0; i < n; i++) {
            if (events[i].data.u64 == UINT64_MAX) {
                uint64_t drain;
                if (read(d->wakefd, &drain, sizeof drain) < 0) { /* nothing to do */ }
                continue;
            }
            port_t *p = &d->ports[events[i].data.u64];
            if (p->enabled) receive(d, p);
        }
        uint32_t taken = d->any_lanes ? take_lanes(d) : 0;
        /* What every ready port brought is out only now: a port's frames to one host, from several
         * senders' batches, leave as one run (one GSO message on a UDP port). */
        flush_all(d, d->loop_sender);
        timeout = 200;
        if (d->any_lanes) {
            ring_doorbells(d);
            free_corrupt_lanes(d);
            if (taken > 0) {
                timeout = 0; /* lanes are busy: look at them again after a glance at the sockets */
            } else {
                lanes_sleeping(d, 1);
                if (lanes_waiting(d)) lanes_sleeping(d, 0), timeout = 0;
            }
        }
    }
    pthread_mutex_unlock(&d->lanes_lock);
    return NULL;
}

/* ------------------------------------------------------------------ captures */

static void pcap_write(dp_t *d, const record_t *r, const uint8_t *data) {
    uint32_t slot = 0;
    while (slot < d->nports && d->ports[slot].number != r->port) slot++;
    if (slot == d->nports) return;
    FILE **f = &d->pcap_files[slot][r->direction];
    if (!*f) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%u_%s.pcap", d->pcap_dir, r->port, r->direction ? "out" : "in");
        *f = fopen(path, "wb");
        if (!*f) return;
        const uint32_t global[6] = {0xA1B2C3D4u, 2u | (4u << 16), 0, 0, 65535, 1};
        fwrite(global, sizeof global, 1, *f);
    }
    const uint32_t rec[4] = {r->sec, r->usec, r->length, r->length};
    fwrite(rec, sizeof rec, 1, *f);
    fwrite(data, 1, r->length, *f);
}

static void pcap_flush(dp_t *d) {
    for (uint32_t i = 0; i < d->nports; i++)
        for (int k = 0; k < 2; k++)
            if (d->pcap_files[i][k]) fflush(d->pcap_files[i][k]);
}

static void *writer(void *arg) {
    dp_t *d = arg;
    uint8_t *frame = malloc(UDP_HEADERS + MAX_FRAME);
    record_t r;
    for (;;) {
        long n = queue_pop(&d->pcap, &r, frame, UDP_HEADERS + MAX_FRAME, 200);
        if (n >= 0) {
            pcap_write(d, &r, frame);
        } else {
            pcap_flush(d);
            if (!d->writer_running) break;
        }
    }
    free(frame);
    return NULL;
}

EXPORT int dp_capture(dp_t *d, const char *directory) {
    snprintf(d->pcap_dir, sizeof d->pcap_dir, "%s", directory);
    d->capture = 1;
    d->writer_running = 1;
    return pthread_create(&d->writer, NULL, writer, d);
}

/* ------------------------------------------------------------------ life cycle */

EXPORT int dp_start(dp_t *d) {
    d->running = 1;
    if (pthread_create(&d->thread, NULL, loop, d) != 0) {
        d->running = 0;
        return -1;
    }
    return 0;
}

EXPORT void dp_stop(dp_t *d) {
    if (!d->running) return;
    d->running = 0;
    uint64_t one = 1;
    if (write(d->wakefd, &one, sizeof one) < 0) { /* the loop wakes within 200 ms anyway */ }
    pthread_join(d->thread, NULL);
}

/* For the controller: the next PacketIn frame or digest message into `out` (*digest = its index
 * + 1; 0 for a PacketIn); its length, or -1 after waiting `ms` for none. */
EXPORT long dp_packet_in(dp_t *d, uint8_t *out, size_t cap, int ms, uint32_t *digest) {
    record_t r;
    long n = queue_pop(&d->packet_in, &r, out, cap, ms);
    *digest = n >= 0 && r.direction == 1 ? r.port + 1 : 0;
    return n;
}

EXPORT void dp_destroy(dp_t *d) {
    if (!d) return;
    dp_stop(d);
    if (d->capture) {
        d->writer_running = 0;
        pthread_join(d->writer, NULL);
        for (uint32_t i = 0; i < d->nports; i++)
            for (int k = 0; k < 2; k++)
                if (d->pcap_files[i][k]) fclose(d->pcap_files[i][k]);
    }
    for (uint32_t i = 0; i < d->nports; i++)
        for (int k = 0; k < P4R_LANES; k++) lane_free(&d->ports[i].lane[k]);
    close(d->epfd);
    close(d->wakefd);
    queue_free(&d->packet_in);
    queue_free(&d->pcap);
    free(d->rx);
    free(d->split);
    free(d->frames);
    free(d->lens);
    sender_t *senders[2] = {d->loop_sender, d->inject_sender};
    for (int i = 0; i < 2; i++) {
        free(senders[i]->tx);
        free(senders[i]->planned);
        free(senders[i]);
    }
    pthread_mutex_destroy(&d->lock);
    pthread_mutex_destroy(&d->lanes_lock);
    pthread_mutex_destroy(&d->inject);
    free(d);
}
