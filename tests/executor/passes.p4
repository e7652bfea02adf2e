// Resubmit and recirculate (v1model): not a tutorial exercise, but what the exercises that loop a
// packet back need. A frame's first byte says what to do: 1 resubmit once, 2 recirculate once,
// 3 loop for ever. Ingress counts passes in a preserved metadata field and writes, into the frame,
// the pass count and the instance type it saw; a field outside the field list must start at 0.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header seen_t { bit<8> op; bit<8> passes; bit<8> instance_type; bit<8> unkept; bit<8> kept_by_other; }
struct headers_t { ethernet_t ethernet; seen_t seen; }
struct counts_t { bit<8> passes; }
struct meta_t {
    @field_list(1, 2) counts_t counts;
    bit<8> unkept;
    @field_list(7) bit<8> kept_by_other;
}

parser PassParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.seen); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Again(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.counts.passes = meta.counts.passes + 1;
        hdr.seen.passes = meta.counts.passes;
        hdr.seen.instance_type = (bit<8>) sm.instance_type;
        hdr.seen.unkept = meta.unkept;
        hdr.seen.kept_by_other = meta.kept_by_other;
        meta.unkept = 0xAA;
        meta.kept_by_other = 0xBB;
        sm.egress_spec = 2;
        if (hdr.seen.op == 3 || (hdr.seen.op == 1 && sm.instance_type == 0)) {
            resubmit_preserving_field_list(1);
            sm.egress_spec = 3;  // a resubmitted packet does not also go out
        }
    }
}

control Recirculate(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.seen.op == 2 && sm.instance_type == 0) {
            hdr.seen.op = 0;  // the recirculated frame is what the deparser wrote
            recirculate_preserving_field_list(2);
        }
    }
}

control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control PassDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); } }

V1Switch(PassParser(), NoCheck(), Again(), Recirculate(), NoUpdate(), PassDeparser()) main;
