/*
 * p4reduce constants shared by the v1model and TNA programs.
 *
 * The "wire contract" section must equal contracts/protocol.py, and the
 * derived sizes must follow from it; tests/test_protocol_constants.py parses
 * this file (one `#define NAME VALUE` per line, decimal or hex, optionally
 * inside `#ifndef NAME` for the compile-time parameters) and fails on any
 * mismatch or on a name it does not know. Plain #defines rather than `const`
 * declarations, so that every consumer (p4c, the Tofino compiler, the
 * embedded switch's front end, the test) sees literal numbers.
 */
#ifndef P4REDUCE_CONSTANTS_P4
#define P4REDUCE_CONSTANTS_P4

/* ---- compile-time parameters: override with -D (docs/protocol.md, "Values per packet") ---- */
#ifndef VALUES_PER_PACKET
#ifdef __P4REDUCE_SOFTSWITCH__
/* the embedded switch pays per packet, not per value: K = 1024 was its fastest, idle and busy
   (docs/performance.md, "Values per packet on the embedded switch"); its frames need a 4,162-byte MTU */
#define VALUES_PER_PACKET  1024
#else
#define VALUES_PER_PACKET  64      /* K: 32, 64, 128 or 256; 512 or 1024 on software targets (jumbo frames) */
#endif
#endif
#ifndef SLOT_COUNT
#define SLOT_COUNT         2048    /* slots per set, switch-wide */
#endif

/* ---- wire contract (docs/protocol.md) ---- */
#define PROTOCOL_VERSION   3
#define UDP_PORT           20562   /* 0x5052 "PR": UDP destination port of DATA */
#define HEADER_BYTES       24      /* p4reduce header before the values */
#define MAX_WORKERS        32      /* width of the per-slot bitmap */
#define MAX_JOBS           1024    /* job ids 1 .. MAX_JOBS-1; size of per-job counters and registers */
#define FLOOD_GROUP        1       /* multicast group for L2 flooding */
#define RESULT_TTL         64      /* IPv4 TTL of every packet the switch emits */
#define EXP_BIAS           128     /* wire exponent = e + EXP_BIAS */
#define EXP_NONE           0       /* "no exponent" */
#define EXP_NONFINITE      255     /* the block holds NaN or Inf on some rank; the max propagates it */
#define USE_BITS           16      /* seq = call number (high 16 bits) : use within the call (low 16) */
#define ECN_MASK           3       /* the ECN field: the low two bits of the IPv4 DSCP/ECN byte (RFC 3168) */
#define ECN_CE             3       /* Congestion Experienced; 0 is Not-ECT, 1 ECT(1), 2 ECT(0) (hosts send ECT(0)) */

#define MSG_DATA           1       /* member -> switch: a contribution (a worker's, or a child switch's partial sum) */
#define MSG_RESULT         2       /* switch -> members: a completed sum */
#define MSG_MISSING        3       /* switch -> member: its contribution to this use is missing; aux = who contributed */
#define MSG_ABORT          4       /* switch -> members: the call is aborted; aux = the call the slot holds (child -> parent too) */
#define MSG_STALE          5       /* switch -> sender: the slot has moved past this use; aux = its seq */
#define MSG_QUERY          6       /* member -> switch: header only; where is this use? (RESULT, MISSING, STALE or nothing) */

/* drop reasons: index into MyIngress.ingress_drops / MyEgress.egress_drops */
#define DROP_TRUNCATED          1
#define DROP_BAD_CHECKSUM       2
#define DROP_BAD_LENGTH         3
#define DROP_BAD_TYPE           4
#define DROP_UNKNOWN_JOB        5
#define DROP_WRONG_SENDER       6
#define DROP_BAD_KEY            7
#define DROP_SLOT_OUT_OF_RANGE  8
#define DROP_STALE              9
#define DROP_DUPLICATE          10
#define DROP_CALL_MISMATCH      11
#define DROP_CALL_ABORTED       12
#define DROP_NO_RESULT_DEST     13
#define DROP_CONTRIBUTED        14     /* a QUERY from a rank whose contribution is in: nothing to tell it */
#define DROP_REASON_COUNT       16     /* size of the drop counter arrays */

/* ---- sizes derived from the contract ---- */
#define SLOT_REGISTER_SIZE  (2 * SLOT_COUNT)              /* one copy of each slot per set */
#define PAYLOAD_BYTES       (HEADER_BYTES + 4 * VALUES_PER_PACKET)
#define UDP_AGG_LENGTH      (8 + PAYLOAD_BYTES)           /* UDP length of DATA and RESULT */
#define IPV4_AGG_LENGTH     (28 + PAYLOAD_BYTES)          /* IPv4 total length of DATA and RESULT */
#define UDP_NOTICE_LENGTH   (8 + HEADER_BYTES)            /* UDP length of MISSING, ABORT, STALE */
#define IPV4_NOTICE_LENGTH  (28 + HEADER_BYTES)           /* IPv4 total length of MISSING, ABORT, STALE */

/* ---- program limits (docs/protocol.md, "Limits") ---- */
#define JOB_TABLE_SIZE      4096   /* job_table / result_dest entries (jobs x ranks) */
#define ADDRESS_TABLE_SIZE  64     /* agg_addresses / arp_responder entries */
#define L2_TABLE_SIZE       1024   /* l2_forward entries */
#define PORT_TABLE_SIZE     512    /* ecn_threshold entries: one per egress port (9-bit port numbers) */

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
#define PKT_KIND_JOB        2      /* RESULT, MISSING or ABORT to the job's group: egress addresses each replica */
#define PKT_KIND_REPLY      3      /* unicast answer to the sender: replayed RESULT, ABORT or STALE */
#define PKT_KIND_UP         4      /* to this switch's parent in the job's tree: a partial sum, QUERY or ABORT */

#endif /* P4REDUCE_CONSTANTS_P4 */
