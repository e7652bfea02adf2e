/*
 * p4reduce: in-network aggregation for distributed ML, v1model architecture
 * (bmv2 simple_switch_grpc and the embedded p4reduce-switch).
 *
 * docs/protocol.md is the specification this program implements (protocol
 * version 3: one switch, or a tree of them per job); docs/p4src.md walks through it. Compile for bmv2 with
 *     p4c --target bmv2 --arch v1model -I p4src --p4runtime-files p4reduce.p4info.txtpb p4reduce.p4
 * and choose K with -DVALUES_PER_PACKET=32|64|128|256, or 512|1024 on software targets (default 64).
 *
 * Names of controls, tables, actions, parameters and counters are a contract
 * with the controller, which resolves them by name from P4Info. The
 * controller never reads or writes registers (bmv2's P4Runtime server
 * cannot): everything it sets is in table entries, and the registers below
 * are the data plane's own state.
 */
#include <core.p4>
#include <v1model.p4>

#include "../common/constants.p4"
#include "../common/headers.p4"

/* Count a drop by reason and end ingress processing of this packet. */
#define INGRESS_DROP(reason) ingress_drops.count(reason); mark_to_drop(standard_metadata); exit

/*
 * One register per value, and the three things done to them, expanded K
 * times by P4R_FOR_EACH_VALUE (common/values.p4). `copy` is the register
 * index of the packet's slot copy.
 */
