// Copies of a packet (multicast replicas, clones, a recirculation) and what egress changes in each.
// The C backend shares between copies the headers no egress-side code can write
// (softswitch/backends/c/sharing.py): it neither copies them per replica nor serializes them more
// than once. Every header below but four is written in egress or compute checksum in one of the
// ways the analysis must see; ethernet, read_only, kept and nest2 are never written there, so they
// are shared (kept is also emitted twice, nest2 inside a struct). Ingress picks the multicast group
// from the frame and changes `kept`; egress works per replica id.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header op_t { bit<8> group; bit<8> what; }
header word_t { bit<16> w; }
header bits_t { bit<3> a; bit<13> b; }
struct nest_t { word_t k; word_t m; }
struct headers_t {
    ethernet_t ethernet;
    op_t op;            // assigned (what = 0 before a recirculation)
    word_t assigned;    // assigned by a table's action
    word_t invalidated; // setInvalid
    word_t validated;   // setValid (never parsed)
    word_t[2] stack;    // push_front
    word_t by_action;   // an action's inout argument
    word_t by_extern;   // register.read's out argument
    word_t by_hash;     // hash's out argument
    bits_t by_slice;    // a slice assigned, fields not on whole bytes
    word_t csum;        // written by compute checksum
    nest_t nest;        // nest.m assigned: the whole member is written
    word_t read_only;   // read in egress, never written: shared
    word_t kept;        // never written in egress: shared, emitted twice
    nest_t nest2;       // never written in egress: shared, emitted as a struct
}
struct meta_t { bit<16> seen; }

parser ReplicaParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.op);
        pkt.extract(hdr.read_only);
        pkt.extract(hdr.kept);
        pkt.extract(hdr.assigned);
        pkt.extract(hdr.invalidated);
        pkt.extract(hdr.stack.next);
        pkt.extract(hdr.by_action);
        pkt.extract(hdr.by_extern);
        pkt.extract(hdr.by_hash);
        pkt.extract(hdr.by_slice);
        pkt.extract(hdr.csum);
        pkt.extract(hdr.nest.k);
        pkt.extract(hdr.nest.m);
        pkt.extract(hdr.nest2.k);
        pkt.extract(hdr.nest2.m);
        transition accept;
    }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control ReplicaIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.mcast_grp = (bit<16>) hdr.op.group[2:0];  // groups 1..4 have random replicas
        sm.egress_spec = 1;
        hdr.kept.w = hdr.kept.w + 1;  // every copy must carry the value ingress left
        hdr.nest2.m.w = hdr.nest2.m.w |+| 16w0x7000;
    }
}

control ReplicaEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<16>>(4) cells;
    action set_word(inout word_t h, bit<16> v) { h.w = v; }
    action stamp(bit<16> v) { hdr.assigned.w = v; }
    table by_rid {
        key = { sm.egress_rid: exact; }
        actions = { stamp; NoAction; }
        default_action = NoAction();
    }
    apply {
        bit<16> rid = (bit<16>) sm.egress_rid;
        by_rid.apply();
        meta.seen = hdr.read_only.w;
        if (rid == 1) { hdr.invalidated.setInvalid(); }
        if (rid == 2) { hdr.validated.setValid(); hdr.validated.w = hdr.kept.w ^ meta.seen; }
        if (rid == 3) { hdr.stack.push_front(1); }
        set_word(hdr.by_action, hdr.kept.w ^ rid);
        cells.read(hdr.by_extern.w, (bit<32>) rid);
        hash(hdr.by_hash.w, HashAlgorithm.crc16, 16w0, { hdr.nest2.k.w, rid }, 16w0);
        hdr.by_slice.b[3:0] = rid[3:0];
        hdr.nest.m.w = rid;
        if (hdr.op.what == 1 && sm.instance_type == 5) {
            clone(CloneType.E2E, 5);  // the clone carries what egress wrote and the shared headers
        }
        if (hdr.op.what == 2 && sm.instance_type == 5 && rid == 0) {
            hdr.op.what = 0;
            recirculate_preserving_field_list(0);
        }
    }
}

control ReplicaChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.csum.isValid(), { hdr.kept.w, hdr.by_action.w }, hdr.csum.w, HashAlgorithm.csum16);
    }
}

control ReplicaDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.op);
        pkt.emit(hdr.read_only);
        pkt.emit(hdr.kept);
        pkt.emit(hdr.assigned);
        pkt.emit(hdr.invalidated);
        pkt.emit(hdr.validated);
        pkt.emit(hdr.stack);
        pkt.emit(hdr.by_action);
        pkt.emit(hdr.by_extern);
        pkt.emit(hdr.by_hash);
        pkt.emit(hdr.by_slice);
        pkt.emit(hdr.csum);
        pkt.emit(hdr.nest);
        pkt.emit(hdr.nest2);
        pkt.emit(hdr.kept);
    }
}

V1Switch(ReplicaParser(), NoCheck(), ReplicaIngress(), ReplicaEgress(), ReplicaChecksum(), ReplicaDeparser()) main;
