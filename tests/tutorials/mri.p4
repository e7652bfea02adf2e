// The p4lang/tutorials "mri" (multi-hop route inspection) exercise, written here from its
// description: basic IPv4 forwarding, and a packet that carries the MRI IPv4 option (option 31: a
// count, then one trace per switch) gets this switch's trace pushed on top in egress: its switch id
// and the queue depth the packet saw. The IPv4 header length, the option length and the total length
// grow by the 8 bytes of the trace. Deviations: the embedded switch has no queues, so the queue
// depth recorded is always 0; the header checksum covers the first 20 bytes only, as in the exercise.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

#define MAX_HOPS 9
const bit<5> IPV4_OPTION_MRI = 31;

header ipv4_option_t { bit<1> copy_flag; bit<2> opt_class; bit<5> option; bit<8> option_length; }
header mri_t { bit<16> count; }
header switch_t { bit<32> swid; bit<32> qdepth; }
struct headers_t {
    ethernet_t ethernet;
    ipv4_t ipv4;
    ipv4_option_t ipv4_option;
    mri_t mri;
    switch_t[MAX_HOPS] swtraces;
}
struct meta_t { bit<16> remaining; }

error { IPHeaderTooShort }

parser MriParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl >= 5, error.IPHeaderTooShort);
        transition select(hdr.ipv4.ihl) { 5: accept; default: parse_ipv4_option; }
    }
    state parse_ipv4_option {
        pkt.extract(hdr.ipv4_option);
        transition select(hdr.ipv4_option.option) { IPV4_OPTION_MRI: parse_mri; default: accept; }
    }
    state parse_mri {
        pkt.extract(hdr.mri);
        meta.remaining = hdr.mri.count;
        transition select(meta.remaining) { 0: accept; default: parse_swtrace; }
    }
    state parse_swtrace {
        pkt.extract(hdr.swtraces.next);
        meta.remaining = meta.remaining - 1;
        transition select(meta.remaining) { 0: accept; default: parse_swtrace; }
    }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Forward(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    IPV4_FORWARDING
    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control Trace(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action add_swtrace(bit<32> swid) {
        hdr.mri.count = hdr.mri.count + 1;
        hdr.swtraces.push_front(1);
        hdr.swtraces[0].setValid();
        hdr.swtraces[0].swid = swid;
        hdr.swtraces[0].qdepth = (bit<32>) sm.deq_qdepth;
        hdr.ipv4.ihl = hdr.ipv4.ihl + 2;
        hdr.ipv4_option.option_length = hdr.ipv4_option.option_length + 8;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 8;
    }
    table swtrace {
        actions = { add_swtrace; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (hdr.mri.isValid()) {
            swtrace.apply();
        }
    }
}

IPV4_CHECKSUM_CONTROL
control MriDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_option);
        pkt.emit(hdr.mri);
        pkt.emit(hdr.swtraces);
    }
}

V1Switch(MriParser(), NoCheck(), Forward(), Trace(), Checksum(), MriDeparser()) main;
