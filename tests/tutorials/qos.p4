// The p4lang/tutorials "qos" exercise, written here from its description: basic IPv4 forwarding,
// and the DiffServ code point marked by traffic class on the way: UDP as Expedited Forwarding
// (DSCP 46), TCP as Voice Admit (DSCP 44), everything else Default Forwarding (DSCP 0).
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct meta_t { }

parser QosParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Forward(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    IPV4_FORWARDING
    action default_forwarding() { hdr.ipv4.dscp = 0; }
    action expedited_forwarding() { hdr.ipv4.dscp = 46; }
    action voice_admit() { hdr.ipv4.dscp = 44; }
    apply {
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.protocol == PROTO_UDP) {
                expedited_forwarding();
            } else if (hdr.ipv4.protocol == PROTO_TCP) {
                voice_admit();
            } else {
                default_forwarding();
            }
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
IPV4_CHECKSUM_CONTROL
control QosDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); }
}

V1Switch(QosParser(), NoCheck(), Forward(), NoEgress(), Checksum(), QosDeparser()) main;
