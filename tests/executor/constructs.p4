// Every construct the embedded switch runs, in one program, for the differential tests of the two
// backends (tests/executor/test_differential.py): header stacks (next, last, lastIndex, push_front,
// pop_front), lookahead, slices and header members as l-values, header and struct locals, struct
// initializers, switch on expressions and on action_run, exit inside nested actions with inout
// arguments, signed and saturating arithmetic, shifts by run-time amounts, casts, concatenation,
// every hash algorithm, checksums, registers, counters, direct counters, meters, every match kind,
// const entries with priorities, multicast and egress, parser value sets of select (masks, ranges).
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind_t { PLAIN = 1, STACKED = 2, WIDE = 3 }

header top_t { Kind_t kind; bit<8> a; bit<16> b; int<16> s; bit<1> flag; bit<7> pad; bit<32> c; }
header tag_t { bit<4> id; bit<3> more; bool last; }
header wide_t { bit<48> mac; bit<64> big; int<64> sbig; bit<13> odd; bit<3> rest; }
struct pair_t { bit<8> x; bit<16> y; }
struct headers_t { top_t top; tag_t[4] tags; wide_t wide; }
struct meta_t { pair_t pair; bit<32> idx; bit<16> h16; bit<32> h32; bit<8> color; int<16> acc; bool seen; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    bit<8> peek = 0;
    state start {
        peek = pkt.lookahead<bit<8>>();
        pkt.extract(hdr.top);
        verify(hdr.top.a != 8w0xEE, error.HeaderTooShort);
        transition select(hdr.top.kind, hdr.top.a) {
            (Kind_t.STACKED, _): tags;
            (Kind_t.WIDE, 8w0x10 &&& 8w0xF0): wide;
            (_, 8w200 .. 8w210): wide;
            (Kind_t.PLAIN, _): accept;
            default: reject;
        }
    }
    state tags {
        pkt.extract(hdr.tags.next);
        transition select(hdr.tags.last.last) { true: maybe_wide; default: tags; }
    }
    state maybe_wide {
        meta.pair.x = peek;
        transition select(hdr.tags.lastIndex) { 32w1: wide; default: accept; }
    }
    state wide { pkt.extract(hdr.wide); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.top.isValid(), { hdr.top.a, hdr.top.b, hdr.top.flag, hdr.top.pad }, hdr.top.c[15:0],
            HashAlgorithm.csum16);
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) r32;
    register<bit<8>>(8) r8;
    register<bit<48>>(4) r48;
    counter(8, CounterType.packets_and_bytes) hits;
    direct_counter(CounterType.packets_and_bytes) dc;
    meter(4, MeterType.packets) m;
    bit<32> tmp = 0;
    pair_t local_pair;
    tag_t local_tag;

    action bump(inout bit<8> v, in bit<8> by) { v = v |+| by; if (v == 8w255) { exit; } }
    action outer(inout bit<8> v) { v = v + 1; bump(v, 8w100); v = 0; }
    action set_port(bit<9> port, bit<16> mark) { sm.egress_spec = port; hdr.top.b = mark; dc.count(); }
    action to_group(bit<16> group) { sm.mcast_grp = group; dc.count(); }
    action drop() { mark_to_drop(sm); dc.count(); }
    action note(bit<8> x) { meta.color = x; hdr.top.b[7:0] = x; dc.count(); }
    table route {
        key = { hdr.top.a: ternary; hdr.top.b: range; sm.ingress_port: exact; hdr.top.flag: optional; }
        actions = { set_port; to_group; drop; note; }
        const entries = {
            (8w0x42 &&& 8w0xFF, 16w0 .. 16w100, 9w1, 1w1): set_port(9w3, 16w7);
            (_, _, 9w2, _): to_group(16w1);
        }
        default_action = note(8w9);
        counters = dc;
    }
    action lpm_hit(bit<32> v) { tmp = v; }
    table by_prefix {
        key = { hdr.top.c: lpm; }
        actions = { lpm_hit; NoAction; }
        default_action = NoAction();
    }
    table exact2 {
        key = { hdr.top.a: exact; hdr.top.kind: exact; }
        actions = { note; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    apply {
        if (sm.parser_error == error.PacketTooShort) {
            hdr.top.b = 16w1;
            sm.egress_spec = 1;
            exit;
        } else if (sm.parser_error != error.NoError) {
            hdr.top.b = 16w2;
            sm.egress_spec = 2;
            exit;
        }
        local_pair = { hdr.top.a, hdr.top.b };
        local_tag = hdr.tags[0];
        meta.pair = local_pair;
        switch (route.apply().action_run) {
            set_port: { hits.count(0); }
            to_group:
            drop: { hits.count(1); }
            default: { hits.count((bit<32>) meta.color); }
        }
        if (!by_prefix.apply().hit) { tmp = hdr.top.c; }
        exact2.apply();
        switch (hdr.top.a) {
            8w1: { meta.acc = hdr.top.s |+| 16s30000; }
            8w2:
            8w3: { meta.acc = hdr.top.s |-| 16s30000; }
            default: { meta.acc = (hdr.top.s >> hdr.top.a[3:0]) + (int<16>) hdr.top.b; }
        }
        r32.read(meta.idx, (bit<32>) hdr.top.a[3:0]);
        r32.write((bit<32>) hdr.top.a[3:0], meta.idx + hdr.top.c);
        r8.read(meta.color, (bit<32>) hdr.top.pad);
        r48.write((bit<32>) hdr.top.flag, hdr.top.c ++ hdr.top.b);
        hash(meta.h16, HashAlgorithm.crc16, 16w5, { hdr.top.a, hdr.top.flag, hdr.top.pad }, 16w1000);
        hash(meta.h32, HashAlgorithm.crc32, 32w0, { hdr.top.c, hdr.top.b, hdr.tags[0].id }, 32w0);
        hash(tmp, HashAlgorithm.identity, 32w7, { hdr.top.a, hdr.top.b }, (bit<32>) hdr.top.pad);
        hash(meta.h16, HashAlgorithm.csum16, meta.h16, { hdr.top.c, hdr.top.a }, 16w0);
        m.execute_meter((bit<32>) hdr.top.a[1:0], meta.color);
        if (hdr.tags[1].isValid()) {
            hdr.tags.push_front(1);
            hdr.tags[0].setValid();
            hdr.tags[0] = { 4w9, 3w1, false };
            if (hdr.tags[3].isValid()) { hdr.tags.pop_front(2); }
        }
        if (hdr.wide.isValid()) {
            hdr.wide.big = hdr.wide.big * 64w3 + (bit<64>) hdr.top.c;
            hdr.wide.sbig = hdr.wide.sbig >> hdr.top.a;
            hdr.wide.mac = hdr.wide.mac ^ (hdr.wide.big[47:0] << hdr.top.pad);
            hdr.wide.odd = hdr.wide.odd |+| (bit<13>) hdr.top.a;
            hdr.wide.rest = hdr.wide.sbig < (int<64>) hdr.wide.big ? 3w1 : 3w2;
        }
        hdr.top.c = tmp ^ meta.h32;
        outer(hdr.top.a);
        hdr.top.pad = hdr.top.pad + 7w1;
        if (sm.egress_spec == 0) { sm.egress_spec = (bit<9>) hdr.top.kind; }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(4, CounterType.packets) per_rid;
    apply {
        per_rid.count((bit<32>) sm.egress_rid);
        if (sm.instance_type == 5) { hdr.top.b = sm.egress_rid; }
        if (sm.egress_rid == 3) { mark_to_drop(sm); }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.top.isValid() && hdr.top.flag == 1, { hdr.top.a, hdr.top.b, hdr.top.s },
            hdr.top.c[31:16], HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.top); pkt.emit(hdr.tags); pkt.emit(hdr.wide); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
