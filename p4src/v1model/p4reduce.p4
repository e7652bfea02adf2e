/*
 * p4reduce: in-network aggregation for distributed ML, v1model architecture
 * (bmv2 simple_switch_grpc and the embedded p4reduce-switch).
 *
 * docs/protocol.md is the specification this program implements;
 * docs/p4src.md walks through it. Compile for bmv2 with
 *     p4c --target bmv2 --arch v1model --p4runtime-files p4reduce.p4info.txtpb p4reduce.p4
 *
 * Names of controls, tables, actions, parameters, counters and registers are
 * a contract with the controller, which resolves them by name from P4Info.
 */
#include <core.p4>
#include <v1model.p4>

#include "../common/constants.p4"
#include "../common/headers.p4"

/* Count a drop by reason and end ingress processing of this packet. */
#define INGRESS_DROP(reason) ingress_drops.count(reason); mark_to_drop(standard_metadata); exit

/*
 * One line per value register, unrolled over the K values below.
 * slot_cur is the register index of the packet's slot in the packet's set.
 */
#define STORE_VALUE(reg, field) reg.write(slot_cur, hdr.vals.field);
#define ADD_VALUE(reg, field) reg.read(sum, slot_cur); hdr.vals.field = hdr.vals.field + sum; reg.write(slot_cur, hdr.vals.field);
#define LOAD_VALUE(reg, field) reg.read(hdr.vals.field, slot_cur);

struct metadata_t {
    /* job_table's answer for this (job_id, rank) */
    bit<16> base;
    bit<16> pool_size;
    bit<8>  num_workers;
    bit<32> worker_bit;
    bit<16> job_mcast_grp;
    bit<9>  sender_port;
    bit<32> sender_ip;
    bit<16> sender_udp_port;
    /* PKT_KIND_*: what ingress decided; multicast replicas carry it to egress */
    bit<8>  kind;
}