#define DECLARE_VALUE(i) register<bit<32>>(SLOT_REGISTER_SIZE) value##i;
#define STORE_VALUE(i) value##i.write(copy, hdr.vals.v##i);
#define ADD_VALUE(i) value##i.read(sum, copy); hdr.vals.v##i = hdr.vals.v##i + sum; value##i.write(copy, hdr.vals.v##i);
#define LOAD_VALUE(i) value##i.read(hdr.vals.v##i, copy);

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
    bit<32> key;
    bit<32> epoch;
    /* PKT_KIND_*: what ingress decided; multicast replicas carry it to egress */
    bit<8>  kind;
    /* upstream's answer for the job: where its partial sums go when the job's tree has a parent here */
    bit<9>  up_port;
    bit<48> up_dst_mac;
    bit<32> up_dst_ip;
    bit<32> up_src_ip;
    bit<16> up_job;
    bit<8>  up_rank;
    bit<32> up_key;
    /* from_parent's answer: the local job a parent's packet is about */
    bit<16> child_job;
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

    /*
     * DATA and RESULT carry the K values, and one that ends before them sets parser_error; every
     * other type is the header alone (QUERY from a member, MISSING, ABORT and STALE from a parent).
     */
    state parse_p4reduce {
        packet.extract(hdr.p4r);
        transition select(hdr.p4r.msg_type) {
            MSG_DATA: parse_values;
            MSG_RESULT: parse_values;
            default: accept;
        }
    }

    state parse_values {
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
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_duplicates;
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_replays;
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_missing;
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_aborts;
    counter(MAX_JOBS, CounterType.packets_and_bytes) job_queries;
    counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) ingress_drops;

    /*
     * Slot state. Per copy (index set * SLOT_COUNT + g): the use it holds
     * (copy_seq), the descriptor of that use's call (copy_call), who has
     * contributed (bitmap), how many contributions are missing (remaining),
     * the largest exponent (exp_max) and the K running sums. Per slot g: the
     * epoch of the job incarnation that last used it (owner). Per job: the
     * last call aborted, as epoch ++ call number (aborted). A job with a
     * parent also marks a complete copy whose partial sum went upstream and
     * whose result has not come back (awaiting). Whether any contribution
     * counted in the copy's use arrived with ECN CE (congested): its result
     * carries CE (docs/protocol.md, *Congestion*).
     */
    register<bit<32>>(SLOT_REGISTER_SIZE) copy_seq;
    register<bit<32>>(SLOT_REGISTER_SIZE) copy_call;
    register<bit<32>>(SLOT_REGISTER_SIZE) bitmap;
    register<bit<8>>(SLOT_REGISTER_SIZE) remaining;
    register<bit<8>>(SLOT_REGISTER_SIZE) exp_max;
    register<bit<8>>(SLOT_REGISTER_SIZE) awaiting;
    register<bit<8>>(SLOT_REGISTER_SIZE) congested;
    register<bit<32>>(SLOT_COUNT) owner;
    register<bit<48>>(MAX_JOBS) aborted;
    P4R_FOR_EACH_VALUE(DECLARE_VALUE)

    bit<32> slot_global = 0;  /* g = base + slot */
    bit<32> copy = 0;         /* register index of g in the packet's set */
    bit<32> last_owner = 0;
    bit<48> call_mark = 0;    /* epoch ++ this packet's call number */
    bit<48> abort_mark = 0;
    bit<32> held_seq = 0;     /* the use the copy holds */
    bit<32> held_call = 0;    /* its call descriptor */
    bit<32> age = 0;          /* seq - held_seq: how far this use is ahead of the copy's */
    bit<32> seen = 0;         /* the copy's bitmap before this packet */
    bit<8>  left = 0;         /* remaining contributions after this packet */
    bit<8>  max_exp = 0;
    bit<32> sum = 0;          /* scratch for ADD_VALUE */
    bit<48> peer_mac = 0;     /* scratch for swapping addresses */
    bit<32> peer_ip = 0;
    bit<8>  waiting = 0;      /* the copy's awaiting flag */
    bit<8>  ce = 0;           /* 1 when this packet arrived with ECN CE */
    bit<8>  marked = 0;       /* the copy's congested flag, this packet's CE included */
    bool aggregation = false;
    bool has_parent = false;  /* the job's tree continues above this switch (table upstream) */
    bool resend_up = false;   /* a parent's MISSING: this switch's partial sum goes up again */

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

    /* key: the rank's secret; epoch: the job incarnation's, owner of its slots (docs/protocol.md). */
    action set_job(bit<16> base, bit<16> pool_size, bit<8> num_workers, bit<32> worker_bit,
                   bit<16> mcast_grp, bit<9> sender_port, bit<32> sender_ip, bit<16> sender_udp_port,
                   bit<32> key, bit<32> epoch) {
        meta.base = base;
        meta.pool_size = pool_size;
        meta.num_workers = num_workers;
        meta.worker_bit = worker_bit;
        meta.job_mcast_grp = mcast_grp;
        meta.sender_port = sender_port;
        meta.sender_ip = sender_ip;
        meta.sender_udp_port = sender_udp_port;
        meta.key = key;
        meta.epoch = epoch;
    }

    action unknown_job() {
        ingress_drops.count(DROP_UNKNOWN_JOB);
        mark_to_drop(standard_metadata);
    }

    /* The controller reads K and the slot pool's size from these annotations in the P4Info. */
    @p4reduce_values_per_packet(VALUES_PER_PACKET)
    @p4reduce_slot_count(SLOT_COUNT)
    table job_table {
        key = {
            hdr.p4r.job_id: exact;
            hdr.p4r.rank: exact;
        }
        actions = { set_job; unknown_job; }
        default_action = unknown_job();
        size = JOB_TABLE_SIZE;
    }

    /*
     * A job whose tree has a parent above this switch (docs/protocol.md, *Aggregation trees*):
     * where its partial sums go, and who this switch is in the parent's instance of the job.
     */
    action set_upstream(bit<9> port, bit<48> parent_mac, bit<32> parent_ip, bit<32> own_ip,
                        bit<16> parent_job, bit<8> parent_rank, bit<32> parent_key) {
        meta.up_port = port;
        meta.up_dst_mac = parent_mac;
        meta.up_dst_ip = parent_ip;
        meta.up_src_ip = own_ip;
        meta.up_job = parent_job;
        meta.up_rank = parent_rank;
        meta.up_key = parent_key;
    }

    table upstream {
        key = { hdr.p4r.job_id: exact; }
        actions = { set_upstream; NoAction; }
        default_action = NoAction();
        size = JOB_TABLE_SIZE;
    }

    /*
     * The parent's packets about a job (RESULT, MISSING, ABORT, STALE), by the parent's job id and
     * address: the local job, its slots and group, the port the parent is behind and the key the
     * parent gives this switch.
     */
    action set_child(bit<16> job_id, bit<16> base, bit<16> pool_size, bit<16> mcast_grp,
                     bit<9> parent_port, bit<32> key, bit<32> epoch) {
        meta.child_job = job_id;
        meta.base = base;
        meta.pool_size = pool_size;
        meta.job_mcast_grp = mcast_grp;
        meta.sender_port = parent_port;
        meta.key = key;
        meta.epoch = epoch;
    }

    table from_parent {
        key = {
            hdr.p4r.job_id: exact;
            hdr.ipv4.src_addr: exact;
        }
        actions = { set_child; NoAction; }
        default_action = NoAction();
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
        if (hdr.p4r.msg_type < MSG_DATA || hdr.p4r.msg_type > MSG_QUERY) {
            INGRESS_DROP(DROP_BAD_TYPE);
        }
        if (hdr.p4r.msg_type == MSG_DATA || hdr.p4r.msg_type == MSG_RESULT) {
            if (hdr.ipv4.total_len != IPV4_AGG_LENGTH || hdr.udp.len != UDP_AGG_LENGTH) {
                INGRESS_DROP(DROP_BAD_LENGTH);
            }
        } else {
            if (hdr.ipv4.total_len != IPV4_NOTICE_LENGTH || hdr.udp.len != UDP_NOTICE_LENGTH) {
                INGRESS_DROP(DROP_BAD_LENGTH);
            }
        }

        if (hdr.p4r.msg_type != MSG_DATA && hdr.p4r.msg_type != MSG_QUERY) {
            /*
             * From above: a parent's RESULT, MISSING, ABORT or STALE about a job whose partial sums
             * this switch sends it (docs/protocol.md, *Aggregation trees*). Only an ABORT may also come
             * from below, from a child switch (a member of the job here): step 2 on.
             */
            if (from_parent.apply().hit) {
                if (standard_metadata.ingress_port != meta.sender_port || hdr.udp.src_port != UDP_PORT) {
                    INGRESS_DROP(DROP_WRONG_SENDER);
                }
                if (hdr.p4r.key != meta.key) {
                    INGRESS_DROP(DROP_BAD_KEY);
                }
                if ((bit<16>) hdr.p4r.slot >= meta.pool_size) {
                    INGRESS_DROP(DROP_SLOT_OUT_OF_RANGE);
                }
                slot_global = (bit<32>) meta.base + (bit<32>) hdr.p4r.slot;
                if (slot_global >= SLOT_COUNT) {
                    INGRESS_DROP(DROP_SLOT_OUT_OF_RANGE);
                }
                if (hdr.p4r.set == 0) {
                    copy = slot_global;
                } else {
                    copy = slot_global + SLOT_COUNT;
                }
                /* From here on the packet speaks of the local job: its group, its counters. */
                hdr.p4r.job_id = meta.child_job;
                owner.read(last_owner, slot_global);
                if (last_owner != meta.epoch) {
                    INGRESS_DROP(DROP_STALE);  /* the slot belongs to another job (incarnation) now */
                }
                copy_seq.read(held_seq, copy);
                bitmap.read(seen, copy);
                awaiting.read(waiting, copy);
                if (hdr.p4r.msg_type == MSG_STALE && (seen == 0 || held_seq != hdr.p4r.seq || waiting == 0)) {
                    /* A STALE about a use this switch no longer awaits: a late answer to a late question. */
                    INGRESS_DROP(DROP_STALE);
                }
                if (hdr.p4r.msg_type == MSG_ABORT || hdr.p4r.msg_type == MSG_STALE) {
                    /*
                     * The parent aborted the call (STALE while this switch awaits the use: the parent's
                     * copy moved past it, which only an abort this switch missed explains). Abort it here
                     * too and tell every member.
                     */
                    aborted.write((bit<32>) hdr.p4r.job_id, meta.epoch ++ hdr.p4r.seq[31:16]);
                    job_aborts.count((bit<32>) hdr.p4r.job_id);
                    hdr.p4r.msg_type = MSG_ABORT;
                    meta.kind = PKT_KIND_JOB;
                } else {
                    /* RESULT or MISSING: about a use whose partial sum this switch sent and still awaits. */
                    if (seen == 0 || held_seq != hdr.p4r.seq) {
                        INGRESS_DROP(DROP_STALE);
                    }
                    if (waiting == 0) {
                        INGRESS_DROP(DROP_DUPLICATE);  /* the result is in already */
                    }
                    congested.read(marked, copy);
                    if (hdr.p4r.msg_type == MSG_RESULT) {
                        /*
                         * The tree's sum: keep it for replays, and multicast it to the members. Its CE
                         * (congestion anywhere in the tree) stays with the copy for later replays.
                         */
                        P4R_FOR_EACH_VALUE(STORE_VALUE)
                        exp_max.write(copy, hdr.p4r.exp);
                        awaiting.write(copy, 0);
                        if ((hdr.ipv4.diffserv & ECN_MASK) == ECN_CE) {
                            marked = 1;
                            congested.write(copy, 1);
                        }
                        job_results_out.count((bit<32>) hdr.p4r.job_id);
                        meta.kind = PKT_KIND_JOB;
                    } else {
                        /*
                         * The parent lacks this switch's partial sum: send it again, from the copy
                         * (where to, upstream says below: bmv2 applies a table in one place only).
                         */
                        resend_up = true;
                        hdr.p4r.msg_type = MSG_DATA;
                        exp_max.read(hdr.p4r.exp, copy);
                        copy_call.read(hdr.p4r.call, copy);
                        hdr.p4r.aux = 0;
                        hdr.vals.setValid();
                        P4R_FOR_EACH_VALUE(LOAD_VALUE)
                        meta.kind = PKT_KIND_UP;
                    }
                }
            } else if (hdr.p4r.msg_type != MSG_ABORT) {
                INGRESS_DROP(DROP_BAD_TYPE);
            }
        }

        /*
         * The job's parent, if its tree has one above this switch: for a member's packet (step 2 on), and
         * for the copy a parent's MISSING sends up again. One place for both, since a bmv2 pipeline is a
         * graph in which each table has one place (p4c refuses a table applied where its successors differ).
         */
        if (meta.kind == PKT_KIND_FORWARD || resend_up) {
            has_parent = upstream.apply().hit;
        }
        if (resend_up && !has_parent) {
            INGRESS_DROP(DROP_UNKNOWN_JOB);
        }

        if (meta.kind == PKT_KIND_FORWARD) {
            if ((hdr.ipv4.diffserv & ECN_MASK) == ECN_CE) {
                ce = 1;
            }
            /* 2. Find the job (a miss is counted and dropped by unknown_job). */
            if (!job_table.apply().hit) {
                exit;
            }

            /* 3. Membership: only the registered host, holding the rank's key, speaks for (job_id, rank). */
            if (standard_metadata.ingress_port != meta.sender_port
                    || hdr.ipv4.src_addr != meta.sender_ip
                    || hdr.udp.src_port != meta.sender_udp_port) {
                INGRESS_DROP(DROP_WRONG_SENDER);
            }
            if (hdr.p4r.key != meta.key) {
                INGRESS_DROP(DROP_BAD_KEY);
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
                copy = slot_global;
            } else {
                copy = slot_global + SLOT_COUNT;
            }

            /*
             * 5. Ownership. A slot last used by another job, or by an earlier
             * incarnation of this job id, starts with both copies idle.
             */
            owner.read(last_owner, slot_global);
            if (last_owner != meta.epoch) {
                owner.write(slot_global, meta.epoch);
                bitmap.write(slot_global, 0);
                bitmap.write(slot_global + SLOT_COUNT, 0);
            }

            /*
             * 6. A call the switch has aborted is refused on every slot, and its sender told again;
             * below a parent the ABORT goes up again instead (the first may have been lost), and the
             * parent's answer comes down to every member.
             */
            call_mark = meta.epoch ++ hdr.p4r.seq[31:16];
            aborted.read(abort_mark, (bit<32>) hdr.p4r.job_id);
            if (abort_mark == call_mark) {
                ingress_drops.count(DROP_CALL_ABORTED);
                job_aborts.count((bit<32>) hdr.p4r.job_id);
                hdr.p4r.msg_type = MSG_ABORT;
                hdr.p4r.aux = 0;
                if (has_parent) {
                    meta.kind = PKT_KIND_UP;
                } else {
                    meta.kind = PKT_KIND_REPLY;
                }
            } else if (hdr.p4r.msg_type == MSG_ABORT) {
                /*
                 * A child switch's members disagree on the call: abort it here, and tell the parent
                 * (whose ABORT comes back down to every member) or, at the root, every member.
                 */
                aborted.write((bit<32>) hdr.p4r.job_id, call_mark);
                job_aborts.count((bit<32>) hdr.p4r.job_id);
                if (has_parent) {
                    meta.kind = PKT_KIND_UP;
                } else {
                    meta.kind = PKT_KIND_JOB;
                }
            } else {
                /*
                 * 7. The copy. Uses are ordered by seq with serial-number
                 * arithmetic: a use behind the copy's (age >= 2^31) is stale, one
                 * ahead of it (age in 1 .. 2^31-1) starts it afresh, the same use
                 * aggregates. An idle copy (no contributor) takes any use.
                 */
                bitmap.read(seen, copy);
                copy_seq.read(held_seq, copy);
                remaining.read(left, copy);
                age = hdr.p4r.seq - held_seq;
                if (age != 0 && age[31:31] == 1 && seen != 0) {
                    /*
                     * An earlier use of this copy: never added. A QUERY learns that the copy moved on
                     * (its rank missed an abort); a late DATA is dropped.
                     */
                    ingress_drops.count(DROP_STALE);
                    if (hdr.p4r.msg_type == MSG_DATA) {
                        mark_to_drop(standard_metadata);
                        exit;
                    }
                    hdr.p4r.msg_type = MSG_STALE;
                    hdr.p4r.aux = held_seq;
                    meta.kind = PKT_KIND_REPLY;
                } else if (hdr.p4r.msg_type == MSG_QUERY) {
                    /*
                     * A QUERY asks where its use is, without values, and only the asker is told, and
                     * only what it can act on: the result if complete; if its own contribution is
                     * missing, who has contributed (none, if no contribution has arrived), so that it
                     * resends. A rank whose contribution is in has nothing to do but wait: no answer.
                     * Below a parent, a use complete here whose result has not come down is asked
                     * after upstream, as a worker would: the parent replays it or says MISSING.
                     */
                    job_queries.count((bit<32>) hdr.p4r.job_id);
                    awaiting.read(waiting, copy);
                    if (seen != 0 && age == 0 && left != 0 && (seen & meta.worker_bit) != 0) {
                        ingress_drops.count(DROP_CONTRIBUTED);
                        mark_to_drop(standard_metadata);
                        exit;
                    } else if (seen != 0 && age == 0 && left == 0 && waiting != 0) {
                        meta.kind = PKT_KIND_UP;
                    } else if (seen != 0 && age == 0 && left == 0) {
                        hdr.p4r.msg_type = MSG_RESULT;
                        exp_max.read(hdr.p4r.exp, copy);
                        hdr.vals.setValid();
                        P4R_FOR_EACH_VALUE(LOAD_VALUE)
                        congested.read(marked, copy);
                        job_replays.count((bit<32>) hdr.p4r.job_id);
                        meta.kind = PKT_KIND_REPLY;
                    } else {
                        hdr.p4r.msg_type = MSG_MISSING;
                        if (seen != 0 && age == 0) {
                            hdr.p4r.aux = seen;
                        } else {
                            hdr.p4r.aux = 0;
                        }
                        job_missing.count((bit<32>) hdr.p4r.job_id);
                        meta.kind = PKT_KIND_REPLY;
                    }
                } else if (seen == 0 || age != 0) {
                    /*
                     * First contribution of a use (the copy is idle, or this use is ahead of
                     * the copy's): overwrite whatever an earlier use left.
                     */
                    job_data_in.count((bit<32>) hdr.p4r.job_id);
                    copy_seq.write(copy, hdr.p4r.seq);
                    copy_call.write(copy, hdr.p4r.call);
                    bitmap.write(copy, meta.worker_bit);
                    P4R_FOR_EACH_VALUE(STORE_VALUE)
                    exp_max.write(copy, hdr.p4r.exp);
                    left = meta.num_workers - 1;
                    remaining.write(copy, left);
                    awaiting.write(copy, 0);
                    congested.write(copy, ce);
                    marked = ce;
                    if (left != 0) {
                        /* Consumed into the slot; not a drop. */
                        mark_to_drop(standard_metadata);
                        exit;
                    }
                    meta.kind = PKT_KIND_JOB;
                } else if (left == 0 || (seen & meta.worker_bit) != 0) {
                    /* This rank's contribution is in already: a duplicate, never added twice. */
                    ingress_drops.count(DROP_DUPLICATE);
                    job_duplicates.count((bit<32>) hdr.p4r.job_id);
                    mark_to_drop(standard_metadata);
                    exit;
                } else {
                    copy_call.read(held_call, copy);
                    if (held_call != hdr.p4r.call) {
                        /*
                         * The ranks disagree on the call (size, dtype, operation): nothing is
                         * added, the call is aborted for every rank, and every later packet of
                         * it is refused (step 6). Below a parent the ABORT goes up, and comes
                         * back down to every member of the tree.
                         */
                        ingress_drops.count(DROP_CALL_MISMATCH);
                        job_aborts.count((bit<32>) hdr.p4r.job_id);
                        aborted.write((bit<32>) hdr.p4r.job_id, call_mark);
                        hdr.p4r.msg_type = MSG_ABORT;
                        hdr.p4r.aux = held_call;
                        meta.kind = PKT_KIND_JOB;
                    } else {
                        job_data_in.count((bit<32>) hdr.p4r.job_id);
                        bitmap.write(copy, seen | meta.worker_bit);
                        P4R_FOR_EACH_VALUE(ADD_VALUE)
                        exp_max.read(max_exp, copy);
                        if (hdr.p4r.exp > max_exp) {
                            exp_max.write(copy, hdr.p4r.exp);
                        } else {
                            hdr.p4r.exp = max_exp;
                        }
                        left = left - 1;
                        remaining.write(copy, left);
                        congested.read(marked, copy);
                        if (ce == 1) {
                            marked = 1;
                            congested.write(copy, 1);
                        }
                        if (left != 0) {
                            mark_to_drop(standard_metadata);
                            exit;
                        }
                        meta.kind = PKT_KIND_JOB;
                    }
                }
                if (has_parent && meta.kind == PKT_KIND_JOB) {
                    /*
                     * The use is complete here (or aborted): below a parent the packet, holding the
                     * partial sum (or the ABORT), goes up instead; the copy awaits the parent's result.
                     */
                    if (hdr.p4r.msg_type == MSG_DATA) {
                        awaiting.write(copy, 1);
                    }
                    meta.kind = PKT_KIND_UP;
                }
            }
        }

        /*
         * 8. Turn the packet around: it leaves from the aggregation address. A sum (a RESULT, a replay, a
         * partial going up, the copy sent up again) of a use some contribution of which arrived with CE
         * carries CE, if ECN-capable: congestion on any member's path reaches every rank.
         */
        if (marked != 0 && (hdr.p4r.msg_type == MSG_DATA || hdr.p4r.msg_type == MSG_RESULT)
                && (hdr.ipv4.diffserv & ECN_MASK) != 0) {
            hdr.ipv4.diffserv = hdr.ipv4.diffserv | ECN_CE;
        }
        if (meta.kind == PKT_KIND_UP) {
            /*
             * Up the tree: from this switch's own address in the parent's instance of the job, to the
             * parent's aggregation address. A partial sum stays DATA; a QUERY or ABORT is a header.
             */
            if (hdr.p4r.msg_type == MSG_DATA) {
                hdr.ipv4.total_len = IPV4_AGG_LENGTH;  /* a MISSING turned into the partial sum grows */
                hdr.udp.len = UDP_AGG_LENGTH;
            } else {
                hdr.vals.setInvalid();
                hdr.ipv4.total_len = IPV4_NOTICE_LENGTH;
                hdr.udp.len = UDP_NOTICE_LENGTH;
            }
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = meta.up_dst_mac;
            hdr.ipv4.src_addr = meta.up_src_ip;
            hdr.ipv4.dst_addr = meta.up_dst_ip;
            hdr.ipv4.ttl = RESULT_TTL;
            hdr.udp.src_port = UDP_PORT;
            hdr.udp.dst_port = UDP_PORT;
            hdr.udp.checksum = 0;
            hdr.p4r.job_id = meta.up_job;
            hdr.p4r.rank = meta.up_rank;
            hdr.p4r.key = meta.up_key;
            standard_metadata.egress_spec = meta.up_port;
            exit;
        }
        if (hdr.p4r.msg_type == MSG_DATA) {
            /* Still DATA: the last contribution completed the use; the packet now holds the sums. */
            hdr.p4r.msg_type = MSG_RESULT;
            job_results_out.count((bit<32>) hdr.p4r.job_id);
        }
        if (hdr.p4r.msg_type == MSG_RESULT) {
            hdr.ipv4.total_len = IPV4_AGG_LENGTH;
            hdr.udp.len = UDP_AGG_LENGTH;
        } else {
            /* MISSING, ABORT and STALE carry the header only. */
            hdr.vals.setInvalid();
            hdr.ipv4.total_len = IPV4_NOTICE_LENGTH;
            hdr.udp.len = UDP_NOTICE_LENGTH;
        }
        hdr.ipv4.ttl = RESULT_TTL;
        hdr.udp.checksum = 0;
        if (meta.kind == PKT_KIND_REPLY) {
            peer_mac = hdr.ethernet.src_addr;
            peer_ip = hdr.ipv4.src_addr;
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = peer_mac;
            hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
            hdr.ipv4.dst_addr = peer_ip;
            hdr.udp.dst_port = hdr.udp.src_port;
            standard_metadata.egress_spec = standard_metadata.ingress_port;
        } else {
            /* Destinations and keys are written per replica by MyEgress.result_dest. */
            hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
            hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
            standard_metadata.mcast_grp = meta.job_mcast_grp;
        }
        hdr.udp.src_port = UDP_PORT;
    }
}

