/*
 * p4reduce for Tofino: TNA (Tofino 1, tna.p4) and T2NA (Tofino 2, t2na.p4),
 * protocol version 3 with K = VALUES_PER_PACKET values (default 64): one switch,
 * or a tree of them per job, this switch a root or a child (tables upstream and
 * from_parent; v1model's awaiting register is the value AWAITING of remaining).
 *
 * docs/protocol.md is the specification; p4src/v1model/p4reduce.p4 is the
 * executable reference of its semantics; docs/p4src.md explains both
 * programs and lists every difference, each marked "TNA:" below. Tables,
 * actions, action parameters and counters carry the v1model program's names
 * and widths: one controller serves both (tests/test_p4runtime_names.py checks it).
 *
 * Compiled with p4c 1.2.5.16 / p4c-barefoot 9.13.4 (issue 32; docs/p4src.md,
 * "Compiled with the open Tofino back end"): both chips with 0 errors, the
 * congested register and the tree child role included (Tofino 1 12 of 12
 * stages, 40 of 48 SALUs; Tofino 2 18 of 20 stages, 40 of 80 SALUs). The commands:
 *     p4c --target tofino  --arch tna  -I p4src -o OUT p4src/tna/p4reduce.p4
 *     p4c --target tofino2 --arch t2na -I p4src -o OUT p4src/tna/p4reduce.p4
 * (__TARGET_TOFINO__ selects the variant below).
 *
 * Rules the Tofino compiler imposes and v1model does not (issue 21;
 * docs/p4src.md lists them, tests/test_tna_rules.py checks what a reader can):
 *   - an action statement is one ALU operation at one width: operands of
 *     + - & | ^ have the destination's width; a cast only zero-extends a
 *     plain copy (x = (bit<32>) y), never an operand of arithmetic;
 *   - every field of a parser's out metadata is set in its start state;
 *   - a register or counter lives in one stage and is attached to tables
 *     that are mutually exclusive by control flow: each register is executed
 *     at most once on every path of a pass, in disjoint branches of one
 *     if/else tree, and each counter is counted at one place, at the end of
 *     the pass (so no `exit`: a `done` flag skips the steps after a verdict);
 *   - a RegisterAction (one stateful ALU) has two comparators on Tofino 1
 *     (four on Tofino 2), computes at most two values, and returns one word
 *     on Tofino 1 (four on Tofino 2): a half of the cell, a value it computes
 *     (32-bit and 8-bit cells only) or the constant 1 under a predicate;
 *   - a gateway (if) tests at most 4 bytes of PHV, so two fields are compared
 *     through an XOR or a difference computed in an action, tested against 0;
 *   - a table is applied at most once; the tables the program keeps to itself
 *     are @hidden, so the P4Info offers the controller the v1model names.
 *
 * Stage budget (docs/p4src.md, "Stage budget", gives the reasoning): one line
 * per data dependency, i.e. per MAU stage; SALU = stateful ALU, four per stage
 * on both chips.
 *   S0  job_table (set_job: job, XOR differences of sender and key); slot and
 *       call number widened to 32 bits; agg_addresses, l2_forward
 *   S1  g = base + slot, room = pool_size - slot; membership gateways;
 *       aborted (SALU: read-only check of epoch ++ call)
 *   S2  bounds gateways; copy index; owner (SALU: claim or look)
 *   S3  copy_seq (SALU: age of the packet's use against the copy's)
 *   S4  copy_call (SALU: store, or XOR with the packet's descriptor)
 *   S5  bitmap (SALU: start, add, check or read)
 *   S6  remaining, exp_max, congested (SALUs)
 *   S7  the answer: RESULT, replay, MISSING, consume, recirculate; a result
 *       of a congested copy is marked CE (Tofino 1: in the harvest pass)
 *   S8  the per-job counters (one call each, at the end of the first pass)
 *       and ingress_drops (after the passes' branches join)
 * Values: 32 pair registers (64 values, two per 64-bit cell) = 32 SALUs,
 * whose operation is known once the bitmap (S5) has answered.
 *   Tofino 2 (20 stages, 4 output words per SALU): one pass; the pairs take
 *       S7..S14 and each returns both halves: 16 of 20 stages, 40 of 80 SALUs.
 *   Tofino 1 (12 stages, 1 output word per SALU): S6..S11 could hold only 21
 *       pairs, and a pair returns one half per pass. So the first pass
 *       (S0..S8) decides, and the packet is recirculated (SwitchML's
 *       technique): the value pass stores or adds all 32 pairs (returning the
 *       high halves), and a completed use or a replay goes round once more,
 *       for the harvest pass (the low halves). The pairs use the SALUs the
 *       first pass leaves free: 40 of 48 SALUs, 9 of 12 stages deep.
 *   Both: a CALL_MISMATCH is resubmitted once, to mark its call aborted (the
 *       aborted register is read in S1, before the copy is known).
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#define P4R_HARVEST 0   /* TNA: a RegisterAction returns both halves of a pair: one pass */
#else
#include <tna.p4>
#define P4R_HARVEST 1   /* TNA: one output per RegisterAction: value and harvest passes */
#endif

#include "../common/constants.p4"
#include "../common/headers.p4"

#if SLOT_COUNT > 32768
#error "SLOT_COUNT must be at most 32768: the largest pool the TNA program is checked with (docs/p4src.md, Limits)"
#endif

/* ---- TNA-only numbers ---- */
#define PASS_VALUES      1   /* Tofino 1: recirculated pass that stores, adds or reads the values */
#define PASS_HARVEST     2   /* Tofino 1: recirculated pass that reads the other half of each pair */
#define VALUE_OP_NONE    0
#define VALUE_OP_STORE   1   /* first contribution of a use */
#define VALUE_OP_ADD     2   /* later contribution */
#define VALUE_OP_READ    3   /* replay (Tofino 1: the high halves) */
#define VALUE_OP_READ_LO 4   /* Tofino 1 harvest: the low halves */
#define VALUE_OP_SETTLE  5   /* tree child: the parent's RESULT replaces the copy's sums (remaining settles) */
#define VALUE_OP_RESEND  6   /* tree child: the parent's MISSING: the copy's sums go up again (read) */
#define VALUE_OP_LOOK    7   /* tree child: the parent's STALE: does the copy await its use? (remaining read) */
/*
 * TNA: v1model's awaiting register is the value AWAITING of remaining: a copy that completed below a
 * parent (its partial sum went up) holds AWAITING instead of 0 until the parent's RESULT settles it.
 * remaining counts at most 31 contributions, so AWAITING is no count; "complete" is 0 or AWAITING.
 * One register access, in the stage remaining has, and no stateful ALU more (docs/p4src.md).
 */
#define AWAITING       0x80
#define PENDING_SET0     1   /* owner.hi: set 0's copy still holds an earlier incarnation's state */
#define PENDING_SET1     2   /* owner.hi: set 1's copy still does */
#define RESUBMIT_ABORT   1   /* resubmit_type of a CALL_MISMATCH's second pass */
#define OUTCOME_NONE      0  /* what a pass counts per job (the counter calls at the end of ingress) */
#define OUTCOME_ADDED     1  /* a contribution consumed into its copy: job_data_in */
#define OUTCOME_RESULT    2  /* a contribution that completed its use: job_data_in, job_results_out */
#define OUTCOME_DUPLICATE 3  /* job_duplicates */
#define OUTCOME_REPLAY    4  /* job_queries, job_replays */
#define OUTCOME_MISSING   5  /* job_queries, job_missing */
#define OUTCOME_ABORT     6  /* job_aborts */
#define OUTCOME_SETTLED   7  /* the parent's RESULT, multicast to the members: job_results_out */
#define OUTCOME_QUERY_UP  8  /* a QUERY about a use awaiting the parent's result, sent up: job_queries */
#ifndef RECIRC_PORT_LOW
#define RECIRC_PORT_LOW  68  /* Tofino 1: port 68 of each pipe (pipe * 128 + 68) recirculates */
#endif
/*
 * TNA: where the first pass puts exp_max. Tofino 1 needs it only in the
 * recirculation header, and recirculate() cannot copy it there (recirc_h), so
 * the exp_max RegisterAction's output goes there directly; Tofino 2 answers in
 * the same pass, from metadata.
 */
#if P4R_HARVEST
#define P4R_EXP_OUT hdr.recirc.exp
#define P4R_CONGESTED_OUT hdr.recirc.congested
#else
#define P4R_EXP_OUT ig_md.exp_max
#define P4R_CONGESTED_OUT ig_md.congested
#endif

/* TNA: ingress and egress are separate programs; what ingress decided reaches egress here. */
header bridge_h {
    bit<8> kind;            /* PKT_KIND_* */
    bit<7> pad;
    bit<9> ingress_port;
}

/* TNA: the 64 bits a resubmitted CALL_MISMATCH carries into its second pass (PORT_METADATA_SIZE). */
header resubmit_h {
    bit<32> held_call;      /* the descriptor the copy holds: ABORT's aux */
    bit<32> pad;
}

/*
 * TNA (Tofino 1): what the first pass decided, in front of a recirculated packet.
 * An action may write a PHV container from at most two PHV sources, or from one
 * PHV source and constants (p4c-barefoot 9.13.4: "Tofino supports only two PHV
 * sources"), and the compiler packs these fields into few containers. So the
 * first pass writes each field where its value is decided, not all at once in
 * recirculate(): op in values_*(), exp by the exp_max RegisterAction, congested by
 * the congested RegisterAction, copy in copy_in_set*(), mcast_grp and reply_port
 * in set_job(), pass and kind (two constants) in recirculate().
 */
/*
 * TNA: kind, pass, op in this order: an action that writes part of a container must
 * write a contiguous part (recirculate() writes kind and pass, to_harvest() pass and op).
 */
