// The p4lang/tutorials "multicast" exercise, written here from its description: frames are switched
// by destination MAC; a known MAC goes out of its port, a broadcast (or unknown) destination is
// replicated by a multicast group to every port of the group except the one it came in on.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

struct headers_t { ethernet_t ethernet; }
struct meta_t { }

parser L2Parser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Switching(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action multicast(bit<16> group) { sm.mcast_grp = group; }
    table mac_lookup {
        key = { hdr.ethernet.dst: exact; }
        actions = { forward; multicast; drop; }
        size = 1024;
        default_action = multicast(1);
    }
    apply { mac_lookup.apply(); }
}

control Prune(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_port == sm.ingress_port) {
            mark_to_drop(sm);
        }
    }
}

control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control L2Deparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); } }

V1Switch(L2Parser(), NoCheck(), Switching(), Prune(), NoUpdate(), L2Deparser()) main;