control MyEgress(inout headers_t hdr,
               inout metadata_t meta,
               inout standard_metadata_t standard_metadata) {

    counter(DROP_REASON_COUNT, CounterType.packets_and_bytes) egress_drops;

    /* egress_rid is the rank the multicast group gave this replica; key is that rank's secret. */
    action set_result_dest(bit<48> dst_mac, bit<32> dst_ip, bit<16> dst_udp_port, bit<32> key) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_ip;
        hdr.udp.dst_port = dst_udp_port;
        hdr.p4r.key = key;
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

    /*
     * Where the target knows its queues (bmv2, Tofino), an ECN-capable packet of the switch's own
     * (answers, partial sums) leaving a port whose queue holds `depth` packets or more is marked CE; the
     * controller sets the depth per port, and a port without an entry never marks.
     */
    bit<19> ecn_depth = 0;
    bool ecn_marking = false;

    action set_ecn_threshold(bit<19> depth) {
        ecn_depth = depth;
        ecn_marking = true;
    }

    table ecn_threshold {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_ecn_threshold; NoAction; }
        default_action = NoAction();
        size = PORT_TABLE_SIZE;
    }

    apply {
        if (meta.kind == PKT_KIND_FLOOD) {
            /* Never flood a frame back out of the port it came in on. */
            if (standard_metadata.egress_port == standard_metadata.ingress_port) {
                mark_to_drop(standard_metadata);
            }
        } else if (meta.kind == PKT_KIND_JOB) {
            result_dest.apply();
        }
        if (meta.kind == PKT_KIND_JOB || meta.kind == PKT_KIND_REPLY || meta.kind == PKT_KIND_UP) {
            ecn_threshold.apply();
            if (ecn_marking && (hdr.ipv4.diffserv & ECN_MASK) != 0
                    && standard_metadata.enq_qdepth >= ecn_depth) {
                hdr.ipv4.diffserv = hdr.ipv4.diffserv | ECN_CE;
            }
        }
    }
}

/* Only packets the switch wrote itself get a new IPv4 checksum; forwarded ones pass untouched. */
control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid()
                && (meta.kind == PKT_KIND_JOB || meta.kind == PKT_KIND_REPLY || meta.kind == PKT_KIND_UP),
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
