// All-exact tables around the C backend's one-word key (softswitch/backends/c/p4rt.h, `packed`): keys
// of 64 bits together (two fields, and one field of 64 bits) are matched as one word, 96 bits and
// more field by field. Each table writes its action's argument into the frame, so that which entry
// hit shows in the output.
#include <core.p4>
#include <v1model.p4>

header keys_t { bit<32> a; bit<32> b; bit<48> c; bit<48> d; bit<64> e; bit<7> f; bool g; bit<8> out; }
struct headers_t { keys_t k; }
struct meta_t { }

parser KeyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.k); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control KeyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action put(bit<8> v) { hdr.k.out = hdr.k.out ^ v; }
    table two_words { key = { hdr.k.a: exact; hdr.k.b: exact; } actions = { put; NoAction; } }
    table one_wide { key = { hdr.k.e: exact; } actions = { put; NoAction; } }
    table too_wide { key = { hdr.k.c: exact; hdr.k.d: exact; } actions = { put; NoAction; } }
    table three { key = { hdr.k.f: exact; hdr.k.g: exact; hdr.k.a: exact; } actions = { put; NoAction; } }
    apply {
        sm.egress_spec = 1;
        two_words.apply();
        one_wide.apply();
        too_wide.apply();
        three.apply();
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control KeyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.k); } }

V1Switch(KeyParser(), NoCheck(), KeyIngress(), NoEgress(), NoUpdate(), KeyDeparser()) main;
