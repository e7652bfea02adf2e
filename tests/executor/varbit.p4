// varbit fields, for the differential tests of the two backends (tests/executor/test_differential.py)
// and the varbit tests (tests/executor/test_varbit.py): extract(h, bits) with its three errors, a varbit
// field between fixed ones, emit, header and field copies, a varbit local, ==, checksums and hashes over varbit data,
// a stack of headers with a varbit field.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<8> op; bit<8> bits; }
header opt_t { bit<8> ver; varbit<64> options; bit<8> tail; }
header sum_t { bit<16> csum; bit<16> crc; }
struct headers_t { eth_t eth; opt_t opt; opt_t copy; opt_t[2] s; sum_t sum; }
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.op) { 8: stack; 9: with_sum; default: one; }
    }
    state one { pkt.extract(hdr.opt, (bit<32>) hdr.eth.bits); transition accept; }
    state with_sum { pkt.extract(hdr.opt, (bit<32>) hdr.eth.bits); pkt.extract(hdr.sum); transition accept; }
    state stack {
        pkt.extract(hdr.s.next, (bit<32>) hdr.eth.bits);
        pkt.extract(hdr.s.next, (bit<32>) hdr.eth.bits + 8);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.sum.isValid(), { hdr.opt.ver, hdr.opt.options, hdr.opt.tail }, hdr.sum.csum,
            HashAlgorithm.csum16);
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.parser_error == error.ParserInvalidArgument) {
            hdr.eth.op = 0xE1;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.eth.op = 0xE2;
        } else if (sm.parser_error == error.HeaderTooShort) {
            hdr.eth.op = 0xE3;
        } else if (hdr.eth.op == 1) {         // a whole header copied
            hdr.copy = hdr.opt;
        } else if (hdr.eth.op == 2) {  // the field copied, then compared
            hdr.copy.setValid();
            hdr.copy.ver = 7;
            hdr.copy.options = hdr.opt.options;
            if (hdr.copy.options == hdr.opt.options) { hdr.copy.tail = 0xAA; }
        } else if (hdr.eth.op == 3) {  // a different length is a different value
            if (hdr.opt.options != hdr.s[0].options) { hdr.eth.op = 0x33; }
        } else if (hdr.eth.op == 4) {  // checksum and hash over a varbit field
            hdr.sum.setValid();
            hash(hdr.sum.crc, HashAlgorithm.crc16, 16w0, { hdr.opt.options, hdr.opt.tail }, 32w0);
        } else if (hdr.eth.op == 5) {  // a varbit local: starts empty, swaps two fields
            varbit<64> v;
            hdr.copy.setValid();
            hdr.copy.ver = 2;
            hdr.copy.tail = 3;
            hdr.copy.options = v;
            v = hdr.opt.options;
            hdr.opt.options = hdr.copy.options;
            hdr.copy.options = v;
        } else if (hdr.eth.op == 8) {  // a stack of headers with a varbit field
            hdr.s[0].options = hdr.s[1].options;
        } else if (hdr.eth.op == 9 && sm.checksum_error == 1) {
            hdr.eth.op = 0xCE;
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.eth.op == 4, { hdr.opt.ver, hdr.opt.options, hdr.opt.tail }, hdr.sum.csum,
            HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.opt); pkt.emit(hdr.copy); pkt.emit(hdr.s); pkt.emit(hdr.sum); }
}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
