// Port mirroring with clone sessions (the p4lang/tutorials style of exercise, written here): a two
// port wire (table `wire`: ingress port -> egress port) that mirrors every packet to whatever the
// controller puts in a clone session. Session 100 gets the packet as it came in (I2E, cloned at the
// end of ingress), session 200 as it leaves (E2E, cloned at the end of egress, after egress has
// decremented the TTL). A mirrored copy carries its kind in the IPv4 DSCP: 1 ingress, 2 egress.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<32> I2E_SESSION = 100;
const bit<32> E2E_SESSION = 200;
const bit<32> NORMAL = 0;

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct meta_t { }

parser MirrorParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Wire(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action forward(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table wire {
        key = { sm.ingress_port: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        wire.apply();
        clone(CloneType.I2E, I2E_SESSION);  // clones nothing until the controller configures the session
    }
}

control Leave(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.ipv4.isValid()) {
            if (sm.instance_type == NORMAL) {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                clone(CloneType.E2E, E2E_SESSION);
            } else {
                hdr.ipv4.dscp = (bit<6>) sm.instance_type;
            }
        }
    }
}

IPV4_CHECKSUM_CONTROL
control MirrorDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); }
}

V1Switch(MirrorParser(), NoCheck(), Wire(), Leave(), Checksum(), MirrorDeparser()) main;
