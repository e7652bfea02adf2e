// The p4lang/tutorials "basic" exercise, written here from its description: IPv4 forwarding by
// longest-prefix match on the destination; the chosen next hop gives the egress port and the new
// destination MAC, the old destination MAC becomes the source, TTL is decremented and the header
// checksum recomputed; a miss drops.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct meta_t { }

parser BasicParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Forward(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    IPV4_FORWARDING
    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
IPV4_CHECKSUM_CONTROL
control BasicDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); }
}

V1Switch(BasicParser(), NoCheck(), Forward(), NoEgress(), Checksum(), BasicDeparser()) main;
