// The p4lang/tutorials "ecn" exercise, written here from its description: basic IPv4 forwarding,
// and in egress an ECN-capable packet (ECN 1 or 2) that met a queue at least as deep as the
// threshold is marked Congestion Experienced (ECN 3); other packets keep their ECN bits.
// Deviation: the embedded switch has no queues, so `enq_qdepth` is always 0. The threshold (10
// packets, as in the exercise) is therefore the default action of a table, so that a controller
// (or a test) can lower it to 0 and see the marking happen.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

const bit<19> ECN_THRESHOLD = 10;

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct meta_t { bit<19> threshold; }

parser EcnParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
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

control Mark(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_threshold(bit<19> depth) { meta.threshold = depth; }
    action mark_ecn() { hdr.ipv4.ecn = 3; }
    table ecn_threshold {
        actions = { set_threshold; }
        default_action = set_threshold(ECN_THRESHOLD);
    }
    apply {
        ecn_threshold.apply();
        if (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2) {
            if (sm.enq_qdepth >= meta.threshold) {
                mark_ecn();
            }
        }
    }
}

IPV4_CHECKSUM_CONTROL
control EcnDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); }
}

V1Switch(EcnParser(), NoCheck(), Forward(), Mark(), Checksum(), EcnDeparser()) main;
