/*
 * p4reduce for Tofino (TNA). Same protocol, same names as the v1model program
 * (p4src/v1model/p4reduce.p4) wherever the architecture allows; every place
 * where the two must differ is marked "TNA:". docs/protocol.md is the
 * specification, docs/p4src.md explains both programs.
 *
 * This program is not compiled in this repository (the Tofino compiler is
 * not available); keep it in step with the v1model program by hand.
 *
 * Stage budget: each value register needs its own stateful ALU, and the
 * values depend on the bitmap result, which depends on the owner result,
 * which depends on job_table. With K = 32 single 32-bit registers the chain
 * is about 4 + 32/4 = 12 stages: it fits Tofino 2 (compile with t2na.p4) with
 * room to spare and is at the limit of Tofino 1. On Tofino 1, pack value pairs
 * into 64-bit registers as SwitchML does and harvest the second half on a
 * recirculated pass.
 */
#include <core.p4>
#include <tna.p4>

#include "../common/constants.p4"
#include "../common/headers.p4"

/* What to do with the slot's registers, decided from the bitmap. */
#define STEP_NONE   0
#define STEP_FIRST  1   /* first contribution: store */
#define STEP_ADD    2   /* later contribution: add */
#define STEP_REPLAY 3   /* retransmission: read */

/*
 * TNA: ingress and egress are separate programs; what ingress decided travels
 * to egress in a bridged header in front of the frame.
 */
header bridge_t {
    bit<8> kind;          /* PKT_KIND_* */
    bit<7> pad;
    bit<9> ingress_port;
}

struct tna_headers_t {
    bridge_t          bridge;
    ethernet_t        ethernet;
    arp_t             arp;
    ipv4_t            ipv4;
    udp_t             udp;
    p4reduce_t        p4r;
    p4reduce_values_t vals;
}

struct ig_metadata_t {
    bool    checksum_err;
    bit<32> slot_global;
    bit<32> slot_cur;
    bit<8>  workers_left;     /* num_workers - 1, the remaining count of a first contribution */
    bit<32> worker_bit;
    bit<16> pool_size;
    bit<16> job_mcast_grp;
    bit<9>  sender_port;
    bit<32> sender_ip;
    bit<16> sender_udp_port;
    bit<1>  new_owner;
    bit<32> seen;
    bit<8>  step;
    bit<8>  left;
    bit<8>  kind;
}

struct eg_metadata_t {
}

struct bitmap_pair_t {
    bit<32> set0;
    bit<32> set1;
}

/* ------------------------------------------------------------------------ */

parser IngressParser(packet_in pkt,
                     out tna_headers_t hdr,
                     out ig_metadata_t ig_md,
                     out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);   /* TNA: no resubmission is used */
        ig_md.checksum_err = false;
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ARP: parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_arp {
        pkt.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        ig_md.checksum_err = ipv4_checksum.verify();
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            UDP_PORT: parse_p4reduce;
            default: accept;
        }
    }

    state parse_p4reduce {
        pkt.extract(hdr.p4r);
        pkt.extract(hdr.vals);
        transition accept;
    }
}

/*
 * One value register with its three operations, and their use. The value
 * travels in the packet: after the register operation the header field holds
 * the running sum (or the stored sum, for a replay).
 */
