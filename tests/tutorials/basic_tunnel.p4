// The p4lang/tutorials "basic_tunnel" exercise, written here from its description: basic IPv4
// forwarding, plus a tunnel header between Ethernet and IPv4 (EtherType 0x1212: protocol id, then
// destination id) that is forwarded by its destination id alone, whatever the IPv4 inside says.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> TYPE_TUNNEL = 0x1212;

header tunnel_t { bit<16> proto_id; bit<16> dst_id; }
struct headers_t { ethernet_t ethernet; tunnel_t tunnel; ipv4_t ipv4; }
struct meta_t { }

parser TunnelParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            TYPE_TUNNEL: parse_tunnel;
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_tunnel {
        pkt.extract(hdr.tunnel);
        transition select(hdr.tunnel.proto_id) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Forward(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    IPV4_FORWARDING
    action tunnel_forward(bit<9> port) { sm.egress_spec = port; }
    table tunnel_exact {
        key = { hdr.tunnel.dst_id: exact; }
        actions = { tunnel_forward; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.tunnel.isValid()) {
            tunnel_exact.apply();
        } else if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
IPV4_CHECKSUM_CONTROL
control TunnelDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.tunnel); pkt.emit(hdr.ipv4); }
}

V1Switch(TunnelParser(), NoCheck(), Forward(), NoEgress(), Checksum(), TunnelDeparser()) main;
