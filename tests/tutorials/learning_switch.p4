// An L2 learning switch whose controller learns from digests (the p4lang/tutorials p4runtime style,
// written here). `smac` knows the source addresses the controller has learned; for any other one
// ingress sends the controller a digest of the address and the port it came in on. `dmac` forwards
// to the port of a learned destination; an unknown one is flooded to multicast group 1, and egress
// never sends a flooded copy back out of the port it came in on.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<16> FLOOD_GROUP = 1;

struct learn_t { bit<48> src_mac; bit<9> ingress_port; }
struct headers_t { ethernet_t ethernet; }
struct meta_t { }

parser L2Parser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Learn(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action learn() { digest<learn_t>(1, {hdr.ethernet.src, sm.ingress_port}); }
    table smac {
        key = { hdr.ethernet.src: exact; }
        actions = { learn; NoAction; }
        default_action = learn();
    }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action flood() { sm.mcast_grp = FLOOD_GROUP; }
    table dmac {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; flood; }
        default_action = flood();
    }
    apply {
        smac.apply();
        dmac.apply();
    }
}

control NoEcho(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == sm.ingress_port) {
            mark_to_drop(sm);
        }
    }
}

control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control L2Deparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); } }

V1Switch(L2Parser(), NoCheck(), Learn(), NoEcho(), NoUpdate(), L2Deparser()) main;
