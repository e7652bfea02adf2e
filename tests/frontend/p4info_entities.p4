// Every P4Info entity kind, for tests/frontend/test_p4info_golden.py (expectations follow p4c's
// control-plane serializer rules; see softswitch/p4info/__init__.py).
#include <core.p4>
#include <v1model.p4>

enum bit<8> Reason_t { MISS = 1, HIT = 2 }

@controller_header("packet_in")
header packet_in_h {
    bit<9> ingress_port;
    Reason_t reason;
    bit<7> pad;
}

@controller_header("packet_out")
header packet_out_h {
    @id(2) bit<9> egress_port;
    @id(1) bit<7> pad;
}

header eth_h { bit<48> dst; bit<48> src; bit<16> type; }
struct flow_t { @name("flow_id") bit<16> id; }
struct headers_t { packet_out_h po; packet_in_h pi; eth_h eth; }
struct meta_t { flow_t flow; bit<8> color; }
struct learn_t { bit<48> src; bit<9> port; }
struct note_t { int<8> delta; }

register<bit<32>>(8) global_reg;
@name("global_rate") direct_meter<bit<8>>(MeterType.bytes) fixed_rate;  // top level, annotated: a table's

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(16, CounterType.packets) by_port;
    direct_counter(CounterType.bytes) fwd_bytes;
    direct_counter(CounterType.packets) unused_direct;
    meter(4, MeterType.bytes) rate;
    direct_meter<bit<8>>(MeterType.packets) fwd_rate;

    action helper() { meta.color = 3; }
    @brief("send out of a port")
    // Each direct meter is read by an action of its table, as p4c requires.
    action forward(@name("out_port") bit<9> port) { sm.egress_spec = port; helper(); fixed_rate.read(meta.color); }
    action drop() { mark_to_drop(sm); fwd_rate.read(meta.color); }
    action direct_only() { meta.color = 1; }
    action in_unapplied_table() { }

    table fwd {
        key = {
            hdr.eth.dst: exact @name("dmac");
            hdr.eth.isValid(): exact;
            meta.flow.id: ternary;
            hdr.eth.type[7:0]: range;
        }
        actions = { forward; @defaultonly drop; }
        default_action = drop();
        counters = fwd_bytes;
        meters = fwd_rate;
        support_timeout = true;
        size = 512;
    }
    table fixed {
        key = { hdr.eth.type: exact; }
        actions = { forward; }
        meters = fixed_rate;
        const entries = { 0x800: forward(1); }
    }
    table never_applied {
        actions = { in_unapplied_table; }
    }
    apply {
        fwd.apply();
        fixed.apply();
        direct_only();
        by_port.count((bit<32>) sm.ingress_port);
        rate.execute_meter<bit<8>>(0, meta.color);
        digest<learn_t>(1, {hdr.eth.src, sm.ingress_port});
        digest<note_t>(1, {-8s1});
        digest<learn_t>(1, {hdr.eth.dst, sm.ingress_port});
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.pi); pkt.emit(hdr.eth); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
