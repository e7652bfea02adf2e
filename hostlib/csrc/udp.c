/* Batched UDP (udp.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "udp.h"

#include <errno.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

int p4r_udp_receiver_init(struct p4r_udp_receiver *r) {
    memset(r, 0, sizeof *r);
    r->buffers = malloc((size_t)P4R_UDP_MESSAGES * P4R_UDP_BUFFER);
    return r->buffers == NULL ? -1 : 0;
}

void p4r_udp_receiver_free(struct p4r_udp_receiver *r) {
    free(r->buffers);
    r->buffers = NULL;
}

int p4r_udp_enable_gro(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on);
}

int p4r_udp_receive(int fd, struct p4r_udp_receiver *r) {
    for (int i = 0; i < P4R_UDP_MESSAGES; i++) {
        r->vectors[i].iov_base = r->buffers + (size_t)i * P4R_UDP_BUFFER;
        r->vectors[i].iov_len = P4R_UDP_BUFFER;
        memset(&r->messages[i], 0, sizeof r->messages[i]);
        r->messages[i].msg_hdr.msg_iov = &r->vectors[i];
        r->messages[i].msg_hdr.msg_iovlen = 1;
        r->messages[i].msg_hdr.msg_name = &r->from[i];
        r->messages[i].msg_hdr.msg_namelen = sizeof r->from[i];
        r->messages[i].msg_hdr.msg_control = r->control[i].bytes;
        r->messages[i].msg_hdr.msg_controllen = sizeof r->control[i].bytes;
    }
    return recvmmsg(fd, r->messages, P4R_UDP_MESSAGES, MSG_DONTWAIT, NULL);
}

size_t p4r_udp_segment(const struct p4r_udp_receiver *r, int m) {
    const struct msghdr *h = &r->messages[m].msg_hdr;
    size_t length = r->messages[m].msg_len;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR((struct msghdr *)h, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int segment;
            memcpy(&segment, CMSG_DATA(c), sizeof segment);
            if (segment > 0 && (size_t)segment < length) return (size_t)segment;
        }
    }
    return length;
}

int p4r_udp_enable_tos(int fd) {
    int on = 1;
    return setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on);
}

/* Every control message is bounded by the kernel's msg_controllen (CMSG_NXTHDR) and by its own length,
 * which must hold the byte read: a truncated message (MSG_CTRUNC) is only shorter. */
uint8_t p4r_udp_tos(const struct p4r_udp_receiver *r, int m) {
    const struct msghdr *h = &r->messages[m].msg_hdr;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR((struct msghdr *)h, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
            return *(const uint8_t *)CMSG_DATA(c);
        }
    }
    return 0;
}

static void wait_writable(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, 10);
}

/* How many datagrams from `first` go in one message: a run of equal sizes (GSO), or one. */
static size_t run_length(const uint16_t *lengths, size_t first, size_t count, int gso) {
    if (!gso) return 1;
    size_t n = 1, bytes = lengths[first];
    while (first + n < count && n < P4R_UDP_SEGMENTS && lengths[first + n] == lengths[first] &&
           bytes + lengths[first] <= P4R_UDP_GSO_BYTES) {
        bytes += lengths[first + n];
        n++;
    }
    return n;
}

int p4r_udp_send(struct p4r_udp_sender *s, int fd, const uint8_t *const *packets, const uint16_t *lengths,
                 size_t count, const struct sockaddr_in *to, uint64_t *refused) {
    struct mmsghdr *messages = s->messages;
    struct iovec *vectors = s->vectors;
    size_t *firsts = s->firsts;
    int *gso = &s->gso;
    size_t next = 0;
    int refused_here = 0; /* the message at `next` met ECONNREFUSED once already */
    int plain = 0;        /* the run at `next` failed as one GSO send: try it as plain datagrams */
    while (next < count) {
        size_t built = 0, at = next, vector = 0;
        while (at < count && built < P4R_UDP_SEND_MESSAGES) {
            size_t n = run_length(lengths, at, count, *gso && !(plain && at == next));
            struct msghdr *h = &messages[built].msg_hdr;
            memset(&messages[built], 0, sizeof messages[built]);
            for (size_t i = 0; i < n; i++) {
                vectors[vector + i].iov_base = (void *)packets[at + i];
                vectors[vector + i].iov_len = lengths[at + i];
            }
            h->msg_iov = &vectors[vector];
            h->msg_iovlen = n;
            if (to != NULL) {
                h->msg_name = (void *)to;
                h->msg_namelen = sizeof *to;
            }
            if (n > 1) {
                uint16_t segment = lengths[at];
                h->msg_control = s->control[built].bytes;
                h->msg_controllen = sizeof s->control[built].bytes;
                struct cmsghdr *c = CMSG_FIRSTHDR(h);
                c->cmsg_level = SOL_UDP;
                c->cmsg_type = UDP_SEGMENT;
                c->cmsg_len = CMSG_LEN(sizeof segment);
                memcpy(CMSG_DATA(c), &segment, sizeof segment);
            }
            firsts[built++] = at;
            at += n;
            vector += n;
        }
        firsts[built] = at;
        int sent = sendmmsg(fd, messages, (unsigned)built, MSG_DONTWAIT);
        if (sent > 0) {
            if (plain) *gso = 0; /* the datagrams went one by one where the run could not: no GSO here */
            next = firsts[sent];
            refused_here = plain = 0;
            continue;
        }
        if (sent == 0 || errno == EINTR) continue;
        if (errno == ECONNREFUSED) {
            *refused += 1;
            if (refused_here) {
                next = firsts[1];
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
        if (!plain && firsts[1] - firsts[0] > 1 && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
            plain = 1; /* the kernel may lack UDP GSO: if plain datagrams go, it does, and GSO is off */
            continue;
        }
        return errno;
    }
    return 0;
}
