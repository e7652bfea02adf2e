// Headers and the IPv4 checksum shared by the tutorial programs written here (tests/tutorials).
// The IPv4 type-of-service byte is split as DSCP (6 bits) and ECN (2 bits), as the qos and ecn
// exercises need; on the wire it is the same byte the other exercises call diffserv.
#ifndef TUTORIAL_HEADERS
#define TUTORIAL_HEADERS

const bit<16> TYPE_IPV4 = 0x800;
const bit<8> PROTO_TCP = 6;
const bit<8> PROTO_UDP = 17;

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<6> dscp; bit<2> ecn; bit<16> total_len; bit<16> identification;
    bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> checksum;
    bit<32> src; bit<32> dst;
}
header tcp_t {
    bit<16> src_port; bit<16> dst_port; bit<32> seq; bit<32> ack;
    bit<4> data_offset; bit<4> reserved; bit<8> flags; bit<16> window; bit<16> checksum; bit<16> urgent;
}
header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }

// The header checksum over the 20 bytes of an IPv4 header without options.
#define IPV4_CHECKSUM_FIELDS(ip) { ip.version, ip.ihl, ip.dscp, ip.ecn, ip.total_len, ip.identification, \
    ip.flags, ip.frag_offset, ip.ttl, ip.protocol, ip.src, ip.dst }


// The basic exercise's forwarding, which most exercises build on: inside a control with `hdr` and
// `sm`, the actions `drop` and `ipv4_forward(dst_mac, port)` (egress port, MAC rewrite, TTL - 1) and
// the table `ipv4_lpm` (longest-prefix match on the IPv4 destination; a miss drops).
#define IPV4_FORWARDING \
    action drop() { mark_to_drop(sm); } \
    action ipv4_forward(bit<48> dst_mac, bit<9> port) { \
        sm.egress_spec = port; \
        hdr.ethernet.src = hdr.ethernet.dst; \
        hdr.ethernet.dst = dst_mac; \
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1; \
    } \
    table ipv4_lpm { \
        key = { hdr.ipv4.dst: lpm; } \
        actions = { ipv4_forward; drop; } \
        size = 1024; \
        default_action = drop(); \
    }

// The compute-checksum control of a program whose headers_t has an `ipv4` member.
#define IPV4_CHECKSUM_CONTROL \
    control Checksum(inout headers_t hdr, inout meta_t meta) { \
        apply { \
            update_checksum(hdr.ipv4.isValid(), IPV4_CHECKSUM_FIELDS(hdr.ipv4), hdr.ipv4.checksum, \
                            HashAlgorithm.csum16); \
        } \
    }

#endif
