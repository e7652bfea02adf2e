// Runs of bit<32>/int<32> fields, which the C backend parses and deparses as blocks of byte-swapped
// words, four at a time (softswitch/backends/c/p4rt.h, p4_swap32_words): a run of five (one block
// and one word), a run of four int<32>, a run of four that starts inside a byte (field by field),
// and a run of three (field by field). Ingress changes a word of each run, so the deparser writes
// back what ingress computed.
#include <core.p4>
#include <v1model.p4>

header words_t {
    bit<4> x; bit<4> y;
    bit<32> a0; bit<32> a1; bit<32> a2; bit<32> a3; bit<32> a4;
    bit<16> z;
    int<32> b0; int<32> b1; int<32> b2; int<32> b3;
    bit<3> p;
    bit<32> c0; bit<32> c1; bit<32> c2; bit<32> c3;
    bit<5> q;
    bit<32> d0; bit<32> d1; bit<32> d2;
}
struct headers_t { words_t w; }
struct meta_t { }

parser WordParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.w); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control WordIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.w.a4 = hdr.w.a0 + hdr.w.a4;
        hdr.w.b2 = hdr.w.b2 - hdr.w.b3;
        hdr.w.c1 = hdr.w.c1 ^ hdr.w.a1;
        hdr.w.d2 = hdr.w.d0 | hdr.w.c3;
        hdr.w.y = hdr.w.x;
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control WordDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.w); } }

V1Switch(WordParser(), NoCheck(), WordIngress(), NoEgress(), NoUpdate(), WordDeparser()) main;
