// The p4lang/tutorials "source_routing" exercise, written here from its description: after
// Ethernet (EtherType 0x1234) comes a stack of source-route entries {bos, port}; each switch pops
// the first entry and sends the packet out of its port. When the popped entry was the last one
// (bos = 1) the EtherType becomes IPv4 again and the IPv4 TTL is decremented.
#include <core.p4>
#include <v1model.p4>

#define MAX_HOPS 9

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header src_route_t { bit<1> bos; bit<15> port; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification;
    bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> checksum;
    bit<32> src; bit<32> dst;
}
struct headers_t { ethernet_t ethernet; src_route_t[MAX_HOPS] routes; ipv4_t ipv4; }
struct meta_t { }

parser RouteParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x1234: parse_route; 0x800: parse_ipv4; default: accept; }
    }
    state parse_route {
        pkt.extract(hdr.routes.next);
        transition select(hdr.routes.last.bos) { 1: parse_ipv4; default: parse_route; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Route(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.routes[0].isValid()) {
            if (hdr.routes[0].bos == 1) {
                hdr.ethernet.ether_type = 0x800;
                if (hdr.ipv4.isValid()) {
                    hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                }
            }
            sm.egress_spec = (bit<9>) hdr.routes[0].port;
            hdr.routes.pop_front(1);
        } else {
            mark_to_drop(sm);
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control RouteDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.routes); pkt.emit(hdr.ipv4); }
}

V1Switch(RouteParser(), NoCheck(), Route(), NoEgress(), NoUpdate(), RouteDeparser()) main;
