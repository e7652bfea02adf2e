// Header unions, for the differential tests of the two backends (tests/executor/test_differential.py)
// and the union tests (tests/executor/test_header_unions.py): members extracted, made valid and
// invalid, assigned, a union's isValid() as a condition and a table key, union locals, a union as an
// action's inout parameter, a stack of unions filled with extract(s.next.member), indexed, pushed.
#include <core.p4>
#include <v1model.p4>

header tag_t { bit<8> t; }
header a_t { bit<8> a; }
header b_t { bit<16> b; }
header_union u_t { a_t a; b_t b; }
struct headers_t { tag_t tag; u_t u; u_t[2] s; a_t spare; }
struct meta_t { bit<8> op; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.tag);
        meta.op = hdr.tag.t >> 4;
        transition select(hdr.tag.t[1:0]) { 1: one_a; 2: one_b; 3: stack; default: accept; }
    }
    state one_a { pkt.extract(hdr.u.a); transition accept; }
    state one_b { pkt.extract(hdr.u.b); transition accept; }
    state stack {
        pkt.extract(hdr.s.next.a);
        transition select(hdr.tag.t[2:2]) { 0: second_a; default: second_b; }
    }
    state second_a { pkt.extract(hdr.s.next.a); transition accept; }
    state second_b { pkt.extract(hdr.s.next.b); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    u_t local;
    action fill(inout u_t x, bit<8> v) { x.a.setValid(); x.a.a = v; }
    action mark(bit<8> v) { hdr.tag.t = v; }
    table by_validity {
        key = { hdr.u.isValid(): exact; hdr.s[1].b.isValid(): exact; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    apply {
        by_validity.apply();
        if (meta.op == 1) {         // setValid on one member: the other is invalid
            hdr.u.b.setValid();
            hdr.u.b.b = 0xBEEF;
        } else if (meta.op == 2) {  // setInvalid on any member: the union is invalid
            hdr.u.b.setInvalid();
        } else if (meta.op == 3) {  // the union's isValid(): one of its members is
            if (hdr.u.isValid()) { hdr.tag.t = hdr.tag.t | 8w0x08; }
        } else if (meta.op == 4) {  // assigning a valid header to a member
            hdr.spare.setValid();
            hdr.spare.a = 7;
            hdr.u.a = hdr.spare;
        } else if (meta.op == 5) {  // assigning an invalid header to a member: the union is invalid
            hdr.u.a = hdr.spare;
        } else if (meta.op == 6) {  // a union local, copied whole
            local.b.setValid();
            local.b.b = 0x0102;
            hdr.u = local;
        } else if (meta.op == 7) {  // a union as an inout action argument
            fill(hdr.u, 5);
        } else if (meta.op == 8) {  // an element of a stack of unions
            hdr.s[0].b.setValid();
            hdr.s[0].b.b = 0x0405;
        } else if (meta.op == 9) {  // push_front moves the unions
            hdr.s.push_front(1);
            hdr.s[0].a.setValid();
            hdr.s[0].a.a = 9;
        } else if (meta.op == 10) { // list assignment to a member
            hdr.u.b = { 16w0x0A0B };
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.tag); pkt.emit(hdr.u); pkt.emit(hdr.s); pkt.emit(hdr.spare); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