parser MyParser(packet_in packet,
                out headers_t hdr,
                inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ARP: parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    /*
     * UDP is parsed only behind an option-less IPv4 header of an unfragmented
     * datagram (or its first fragment): anything else cannot be aggregation
     * traffic and is forwarded at layer 2 without looking further.
     */
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            UDP_PORT: parse_p4reduce;
            default: accept;
        }
    }

    /* A frame that ends before the K values sets parser_error (PacketTooShort). */
    state parse_p4reduce {
        packet.extract(hdr.p4r);
        packet.extract(hdr.vals);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr,
                inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {

    counter(MAX_JOBS, CounterType.packets_and_bytes) job_data_in;
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_results_out;
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_retransmissions;
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_replays;
    counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) ingress_drops;

    /* Slot state: index set * SLOT_COUNT + g for the per-set registers, g for owner. */
    register<bit<32>>(SLOT_REGISTER_SIZE) bitmap;
    register<bit<8>>(SLOT_REGISTER_SIZE) remaining;
    register<bit<8>>(SLOT_REGISTER_SIZE) exp_max;
    register<bit<16>>(SLOT_COUNT) owner;
    register<bit<32>>(SLOT_REGISTER_SIZE) value00;
    register<bit<32>>(SLOT_REGISTER_SIZE) value01;
    register<bit<32>>(SLOT_REGISTER_SIZE) value02;
    register<bit<32>>(SLOT_REGISTER_SIZE) value03;
    register<bit<32>>(SLOT_REGISTER_SIZE) value04;
    register<bit<32>>(SLOT_REGISTER_SIZE) value05;
    register<bit<32>>(SLOT_REGISTER_SIZE) value06;
    register<bit<32>>(SLOT_REGISTER_SIZE) value07;
    register<bit<32>>(SLOT_REGISTER_SIZE) value08;
    register<bit<32>>(SLOT_REGISTER_SIZE) value09;
    register<bit<32>>(SLOT_REGISTER_SIZE) value10;
    register<bit<32>>(SLOT_REGISTER_SIZE) value11;
    register<bit<32>>(SLOT_REGISTER_SIZE) value12;
    register<bit<32>>(SLOT_REGISTER_SIZE) value13;
    register<bit<32>>(SLOT_REGISTER_SIZE) value14;
    register<bit<32>>(SLOT_REGISTER_SIZE) value15;
    register<bit<32>>(SLOT_REGISTER_SIZE) value16;
    register<bit<32>>(SLOT_REGISTER_SIZE) value17;
    register<bit<32>>(SLOT_REGISTER_SIZE) value18;
    register<bit<32>>(SLOT_REGISTER_SIZE) value19;
    register<bit<32>>(SLOT_REGISTER_SIZE) value20;
    register<bit<32>>(SLOT_REGISTER_SIZE) value21;
    register<bit<32>>(SLOT_REGISTER_SIZE) value22;
    register<bit<32>>(SLOT_REGISTER_SIZE) value23;
    register<bit<32>>(SLOT_REGISTER_SIZE) value24;
    register<bit<32>>(SLOT_REGISTER_SIZE) value25;
    register<bit<32>>(SLOT_REGISTER_SIZE) value26;
    register<bit<32>>(SLOT_REGISTER_SIZE) value27;
    register<bit<32>>(SLOT_REGISTER_SIZE) value28;
    register<bit<32>>(SLOT_REGISTER_SIZE) value29;
    register<bit<32>>(SLOT_REGISTER_SIZE) value30;
    register<bit<32>>(SLOT_REGISTER_SIZE) value31;

    bit<32> slot_global = 0;  /* g = base + slot */
    bit<32> slot_cur = 0;     /* index of g in the packet's set */
    bit<32> slot_other = 0;   /* index of g in the other set */
    bit<32> seen = 0;         /* bitmap of the packet's set before this packet */
    bit<32> other_seen = 0;   /* bitmap of the other set */
    bit<8>  left = 0;         /* remaining contributions after this packet */
    bit<8>  max_exp = 0;
    bit<16> last_owner = 0;
    bit<32> sum = 0;          /* scratch for ADD_VALUE */
    bit<48> peer_mac = 0;     /* scratch for swapping addresses */
    bit<32> peer_ip = 0;
    bool aggregation = false;

    /* Answer an ARP request for one of our addresses, out of the port it came in on. */
    action arp_reply(bit<48> mac) {
        bit<32> asked = hdr.arp.target_proto_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        hdr.arp.opcode = ARP_OPER_REPLY;
        hdr.arp.target_hw_addr = hdr.arp.sender_hw_addr;
        hdr.arp.target_proto_addr = hdr.arp.sender_proto_addr;
        hdr.arp.sender_hw_addr = mac;
        hdr.arp.sender_proto_addr = asked;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    table arp_responder {
        key = { hdr.arp.target_proto_addr: exact; }
        actions = { arp_reply; NoAction; }
        default_action = NoAction();
        size = ADDRESS_TABLE_SIZE;
    }

    /* The hit itself is the answer: the packet is addressed to the aggregation service. */
    action accept_aggregation() {
    }

    table agg_addresses {
        key = { hdr.ipv4.dst_addr: exact; }
        actions = { accept_aggregation; NoAction; }
        default_action = NoAction();
        size = ADDRESS_TABLE_SIZE;
    }

    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action flood() {
        standard_metadata.mcast_grp = FLOOD_GROUP;
        meta.kind = PKT_KIND_FLOOD;
    }

    table l2_forward {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = L2_TABLE_SIZE;
    }

    action set_job(bit<16> base, bit<16> pool_size, bit<8> num_workers, bit<32> worker_bit,
                   bit<16> mcast_grp, bit<9> sender_port, bit<32> sender_ip, bit<16> sender_udp_port) {
        meta.base = base;
        meta.pool_size = pool_size;
        meta.num_workers = num_workers;
        meta.worker_bit = worker_bit;
        meta.job_mcast_grp = mcast_grp;
        meta.sender_port = sender_port;
        meta.sender_ip = sender_ip;
        meta.sender_udp_port = sender_udp_port;
    }

    action unknown_job() {
        ingress_drops.count(DROP_UNKNOWN_JOB);
        mark_to_drop(standard_metadata);
    }

    table job_table {
        key = {
            hdr.p4r.job_id: exact;
            hdr.p4r.rank: exact;
        }
        actions = { set_job; unknown_job; }
        default_action = unknown_job();
        size = JOB_TABLE_SIZE;
    }

    apply {
        /* 1. Framing. In v1model a parser error does not drop: we do. */
        if (standard_metadata.parser_error != error.NoError) {
            INGRESS_DROP(DROP_TRUNCATED);
        }

        if (hdr.arp.isValid()) {
            if (hdr.arp.opcode == ARP_OPER_REQUEST && hdr.arp.hw_type == ARP_HTYPE_ETHERNET
                    && hdr.arp.proto_type == ETHERTYPE_IPV4
                    && hdr.arp.hw_addr_len == 6 && hdr.arp.proto_addr_len == 4) {
                if (arp_responder.apply().hit) {
                    exit;
                }
            }
        }

        /* hdr.p4r is valid only for option-less IPv4 / UDP to UDP_PORT (see the parser). */
        if (hdr.p4r.isValid()) {
            if (agg_addresses.apply().hit) {
                aggregation = true;
            }
        }
        if (!aggregation) {
            l2_forward.apply();
            exit;
        }

        if (standard_metadata.checksum_error == 1) {
            INGRESS_DROP(DROP_BAD_CHECKSUM);
        }
        if (hdr.ipv4.total_len != IPV4_AGG_LENGTH || hdr.udp.len != UDP_AGG_LENGTH) {
            INGRESS_DROP(DROP_BAD_LENGTH);
        }
        if (hdr.p4r.msg_type != MSG_DATA) {
            INGRESS_DROP(DROP_BAD_TYPE);
        }

        /* 2. Find the job (a miss is counted and dropped by unknown_job). */
        if (!job_table.apply().hit) {
            exit;
        }

        /* 3. Isolation: only the registered host may speak for (job_id, rank). */
        if (standard_metadata.ingress_port != meta.sender_port
                || hdr.ipv4.src_addr != meta.sender_ip
                || hdr.udp.src_port != meta.sender_udp_port) {
            INGRESS_DROP(DROP_WRONG_SENDER);
        }

        /* 4. Bounds; the second test only fails for a job entry whose range overruns the pool. */
        if ((bit<16>) hdr.p4r.slot >= meta.pool_size) {
            INGRESS_DROP(DROP_SLOT_OUT_OF_RANGE);
        }
        slot_global = (bit<32>) meta.base + (bit<32>) hdr.p4r.slot;
        if (slot_global >= SLOT_COUNT) {
            INGRESS_DROP(DROP_SLOT_OUT_OF_RANGE);
        }
        if (hdr.p4r.set == 0) {
            slot_cur = slot_global;
            slot_other = slot_global + SLOT_COUNT;
        } else {
            slot_cur = slot_global + SLOT_COUNT;
            slot_other = slot_global;
        }

        /*
         * 5. Ownership. A slot last used by another (deleted) job starts clean:
         * job ids are never reused, so the controller needs no register writes.
         */
        owner.read(last_owner, slot_global);
        if (last_owner != hdr.p4r.job_id) {
            bitmap.write(slot_global, 0);
            bitmap.write(slot_global + SLOT_COUNT, 0);
            remaining.write(slot_global, 0);
            remaining.write(slot_global + SLOT_COUNT, 0);
            owner.write(slot_global, hdr.p4r.job_id);
        }

        /*
         * 6. Aggregate. Sending on set s proves the worker received the result
         * held in set 1-s, so its bit there is no longer needed for replays.
         */
        bitmap.read(other_seen, slot_other);
        bitmap.write(slot_other, other_seen & ~meta.worker_bit);
        bitmap.read(seen, slot_cur);

        if ((seen & meta.worker_bit) != 0) {
            /* Retransmission: the contribution is already in the sum. */
            job_retransmissions.count((bit<32>) hdr.p4r.job_id);
            remaining.read(left, slot_cur);
            if (left != 0) {
                INGRESS_DROP(DROP_EARLY_DUPLICATE);
            }
            /* The slot is complete: replay its result to this sender only. */
            exp_max.read(hdr.p4r.exp, slot_cur);
            LOAD_VALUE(value00, v00)
            LOAD_VALUE(value01, v01)
            LOAD_VALUE(value02, v02)
            LOAD_VALUE(value03, v03)
            LOAD_VALUE(value04, v04)
            LOAD_VALUE(value05, v05)
            LOAD_VALUE(value06, v06)
            LOAD_VALUE(value07, v07)
            LOAD_VALUE(value08, v08)
            LOAD_VALUE(value09, v09)
            LOAD_VALUE(value10, v10)
            LOAD_VALUE(value11, v11)
            LOAD_VALUE(value12, v12)
            LOAD_VALUE(value13, v13)
            LOAD_VALUE(value14, v14)
            LOAD_VALUE(value15, v15)
            LOAD_VALUE(value16, v16)
            LOAD_VALUE(value17, v17)
            LOAD_VALUE(value18, v18)
            LOAD_VALUE(value19, v19)
            LOAD_VALUE(value20, v20)
            LOAD_VALUE(value21, v21)
            LOAD_VALUE(value22, v22)
            LOAD_VALUE(value23, v23)
            LOAD_VALUE(value24, v24)
            LOAD_VALUE(value25, v25)
            LOAD_VALUE(value26, v26)
            LOAD_VALUE(value27, v27)
            LOAD_VALUE(value28, v28)
            LOAD_VALUE(value29, v29)
            LOAD_VALUE(value30, v30)
            LOAD_VALUE(value31, v31)
            meta.kind = PKT_KIND_REPLAY;
        } else {
            job_data_in.count((bit<32>) hdr.p4r.job_id);
            bitmap.write(slot_cur, seen | meta.worker_bit);
            if (seen == 0) {
                /* First contribution: overwrite whatever an earlier use left. */
                STORE_VALUE(value00, v00)
                STORE_VALUE(value01, v01)
                STORE_VALUE(value02, v02)
                STORE_VALUE(value03, v03)
                STORE_VALUE(value04, v04)
                STORE_VALUE(value05, v05)
                STORE_VALUE(value06, v06)
                STORE_VALUE(value07, v07)
                STORE_VALUE(value08, v08)
                STORE_VALUE(value09, v09)
                STORE_VALUE(value10, v10)
                STORE_VALUE(value11, v11)
                STORE_VALUE(value12, v12)
                STORE_VALUE(value13, v13)
                STORE_VALUE(value14, v14)
                STORE_VALUE(value15, v15)
                STORE_VALUE(value16, v16)
                STORE_VALUE(value17, v17)
                STORE_VALUE(value18, v18)
                STORE_VALUE(value19, v19)
                STORE_VALUE(value20, v20)
                STORE_VALUE(value21, v21)
                STORE_VALUE(value22, v22)
                STORE_VALUE(value23, v23)
                STORE_VALUE(value24, v24)
                STORE_VALUE(value25, v25)
                STORE_VALUE(value26, v26)
                STORE_VALUE(value27, v27)
                STORE_VALUE(value28, v28)
                STORE_VALUE(value29, v29)
                STORE_VALUE(value30, v30)
                STORE_VALUE(value31, v31)
                exp_max.write(slot_cur, hdr.p4r.exp);
                left = meta.num_workers - 1;
            } else {
                ADD_VALUE(value00, v00)
                ADD_VALUE(value01, v01)
                ADD_VALUE(value02, v02)
                ADD_VALUE(value03, v03)
                ADD_VALUE(value04, v04)
                ADD_VALUE(value05, v05)
                ADD_VALUE(value06, v06)
                ADD_VALUE(value07, v07)
                ADD_VALUE(value08, v08)
                ADD_VALUE(value09, v09)
                ADD_VALUE(value10, v10)
                ADD_VALUE(value11, v11)
                ADD_VALUE(value12, v12)
                ADD_VALUE(value13, v13)
                ADD_VALUE(value14, v14)
                ADD_VALUE(value15, v15)
                ADD_VALUE(value16, v16)
                ADD_VALUE(value17, v17)
                ADD_VALUE(value18, v18)
                ADD_VALUE(value19, v19)
                ADD_VALUE(value20, v20)
                ADD_VALUE(value21, v21)
                ADD_VALUE(value22, v22)
                ADD_VALUE(value23, v23)
                ADD_VALUE(value24, v24)
                ADD_VALUE(value25, v25)
                ADD_VALUE(value26, v26)
                ADD_VALUE(value27, v27)
                ADD_VALUE(value28, v28)
                ADD_VALUE(value29, v29)
                ADD_VALUE(value30, v30)
                ADD_VALUE(value31, v31)
                exp_max.read(max_exp, slot_cur);
                if (hdr.p4r.exp > max_exp) {
                    exp_max.write(slot_cur, hdr.p4r.exp);
                } else {
                    hdr.p4r.exp = max_exp;
                }
                remaining.read(left, slot_cur);
                left = left - 1;
            }
            remaining.write(slot_cur, left);
            if (left != 0) {
                /* Consumed into the slot; not a drop. */
                mark_to_drop(standard_metadata);
                exit;
            }
            meta.kind = PKT_KIND_RESULT;
        }

        /* Turn the packet around: it leaves as a RESULT from the aggregation address. */
        hdr.p4r.msg_type = MSG_RESULT;
        hdr.ipv4.ttl = RESULT_TTL;
        hdr.udp.checksum = 0;
        if (meta.kind == PKT_KIND_REPLAY) {
            peer_mac = hdr.ethernet.src_addr;
            peer_ip = hdr.ipv4.src_addr;
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = peer_mac;
            hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
            hdr.ipv4.dst_addr = peer_ip;
            hdr.udp.dst_port = hdr.udp.src_port;
            standard_metadata.egress_spec = standard_metadata.ingress_port;
            job_replays.count((bit<32>) hdr.p4r.job_id);
        } else {
            /* Destinations are written per replica by MyEgress.result_dest. */
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
            standard_metadata.mcast_grp = meta.job_mcast_grp;
            job_results_out.count((bit<32>) hdr.p4r.job_id);
        }
        hdr.udp.src_port = UDP_PORT;
    }
}

control MyEgress(inout headers_t hdr,
               inout metadata_t meta,
               inout standard_metadata_t standard_metadata) {

    counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) egress_drops;

    /* egress_rid is the rank the multicast group gave this replica. */
    action set_result_dest(bit<48> dst_mac, bit<32> dst_ip, bit<16> dst_udp_port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_ip;
        hdr.udp.dst_port = dst_udp_port;
    }

    action no_result_dest() {
        egress_drops.count(DROP_NO_RESULT_DEST);
        mark_to_drop(standard_metadata);
    }

    table result_dest {
        key = {
            hdr.p4r.job_id: exact;
            standard_metadata.egress_rid: exact;
        }
        actions = { set_result_dest; no_result_dest; }
        default_action = no_result_dest();
        size = JOB_TABLE_SIZE;
    }

    apply {
        if (meta.kind == PKT_KIND_FLOOD) {
            /* Never flood a frame back out of the port it came in on. */
            if (standard_metadata.egress_port == standard_metadata.ingress_port) {
                mark_to_drop(standard_metadata);
            }
        } else if (meta.kind == PKT_KIND_RESULT) {
            result_dest.apply();
        }
    }
}

/* Only packets the switch rewrote as RESULTs get a new IPv4 checksum; forwarded ones pass untouched. */
control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && (meta.kind == PKT_KIND_RESULT || meta.kind == PKT_KIND_REPLAY),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.p4r);
        packet.emit(hdr.vals);
    }
}

V1Switch(
    MyParser(),
    MyVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    MyComputeChecksum(),
    MyDeparser()
) main;
