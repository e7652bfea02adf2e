#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; bit<32> c; }
header g_t { bit<8> x; }
struct headers_t { h_t h; g_t g; }
struct meta_t { bit<8> m; int<8> s; bit<16> hv; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.a, hdr.h.b) {
            (8w0x10 &&& 8w0xf0, _): parse_g;
            (8w1 .. 8w5, 16w7): accept;
            default: accept;
        }
    }
    state parse_g { pkt.extract(hdr.g); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets) dc;
    action a(bit<8> x) { hdr.h.a = x; dc.count(); }
    action b() { hdr.g.setValid(); hdr.g.x = hdr.h.c[7:0]; }
    table t {
        key = { hdr.h.a: lpm; hdr.h.b: ternary; }
        actions = { a; b; NoAction; }
        const entries = { (8w1, 16w2 &&& 16w3): a(8w4); }
        counters = dc;
        default_action = NoAction();
    }
    apply {
        switch (t.apply().action_run) {
            a: { hdr.h.b = hdr.h.a ++ 8w1; }
            default: { hdr.h.c = hdr.h.c << 2; }
        }
        hdr.h.a = hdr.h.a |+| 8w200;
        meta.s = meta.s |-| 8s100;
        hash(meta.hv, HashAlgorithm.crc16, 16w0, { hdr.h.a, hdr.h.b }, 16w1024);
        if (hdr.g.isValid()) { hdr.g.setInvalid(); }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); pkt.emit(hdr.g); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
