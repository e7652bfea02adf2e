// The p4lang/tutorials "firewall" exercise, written here from its description: basic IPv4
// forwarding plus a stateful firewall for TCP. The table check_ports tells, by ingress and egress
// port, whether a packet goes out of the protected network (direction 0) or comes into it
// (direction 1). An outgoing SYN records its connection in a Bloom filter (two bit registers
// indexed by two hashes of the 5-tuple); an incoming TCP packet passes only if the filter holds
// its reversed 5-tuple, i.e. an inside host opened the connection. Other traffic is not filtered.
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

#define BLOOM_CELLS 4096
const bit<8> TCP_SYN = 0x02;

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; tcp_t tcp; }
struct meta_t { }

parser FirewallParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { TYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { PROTO_TCP: parse_tcp; default: accept; }
    }
    state parse_tcp { pkt.extract(hdr.tcp); transition accept; }
}

control NoCheck(inout headers_t hdr, inout meta_t meta) { apply { } }

control Firewall(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<1>>(BLOOM_CELLS) bloom_1;
    register<bit<1>>(BLOOM_CELLS) bloom_2;
    bit<32> cell_1;
    bit<32> cell_2;
    bit<1> seen_1;
    bit<1> seen_2;
    bit<1> direction = 0;

    IPV4_FORWARDING
    action cells(bit<32> a, bit<32> b, bit<16> a_port, bit<16> b_port) {
        hash(cell_1, HashAlgorithm.crc16, (bit<32>) 0, { a, b, a_port, b_port, hdr.ipv4.protocol },
             (bit<32>) BLOOM_CELLS);
        hash(cell_2, HashAlgorithm.crc32, (bit<32>) 0, { a, b, a_port, b_port, hdr.ipv4.protocol },
             (bit<32>) BLOOM_CELLS);
    }
    action set_direction(bit<1> dir) { direction = dir; }
    table check_ports {
        key = { sm.ingress_port: exact; sm.egress_spec: exact; }
        actions = { set_direction; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (!hdr.ipv4.isValid()) {
            drop();
            exit;
        }
        ipv4_lpm.apply();
        if (!hdr.tcp.isValid()) {
            exit;
        }
        if (!check_ports.apply().hit) {
            exit;
        }
        if (direction == 0) {
            cells(hdr.ipv4.src, hdr.ipv4.dst, hdr.tcp.src_port, hdr.tcp.dst_port);
            if (hdr.tcp.flags & TCP_SYN != 0) {
                bloom_1.write(cell_1, 1);
                bloom_2.write(cell_2, 1);
            }
        } else {
            cells(hdr.ipv4.dst, hdr.ipv4.src, hdr.tcp.dst_port, hdr.tcp.src_port);
            bloom_1.read(seen_1, cell_1);
            bloom_2.read(seen_2, cell_2);
            if (seen_1 == 0 || seen_2 == 0) {
                drop();
            }
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
IPV4_CHECKSUM_CONTROL
control FirewallDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.tcp); }
}

V1Switch(FirewallParser(), NoCheck(), Firewall(), NoEgress(), Checksum(), FirewallDeparser()) main;
