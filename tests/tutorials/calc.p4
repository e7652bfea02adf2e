// The p4lang/tutorials "calc" exercise, written here from its description: a calculator header
// after Ethernet (EtherType 0x1234: 'P' '4' version op a b result); the switch computes the result
// and returns the packet to its sender with the MAC addresses swapped; anything else is dropped.
#include <core.p4>
#include <v1model.p4>

const bit<16> CALC_TYPE = 0x1234;

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header calc_t {
    bit<8> p;
    bit<8> four;
    bit<8> version;
    bit<8> op;
    bit<32> a;
    bit<32> b;
    bit<32> result;
}
struct headers_t { ethernet_t ethernet; calc_t calc; }
struct meta_t { }

parser CalcParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { CALC_TYPE: check; default: accept; }
    }
    state check {
        // Peek at the calculator header before committing to it.
        transition select(pkt.lookahead<calc_t>().p, pkt.lookahead<calc_t>().four,
                          pkt.lookahead<calc_t>().version) {
            (0x50, 0x34, 0x01): parse_calc;
            default: accept;
        }
    }
    state parse_calc { pkt.extract(hdr.calc); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Calc(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action reply(bit<32> value) {
        hdr.calc.result = value;
        bit<48> tmp = hdr.ethernet.dst;
        hdr.ethernet.dst = hdr.ethernet.src;
        hdr.ethernet.src = tmp;
        sm.egress_spec = sm.ingress_port;
    }
    action op_add() { reply(hdr.calc.a + hdr.calc.b); }
    action op_sub() { reply(hdr.calc.a - hdr.calc.b); }
    action op_and() { reply(hdr.calc.a & hdr.calc.b); }
    action op_or() { reply(hdr.calc.a | hdr.calc.b); }
    action op_xor() { reply(hdr.calc.a ^ hdr.calc.b); }
    action drop() { mark_to_drop(sm); }
    table calculate {
        key = { hdr.calc.op: exact; }
        actions = { op_add; op_sub; op_and; op_or; op_xor; drop; }
        const default_action = drop();
        const entries = {
            0x2b: op_add();  // '+'
            0x2d: op_sub();  // '-'
            0x26: op_and();  // '&'
            0x7c: op_or();   // '|'
            0x5e: op_xor();  // '^'
        }
    }
    apply {
        if (hdr.calc.isValid()) {
            calculate.apply();
        } else {
            drop();
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers_t hdr, inout meta_t meta) { apply { } }
control CalcDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.calc); }
}

V1Switch(CalcParser(), NoCheck(), Calc(), NoEgress(), NoUpdate(), CalcDeparser()) main;