header recirc_h {
    bit<8>  kind;           /* how the answer leaves: PKT_KIND_JOB, PKT_KIND_REPLY; FORWARD = consumed */
    bit<8>  pass;           /* PASS_VALUES, then PASS_HARVEST */
    bit<8>  op;             /* VALUE_OP_* */
    bit<8>  exp;            /* exp_max of the result */
    bit<32> copy;           /* register index of the copy (TNA: ig_md.copy's width, so that it is a plain copy) */
    bit<16> mcast_grp;      /* the job's group */
    bit<7>  pad;
    bit<9>  reply_port;     /* the sender's port */
    bit<8>  congested;      /* the copy's congested register: ECN_CE when the result carries CE */
}

struct tna_headers_t {
    resubmit_h        resubmit;    /* parsed on a resubmitted pass; never emitted */
    recirc_h          recirc;
    bridge_h          bridge;
    ethernet_t        ethernet;
    arp_t             arp;
    ipv4_t            ipv4;
    udp_t             udp;
    p4reduce_t        p4r;
    p4reduce_values_t vals;        /* the values the RegisterActions work on (Tofino 1: recirculated passes) */
#if P4R_HARVEST
    p4reduce_values_t carry;       /* Tofino 1: the values riding through the first pass, untouched */
#endif
}

/* TNA: a 64-bit register cell as two 32-bit halves (SwitchML's value pair). */
struct pair_t {
    bit<32> lo;
    bit<32> hi;
}

struct ig_metadata_t {
    bool    checksum_err;   /* the parser's IPv4 checksum unit: true when the checksum is wrong */
    /* job_table's answer; base and pool_size zero-extended so that the slot arithmetic is 32-bit */
    bit<32> base;
    bit<32> pool_size;
    bit<8>  num_workers;
    bit<32> worker_bit;
    bit<16> job_mcast_grp;
    bit<32> epoch;
    bit<1>  known;          /* TNA: job_table or from_parent hit; the miss is refused after the framing checks */
    bit<16> job;            /* the local job id (a parent's packet: set_child's); the per-job counters' index */
    bit<1>  parent;         /* from_parent hit: the packet is the parent's (RESULT, MISSING, ABORT, STALE) */
    /* upstream's answer: where the job's partial sums go when its tree has a parent here */
    bit<8>  up_mark;        /* AWAITING when the job has a parent (what remaining holds at completion), else 0 */
    bit<9>  up_port;
    bit<48> up_dst_mac;
    bit<32> up_dst_ip;
    bit<32> up_src_ip;
    bit<16> up_job;
    bit<8>  up_rank;
    bit<32> up_key;
    /* TNA: registered sender and key as XOR differences: 0 when the packet agrees */
    bit<9>  port_diff;
    bit<32> ip_diff;
    bit<16> udp_diff;
    bit<32> key_diff;
    /* the packet's place */
    bit<32> slot;           /* hdr.p4r.slot, zero-extended */
    bit<32> call_no;        /* seq[31:16], zero-extended: the aborted register's high half */
    bit<32> g;              /* base + slot */
    bit<32> room;           /* pool_size - slot: in range while non-zero and non-negative */
    bit<32> copy;           /* set * SLOT_COUNT + g */
    bit<9>  reply_port;     /* where an answer to the sender leaves */
    /* what the registers answered */
    bit<1>  aborted;        /* aborted[job_id] holds this call */
    bit<1>  fresh;          /* owner: the copy still holds an earlier incarnation's state, i.e. is idle */
    bit<32> age;            /* seq - copy_seq: 0 same use, >= 2^31 behind, else ahead (1 for an idle copy) */
    bit<32> call_diff;      /* call ^ copy_call */
    bit<32> seen;           /* QUERY: the copy's bitmap; DATA: the sender's bit if already in */
    bit<32> asker_in;       /* QUERY: seen & worker_bit, the asker's bit if its contribution is in */
    bit<8>  left;           /* remaining after this packet */
    bit<8>  exp_max;
    bit<8>  ecn;            /* the packet's ECN field (diffserv & ECN_MASK): ECN_CE when it arrived with CE */
    bit<8>  congested;      /* Tofino 2: the congested register after this packet (ECN_CE: the result carries CE) */
    bit<8>  value_op;       /* VALUE_OP_*: what the value registers do */
    /* what the pass decided, counted at its end */
    bit<1>  done;           /* the packet's fate is decided: later steps are skipped */
    bit<1>  l2;             /* not aggregation traffic: l2_forward decides */
    bit<8>  drop_reason;    /* DROP_*, 0 for none: ingress_drops */
    bit<8>  outcome;        /* OUTCOME_*: the per-job counters */
}

struct eg_metadata_t {
    bit<9> port_diff;       /* egress port ^ ingress port: 0 for the flood replica going back */
    bit<32> qdepth;         /* enq_qdepth, widened for the threshold's difference */
    bit<32> ecn_depth;      /* ecn_threshold's depth for the egress port */
    bit<32> over;           /* qdepth - ecn_depth: its top bit clear when the queue is at the threshold */
}

/* ------------------------------------------------------------------------ */

parser IngressParser(packet_in pkt,
                     out tna_headers_t hdr,
                     out ig_metadata_t ig_md,
                     out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        /* TNA (issue 21): every field of the out metadata is set here, before any other state. */
        ig_md.checksum_err = false;
        ig_md.base = 0;
        ig_md.pool_size = 0;
        ig_md.num_workers = 0;
        ig_md.worker_bit = 0;
        ig_md.job_mcast_grp = 0;
        ig_md.epoch = 0;
        ig_md.known = 0;
        ig_md.job = 0;
        ig_md.parent = 0;
        ig_md.up_mark = 0;
        ig_md.up_port = 0;
        ig_md.up_dst_mac = 0;
        ig_md.up_dst_ip = 0;
        ig_md.up_src_ip = 0;
        ig_md.up_job = 0;
        ig_md.up_rank = 0;
        ig_md.up_key = 0;
        ig_md.port_diff = 0;
        ig_md.ip_diff = 0;
        ig_md.udp_diff = 0;
        ig_md.key_diff = 0;
        ig_md.slot = 0;
        ig_md.call_no = 0;
        ig_md.g = 0;
        ig_md.room = 0;
        ig_md.copy = 0;
        ig_md.reply_port = 0;
        ig_md.aborted = 0;
        ig_md.fresh = 0;
        ig_md.age = 0;
        ig_md.call_diff = 0;
        ig_md.seen = 0;
        ig_md.asker_in = 0;
        ig_md.left = 0;
        ig_md.exp_max = 0;
        ig_md.ecn = 0;
        ig_md.congested = 0;
        ig_md.value_op = VALUE_OP_NONE;
        ig_md.done = 0;
        ig_md.l2 = 0;
        ig_md.drop_reason = 0;
        ig_md.outcome = OUTCOME_NONE;
        pkt.extract(ig_intr_md);
        transition select(ig_intr_md.resubmit_flag) {
            1: parse_resubmit;
            default: parse_port_metadata;
        }
    }

    /* TNA: a resubmitted packet carries its 64 bits of resubmit data where port metadata would be. */
    state parse_resubmit {
        pkt.extract(hdr.resubmit);
        transition parse_ethernet;
    }

    state parse_port_metadata {
        pkt.advance(PORT_METADATA_SIZE);
#if P4R_HARVEST
        transition select(ig_intr_md.ingress_port[6:0]) {
            RECIRC_PORT_LOW: parse_recirc;
            default: parse_ethernet;
        }
#else
        transition parse_ethernet;
#endif
    }

#if P4R_HARVEST
    /*
     * TNA (Tofino 1): a recirculated packet is one the first pass accepted (an option-less IPv4 / UDP
     * aggregation packet, checksum checked), so its headers are taken as they come, and its values go
     * to hdr.vals, which only these passes use (see carry and PHV below).
     */
    state parse_recirc {
        pkt.extract(hdr.recirc);
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.p4r);
        transition select(hdr.p4r.msg_type) {
            MSG_QUERY: accept;
            MSG_MISSING: accept;   /* a parent's MISSING: its value pass reads the copy into hdr.vals */
            default: parse_recirc_values;
        }
    }

    state parse_recirc_values {
        pkt.extract(hdr.vals);
        transition accept;
    }
#endif

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

    /* TNA: the checksum is verified by the parser's checksum unit. */
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

    /*
     * DATA and RESULT carry the K values, and one that ends before them is a parser error; every other
     * type is the header alone (QUERY from a member; MISSING, ABORT and STALE from a parent).
     */
    state parse_p4reduce {
        pkt.extract(hdr.p4r);
        transition select(hdr.p4r.msg_type) {
            MSG_DATA: parse_values;
            MSG_RESULT: parse_values;
            default: accept;
        }
    }

    state parse_values {
#if P4R_HARVEST
        pkt.extract(hdr.carry);   /* TNA (Tofino 1): the first pass only carries the values (PHV below) */
#else
        pkt.extract(hdr.vals);
#endif
        transition accept;
    }
}

/*
 * The value registers: one 64-bit cell holds values a and b (SwitchML's
 * pairs), and one hidden table per pair chooses the RegisterAction from
 * ig_md.value_op, so that each pair's register is attached to one table.
 */
