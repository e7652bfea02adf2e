// The p4lang/tutorials "link_monitor" exercise, written here from its description: basic IPv4
// forwarding, and every packet's length counted per egress port in a register. A probe (EtherType
// 0x812: a hop count, the records of the switches it crossed, then the list of egress ports its
// source chose, one per hop) is sent out of the port its list names for this hop, and in egress
// pushes a record on top: the switch id, the egress port, the bytes sent out of that port since the
// last probe (this probe included), and the times of the last probe and of this one; the byte
// count starts again from 0. Deviation: the embedded switch keeps no clock, so both times are 0.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

#define MAX_HOPS 10
#define MAX_PORTS 8
const bit<16> TYPE_PROBE = 0x812;

header probe_t { bit<8> hop_cnt; }
header probe_data_t {
    bit<1> bos; bit<7> swid; bit<8> port; bit<32> byte_cnt; bit<48> last_time; bit<48> cur_time;
}
header probe_fwd_t { bit<8> egress_spec; }
struct headers_t {
    ethernet_t ethernet;
    probe_t probe;
    probe_data_t[MAX_HOPS] probe_data;
    probe_fwd_t[MAX_HOPS] probe_fwd;
    ipv4_t ipv4;
}
struct meta_t { bit<8> remaining; bit<8> egress_spec; }

parser MonitorParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            TYPE_IPV4: parse_ipv4;
            TYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
    state parse_probe {
        pkt.extract(hdr.probe);
        meta.remaining = hdr.probe.hop_cnt + 1;
        transition select(hdr.probe.hop_cnt) { 0: parse_probe_fwd; default: parse_probe_data; }
    }
    state parse_probe_data {
        pkt.extract(hdr.probe_data.next);
        transition select(hdr.probe_data.last.bos) { 1: parse_probe_fwd; default: parse_probe_data; }
    }
    // The entries up to this hop's; the last one extracted names this hop's egress port.
    state parse_probe_fwd {
        pkt.extract(hdr.probe_fwd.next);
        meta.remaining = meta.remaining - 1;
        transition select(meta.remaining) { 0: this_hop; default: parse_probe_fwd; }
    }
    state this_hop {
        meta.egress_spec = hdr.probe_fwd.last.egress_spec;
        transition accept;
    }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Forward(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    IPV4_FORWARDING
    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        } else if (hdr.probe.isValid() && hdr.probe_fwd[0].isValid()) {
            sm.egress_spec = (bit<9>) meta.egress_spec;
            hdr.probe.hop_cnt = hdr.probe.hop_cnt + 1;
        } else {
            drop();
        }
    }
}

control Monitor(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(MAX_PORTS) byte_cnt_reg;
    register<bit<48>>(MAX_PORTS) last_time_reg;
    bit<32> byte_cnt;
    bit<48> last_time;

    action set_swid(bit<7> swid) { hdr.probe_data[0].swid = swid; }
    table swid {
        actions = { set_swid; NoAction; }
        default_action = NoAction();
    }
    apply {
        byte_cnt_reg.read(byte_cnt, (bit<32>) sm.egress_port);
        byte_cnt = byte_cnt + sm.packet_length;
        byte_cnt_reg.write((bit<32>) sm.egress_port, byte_cnt);
        if (hdr.probe.isValid()) {
            hdr.probe_data.push_front(1);
            hdr.probe_data[0].setValid();
            hdr.probe_data[0].bos = hdr.probe.hop_cnt == 1 ? 1w1 : 1w0;
            swid.apply();
            hdr.probe_data[0].port = (bit<8>) sm.egress_port;
            hdr.probe_data[0].byte_cnt = byte_cnt;
            last_time_reg.read(last_time, (bit<32>) sm.egress_port);
            last_time_reg.write((bit<32>) sm.egress_port, sm.egress_global_timestamp);
            hdr.probe_data[0].last_time = last_time;
            hdr.probe_data[0].cur_time = sm.egress_global_timestamp;
            byte_cnt_reg.write((bit<32>) sm.egress_port, 0);
        }
    }
}

IPV4_CHECKSUM_CONTROL
control MonitorDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
        pkt.emit(hdr.probe_data);
        pkt.emit(hdr.probe_fwd);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(MonitorParser(), NoCheck(), Forward(), Monitor(), Checksum(), MonitorDeparser()) main;