#define VALUE_REGISTER(n) \
    Register<bit<32>, bit<32>>(SLOT_REGISTER_SIZE) value##n; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(value##n) value##n##_store = { \
        void apply(inout bit<32> v, out bit<32> rv) { v = hdr.vals.v##n; rv = v; } }; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(value##n) value##n##_add = { \
        void apply(inout bit<32> v, out bit<32> rv) { v = v + hdr.vals.v##n; rv = v; } }; \
    RegisterAction<bit<32>, bit<32>, bit<32>>(value##n) value##n##_read = { \
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; } };

#define VALUE_APPLY(n) \
    if (ig_md.step == STEP_FIRST) { hdr.vals.v##n = value##n##_store.execute(ig_md.slot_cur); } \
    else if (ig_md.step == STEP_ADD) { hdr.vals.v##n = value##n##_add.execute(ig_md.slot_cur); } \
    else { hdr.vals.v##n = value##n##_read.execute(ig_md.slot_cur); }

control MyIngress(inout tna_headers_t hdr,
                inout ig_metadata_t ig_md,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Counter<bit<64>, bit<32>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_data_in;
    Counter<bit<64>, bit<32>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_results_out;
    Counter<bit<64>, bit<32>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_retransmissions;
    Counter<bit<64>, bit<32>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_replays;
    Counter<bit<64>, bit<32>>(DROP_REASON_COUNT, CounterType_t.PACKETS_AND_BYTES) ingress_drops;

    /* owner[g]: a RegisterAction claims the slot and says whether the owner changed. */
    Register<bit<16>, bit<32>>(SLOT_COUNT) owner;
    RegisterAction<bit<16>, bit<32>, bit<1>>(owner) claim = {
        void apply(inout bit<16> job, out bit<1> changed) {
            if (job != hdr.p4r.job_id) {
                job = hdr.p4r.job_id;
                changed = 1;
            } else {
                changed = 0;
            }
        }
    };

    /*
     * TNA: both sets' bitmaps of slot g live in one 64-bit register entry, so
     * "set my bit here, clear it there" is one stateful operation. The
     * register is indexed by g (SLOT_COUNT entries), not by set * SLOT_COUNT + g
     * as in v1model. Each action returns the packet set's bitmap before the
     * update; the _fresh variants serve a new owner and start from zero.
     */
    Register<bitmap_pair_t, bit<32>>(SLOT_COUNT) bitmap;
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(bitmap) bitmap_set0 = {
        void apply(inout bitmap_pair_t b, out bit<32> before) {
            before = b.set0;
            b.set0 = b.set0 | ig_md.worker_bit;
            b.set1 = b.set1 & ~ig_md.worker_bit;
        }
    };
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(bitmap) bitmap_set1 = {
        void apply(inout bitmap_pair_t b, out bit<32> before) {
            before = b.set1;
            b.set1 = b.set1 | ig_md.worker_bit;
            b.set0 = b.set0 & ~ig_md.worker_bit;
        }
    };
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(bitmap) bitmap_set0_fresh = {
        void apply(inout bitmap_pair_t b, out bit<32> before) {
            before = 0;
            b.set0 = ig_md.worker_bit;
            b.set1 = 0;
        }
    };
    RegisterAction<bitmap_pair_t, bit<32>, bit<32>>(bitmap) bitmap_set1_fresh = {
        void apply(inout bitmap_pair_t b, out bit<32> before) {
            before = 0;
            b.set1 = ig_md.worker_bit;
            b.set0 = 0;
        }
    };

    /*
     * TNA: remaining is not cleared on an owner change; the cleared bitmap
     * makes the next packet a first contribution, which overwrites it.
     */
    Register<bit<8>, bit<32>>(SLOT_REGISTER_SIZE) remaining;
    RegisterAction<bit<8>, bit<32>, bit<8>>(remaining) remaining_start = {
        void apply(inout bit<8> v, out bit<8> rv) { v = ig_md.workers_left; rv = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(remaining) remaining_count_down = {
        void apply(inout bit<8> v, out bit<8> rv) { v = v - 1; rv = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(remaining) remaining_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };

    Register<bit<8>, bit<32>>(SLOT_REGISTER_SIZE) exp_max;
    RegisterAction<bit<8>, bit<32>, bit<8>>(exp_max) exp_store = {
        void apply(inout bit<8> v, out bit<8> rv) { v = hdr.p4r.exp; rv = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(exp_max) exp_raise = {
        void apply(inout bit<8> v, out bit<8> rv) {
            if (hdr.p4r.exp > v) {
                v = hdr.p4r.exp;
            }
            rv = v;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(exp_max) exp_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };

    VALUE_REGISTER(00)
    VALUE_REGISTER(01)
    VALUE_REGISTER(02)
    VALUE_REGISTER(03)
    VALUE_REGISTER(04)
    VALUE_REGISTER(05)
    VALUE_REGISTER(06)
    VALUE_REGISTER(07)
    VALUE_REGISTER(08)
    VALUE_REGISTER(09)
    VALUE_REGISTER(10)
    VALUE_REGISTER(11)
    VALUE_REGISTER(12)
    VALUE_REGISTER(13)
    VALUE_REGISTER(14)
    VALUE_REGISTER(15)
    VALUE_REGISTER(16)
    VALUE_REGISTER(17)
    VALUE_REGISTER(18)
    VALUE_REGISTER(19)
    VALUE_REGISTER(20)
    VALUE_REGISTER(21)
    VALUE_REGISTER(22)
    VALUE_REGISTER(23)
    VALUE_REGISTER(24)
    VALUE_REGISTER(25)
    VALUE_REGISTER(26)
    VALUE_REGISTER(27)
    VALUE_REGISTER(28)
    VALUE_REGISTER(29)
    VALUE_REGISTER(30)
    VALUE_REGISTER(31)

    action drop(bit<32> reason) {
        ingress_drops.count(reason);
        ig_dprsr_md.drop_ctl = 1;
    }

    action arp_reply(bit<48> mac) {
        bit<32> asked = hdr.arp.target_proto_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        hdr.arp.opcode = ARP_OPER_REPLY;
        hdr.arp.target_hw_addr = hdr.arp.sender_hw_addr;
        hdr.arp.target_proto_addr = hdr.arp.sender_proto_addr;
        hdr.arp.sender_hw_addr = mac;
        hdr.arp.sender_proto_addr = asked;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }

    table arp_responder {
        key = { hdr.arp.target_proto_addr: exact; }
        actions = { arp_reply; NoAction; }
        default_action = NoAction();
        size = ADDRESS_TABLE_SIZE;
    }

    action accept_aggregation() {
    }

    table agg_addresses {
        key = { hdr.ipv4.dst_addr: exact; }
        actions = { accept_aggregation; NoAction; }
        default_action = NoAction();
        size = ADDRESS_TABLE_SIZE;
    }

    action forward(bit<9> port) {
        ig_tm_md.ucast_egress_port = port;
    }

    action flood() {
        ig_tm_md.mcast_grp_a = FLOOD_GROUP;
        ig_md.kind = PKT_KIND_FLOOD;
    }

    table l2_forward {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = L2_TABLE_SIZE;
    }

    /*
     * TNA: the action also computes g and the number of contributions a first
     * one leaves missing, so that later stages only read metadata.
     */
    action set_job(bit<16> base, bit<16> pool_size, bit<8> num_workers, bit<32> worker_bit,
                   bit<16> mcast_grp, bit<9> sender_port, bit<32> sender_ip, bit<16> sender_udp_port) {
        ig_md.slot_global = (bit<32>) base + (bit<32>) hdr.p4r.slot;
        ig_md.pool_size = pool_size;
        ig_md.workers_left = num_workers - 1;
        ig_md.worker_bit = worker_bit;
        ig_md.job_mcast_grp = mcast_grp;
        ig_md.sender_port = sender_port;
        ig_md.sender_ip = sender_ip;
        ig_md.sender_udp_port = sender_udp_port;
    }

    action unknown_job() {
        drop(DROP_UNKNOWN_JOB);
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

    /* Ingress hands its decision and the ingress port to egress. */
    action bridge_to_egress() {
        hdr.bridge.setValid();
        hdr.bridge.kind = PKT_KIND_FORWARD;
        hdr.bridge.pad = 0;
        hdr.bridge.ingress_port = ig_intr_md.ingress_port;
    }

    apply {
        ig_md.kind = PKT_KIND_FORWARD;
        bridge_to_egress();

        /*
         * 1. Framing. TNA: depending on the parser configuration, Tofino may drop
         * a frame with a parser error before ingress runs, so TRUNCATED can undercount.
         */
        if (ig_prsr_md.parser_err != 0) {
            drop(DROP_TRUNCATED);
            exit;
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

        bool aggregation = false;
        if (hdr.p4r.isValid()) {
            if (agg_addresses.apply().hit) {
                aggregation = true;
            }
        }
        if (!aggregation) {
            l2_forward.apply();
            hdr.bridge.kind = ig_md.kind;
            exit;
        }

        if (ig_md.checksum_err) {
            drop(DROP_BAD_CHECKSUM);
            exit;
        }
        if (hdr.ipv4.total_len != IPV4_AGG_LENGTH || hdr.udp.len != UDP_AGG_LENGTH) {
            drop(DROP_BAD_LENGTH);
            exit;
        }
        if (hdr.p4r.msg_type != MSG_DATA) {
            drop(DROP_BAD_TYPE);
            exit;
        }

        /* 2. Find the job (a miss is counted and dropped by unknown_job). */
        if (!job_table.apply().hit) {
            exit;
        }

        /* 3. Isolation. */
        if (ig_intr_md.ingress_port != ig_md.sender_port
                || hdr.ipv4.src_addr != ig_md.sender_ip
                || hdr.udp.src_port != ig_md.sender_udp_port) {
            drop(DROP_WRONG_SENDER);
            exit;
        }

        /* 4. Bounds. */
        if ((bit<16>) hdr.p4r.slot >= ig_md.pool_size || ig_md.slot_global >= SLOT_COUNT) {
            drop(DROP_SLOT_OUT_OF_RANGE);
            exit;
        }
        if (hdr.p4r.set == 0) {
            ig_md.slot_cur = ig_md.slot_global;
        } else {
            ig_md.slot_cur = ig_md.slot_global + SLOT_COUNT;
        }

        /* 5. Ownership, folded into the bitmap update (the _fresh actions). */
        ig_md.new_owner = claim.execute(ig_md.slot_global);

        /* 6. Aggregate. */
        if (hdr.p4r.set == 0) {
            if (ig_md.new_owner == 1) {
                ig_md.seen = bitmap_set0_fresh.execute(ig_md.slot_global);
            } else {
                ig_md.seen = bitmap_set0.execute(ig_md.slot_global);
            }
        } else {
            if (ig_md.new_owner == 1) {
                ig_md.seen = bitmap_set1_fresh.execute(ig_md.slot_global);
            } else {
                ig_md.seen = bitmap_set1.execute(ig_md.slot_global);
            }
        }
        if ((ig_md.seen & ig_md.worker_bit) != 0) {
            ig_md.step = STEP_REPLAY;
            job_retransmissions.count((bit<32>) hdr.p4r.job_id);
            ig_md.left = remaining_read.execute(ig_md.slot_cur);
            hdr.p4r.exp = exp_read.execute(ig_md.slot_cur);
        } else if (ig_md.seen == 0) {
            ig_md.step = STEP_FIRST;
            job_data_in.count((bit<32>) hdr.p4r.job_id);
            ig_md.left = remaining_start.execute(ig_md.slot_cur);
            hdr.p4r.exp = exp_store.execute(ig_md.slot_cur);
        } else {
            ig_md.step = STEP_ADD;
            job_data_in.count((bit<32>) hdr.p4r.job_id);
            ig_md.left = remaining_count_down.execute(ig_md.slot_cur);
            hdr.p4r.exp = exp_raise.execute(ig_md.slot_cur);
        }

        /*
         * TNA: the values are updated before the remaining count is examined
         * (they sit in later stages); a read for a packet that is then dropped
         * changes nothing.
         */
        VALUE_APPLY(00)
        VALUE_APPLY(01)
        VALUE_APPLY(02)
        VALUE_APPLY(03)
        VALUE_APPLY(04)
        VALUE_APPLY(05)
        VALUE_APPLY(06)
        VALUE_APPLY(07)
        VALUE_APPLY(08)
        VALUE_APPLY(09)
        VALUE_APPLY(10)
        VALUE_APPLY(11)
        VALUE_APPLY(12)
        VALUE_APPLY(13)
        VALUE_APPLY(14)
        VALUE_APPLY(15)
        VALUE_APPLY(16)
        VALUE_APPLY(17)
        VALUE_APPLY(18)
        VALUE_APPLY(19)
        VALUE_APPLY(20)
        VALUE_APPLY(21)
        VALUE_APPLY(22)
        VALUE_APPLY(23)
        VALUE_APPLY(24)
        VALUE_APPLY(25)
        VALUE_APPLY(26)
        VALUE_APPLY(27)
        VALUE_APPLY(28)
        VALUE_APPLY(29)
        VALUE_APPLY(30)
        VALUE_APPLY(31)

        if (ig_md.left != 0) {
            if (ig_md.step == STEP_REPLAY) {
                drop(DROP_EARLY_DUPLICATE);
            } else {
                ig_dprsr_md.drop_ctl = 1;   /* consumed into the slot; not a drop */
            }
            exit;
        }

        /* Turn the packet around as a RESULT. */
        hdr.p4r.msg_type = MSG_RESULT;
        hdr.ipv4.ttl = RESULT_TTL;
        hdr.udp.checksum = 0;
        if (ig_md.step == STEP_REPLAY) {
            bit<48> peer_mac = hdr.ethernet.src_addr;
            bit<32> peer_ip = hdr.ipv4.src_addr;
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = peer_mac;
            hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
            hdr.ipv4.dst_addr = peer_ip;
            hdr.udp.dst_port = hdr.udp.src_port;
            ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
            hdr.bridge.kind = PKT_KIND_REPLAY;
            job_replays.count((bit<32>) hdr.p4r.job_id);
        } else {
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
            ig_tm_md.mcast_grp_a = ig_md.job_mcast_grp;
            hdr.bridge.kind = PKT_KIND_RESULT;
            job_results_out.count((bit<32>) hdr.p4r.job_id);
        }
        hdr.udp.src_port = UDP_PORT;
    }
}

control IngressDeparser(packet_out pkt,
                        inout tna_headers_t hdr,
                        in ig_metadata_t ig_md,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    /* TNA: the IPv4 checksum of results is recomputed in the egress deparser, after the rewrite. */
    apply {
        pkt.emit(hdr);
    }
}

/* ------------------------------------------------------------------------ */

parser EgressParser(packet_in pkt,
                    out tna_headers_t hdr,
                    out eg_metadata_t eg_md,
                    out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        pkt.extract(hdr.ethernet);
        transition select(hdr.bridge.kind) {
            PKT_KIND_RESULT: parse_result;
            PKT_KIND_REPLAY: parse_result;
            default: accept;
        }
    }

    /* Only results are rewritten in egress; the values ride along unparsed. */
    state parse_result {
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.p4r);
        transition accept;
    }
}

control MyEgress(inout tna_headers_t hdr,
               inout eg_metadata_t eg_md,
               in egress_intrinsic_metadata_t eg_intr_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {

    Counter<bit<64>, bit<32>>(DROP_REASON_COUNT, CounterType_t.PACKETS_AND_BYTES) egress_drops;

    action set_result_dest(bit<48> dst_mac, bit<32> dst_ip, bit<16> dst_udp_port) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_ip;
        hdr.udp.dst_port = dst_udp_port;
    }

    action no_result_dest() {
        egress_drops.count(DROP_NO_RESULT_DEST);
        eg_dprsr_md.drop_ctl = 1;
    }

    /* TNA: the rid is eg_intr_md.egress_rid; the key keeps the v1model name for the controller. */
    table result_dest {
        key = {
            hdr.p4r.job_id: exact;
            eg_intr_md.egress_rid: exact @name("standard_metadata.egress_rid");
        }
        actions = { set_result_dest; no_result_dest; }
        default_action = no_result_dest();
        size = JOB_TABLE_SIZE;
    }

    apply {
        if (hdr.bridge.kind == PKT_KIND_FLOOD) {
            if (eg_intr_md.egress_port == hdr.bridge.ingress_port) {
                eg_dprsr_md.drop_ctl = 1;
            }
        } else if (hdr.bridge.kind == PKT_KIND_RESULT) {
            result_dest.apply();
        }
        hdr.bridge.setInvalid();
    }
}

control EgressDeparser(packet_out pkt,
                       inout tna_headers_t hdr,
                       in eg_metadata_t eg_md,
                       in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        /* hdr.ipv4 is parsed in egress only for results, so forwarded packets keep their checksum. */
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        pkt.emit(hdr);
    }
}

Pipeline(IngressParser(),
         MyIngress(),
         IngressDeparser(),
         EgressParser(),
         MyEgress(),
         EgressDeparser()) pipe;

Switch(pipe) main;
