// The program of the p4lang/tutorials "p4runtime" exercise, written here from its description: a
// controller provisions tunnels between hosts. At the first switch an IPv4 route may push the tunnel
// header (EtherType 0x1212: protocol id, destination id) and count the packet on the tunnel's
// ingress counter; switches forward tunnelled packets by destination id; the last switch pops the
// header, writes the host's MAC and counts the packet on the tunnel's egress counter.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

#define MAX_TUNNEL_ID 1024
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

control Tunnel(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(MAX_TUNNEL_ID, CounterType.packets_and_bytes) ingress_tunnel_counter;
    counter(MAX_TUNNEL_ID, CounterType.packets_and_bytes) egress_tunnel_counter;

    action drop() { mark_to_drop(sm); }
    action tunnel_ingress(bit<16> dst_id) {
        hdr.tunnel.setValid();
        hdr.tunnel.proto_id = hdr.ethernet.ether_type;
        hdr.tunnel.dst_id = dst_id;
        hdr.ethernet.ether_type = TYPE_TUNNEL;
        ingress_tunnel_counter.count((bit<32>) dst_id);
    }
    action tunnel_forward(bit<9> port) { sm.egress_spec = port; }
    action tunnel_egress(bit<48> dst_mac, bit<9> port) {
        sm.egress_spec = port;
        hdr.ethernet.dst = dst_mac;
        hdr.ethernet.ether_type = hdr.tunnel.proto_id;
        egress_tunnel_counter.count((bit<32>) hdr.tunnel.dst_id);
        hdr.tunnel.setInvalid();
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dst: lpm; }
        actions = { tunnel_ingress; drop; NoAction; }
        default_action = drop();
    }
    table tunnel_exact {
        key = { hdr.tunnel.dst_id: exact; }
        actions = { tunnel_forward; tunnel_egress; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid() && !hdr.tunnel.isValid()) {
            ipv4_lpm.apply();
        }
        if (hdr.tunnel.isValid()) {
            tunnel_exact.apply();
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control TunnelDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.tunnel); pkt.emit(hdr.ipv4); }
}

V1Switch(TunnelParser(), NoCheck(), Tunnel(), NoEgress(), NoUpdate(), TunnelDeparser()) main;
