/*
 * p4reduce constants shared by the v1model and TNA programs.
 *
 * The "wire contract" section must equal contracts/protocol.py, and the
 * derived sizes must follow from it; tests/test_protocol_constants.py parses
 * this file (one `#define NAME VALUE` per line, decimal or hex) and fails on
 * any mismatch or on a name it does not know. Plain #defines rather than
 * `const` declarations, so that every consumer (p4c, the Tofino compiler,
 * the embedded switch's front end, the test) sees literal numbers.
 */
#ifndef P4REDUCE_CONSTANTS_P4
#define P4REDUCE_CONSTANTS_P4

/* ---- wire contract (docs/protocol.md) ---- */
#define UDP_PORT           20562   /* 0x5052 "PR": UDP destination port of DATA */
#define VALUES_PER_PACKET  32      /* K */
#define HEADER_BYTES       12      /* p4reduce header before the values */
#define PAYLOAD_BYTES      140     /* HEADER_BYTES + 4 * K: UDP payload of every p4reduce packet */
#define MAX_WORKERS        32      /* width of the per-slot bitmap */
#define SLOT_COUNT         2048    /* slots per set, switch-wide */
#define MAX_JOBS           1024    /* job ids 1 .. MAX_JOBS-1; size of per-job counters */
#define FLOOD_GROUP        1       /* multicast group for L2 flooding */
#define RESULT_TTL         64      /* IPv4 TTL of every RESULT the switch emits */
#define EXP_BIAS           128     /* wire exponent = e + EXP_BIAS */
#define EXP_NONE           0       /* "no exponent" */

#define MSG_DATA           1
#define MSG_RESULT         2

/* drop reasons: index into MyIngress.ingress_drops / MyEgress.egress_drops */
#define DROP_TRUNCATED          1
#define DROP_BAD_CHECKSUM       2
#define DROP_BAD_LENGTH         3
#define DROP_BAD_TYPE           4
#define DROP_UNKNOWN_JOB        5
#define DROP_WRONG_SENDER       6
#define DROP_SLOT_OUT_OF_RANGE  7
#define DROP_EARLY_DUPLICATE    8
#define DROP_NO_RESULT_DEST     9
#define DROP_REASON_COUNT       16     /* size of the drop counter arrays */

/* ---- sizes derived from the contract ---- */
#define SLOT_REGISTER_SIZE  4096   /* 2 * SLOT_COUNT: one copy of each slot per set */
#define UDP_AGG_LENGTH      148    /* UDP length of a p4reduce packet: 8 + PAYLOAD_BYTES */
#define IPV4_AGG_LENGTH     168    /* IPv4 total length of a p4reduce packet: 20 + 8 + PAYLOAD_BYTES */

/* ---- program limits (docs/protocol.md, "Limits") ---- */
#define JOB_TABLE_SIZE      4096   /* job_table / result_dest entries (jobs x ranks) */
#define ADDRESS_TABLE_SIZE  64     /* agg_addresses / arp_responder entries */
#define L2_TABLE_SIZE       1024   /* l2_forward entries */

/* ---- standard numbers ---- */
#define ETHERTYPE_IPV4      0x0800
#define ETHERTYPE_ARP       0x0806
#define IP_PROTO_UDP        17
#define ARP_HTYPE_ETHERNET  1
#define ARP_OPER_REQUEST    1
#define ARP_OPER_REPLY      2

/* ---- program-internal: what ingress decided, read by egress and the checksum unit ---- */
#define PKT_KIND_FORWARD    0      /* unicast L2 forwarding, ARP reply, or dropped */
#define PKT_KIND_FLOOD      1      /* L2 flood: egress prunes the replica to the ingress port */
#define PKT_KIND_RESULT     2      /* completed slot: egress rewrites each replica per rank */
#define PKT_KIND_REPLAY     3      /* unicast replay to a retransmitting sender */

#endif /* P4REDUCE_CONSTANTS_P4 */
