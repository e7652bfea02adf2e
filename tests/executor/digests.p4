// digest (v1model): a frame's first byte after Ethernet says what to do: 1 send a digest of the
// source address and ingress port, 2 send one then another (the last call wins), 3 send one and
// change the field afterwards (the value at the call is sent), 4 send one and drop the packet,
// 5 send a digest of another type from metadata, 6 ask for one in egress (ignored, as bmv2).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header op_t { bit<8> op; }
struct headers_t { ethernet_t ethernet; op_t op; }
struct learn_t { bit<48> src; bit<9> port; }
struct note_t { int<8> delta; bit<16> type; bit<1> flag; }
struct meta_t { note_t note; }

parser DigestParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.op); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control DigestIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action learn() { digest<learn_t>(1, {hdr.ethernet.src, sm.ingress_port}); }
    apply {
        sm.egress_spec = 2;
        if (hdr.op.op == 1) {
            learn();
        } else if (hdr.op.op == 2) {
            learn();
            digest<learn_t>(1, {48w0xAB, 9w7});
        } else if (hdr.op.op == 3) {
            learn();
            hdr.ethernet.src = 0;
        } else if (hdr.op.op == 4) {
            learn();
            mark_to_drop(sm);
        } else if (hdr.op.op == 5) {
            meta.note.delta = -2;
            meta.note.type = hdr.ethernet.ether_type;
            meta.note.flag = 1;
            digest(2, meta.note);
        }
    }
}

control DigestEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.op.op == 6) {
            digest<learn_t>(1, {hdr.ethernet.src, sm.ingress_port});
        }
    }
}

control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control DigestDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.op); } }

V1Switch(DigestParser(), NoCheck(), DigestIngress(), DigestEgress(), NoUpdate(), DigestDeparser()) main;
