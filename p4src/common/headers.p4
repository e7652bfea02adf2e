/*
 * Header types of p4reduce traffic, shared by the v1model and TNA programs.
 * Field names are part of the contract with the controller: table keys are
 * resolved by name from P4Info (e.g. "hdr.p4r.job_id", "hdr.ipv4.dst_addr").
 */
#ifndef P4REDUCE_HEADERS_P4
#define P4REDUCE_HEADERS_P4

#include "values.p4"

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

/* ARP for IPv4 over Ethernet (RFC 826 with hlen = 6, plen = 4). */
header arp_t {
    bit<16> hw_type;
    bit<16> proto_type;
    bit<8>  hw_addr_len;
    bit<8>  proto_addr_len;
    bit<16> opcode;
    bit<48> sender_hw_addr;
    bit<32> sender_proto_addr;
    bit<48> target_hw_addr;
    bit<32> target_proto_addr;
}

/* IPv4 without options (the parser only goes past it when ihl == 5). */
header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

/* The 24-byte p4reduce header (docs/protocol.md, "The p4reduce header"). */
header p4reduce_t {
    bit<8>  msg_type;   /* MSG_* */
    bit<8>  rank;       /* sender's rank in its job */
    bit<16> job_id;
    bit<1>  set;        /* which of the slot's two copies */
    bit<15> slot;       /* slot index relative to the job's base */
    bit<8>  exp;        /* biased exponent; EXP_NONE = none, EXP_NONFINITE = NaN/Inf */
    bit<8>  flags;      /* reserved: 0, copied unchanged */
    bit<32> seq;        /* the use: call number (high USE_BITS) : use within the call */
    bit<32> key;        /* the rank's secret, checked against job_table; per rank on results */
    bit<32> call;       /* the call's descriptor: dtype, operation, element count */
    bit<32> aux;        /* MISSING: contributors; ABORT: the slot's descriptor; STALE: the slot's seq */
}

/*
 * The K = VALUES_PER_PACKET values, each a signed 32-bit two's-complement
 * number, named v00, v01, ... with the index in hex (values.p4). They are
 * declared bit<32> because unsigned addition modulo 2^32 is bit-for-bit the
 * same as wrapping signed addition.
 */
#define P4R_VALUE_FIELD(i) bit<32> v##i;
header p4reduce_values_t {
    P4R_FOR_EACH_VALUE(P4R_VALUE_FIELD)
}

struct headers_t {
    ethernet_t        ethernet;
    arp_t             arp;
    ipv4_t            ipv4;
    udp_t             udp;
    p4reduce_t        p4r;
    p4reduce_values_t vals;
}

#endif /* P4REDUCE_HEADERS_P4 */
