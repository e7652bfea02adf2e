/*
 * Native traffic for benchmarks/bench_switch.py: a closed-loop p4reduce client and a UDP echo loop,
 * both in C, so that neither the clients nor the reference loop are what is measured.
 *
 * udp_client: `n` worker sockets (bound, one per rank) keep `window` slots in flight; each slot's
 * DATA packets (one template per rank, from Python) are sent with the slot's set bit and use
 * number patched in; when every rank has its answer (a RESULT, or the echo of its own packet) the
 * slot is reused with the set bit flipped and the next use number. After 200 ms without an
 * answer, each missing rank asks with a QUERY (the switch replays the result or names the missing).
 * Returns the DATA packets per second the target answered.
 *
 * udp_echo: receive a batch with recvmmsg, send each datagram back to its sender with sendmmsg;
 * forever (the benchmark kills the process).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_RANKS 32
#define MAX_WINDOW 4096
#define BATCH 64

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void patch(uint8_t *p, uint32_t slot, uint32_t set, uint32_t seq) {
    uint32_t word = (set << 15) | slot;
    p[4] = (uint8_t)(word >> 8), p[5] = (uint8_t)word;
    p[8] = (uint8_t)(seq >> 24), p[9] = (uint8_t)(seq >> 16), p[10] = (uint8_t)(seq >> 8), p[11] = (uint8_t)seq;
}

static void send_one(int fd, const struct sockaddr_in *to, const uint8_t *tmpl, int len, uint32_t slot,
                     uint32_t set, uint32_t seq) {
    uint8_t buf[2048];
    memcpy(buf, tmpl, (size_t)len);
    patch(buf, slot, set, seq);
    while (sendto(fd, buf, (size_t)len, 0, (const struct sockaddr *)to, sizeof *to) < 0 && errno == EINTR) {
    }
}

EXPORT double udp_client(int n, const int *fds, const struct sockaddr_in *target, const uint8_t *data,
                         int data_len, const uint8_t *query, int query_len, int window, double seconds,
                         uint32_t first_seq) {
    static uint32_t waiting[MAX_WINDOW], set_bits[MAX_WINDOW], seqs[MAX_WINDOW];
    if (n > MAX_RANKS || window > MAX_WINDOW || data_len > 2048) return -1;
    uint32_t all = n == 32 ? 0xFFFFFFFFu : (1u << n) - 1, seq = first_seq;
    for (int s = 0; s < window; s++) {
        waiting[s] = all, set_bits[s] = 0, seqs[s] = seq++;
        for (int r = 0; r < n; r++) send_one(fds[r], target, data + r * data_len, data_len, s, 0, seqs[s]);
    }
    struct pollfd pfds[MAX_RANKS];
    for (int r = 0; r < n; r++) pfds[r].fd = fds[r], pfds[r].events = POLLIN;
    long completed = 0;
    double start = now(), elapsed = 0;
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    static uint8_t bufs[BATCH][2048];
    while ((elapsed = now() - start) < seconds) {
        int ready = poll(pfds, (nfds_t)n, 200);
        if (ready == 0) { /* a loss: ask for what is outstanding */
            for (int s = 0; s < window; s++)
                for (int r = 0; r < n; r++)
                    if (waiting[s] >> r & 1)
                        send_one(fds[r], target, query + r * query_len, query_len, s, set_bits[s], seqs[s]);
            continue;
        }
        for (int r = 0; r < n; r++) {
            if (!(pfds[r].revents & POLLIN)) continue;
            for (int i = 0; i < BATCH; i++) {
                iov[i].iov_base = bufs[i];
                iov[i].iov_len = sizeof bufs[i];
                memset(&msgs[i], 0, sizeof msgs[i]);
                msgs[i].msg_hdr.msg_iov = &iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            int got = recvmmsg(fds[r], msgs, BATCH, MSG_DONTWAIT, NULL);
            for (int i = 0; i < got; i++) {
                if (msgs[i].msg_len < 6) continue;
                uint32_t word = (uint32_t)(bufs[i][4] << 8 | bufs[i][5]), slot = word & 0x7FFF, set = word >> 15;
                if ((int)slot >= window || set != set_bits[slot] || !(waiting[slot] >> r & 1)) continue;
                waiting[slot] &= ~(1u << r);
                if (!waiting[slot]) { /* the use is complete: the slot goes on with the next use */
                    completed++;
                    set_bits[slot] ^= 1;
                    seqs[slot] = seq++;
                    waiting[slot] = all;
                    for (int k = 0; k < n; k++)
                        send_one(fds[k], target, data + k * data_len, data_len, slot, set_bits[slot], seqs[slot]);
                }
            }
        }
    }
    return completed * n / elapsed;
}

EXPORT void udp_echo(int fd) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    static uint8_t bufs[BATCH][2048];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = sizeof bufs[i];
            memset(&msgs[i], 0, sizeof msgs[i]);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = &from[i];
            msgs[i].msg_hdr.msg_namelen = sizeof from[i];
        }
        int got = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (got <= 0) continue;
        for (int i = 0; i < got; i++) iov[i].iov_len = msgs[i].msg_len;
        int sent = 0;
        while (sent < got) {
            int n = sendmmsg(fd, msgs + sent, (unsigned)(got - sent), 0);
            if (n <= 0) break;
            sent += n;
        }
    }
}
