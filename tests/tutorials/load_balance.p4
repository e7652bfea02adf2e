// The p4lang/tutorials "load_balance" exercise, written here from its description: packets to the
// virtual address are spread over several next hops (ECMP) by a hash of their 5-tuple, so one flow
// always takes one path. ecmp_group maps the destination to a range of next-hop indices, the hash
// picks one, ecmp_nhop gives that next hop's MAC, address and port, and egress writes the port's
// own MAC as the source.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; tcp_t tcp; }
struct meta_t { bit<14> ecmp_select; }

parser BalanceParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { PROTO_TCP: parse_tcp; default: accept; }
    }
    state parse_tcp { pkt.extract(hdr.tcp); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Balance(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action set_ecmp_select(bit<16> base, bit<32> count) {
        hash(meta.ecmp_select, HashAlgorithm.crc16, base,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.protocol, hdr.tcp.src_port, hdr.tcp.dst_port }, count);
    }
    action set_nhop(bit<48> nhop_mac, bit<32> nhop_ipv4, bit<9> port) {
        hdr.ethernet.dst = nhop_mac;
        hdr.ipv4.dst = nhop_ipv4;
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ecmp_group {
        key = { hdr.ipv4.dst: lpm; }
        actions = { drop; set_ecmp_select; }
        default_action = drop();
    }
    table ecmp_nhop {
        key = { meta.ecmp_select: exact; }
        actions = { drop; set_nhop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ttl > 0) {
            if (ecmp_group.apply().hit) {
                ecmp_nhop.apply();
            }
        } else {
            drop();
        }
    }
}

control Rewrite(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action rewrite_mac(bit<48> smac) { hdr.ethernet.src = smac; }
    action drop() { mark_to_drop(sm); }
    table send_frame {
        key = { sm.egress_port: exact; }
        actions = { rewrite_mac; drop; }
        default_action = drop();
    }
    apply { send_frame.apply(); }
}

IPV4_CHECKSUM_CONTROL
control BalanceDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.tcp); }
}

V1Switch(BalanceParser(), NoCheck(), Balance(), Rewrite(), Checksum(), BalanceDeparser()) main;
