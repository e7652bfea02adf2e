// Parsers and controls instantiated inside others (inlined by the front end): a sub-parser applied
// from two states, controls with tables, counters and registers instantiated twice and two levels
// deep, parameters that stand for their arguments and ones copied in and out, a direct invocation,
// `return` and `exit` inside an inlined apply body. Held to the same answer on both backends by
// tests/executor/test_differential.py; tests/executor/test_nested_blocks.py pins what it does.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> kind; bit<8> a; bit<16> b; }
header opt_t { bit<8> v; }
struct headers_t { h_t h; opt_t[2] opts; opt_t last; }
struct meta_t { bit<8> m; bit<8> n; }

parser Options(packet_in pkt, inout headers_t hdr, out opt_t last) {
    state start {
        transition select(hdr.h.kind) {
            1: one;
            2: two;
            default: accept;
        }
    }
    state one { pkt.extract(hdr.opts.next); transition accept; }
    state two { pkt.extract(hdr.opts.next); pkt.extract(hdr.opts.next); transition done; }
    state done { pkt.extract(last); transition accept; }
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Options() options;
    state start {
        pkt.extract(hdr.h);
        transition select(sm.ingress_port) {
            0: from_zero;
            default: from_other;
        }
    }
    state from_zero { meta.n = 1; options.apply(pkt, hdr, hdr.last); transition accept; }
    state from_other { options.apply(pkt, hdr, hdr.last); meta.n = meta.n + 2; transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

// x += the table's amount for x (default: 1), then + by; nothing for x == 0.
control Bump(inout bit<8> x, in bit<16> by) {
    counter(4, CounterType.packets) seen;
    action add(bit<8> d) { x = x + d; }
    table amounts {
        key = { x: exact; }
        actions = { add; }
        default_action = add(1);
    }
    apply {
        if (x == 0) {
            return;
        }
        seen.count((bit<32>) x[1:0]);
        amounts.apply();
        x = x + (bit<8>) by;
    }
}

control Twice(inout bit<8> x, inout bit<8> y) {
    Bump() inner;
    register<bit<8>>(2) last;
    apply {
        inner.apply(x, 16w1);
        inner.apply(y, 16w2);
        last.write(0, x);
        last.write(1, y);
    }
}

control Stamp(out opt_t o, in bit<8> v) {
    apply {
        if (v == 0xff) {
            exit;
        }
        o.setValid();
        o.v = v;
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Bump() b1;
    Twice() twice;
    Bump() b2;
    apply {
        b1.apply(hdr.h.a, hdr.h.b);
        twice.apply(meta.m, hdr.h.kind);
        b2.apply(meta.n, 7);
        b2.apply(meta.n, 9);
        Stamp.apply(hdr.last, meta.n);
        hdr.h.b = meta.m ++ meta.n;
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
