// clone and clone_preserving_field_list (v1model, bmv2 semantics). A frame's first byte after
// Ethernet says what to do: 1 clone at ingress (I2E), 2 the same keeping field list 1, 3 clone at
// egress (E2E), 4 clone at egress for ever, 5 clone at ingress and drop the packet itself.
// Ingress marks the header (an I2E clone must not see it); egress writes into the frame what each
// copy saw: its instance type, replica id, port and two metadata fields.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header seen_t {
    bit<8> op; bit<8> mark; bit<8> instance_type; bit<8> rid; bit<8> port; bit<8> kept; bit<8> unkept;
}
struct headers_t { ethernet_t ethernet; seen_t seen; }
struct meta_t {
    @field_list(1) bit<8> kept;
    bit<8> unkept;
}

parser CloneParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.ethernet); pkt.extract(hdr.seen); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control CloneIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        meta.unkept = 0xAA;
        sm.egress_spec = 2;
        if (hdr.seen.op == 1) {
            clone(CloneType.I2E, 5);
        } else if (hdr.seen.op == 2) {
            meta.kept = 0x11;
            clone_preserving_field_list(CloneType.I2E, 32w5, 1);
            meta.kept = 0x77;  // the value at the end of ingress is the one kept
        } else if (hdr.seen.op == 5) {
            clone(CloneType.I2E, 5);
            mark_to_drop(sm);
        }
        hdr.seen.mark = 0xEE;
    }
}

control CloneEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.seen.instance_type = (bit<8>) sm.instance_type;
        hdr.seen.rid = (bit<8>) sm.egress_rid;
        hdr.seen.port = (bit<8>) sm.egress_port;
        hdr.seen.kept = meta.kept;
        hdr.seen.unkept = meta.unkept;
        if (hdr.seen.op == 3 && sm.instance_type == 0) {
            hdr.seen.mark = 0xE0;  // an E2E clone sees what egress did
            meta.kept = 0x33;
            clone_preserving_field_list(CloneType.E2E, 6, 1);
        }
        if (hdr.seen.op == 4) {
            clone(CloneType.E2E, 6);
        }
    }
}

control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control CloneDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.seen); } }

V1Switch(CloneParser(), NoCheck(), CloneIngress(), CloneEgress(), NoUpdate(), CloneDeparser()) main;
