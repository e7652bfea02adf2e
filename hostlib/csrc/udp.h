/* Batched UDP: many datagrams per system call, and many per kernel traversal where the kernel can.
 *
 * Sending: sendmmsg of messages that each carry a run of equal-sized datagrams to one destination
 * as one UDP GSO send (UDP_SEGMENT): the stack is traversed once per run and the datagrams are cut
 * at the NIC, or on loopback handed whole to a receiver that takes GRO. Receiving: recvmmsg with
 * UDP_GRO on, so runs of datagrams of a flow arrive as one buffer with their segment size. Where
 * the kernel refuses either, plain datagrams go one per message, as before. */
#ifndef P4R_UDP_H
#define P4R_UDP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define P4R_UDP_MESSAGES 32          /* buffers per recvmmsg */
#define P4R_UDP_BUFFER 65536         /* a GRO run is at most 64 KiB */
#define P4R_UDP_SEND_MESSAGES 64     /* messages per sendmmsg */
#define P4R_UDP_SEGMENTS 64          /* datagrams per GSO send */
#define P4R_UDP_GSO_BYTES 60000      /* and bytes: under the 65507 a UDP datagram can carry */

struct p4r_udp_receiver {
    uint8_t *buffers;
    struct mmsghdr messages[P4R_UDP_MESSAGES];
    struct iovec vectors[P4R_UDP_MESSAGES];
    struct sockaddr_in from[P4R_UDP_MESSAGES];
    union {
        char bytes[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(int))]; /* UDP_GRO's segment size, IP_TOS */
        struct cmsghdr align;
    } control[P4R_UDP_MESSAGES];
};

int p4r_udp_receiver_init(struct p4r_udp_receiver *r); /* 0, or -1 out of memory */
void p4r_udp_receiver_free(struct p4r_udp_receiver *r);
/* Turns UDP_GRO on (0, or -1 where the kernel has none: datagrams then come one per buffer). */
int p4r_udp_enable_gro(int fd);
/* recvmmsg without blocking: the number of buffers filled, or -1 with errno. */
int p4r_udp_receive(int fd, struct p4r_udp_receiver *r);
/* The size of the datagrams in buffer m (the last may be shorter): its GRO segment size, or its length. */
size_t p4r_udp_segment(const struct p4r_udp_receiver *r, int m);
/* Asks the kernel for each datagram's IPv4 DSCP/ECN byte (IP_RECVTOS): 0, or -1. */
int p4r_udp_enable_tos(int fd);
/* The DSCP/ECN byte buffer m arrived with, or 0 when the kernel did not say. */
uint8_t p4r_udp_tos(const struct p4r_udp_receiver *r, int m);

/* Scratch for p4r_udp_send, and whether UDP GSO works here (set gso = 1 to try it). */
struct p4r_udp_sender {
    int gso;
    struct mmsghdr messages[P4R_UDP_SEND_MESSAGES];
    struct iovec vectors[P4R_UDP_SEND_MESSAGES * P4R_UDP_SEGMENTS];
    size_t firsts[P4R_UDP_SEND_MESSAGES + 1];
    union {
        char bytes[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } control[P4R_UDP_SEND_MESSAGES];
};

/* Sends count datagrams, in order, to `to` (NULL: the connected peer). s->gso drops to 0 for good
 * if the kernel refuses UDP_SEGMENT. ECONNREFUSED (an ICMP port unreachable reported for an earlier
 * datagram) is counted in *refused and the message tried once more, then given up; a full send
 * buffer waits. Returns 0, or the errno of any other failure. */
int p4r_udp_send(struct p4r_udp_sender *s, int fd, const uint8_t *const *packets, const uint16_t *lengths,
                 size_t count, const struct sockaddr_in *to, uint64_t *refused);

#endif