#if P4R_HARVEST
/* Tofino 1: one output word, the high half; the harvest pass reads the low half. */
#define VALUE_PAIR(a, b) \
    Register<pair_t, bit<32>>(SLOT_REGISTER_SIZE) value##a##_##b; \
    RegisterAction<pair_t, bit<32>, bit<32>>(value##a##_##b) value##a##_##b##_store = { \
        void apply(inout pair_t v, out bit<32> hi) { \
            v.lo = hdr.vals.v##a; v.hi = hdr.vals.v##b; hi = v.hi; } }; \
    RegisterAction<pair_t, bit<32>, bit<32>>(value##a##_##b) value##a##_##b##_add = { \
        void apply(inout pair_t v, out bit<32> hi) { \
            v.lo = v.lo + hdr.vals.v##a; v.hi = v.hi + hdr.vals.v##b; hi = v.hi; } }; \
    RegisterAction<pair_t, bit<32>, bit<32>>(value##a##_##b) value##a##_##b##_read = { \
        void apply(inout pair_t v, out bit<32> hi) { hi = v.hi; } }; \
    RegisterAction<pair_t, bit<32>, bit<32>>(value##a##_##b) value##a##_##b##_read_lo = { \
        void apply(inout pair_t v, out bit<32> lo) { lo = v.lo; } }; \
    action value##a##_##b##_do_store() { hdr.vals.v##b = value##a##_##b##_store.execute(ig_md.copy); } \
    action value##a##_##b##_do_add() { hdr.vals.v##b = value##a##_##b##_add.execute(ig_md.copy); } \
    action value##a##_##b##_do_read() { hdr.vals.v##b = value##a##_##b##_read.execute(ig_md.copy); } \
    action value##a##_##b##_do_read_lo() { hdr.vals.v##a = value##a##_##b##_read_lo.execute(ig_md.copy); } \
    @hidden table value##a##_##b##_step { \
        key = { ig_md.value_op: exact; } \
        actions = { value##a##_##b##_do_store; value##a##_##b##_do_add; value##a##_##b##_do_read; \
                    value##a##_##b##_do_read_lo; NoAction; } \
        const entries = { \
            VALUE_OP_STORE: value##a##_##b##_do_store(); \
            VALUE_OP_ADD: value##a##_##b##_do_add(); \
            VALUE_OP_READ: value##a##_##b##_do_read(); \
            VALUE_OP_READ_LO: value##a##_##b##_do_read_lo(); \
        } \
        const default_action = NoAction(); \
        size = 8; \
    }
#else
/* Tofino 2: four output words; the second half comes back through execute's out argument. */
#define VALUE_PAIR(a, b) \
    Register<pair_t, bit<32>>(SLOT_REGISTER_SIZE) value##a##_##b; \
    RegisterAction<pair_t, bit<32>, bit<32>>(value##a##_##b) value##a##_##b##_store = { \
        void apply(inout pair_t v, out bit<32> lo, out bit<32> hi) { \
            v.lo = hdr.vals.v##a; v.hi = hdr.vals.v##b; lo = v.lo; hi = v.hi; } }; \
    RegisterAction<pair_t, bit<32>, bit<32>>(value##a##_##b) value##a##_##b##_add = { \
        void apply(inout pair_t v, out bit<32> lo, out bit<32> hi) { \
            v.lo = v.lo + hdr.vals.v##a; v.hi = v.hi + hdr.vals.v##b; lo = v.lo; hi = v.hi; } }; \
    RegisterAction<pair_t, bit<32>, bit<32>>(value##a##_##b) value##a##_##b##_read = { \
        void apply(inout pair_t v, out bit<32> lo, out bit<32> hi) { lo = v.lo; hi = v.hi; } }; \
    action value##a##_##b##_do_store() { \
        hdr.vals.v##a = value##a##_##b##_store.execute(ig_md.copy, hdr.vals.v##b); } \
    action value##a##_##b##_do_add() { \
        hdr.vals.v##a = value##a##_##b##_add.execute(ig_md.copy, hdr.vals.v##b); } \
    action value##a##_##b##_do_read() { \
        hdr.vals.v##a = value##a##_##b##_read.execute(ig_md.copy, hdr.vals.v##b); } \
    @hidden table value##a##_##b##_step { \
        key = { ig_md.value_op: exact; } \
        actions = { value##a##_##b##_do_store; value##a##_##b##_do_add; value##a##_##b##_do_read; NoAction; } \
        const entries = { \
            VALUE_OP_STORE: value##a##_##b##_do_store(); \
            VALUE_OP_ADD: value##a##_##b##_do_add(); \
            VALUE_OP_READ: value##a##_##b##_do_read(); \
            VALUE_OP_SETTLE: value##a##_##b##_do_store(); \
            VALUE_OP_RESEND: value##a##_##b##_do_read(); \
        } \
        const default_action = NoAction(); \
        size = 8; \
    }
#endif
#define VALUE_STEP(a, b) value##a##_##b##_step.apply();

#if P4R_HARVEST
/*
 * TNA (Tofino 1): PHV. Ingress has 3200 bits of normal PHV, and the 64 values alone take 2048 (a
 * RegisterAction reads them from PHV); with the first pass's state beside them the program did not fit
 * (p4c-barefoot 9.13.4: "PHV allocation was not successful"; docs/p4src.md). So the first pass never
 * touches the values: it parses them into hdr.carry, which no table reads or writes (the compiler may
 * keep such fields in tagalong containers, outside the MAU's PHV), and only the recirculated passes
 * parse them into hdr.vals. The state below is the first pass's alone (a recirculated pass neither
 * reads nor writes it), and hdr.vals is invalid in the first pass, so each field may share containers
 * with the values.
 */
@pa_mutually_exclusive("ingress", "ig_md.base", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.pool_size", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.num_workers", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.worker_bit", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.epoch", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.known", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.port_diff", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.ip_diff", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.udp_diff", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.key_diff", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.slot", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.call_no", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.g", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.room", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.aborted", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.fresh", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.call_diff", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.seen", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.asker_in", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.left", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.ecn", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.job", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.parent", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_mark", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_port", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_dst_mac", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_dst_ip", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_src_ip", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_job", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_rank", "hdr.vals")
@pa_mutually_exclusive("ingress", "ig_md.up_key", "hdr.vals")
#endif
control MyIngress(inout tna_headers_t hdr,
                  inout ig_metadata_t ig_md,
                  in ingress_intrinsic_metadata_t ig_intr_md,
                  in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                  inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                  inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Counter<bit<64>, bit<16>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_data_in;
    Counter<bit<64>, bit<16>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_results_out;
    Counter<bit<64>, bit<16>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_duplicates;
    Counter<bit<64>, bit<16>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_replays;
    Counter<bit<64>, bit<16>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_missing;
    Counter<bit<64>, bit<16>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_aborts;
    Counter<bit<64>, bit<16>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) job_queries;
    Counter<bit<64>, bit<8>>(DROP_REASON_COUNT, CounterType_t.PACKETS_AND_BYTES) ingress_drops;

    /*
     * owner[g]: TNA: a pair, lo = the epoch of the incarnation that last
     * used slot g, hi = PENDING_SET0 / PENDING_SET1 when a copy has not been
     * touched since the epoch changed. v1model clears both copies' bitmaps on
     * a new epoch; here the claim marks this copy idle (fresh) and the other
     * copy pending, and that copy is treated as idle when it is next touched.
     * Only a DATA that goes on to its copy claims; a QUERY only looks.
     */
    Register<pair_t, bit<32>>(SLOT_COUNT) owner;
    RegisterAction<pair_t, bit<32>, bit<1>>(owner) owner_claim0 = {
        void apply(inout pair_t o, out bit<1> fresh) {
            fresh = 0;
            if (o.lo != ig_md.epoch) {
                o.lo = ig_md.epoch;
                o.hi = PENDING_SET1;
                fresh = 1;
            } else if (o.hi == PENDING_SET0) {
                o.hi = 0;
                fresh = 1;
            }
        }
    };
    RegisterAction<pair_t, bit<32>, bit<1>>(owner) owner_claim1 = {
        void apply(inout pair_t o, out bit<1> fresh) {
            fresh = 0;
            if (o.lo != ig_md.epoch) {
                o.lo = ig_md.epoch;
                o.hi = PENDING_SET0;
                fresh = 1;
            } else if (o.hi == PENDING_SET1) {
                o.hi = 0;
                fresh = 1;
            }
        }
    };
    RegisterAction<pair_t, bit<32>, bit<1>>(owner) owner_look0 = {
        void apply(inout pair_t o, out bit<1> fresh) {
            fresh = 0;
            if (o.lo != ig_md.epoch || o.hi == PENDING_SET0) {
                fresh = 1;
            }
        }
    };
    RegisterAction<pair_t, bit<32>, bit<1>>(owner) owner_look1 = {
        void apply(inout pair_t o, out bit<1> fresh) {
            fresh = 0;
            if (o.lo != ig_md.epoch || o.hi == PENDING_SET1) {
                fresh = 1;
            }
        }
    };

    /* aborted[job_id]: TNA: a pair, lo = epoch, hi = call number (v1model: one bit<48> epoch ++ call). */
    Register<pair_t, bit<16>>(MAX_JOBS) aborted;
    RegisterAction<pair_t, bit<16>, bit<1>>(aborted) aborted_check = {
        void apply(inout pair_t a, out bit<1> hit) {
            hit = 0;
            if (a.lo == ig_md.epoch && a.hi == ig_md.call_no) {
                hit = 1;
            }
        }
    };
    /* The CALL_MISMATCH's second pass: says whether the call was aborted already, and marks it. */
    RegisterAction<pair_t, bit<16>, bit<1>>(aborted) aborted_mark = {
        void apply(inout pair_t a, out bit<1> hit) {
            hit = 0;
            if (a.lo == ig_md.epoch && a.hi == ig_md.call_no) {
                hit = 1;
            }
            a.lo = ig_md.epoch;
            a.hi = ig_md.call_no;
        }
    };

    /*
     * copy_seq: the RegisterAction compares the uses by serial-number
     * arithmetic (the signed 32-bit difference, bf-p4c's "uus" compare),
     * stores a use that is ahead, and returns age = seq - copy_seq from
     * before the store: 0 for the same use, >= 2^31 for a use behind.
     */
    Register<bit<32>, bit<32>>(SLOT_REGISTER_SIZE) copy_seq;
    RegisterAction<bit<32>, bit<32>, bit<32>>(copy_seq) seq_start = {
        void apply(inout bit<32> s, out bit<32> age) {
            s = hdr.p4r.seq;
            age = 1;    /* an idle copy takes any use: as if it were ahead */
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(copy_seq) seq_data = {
        void apply(inout bit<32> s, out bit<32> age) {
            age = hdr.p4r.seq - s;
            if ((int<32>) hdr.p4r.seq - (int<32>) s > 0) {
                s = hdr.p4r.seq;
            }
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(copy_seq) seq_look = {
        void apply(inout bit<32> s, out bit<32> age) {
            age = hdr.p4r.seq - s;
        }
    };

    /* copy_call: stored by a first contribution; XOR with the packet's descriptor for a later one. */
    Register<bit<32>, bit<32>>(SLOT_REGISTER_SIZE) copy_call;
    RegisterAction<bit<32>, bit<32>, bit<32>>(copy_call) call_store = {
        void apply(inout bit<32> c) {
            c = hdr.p4r.call;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(copy_call) call_read = {
        void apply(inout bit<32> c, out bit<32> diff) {
            diff = c ^ hdr.p4r.call;
        }
    };
    /* The parent's MISSING: the partial sum goes up again with the call it was summed for. */
    RegisterAction<bit<32>, bit<32>, bit<32>>(copy_call) call_get = {
        void apply(inout bit<32> c, out bit<32> call) {
            call = c;
        }
    };

    /*
     * bitmap: a later contribution sets its bit and learns in the same access
     * whether it was set already (a duplicate; setting it again changes
     * nothing). A complete copy has every rank's bit, so "complete" needs no
     * second register here.
     */
    Register<bit<32>, bit<32>>(SLOT_REGISTER_SIZE) bitmap;
    RegisterAction<bit<32>, bit<32>, bit<32>>(bitmap) bitmap_start = {
        void apply(inout bit<32> b) {
            b = ig_md.worker_bit;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(bitmap) bitmap_add = {
        void apply(inout bit<32> b, out bit<32> dup) {
            dup = b & ig_md.worker_bit;
            b = b | ig_md.worker_bit;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(bitmap) bitmap_check = {
        void apply(inout bit<32> b, out bit<32> dup) {
            dup = b & ig_md.worker_bit;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(bitmap) bitmap_read = {
        void apply(inout bit<32> b, out bit<32> seen) {
            seen = b;
        }
    };

    Register<bit<8>, bit<32>>(SLOT_REGISTER_SIZE) remaining;
    /* TNA: a use that completes below a parent awaits its result: AWAITING (up_mark), not 0. */
    RegisterAction<bit<8>, bit<32>, bit<8>>(remaining) remaining_start = {
        void apply(inout bit<8> r, out bit<8> left) {
            if (ig_md.num_workers == 1) {
                r = ig_md.up_mark;
            } else {
                r = ig_md.num_workers - 1;
            }
            left = r;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(remaining) remaining_count = {
        void apply(inout bit<8> r, out bit<8> left) {
            if (r == 1) {
                r = ig_md.up_mark;
            } else {
                r = r - 1;
            }
            left = r;
        }
    };
    /* The parent's RESULT: a copy that awaits it is settled (v1model: awaiting = 0); says what it held. */
    RegisterAction<bit<8>, bit<32>, bit<8>>(remaining) remaining_settle = {
        void apply(inout bit<8> r, out bit<8> left) {
            left = r;
            if (r == AWAITING) {
                r = 0;
            }
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(remaining) remaining_read = {
        void apply(inout bit<8> r, out bit<8> left) {
            left = r;
        }
    };

    Register<bit<8>, bit<32>>(SLOT_REGISTER_SIZE) exp_max;
    RegisterAction<bit<8>, bit<32>, bit<8>>(exp_max) exp_store = {
        void apply(inout bit<8> e, out bit<8> top) {
            e = hdr.p4r.exp;
            top = e;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(exp_max) exp_raise = {
        void apply(inout bit<8> e, out bit<8> top) {
            e = max(e, hdr.p4r.exp);
            top = e;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(exp_max) exp_read = {
        void apply(inout bit<8> e, out bit<8> top) {
            top = e;
        }
    };

    /*
     * TNA: remaining and exp_max are each reached through one hidden table keyed on the value
     * operation (as the value pairs are): three RegisterActions of one register in three implicit
     * tables must share a stage, and p4c-barefoot 9.13.4 placed the read and the start before the
     * bitmap's answer, which the count waits for ("was not able to allocate ... in the same stage
     * along with Register MyIngress.remaining").
     */
    action remaining_do_start() { ig_md.left = remaining_start.execute(ig_md.copy); }
    action remaining_do_count() { ig_md.left = remaining_count.execute(ig_md.copy); }
    action remaining_do_read() { ig_md.left = remaining_read.execute(ig_md.copy); }
    action remaining_do_settle() { ig_md.left = remaining_settle.execute(ig_md.copy); }

    @hidden table remaining_step {
        key = { ig_md.value_op: exact; }
        actions = { remaining_do_start; remaining_do_count; remaining_do_read; remaining_do_settle; NoAction; }
        const entries = {
            VALUE_OP_STORE: remaining_do_start();
            VALUE_OP_ADD: remaining_do_count();
            VALUE_OP_READ: remaining_do_read();
            VALUE_OP_SETTLE: remaining_do_settle();
            VALUE_OP_RESEND: remaining_do_read();
            VALUE_OP_LOOK: remaining_do_read();
        }
        const default_action = NoAction();
        size = 8;
    }

    /*
     * congested (docs/protocol.md, *Congestion*): whether a contribution counted in the copy's use
     * arrived with CE. TNA: the register holds the highest ECN field of those contributions, raised
     * like exp_max, which is ECN_CE exactly when one of them was CE (CE is the highest codepoint; an OR
     * of the fields would take ECT(0) and ECT(1) for CE), so one access needs no comparator. The first
     * contribution stores its field, a later counted one raises it, a QUERY reads it.
     */
    Register<bit<8>, bit<32>>(SLOT_REGISTER_SIZE) congested;
    RegisterAction<bit<8>, bit<32>, bit<8>>(congested) congested_start = {
        void apply(inout bit<8> c, out bit<8> marked) {
            c = ig_md.ecn;
            marked = c;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(congested) congested_raise = {
        void apply(inout bit<8> c, out bit<8> marked) {
            c = max(c, ig_md.ecn);
            marked = c;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(congested) congested_read = {
        void apply(inout bit<8> c, out bit<8> marked) {
            marked = c;
        }
    };

    action exp_do_store() { P4R_EXP_OUT = exp_store.execute(ig_md.copy); }
    action exp_do_raise() { P4R_EXP_OUT = exp_raise.execute(ig_md.copy); }
    action exp_do_read() { P4R_EXP_OUT = exp_read.execute(ig_md.copy); }

    @hidden table exp_max_step {
        key = { ig_md.value_op: exact; }
        actions = { exp_do_store; exp_do_raise; exp_do_read; NoAction; }
        const entries = {
            VALUE_OP_STORE: exp_do_store();
            VALUE_OP_ADD: exp_do_raise();
            VALUE_OP_READ: exp_do_read();
            VALUE_OP_SETTLE: exp_do_store();
            VALUE_OP_RESEND: exp_do_read();
        }
        const default_action = NoAction();
        size = 8;
    }

    /* TNA: Tofino 1 carries the verdict to the harvest pass, which answers (see recirc_h). */
    action congested_do_start() { P4R_CONGESTED_OUT = congested_start.execute(ig_md.copy); }
    action congested_do_raise() { P4R_CONGESTED_OUT = congested_raise.execute(ig_md.copy); }
    action congested_do_read() { P4R_CONGESTED_OUT = congested_read.execute(ig_md.copy); }

    @hidden table congested_step {
        key = { ig_md.value_op: exact; }
        actions = { congested_do_start; congested_do_raise; congested_do_read; NoAction; }
        const entries = {
            VALUE_OP_STORE: congested_do_start();
            VALUE_OP_ADD: congested_do_raise();
            VALUE_OP_READ: congested_do_read();
            VALUE_OP_SETTLE: congested_do_raise();   /* the RESULT's own CE: congestion anywhere in the tree */
            VALUE_OP_RESEND: congested_do_read();
        }
        const default_action = NoAction();
        size = 8;
    }

    P4R_FOR_EACH_PAIR(VALUE_PAIR)

    /*
     * ---- decisions and counts ----
     * TNA: a counter lives in one stage, so each is counted at one place,
     * at the end of the pass (the per-job counters at the end of the first
     * pass), from what the pass decided: drop_reason and outcome. `done` says the packet's fate is decided; the steps after it
     * are skipped (TNA: no `exit`, so that the counting is always reached).
     */

    action refuse(bit<8> reason) {
        ig_md.drop_reason = reason;
        ig_dprsr_md.drop_ctl = 1;
        ig_md.done = 1;
    }

    /* A refusal that is answered (STALE to a QUERY, CALL_ABORTED, CALL_MISMATCH): counted, not dropped. */
    action note_refusal(bit<8> reason) {
        ig_md.drop_reason = reason;
    }

    action counted_as(bit<8> outcome) {
        ig_md.outcome = outcome;
    }

    /* Consumed into the slot; not a drop. */
    action consume() {
        ig_dprsr_md.drop_ctl = 1;
        ig_md.done = 1;
    }

    /* ---- the v1model tables ---- */

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
        ig_md.done = 1;
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
        hdr.bridge.kind = PKT_KIND_FLOOD;
    }

    /* Not aggregation traffic: l2_forward decides (TNA: a flag, so that the L2 lookup is applied once). */
    action to_l2() {
        ig_md.l2 = 1;
    }

    table l2_forward {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = L2_TABLE_SIZE;
    }

    /*
     * TNA (issue 21): each statement is one ALU operation at one width. The
     * parameters keep the v1model widths; base and pool_size are
     * zero-extended by plain copies, and the sender and key checks become
     * XORs at each field's own width, tested against 0 by gateways.
     */
    action set_job(bit<16> base, bit<16> pool_size, bit<8> num_workers, bit<32> worker_bit,
                   bit<16> mcast_grp, bit<9> sender_port, bit<32> sender_ip, bit<16> sender_udp_port,
                   bit<32> key, bit<32> epoch) {
        ig_md.base = (bit<32>) base;
        ig_md.pool_size = (bit<32>) pool_size;
        ig_md.num_workers = num_workers;
        ig_md.worker_bit = worker_bit;
        ig_md.job_mcast_grp = mcast_grp;
        ig_md.port_diff = ig_intr_md.ingress_port ^ sender_port;
        ig_md.ip_diff = hdr.ipv4.src_addr ^ sender_ip;
        ig_md.udp_diff = hdr.udp.src_port ^ sender_udp_port;
        ig_md.key_diff = hdr.p4r.key ^ key;
        ig_md.epoch = epoch;
        ig_md.known = 1;
        ig_md.job = hdr.p4r.job_id;
#if P4R_HARVEST
        /* TNA (Tofino 1): what a recirculated pass needs of the job, written where known (see recirc_h). */
        hdr.recirc.mcast_grp = mcast_grp;
        hdr.recirc.pad = 0;
        hdr.recirc.reply_port = ig_intr_md.ingress_port;
#endif
    }

    /* TNA: the lookup runs before the framing checks are decided, so the miss is refused after them. */
    action unknown_job() {
        ig_md.known = 0;
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
     * TNA: up_mark is what remaining holds when a use completes here (AWAITING: it awaits the parent).
     */
    action set_upstream(bit<9> port, bit<48> parent_mac, bit<32> parent_ip, bit<32> own_ip,
                        bit<16> parent_job, bit<8> parent_rank, bit<32> parent_key) {
        ig_md.up_port = port;
        ig_md.up_dst_mac = parent_mac;
        ig_md.up_dst_ip = parent_ip;
        ig_md.up_src_ip = own_ip;
        ig_md.up_job = parent_job;
        ig_md.up_rank = parent_rank;
        ig_md.up_key = parent_key;
        ig_md.up_mark = AWAITING;
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
     * parent gives this switch. TNA: as set_job, the checks become XOR differences tested against 0,
     * and the packet speaks of the local job from here on (upstream, aborted, counters, result_dest).
     */
    action set_child(bit<16> job_id, bit<16> base, bit<16> pool_size, bit<16> mcast_grp,
                     bit<9> parent_port, bit<32> key, bit<32> epoch) {
        hdr.p4r.job_id = job_id;
        ig_md.job = job_id;
        ig_md.base = (bit<32>) base;
        ig_md.pool_size = (bit<32>) pool_size;
        ig_md.job_mcast_grp = mcast_grp;
        ig_md.port_diff = ig_intr_md.ingress_port ^ parent_port;
        ig_md.udp_diff = hdr.udp.src_port ^ UDP_PORT;
        ig_md.key_diff = hdr.p4r.key ^ key;
        ig_md.epoch = epoch;
        ig_md.known = 1;
        ig_md.parent = 1;
#if P4R_HARVEST
        hdr.recirc.mcast_grp = mcast_grp;
        hdr.recirc.pad = 0;
        hdr.recirc.reply_port = ig_intr_md.ingress_port;
#endif
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

    /* ---- the steps between the tables and the registers, one width each ---- */

    /* Every pass starts here: egress learns the packet kind and the ingress port. */
    action begin_pass() {
        hdr.bridge.setValid();
        hdr.bridge.kind = PKT_KIND_FORWARD;
        hdr.bridge.pad = 0;
        hdr.bridge.ingress_port = ig_intr_md.ingress_port;
    }

    /* Plain zero-extending copies (issue 21: the sums below then have 32-bit operands only). */
    action widen() {
        ig_md.slot = (bit<32>) hdr.p4r.slot;
        ig_md.call_no = (bit<32>) hdr.p4r.seq[31:16];
        ig_md.reply_port = ig_intr_md.ingress_port;   /* TNA: here, not in begin_pass(): a recirculated pass sets it from recirc_h */
        ig_md.ecn = hdr.ipv4.diffserv & ECN_MASK;
    }

    action locate() {
        ig_md.g = ig_md.base + ig_md.slot;
        ig_md.room = ig_md.pool_size - ig_md.slot;
    }

    action copy_in_set0() {
        ig_md.copy = ig_md.g;
#if P4R_HARVEST
        hdr.recirc.copy = ig_md.g;   /* TNA: written where decided (see recirc_h) */
#endif
    }

    action copy_in_set1() {
        ig_md.copy = ig_md.g + SLOT_COUNT;
#if P4R_HARVEST
        hdr.recirc.copy = ig_md.g + SLOT_COUNT;
#endif
    }

    /* A QUERY for an idle copy: no contribution has arrived, as for a use ahead of the copy's. */
    action idle_copy() {
        ig_md.age = 1;
    }

    /* STALE's aux is the use the copy holds: seq - age. */
    action stale_aux() {
        hdr.p4r.aux = hdr.p4r.seq - ig_md.age;
    }

    /*
     * TNA: a gateway compares a field with a constant; "seen & worker_bit"
     * of two fields is computed here and tested against 0 (p4c-barefoot:
     * "condition too complex, one operand of & must be constant").
     */
    action asker_check() {
        ig_md.asker_in = ig_md.seen & ig_md.worker_bit;
    }

    action missing_aux() {
        hdr.p4r.aux = ig_md.seen;
    }

    action abort_aux() {
        hdr.p4r.aux = hdr.resubmit.held_call;
    }

    action no_aux() {
        hdr.p4r.aux = 0;
    }

    /* TNA: the second pass of a CALL_MISMATCH marks the call aborted (the aborted register was read in S1). */
    action resubmit_mismatch() {
        hdr.resubmit.setValid();
        hdr.resubmit.held_call = ig_md.call_diff ^ hdr.p4r.call;
        hdr.resubmit.pad = 0;
        ig_dprsr_md.resubmit_type = RESUBMIT_ABORT;
        ig_md.done = 1;
    }

    action values_read() {
        ig_md.value_op = VALUE_OP_READ;
#if P4R_HARVEST
        hdr.recirc.op = VALUE_OP_READ;   /* TNA: written where decided (see recirc_h) */
#else
        hdr.vals.setValid();   /* the replay's values, read in this pass */
#endif
    }

    /* A QUERY for a use the copy does not hold: nothing to replay, nobody has contributed (seen = 0). */
    action not_collected() {
        ig_md.left = 1;
    }

    action values_store() {
        ig_md.value_op = VALUE_OP_STORE;
#if P4R_HARVEST
        hdr.recirc.op = VALUE_OP_STORE;
#endif
    }

    action values_add() {
        ig_md.value_op = VALUE_OP_ADD;
#if P4R_HARVEST
        hdr.recirc.op = VALUE_OP_ADD;
#endif
    }

    /* Tree child: the parent's RESULT is stored as the copy's sums (the value pass stores it). */
    action values_settle() {
        ig_md.value_op = VALUE_OP_SETTLE;
#if P4R_HARVEST
        hdr.recirc.op = VALUE_OP_STORE;
#endif
    }

    /* Tree child: the parent's MISSING: the copy's sums are read, to go up again. */
    action values_resend() {
        hdr.p4r.call = call_get.execute(ig_md.copy);
        ig_md.value_op = VALUE_OP_RESEND;
#if P4R_HARVEST
        hdr.recirc.op = VALUE_OP_READ;
#else
        hdr.vals.setValid();
#endif
    }

    action values_look() {
        ig_md.value_op = VALUE_OP_LOOK;
    }

    /* TNA: the second pass of a parent's ABORT (or STALE) marks the call aborted (aborted is in S1). */
    action resubmit_parent_abort() {
        hdr.resubmit.setValid();
        hdr.resubmit.held_call = 0;
        hdr.resubmit.pad = 0;
        ig_dprsr_md.resubmit_type = RESUBMIT_ABORT;
        ig_md.done = 1;
    }

    /* ---- the answer (docs/protocol.md step 8) ---- */

    action result_size() {
        hdr.p4r.msg_type = MSG_RESULT;
        hdr.p4r.exp = ig_md.exp_max;
        hdr.ipv4.total_len = IPV4_AGG_LENGTH;
        hdr.udp.len = UDP_AGG_LENGTH;
    }

    /*
     * A result (multicast at completion, or replayed) of a use some counted contribution of which
     * arrived with CE leaves with CE, if ECN-capable: congestion on any member's path reaches every
     * rank (docs/protocol.md, *Congestion*). Notices are not marked.
     */
    action mark_congested() {
        hdr.ipv4.diffserv = hdr.ipv4.diffserv | ECN_CE;
    }

    /* A partial sum going up (a use completed here, or sent again for the parent's MISSING). */
    action data_up_size() {
        hdr.p4r.msg_type = MSG_DATA;
        hdr.p4r.exp = ig_md.exp_max;
        hdr.ipv4.total_len = IPV4_AGG_LENGTH;
        hdr.udp.len = UDP_AGG_LENGTH;
    }

    /* MISSING, ABORT and STALE carry the header only. */
    action notice_size(bit<8> msg_type) {
        hdr.p4r.msg_type = msg_type;
        hdr.vals.setInvalid();
#if P4R_HARVEST
        hdr.carry.setInvalid();
#endif
        hdr.ipv4.total_len = IPV4_NOTICE_LENGTH;
        hdr.udp.len = UDP_NOTICE_LENGTH;
    }

    /* Destinations and keys are written per replica by MyEgress.result_dest. */
    action answer_to_job() {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.ttl = RESULT_TTL;
        hdr.udp.src_port = UDP_PORT;
        hdr.udp.checksum = 0;
        ig_tm_md.mcast_grp_a = ig_md.job_mcast_grp;
        hdr.bridge.kind = PKT_KIND_JOB;
        hdr.recirc.setInvalid();
        ig_md.done = 1;
    }

    action answer_to_sender() {
        bit<48> peer_mac = hdr.ethernet.src_addr;
        bit<32> peer_ip = hdr.ipv4.src_addr;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = peer_mac;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = peer_ip;
        hdr.ipv4.ttl = RESULT_TTL;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = UDP_PORT;
        hdr.udp.checksum = 0;
        ig_tm_md.ucast_egress_port = ig_md.reply_port;
        hdr.bridge.kind = PKT_KIND_REPLY;
        hdr.recirc.setInvalid();
        ig_md.done = 1;
    }

    /*
     * Up the tree (packet kind UP): from this switch's own address in the parent's instance of the job,
     * to the parent's aggregation address, as the parent's rank with its key. Tofino 1 rewrites the
     * headers in the first pass and sends from the harvest pass, out of recirc_h.reply_port.
     */
    action up_headers() {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = ig_md.up_dst_mac;
        hdr.ipv4.src_addr = ig_md.up_src_ip;
        hdr.ipv4.dst_addr = ig_md.up_dst_ip;
        hdr.ipv4.ttl = RESULT_TTL;
        hdr.udp.src_port = UDP_PORT;
        hdr.udp.dst_port = UDP_PORT;
        hdr.udp.checksum = 0;
        hdr.p4r.job_id = ig_md.up_job;
        hdr.p4r.rank = ig_md.up_rank;
        hdr.p4r.key = ig_md.up_key;
#if P4R_HARVEST
        hdr.recirc.reply_port = ig_md.up_port;
#endif
    }

    action send_up() {
        ig_tm_md.ucast_egress_port = ig_md.up_port;
        hdr.bridge.kind = PKT_KIND_UP;
        hdr.recirc.setInvalid();
        ig_md.done = 1;
    }

    /*
     * TNA: each decision is one action (these call the steps above): the compiler makes a table of
     * every action call in the apply block, and a stage holds 16 tables, so a decision spelt as
     * five calls took five of them.
     */
    /* A call the switch has aborted: ABORT to the sender alone, aux 0 (CALL_ABORTED). */
    action abort_to_sender() {
        note_refusal(DROP_CALL_ABORTED);
        counted_as(OUTCOME_ABORT);
        no_aux();
        notice_size(MSG_ABORT);
        answer_to_sender();
    }

    /* The CALL_MISMATCH's second pass: ABORT to the job, aux = the descriptor the copy held. */
    action abort_to_job() {
        note_refusal(DROP_CALL_MISMATCH);
        counted_as(OUTCOME_ABORT);
        abort_aux();
        notice_size(MSG_ABORT);
        answer_to_job();
    }

    /* A QUERY for a use behind the copy's: STALE to the asker, aux = the use the copy holds. */
    action stale_to_asker() {
        note_refusal(DROP_STALE);
        stale_aux();
        notice_size(MSG_STALE);
        answer_to_sender();
    }

    /* The asker's contribution is missing (aux: who contributed) or none has arrived (aux 0). */
    action missing_to_asker() {
        counted_as(OUTCOME_MISSING);
        missing_aux();
        notice_size(MSG_MISSING);
        answer_to_sender();
    }

    action duplicate() {
        refuse(DROP_DUPLICATE);
        counted_as(OUTCOME_DUPLICATE);
    }

    /* Below a parent: a call the switch has aborted is told to the parent again (its ABORT comes down). */
    action abort_up() {
        note_refusal(DROP_CALL_ABORTED);
        counted_as(OUTCOME_ABORT);
        no_aux();
        notice_size(MSG_ABORT);
        up_headers();
        send_up();
    }

    /* Below a parent: the CALL_MISMATCH's second pass sends the ABORT up, and it comes down to all. */
    action mismatch_up() {
        note_refusal(DROP_CALL_MISMATCH);
        counted_as(OUTCOME_ABORT);
        abort_aux();
        notice_size(MSG_ABORT);
        up_headers();
        send_up();
    }

    /* The parent's ABORT (or STALE about the use this copy awaits), second pass: ABORT to the job. */
    action abort_from_parent() {
        counted_as(OUTCOME_ABORT);
        notice_size(MSG_ABORT);
        answer_to_job();
    }

    /* A QUERY about a use complete here that awaits the parent's result: asked after upstream. */
    action query_up() {
        counted_as(OUTCOME_QUERY_UP);
        notice_size(MSG_QUERY);
        up_headers();
        send_up();
    }

#if P4R_HARVEST
    /*
     * TNA (Tofino 1): hand the packet to the value pass through the pipe's
     * recirculation port. One port and one queue per pipe keep the value
     * operations of a copy in the order the first pass decided them.
     */
    action recirculate(bit<8> kind) {
        hdr.bridge.setInvalid();
        hdr.recirc.setValid();
        /* TNA: two constants only; the other fields were written where they were decided (recirc_h). */
        hdr.recirc.pass = PASS_VALUES;
        hdr.recirc.kind = kind;
        ig_tm_md.bypass_egress = 1;
        ig_tm_md.ucast_egress_port[8:7] = ig_intr_md.ingress_port[8:7];
        ig_tm_md.ucast_egress_port[6:0] = RECIRC_PORT_LOW;
        ig_md.done = 1;
    }

    /* A recirculated pass: what the first pass decided. */
    action resume() {
        ig_md.value_op = hdr.recirc.op;
        ig_md.copy = hdr.recirc.copy;
        ig_md.exp_max = hdr.recirc.exp;
        ig_md.job_mcast_grp = hdr.recirc.mcast_grp;
        ig_md.reply_port = hdr.recirc.reply_port;
    }

    /* The value pass of a result: once more through the recirculation port, for the low halves. */
    action to_harvest() {
        hdr.bridge.setInvalid();
        hdr.recirc.pass = PASS_HARVEST;
        hdr.recirc.op = VALUE_OP_READ_LO;
        hdr.p4r.msg_type = MSG_RESULT;   /* so that the harvest pass parses the values */
        ig_tm_md.bypass_egress = 1;
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }
#endif

    action result_to_job() {
        result_size();
        answer_to_job();
    }

    action result_to_sender() {
        result_size();
        answer_to_sender();
    }

    /* The answers of step 8; Tofino 1 hands them to the value pass (recirculate), Tofino 2 answers now. */
    action replay() {
        counted_as(OUTCOME_REPLAY);
#if P4R_HARVEST
        recirculate(PKT_KIND_REPLY);
#else
        result_to_sender();
#endif
    }

    action added() {
        counted_as(OUTCOME_ADDED);
#if P4R_HARVEST
        recirculate(PKT_KIND_FORWARD);
#else
        consume();
#endif
    }

    action completed() {
        counted_as(OUTCOME_RESULT);
#if P4R_HARVEST
        recirculate(PKT_KIND_JOB);
#else
        result_to_job();
#endif
    }

    /* Below a parent the completed use's partial sum goes up instead (counted as data in, not a result). */
    action completed_up() {
        counted_as(OUTCOME_ADDED);
        up_headers();
#if P4R_HARVEST
        recirculate(PKT_KIND_UP);
#else
        data_up_size();
        send_up();
#endif
    }

    /* The parent's RESULT for the use this copy awaits: stored, and multicast to the members. */
    action settled() {
        counted_as(OUTCOME_SETTLED);
#if P4R_HARVEST
        recirculate(PKT_KIND_JOB);
#else
        result_to_job();
#endif
    }

    /* The parent's MISSING: the copy's partial sum goes up again (TNA (Tofino 1): stays MISSING until harvest). */
    action resend_up() {
        no_aux();
        up_headers();
#if P4R_HARVEST
        recirculate(PKT_KIND_UP);
#else
        data_up_size();
        send_up();
#endif
    }

    /*
     * TNA: the tree role's decisions are hidden tables with constant entries rather than if/else chains
     * of action calls: every call is a logical table, a stage holds 16 (ingress and egress together),
     * and with the chains the first pass crowded the value pairs of Tofino 1's recirculated passes out
     * of stages 2 to 5 and 9 (15 stages; docs/p4src.md). Each is applied where the chain stood.
     */
    /* The second pass of a resubmitted packet: a parent's ABORT, or a CALL_MISMATCH (aborted already?). */
    @hidden table second_pass_answer {
        key = { ig_md.parent: exact; ig_md.aborted: exact; ig_md.up_mark: exact; }
        actions = { abort_from_parent; abort_up; abort_to_sender; mismatch_up; abort_to_job; }
        const entries = {
            (1, 0, 0): abort_from_parent();
            (1, 0, AWAITING): abort_from_parent();
            (1, 1, 0): abort_from_parent();
            (1, 1, AWAITING): abort_from_parent();
            (0, 1, 0): abort_to_sender();
            (0, 1, AWAITING): abort_up();       /* below a parent the ABORT goes up again */
            (0, 0, 0): abort_to_job();
            (0, 0, AWAITING): mismatch_up();
        }
        const default_action = abort_to_job();
        size = 8;
    }

    /* Step 6: a call the switch has aborted; below a parent the ABORT goes up, and comes down to all. */
    @hidden table aborted_answer {
        key = { ig_md.up_mark: exact; }
        actions = { abort_to_sender; abort_up; }
        const entries = {
            0: abort_to_sender();
            AWAITING: abort_up();
        }
        const default_action = abort_to_sender();
        size = 2;
    }

    /*
     * The parent's packet, once the copy is known: an ABORT aborts the call (second pass); a RESULT,
     * MISSING or STALE must be about the use the copy holds (age 0), else it is a late answer (STALE).
     * TNA: owner is looked at, so a copy untouched since its slot changed epoch (fresh) is STALE too
     * (v1model: only another epoch; there a parent's ABORT would still abort the call).
     */
    @hidden table parent_step {
        key = { ig_md.fresh: exact; hdr.p4r.msg_type: exact; ig_md.age: ternary; }
        actions = { resubmit_parent_abort; values_settle; values_resend; values_look; refuse; }
        const entries = {
            (0, MSG_ABORT, _): resubmit_parent_abort();
            (0, MSG_RESULT, 0): values_settle();
            (0, MSG_MISSING, 0): values_resend();
            (0, MSG_STALE, 0): values_look();
        }
        const default_action = refuse(DROP_STALE);
        size = 8;
    }

    /*
     * The parent's RESULT, MISSING or STALE about the use the copy holds: only a copy that awaits the
     * parent (remaining = AWAITING) takes it; else a RESULT or MISSING is a DUPLICATE (the result is in
     * already) and a STALE is dropped as STALE. A MISSING needs upstream (UNKNOWN_JOB without it).
     */
    @hidden table parent_answer {
        key = { ig_md.value_op: exact; ig_md.left: ternary; ig_md.up_mark: ternary; }
        actions = { settled; resend_up; resubmit_parent_abort; refuse; }
        const entries = {
            (VALUE_OP_SETTLE, AWAITING, _): settled();
            (VALUE_OP_RESEND, AWAITING, AWAITING): resend_up();
            (VALUE_OP_RESEND, AWAITING, _): refuse(DROP_UNKNOWN_JOB);
            (VALUE_OP_LOOK, AWAITING, _): resubmit_parent_abort();   /* the parent moved past it: an abort missed here */
            (VALUE_OP_LOOK, _, _): refuse(DROP_STALE);
        }
        const default_action = refuse(DROP_DUPLICATE);
        size = 8;
    }

#if P4R_HARVEST
    /* Tofino 1, harvest pass: the partial sum leaves for the parent (headers rewritten in the first pass). */
    action data_up_harvest() {
        data_up_size();
        ig_tm_md.ucast_egress_port = ig_md.reply_port;
        hdr.bridge.kind = PKT_KIND_UP;
        hdr.recirc.setInvalid();
        ig_md.done = 1;
    }
#endif

    /*
     * TNA: no `exit`. Every register's RegisterActions sit in disjoint
     * branches of one if/else tree (the compiler attaches a register to
     * tables that are mutually exclusive by control flow only), and the
     * counting at the end is reached by every pass.
     */
    apply {
        begin_pass();

#if P4R_HARVEST
        if (hdr.recirc.isValid()) {
            /* TNA (Tofino 1): a recirculated pass: the values the first pass left to it. */
            resume();
            if (hdr.recirc.pass == PASS_HARVEST) {
                /* The copy must still hold the use (the host rules guarantee it; docs/p4src.md). */
                ig_md.age = seq_look.execute(ig_md.copy);
                /* The first pass's congested verdict (recirc_h), for the result this pass sends. */
                if (hdr.recirc.congested == ECN_CE && (hdr.ipv4.diffserv & ECN_MASK) != 0) {
                    mark_congested();
                }
            } else if (hdr.recirc.op == VALUE_OP_READ) {
                hdr.vals.setValid();   /* a replay answers a QUERY, which had no values */
            }
            P4R_FOR_EACH_PAIR(VALUE_STEP)
            if (hdr.recirc.pass == PASS_VALUES) {
                if (hdr.recirc.kind == PKT_KIND_FORWARD) {
                    consume();
                } else {
                    to_harvest();
                }
            } else if (ig_md.age != 0) {
                refuse(DROP_STALE);
            } else if (hdr.recirc.kind == PKT_KIND_JOB) {
                result_to_job();
            } else if (hdr.recirc.kind == PKT_KIND_UP) {
                data_up_harvest();
            } else {
                result_to_sender();
            }
        } else {
#endif
        /*
         * TNA: the job is looked up at once, beside the framing checks, and decided after them:
         * the stage budget has no room for a chain of lookups (ARP, addresses, L2, job) one after
         * another. The lookup changes nothing but metadata (ig_md.known and what set_job loads).
         */
        widen();
        if (hdr.p4r.isValid()) {
            /* A member's DATA and QUERY, or a parent's packet (the other types): one lookup each. */
            if (hdr.p4r.msg_type == MSG_DATA || hdr.p4r.msg_type == MSG_QUERY) {
                job_table.apply();
            } else {
                from_parent.apply();
            }
            /* Keyed on the local job: after set_child has said which (S1). */
            upstream.apply();
        }

        if (!hdr.resubmit.isValid()) {
            /*
             * 1. Framing. TNA: depending on the parser configuration, Tofino
             * may drop a frame with a parser error before ingress runs, so
             * TRUNCATED can undercount.
             */
            if (ig_prsr_md.parser_err != 0) {
                refuse(DROP_TRUNCATED);
            } else if (hdr.arp.isValid()) {
                /* An ARP request for IPv4 over Ethernet; TNA: two gateways of 4 bytes each. Else L2. */
                if (hdr.arp.opcode == ARP_OPER_REQUEST && hdr.arp.hw_type == ARP_HTYPE_ETHERNET) {
                    if (hdr.arp.proto_type == ETHERTYPE_IPV4
                            && hdr.arp.hw_addr_len == 6 && hdr.arp.proto_addr_len == 4) {
                        if (!arp_responder.apply().hit) {
                            to_l2();
                        }
                    } else {
                        to_l2();
                    }
                } else {
                    to_l2();
                }
            } else if (!hdr.p4r.isValid()) {
                /* hdr.p4r is valid only for option-less IPv4 / UDP to UDP_PORT (see the parser). */
                to_l2();
            } else if (!agg_addresses.apply().hit) {
                to_l2();
            } else if (ig_md.checksum_err) {
                refuse(DROP_BAD_CHECKSUM);
            } else if (hdr.p4r.msg_type < MSG_DATA || hdr.p4r.msg_type > MSG_QUERY) {
                refuse(DROP_BAD_TYPE);
            } else if (hdr.p4r.msg_type == MSG_DATA || hdr.p4r.msg_type == MSG_RESULT) {
                if (hdr.ipv4.total_len != IPV4_AGG_LENGTH || hdr.udp.len != UDP_AGG_LENGTH) {
                    refuse(DROP_BAD_LENGTH);
                }
            } else if (hdr.ipv4.total_len != IPV4_NOTICE_LENGTH || hdr.udp.len != UDP_NOTICE_LENGTH) {
                /* MISSING, ABORT, STALE and QUERY carry the header only. */
                refuse(DROP_BAD_LENGTH);
            }
        }

        /* 3. Not aggregation traffic (TNA: forward() and flood() decide nothing the steps below read). */
        if (ig_md.l2 == 1) {
            l2_forward.apply();
        }

        /* 2. The job (a miss is UNKNOWN_JOB), for aggregation traffic that passed the framing checks; the ABORT pass too. */
        if (ig_md.done == 0 && ig_md.l2 == 0) {
            if (ig_md.known == 0) {
                /* TNA: a RESULT, MISSING, ABORT or STALE not from a parent: BAD_TYPE (no member ABORT here). */
                if (hdr.p4r.msg_type == MSG_DATA || hdr.p4r.msg_type == MSG_QUERY) {
                    refuse(DROP_UNKNOWN_JOB);
                } else {
                    refuse(DROP_BAD_TYPE);
                }
            } else {
                if (hdr.resubmit.isValid()) {
                    /*
                     * TNA: the second pass of a CALL_MISMATCH. If another
                     * packet aborted the call since the first pass, this one is
                     * CALL_ABORTED, as it would have been in v1model.
                     */
                    ig_md.aborted = aborted_mark.execute(hdr.p4r.job_id);
                    second_pass_answer.apply();
                } else if (ig_md.port_diff != 0) {
                    /* 3. Membership: the registered host, holding the rank's key, speaks for (job, rank). */
                    refuse(DROP_WRONG_SENDER);
                } else if (ig_md.ip_diff != 0) {
                    refuse(DROP_WRONG_SENDER);
                } else if (ig_md.udp_diff != 0) {
                    refuse(DROP_WRONG_SENDER);
                } else if (ig_md.key_diff != 0) {
                    refuse(DROP_BAD_KEY);
                } else {
                    /* TNA: reading aborted[job_id] changes nothing, so it can run before the bounds (S1). */
                    if (ig_md.parent == 0) {
                        ig_md.aborted = aborted_check.execute(hdr.p4r.job_id);
                    }
                    /* 4. Bounds: slot >= pool_size, or g >= SLOT_COUNT (a job entry that overruns the pool). */
                    locate();
                    if (ig_md.room == 0 || ig_md.room[31:31] == 1) {
                        refuse(DROP_SLOT_OUT_OF_RANGE);
                    } else if (ig_md.g >= SLOT_COUNT) {
                        refuse(DROP_SLOT_OUT_OF_RANGE);
                    } else if (ig_md.aborted == 1) {
                        /* 6. A call the switch has aborted is refused on every slot; its sender is told again. */
                        aborted_answer.apply();
                    } else {
                        if (hdr.p4r.set == 0) {
                            copy_in_set0();
                        } else {
                            copy_in_set1();
                        }

                        /* 5. Ownership (TNA: after 6; only a DATA that goes on to its copy claims). */
                        if (hdr.p4r.msg_type == MSG_DATA) {
                            if (hdr.p4r.set == 0) {
                                ig_md.fresh = owner_claim0.execute(ig_md.g);
                            } else {
                                ig_md.fresh = owner_claim1.execute(ig_md.g);
                            }
                        } else {
                            if (hdr.p4r.set == 0) {
                                ig_md.fresh = owner_look0.execute(ig_md.g);
                            } else {
                                ig_md.fresh = owner_look1.execute(ig_md.g);
                            }
                        }

                        /* 7. The copy: how far is the packet's use from the copy's? */
                        if (ig_md.fresh == 1) {
                            if (hdr.p4r.msg_type == MSG_DATA) {
                                ig_md.age = seq_start.execute(ig_md.copy);
                            } else {
                                idle_copy();
                            }
                        } else {
                            if (hdr.p4r.msg_type == MSG_DATA) {
                                ig_md.age = seq_data.execute(ig_md.copy);
                            } else {
                                ig_md.age = seq_look.execute(ig_md.copy);
                            }
                        }

                        if (ig_md.parent == 1) {
                            /* The parent's packet (docs/protocol.md, *Aggregation trees*; see parent_step). */
                            parent_step.apply();
                        } else if (ig_md.age[31:31] == 1) {
                            /* A use behind the copy's (never an idle copy: its age is 1). Never added. */
                            if (hdr.p4r.msg_type == MSG_DATA) {
                                refuse(DROP_STALE);
                            } else {
                                stale_to_asker();
                            }
                        } else if (hdr.p4r.msg_type == MSG_QUERY) {
                            /* Where is the use? Nothing changes. */
                            if (ig_md.age == 0) {
                                ig_md.seen = bitmap_read.execute(ig_md.copy);
                                asker_check();
                                values_read();
                            } else {
                                not_collected();
                            }
                        } else if (ig_md.age != 0) {
                            /* First contribution of a use (the copy is idle, or the use is ahead of its own). */
                            call_store.execute(ig_md.copy);
                            bitmap_start.execute(ig_md.copy);
                            values_store();
                        } else {
                            /* The same use: the descriptor, then the bitmap, which decides. */
                            ig_md.call_diff = call_read.execute(ig_md.copy);
                            if (ig_md.call_diff == 0) {
                                ig_md.seen = bitmap_add.execute(ig_md.copy);
                            } else {
                                ig_md.seen = bitmap_check.execute(ig_md.copy);
                            }
                            if (ig_md.seen != 0) {
                                /* This rank's contribution is in already (a complete use has every bit). */
                                duplicate();
                            } else if (ig_md.call_diff != 0) {
                                /* The ranks disagree on the call: nothing was added; the second pass aborts it. */
                                resubmit_mismatch();
                            } else {
                                values_add();
                            }
                        }

                        /* remaining, exp_max, congested: started, counted down / raised, or read (by value_op). */
                        remaining_step.apply();
                        exp_max_step.apply();
                        congested_step.apply();
#if !P4R_HARVEST
                        /*
                         * Tofino 2: a sum (completion, replay, the partial sum going up, the parent's
                         * RESULT) of a use whose copy is congested carries CE; a QUERY going up does not.
                         */
                        if (ig_md.congested == ECN_CE && ig_md.ecn != 0) {
                            if (ig_md.left == 0) {
                                mark_congested();
                            } else if (ig_md.left == AWAITING && hdr.p4r.msg_type != MSG_QUERY) {
                                mark_congested();
                            }
                        }
#endif

                        /* 8. The answer, unless decided above. */
                        if (ig_md.done == 0) {
#if !P4R_HARVEST
                            /* Tofino 2: the values in this pass (S7..S14). */
                            P4R_FOR_EACH_PAIR(VALUE_STEP)
#endif
                            if (ig_md.parent == 1) {
                                /*
                                 * The parent's RESULT, MISSING or STALE is about a use this copy awaits,
                                 * or nothing changes. TNA (Tofino 2): the values of a RESULT for the use
                                 * the copy holds were stored above, before this test (docs/p4src.md).
                                 */
                                parent_answer.apply();
                            } else if (hdr.p4r.msg_type == MSG_QUERY) {
                                /* TNA: complete first, then the asker's bit (asker_check): one field per gateway. */
                                if (ig_md.left == 0) {
                                    /* Complete: replay the result to the asker alone. */
                                    replay();
                                } else if (ig_md.left == AWAITING) {
                                    /* Complete here, awaiting the parent's result: asked after upstream. */
                                    query_up();
                                } else if (ig_md.asker_in != 0) {
                                    /* Collecting, and the asker's contribution is in: nothing to tell it. */
                                    refuse(DROP_CONTRIBUTED);
                                } else {
                                    /* The asker's contribution is missing (aux: who contributed), or none
                                     * has arrived (aux 0): tell the asker alone, which resends. */
                                    missing_to_asker();
                                }
                            } else if (ig_md.left == 0) {
                                /* The contribution completed the use: its packet carries the sums to the job. */
                                completed();
                            } else if (ig_md.left == AWAITING) {
                                /* Completed below a parent: the partial sum goes up; the copy awaits. */
                                completed_up();
                            } else {
                                added();
                            }
                        }
                    }
                }
            }
        }
        /*
         * TNA: each per-job counter is counted by a call of its own (a table the compiler makes for it):
         * a table whose actions counted several counters failed p4c-barefoot's rule that all of a
         * table's indirect externs be addressed with one expression in all its actions.
         * They are counted at the end of the first pass, inside its branch (only the first pass
         * decides an outcome): on Tofino 1 a table after the two passes' branches joined would have
         * to follow every table of both, the value pairs of the recirculated passes included,
         * which took a thirteenth stage (docs/p4src.md, "Compiled with the open Tofino back end").
         */
        /* TNA: indexed by ig_md.job, the local job: a packet going up carries the parent's job id. */
        if (ig_md.outcome == OUTCOME_ADDED || ig_md.outcome == OUTCOME_RESULT) {
            job_data_in.count(ig_md.job);
        }
        if (ig_md.outcome == OUTCOME_RESULT || ig_md.outcome == OUTCOME_SETTLED) {
            job_results_out.count(ig_md.job);
        }
        if (ig_md.outcome == OUTCOME_DUPLICATE) {
            job_duplicates.count(ig_md.job);
        }
        if (ig_md.outcome == OUTCOME_REPLAY || ig_md.outcome == OUTCOME_MISSING
                || ig_md.outcome == OUTCOME_QUERY_UP) {
            job_queries.count(ig_md.job);
        }
        if (ig_md.outcome == OUTCOME_REPLAY) {
            job_replays.count(ig_md.job);
        }
        if (ig_md.outcome == OUTCOME_MISSING) {
            job_missing.count(ig_md.job);
        }
        if (ig_md.outcome == OUTCOME_ABORT) {
            job_aborts.count(ig_md.job);
        }
#if P4R_HARVEST
        }
#endif

        /* TNA: the drops of every pass (a harvest pass refuses a STALE copy), counted at one place. */
        if (ig_md.drop_reason != 0) {
            ingress_drops.count(ig_md.drop_reason);
        }
    }
}

control IngressDeparser(packet_out pkt,
                        inout tna_headers_t hdr,
                        in ig_metadata_t ig_md,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Resubmit(RESUBMIT_ABORT) resubmit;

    /* TNA: the IPv4 checksum of answers is recomputed in the egress deparser, after the rewrite. */
    apply {
        if (ig_dprsr_md.resubmit_type == RESUBMIT_ABORT) {
            resubmit.emit(hdr.resubmit);
        }
        pkt.emit(hdr.recirc);
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.arp);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.p4r);
        pkt.emit(hdr.vals);
#if P4R_HARVEST
        pkt.emit(hdr.carry);
#endif
    }
}

/* ------------------------------------------------------------------------ */

parser EgressParser(packet_in pkt,
                    out tna_headers_t hdr,
                    out eg_metadata_t eg_md,
                    out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        eg_md.port_diff = 0;
        eg_md.qdepth = 0;
        eg_md.ecn_depth = 0;
        eg_md.over = 0;
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        pkt.extract(hdr.ethernet);
        transition select(hdr.bridge.kind) {
            PKT_KIND_JOB: parse_answer;
            PKT_KIND_REPLY: parse_answer;
            PKT_KIND_UP: parse_answer;
            default: accept;
        }
    }

    /* Only answers are rewritten (and get a new IPv4 checksum); the values ride along unparsed. */
    state parse_answer {
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

    Counter<bit<64>, bit<8>>(DROP_REASON_COUNT, CounterType_t.PACKETS_AND_BYTES) egress_drops;

    /* egress_rid is the rank the multicast group gave this replica; key is that rank's secret. */
    action set_result_dest(bit<48> dst_mac, bit<32> dst_ip, bit<16> dst_udp_port, bit<32> key) {
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_ip;
        hdr.udp.dst_port = dst_udp_port;
        hdr.p4r.key = key;
    }

    action no_result_dest() {
        egress_drops.count(DROP_NO_RESULT_DEST);
        eg_dprsr_md.drop_ctl = 1;
    }

    action prune() {
        eg_md.port_diff = eg_intr_md.egress_port ^ hdr.bridge.ingress_port;
    }

    /*
     * ECN marking at a per-port queue depth (docs/protocol.md, *Congestion*). TNA: the comparison is a
     * difference of widened copies whose top bit a gateway tests; the key keeps the v1model name.
     */
    action set_ecn_threshold(bit<19> depth) {
        eg_md.ecn_depth = (bit<32>) depth;
        eg_md.qdepth = (bit<32>) eg_intr_md.enq_qdepth;
    }

    table ecn_threshold {
        key = { eg_intr_md.egress_port: exact @name("standard_metadata.egress_port"); }
        actions = { set_ecn_threshold; NoAction; }
        default_action = NoAction();
        size = PORT_TABLE_SIZE;
    }

    action queue_over_threshold() {
        eg_md.over = eg_md.qdepth - eg_md.ecn_depth;
    }

    action mark_ce() {
        hdr.ipv4.diffserv = hdr.ipv4.diffserv | ECN_CE;
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
            /* Never flood a frame back out of the port it came in on. */
            prune();
            if (eg_md.port_diff == 0) {
                eg_dprsr_md.drop_ctl = 1;
            }
        } else if (hdr.bridge.kind == PKT_KIND_JOB) {
            result_dest.apply();
        }
        if (hdr.ipv4.isValid() && (hdr.ipv4.diffserv & ECN_MASK) != 0) {
            if (ecn_threshold.apply().hit) {
                queue_over_threshold();
                if (eg_md.over[31:31] == 0) {
                    mark_ce();
                }
            }
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
        /* hdr.ipv4 is parsed in egress only for answers, so forwarded packets keep their checksum. */
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
