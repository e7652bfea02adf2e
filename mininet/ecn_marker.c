/* ECN marking for the lab's rate-limited links: a phantom queue at tc's egress hook (clsact, cls_bpf).
 *
 * Why not fq_codel or RED with `ecn`: kernels built without them (CONFIG_NET_SCH_FQ_CODEL, _RED, _CODEL,
 * _PIE all unset, as on the machines the lab runs on) have no qdisc that marks. This program runs on
 * every packet a link is about to enqueue into its htb and keeps a virtual queue: the bytes enqueued,
 * drained at the link's rate (RATE, bytes/s), which is what htb drains the real queue at. Like htb, it
 * also keeps tokens: time the link spent idle, up to the class's burst (BURST bytes), lets the next
 * packets leave at once without queueing. Without them the virtual queue runs up to BURST bytes above
 * the real one on a busy link that empties now and then, and marks where nothing waits. A packet that
 * finds more than THRESHOLD bytes queued and is ECN-capable (ECT(0) or ECT(1)) leaves with CE, as a
 * step-marking RED (min = max, DCTCP's K) would mark it; Not-ECT packets pass untouched and only the
 * real queue's tail drop affects them. The virtual queue is capped at CAP bytes so that marking stops
 * soon after the real queue (which drops what does not fit) has drained.
 *
 * Per link state is this object's own globals (tc loads an object once per attachment). Two CPUs may
 * update them at once: a lost update misplaces the virtual queue by one packet, which marking tolerates.
 * Built by mininet/lab_ecn.py with the system's clang (-target bpf); no libbpf headers needed.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#define SEC(name) __attribute__((section(name), used))

static long (*bpf_skb_load_bytes)(const void *skb, __u32 offset, void *to, __u32 len) =
    (void *)BPF_FUNC_skb_load_bytes;
static long (*bpf_skb_store_bytes)(void *skb, __u32 offset, const void *from, __u32 len, __u64 flags) =
    (void *)BPF_FUNC_skb_store_bytes;
static long (*bpf_l3_csum_replace)(void *skb, __u32 offset, __u64 from, __u64 to, __u64 size) =
    (void *)BPF_FUNC_l3_csum_replace;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;

#define ETH_HLEN 14
#define IP_CHECKSUM (ETH_HLEN + 10)
#define ECN_CE 3

__u64 queue_bytes = 0; /* the virtual queue, after the last packet */
__u64 tokens = BURST;  /* bytes the link may send at once: its idle time, up to the burst */
__u64 last_ns = 0;     /* when the last packet was enqueued */
__u64 marked = 0;      /* packets marked CE (readable with bpftool map dump, where installed) */

SEC("tc")
int mark(struct __sk_buff *skb) {
    __u64 now = bpf_ktime_get_ns();
    __u64 elapsed = now - last_ns;
    if (elapsed > 1000000000ULL) /* an idle second drains any queue; keeps the product in 64 bits */
        elapsed = 1000000000ULL;
    __u64 drained = elapsed * RATE / 1000000000ULL; /* what the link could send since the last packet */
    __u64 queued = queue_bytes;
    __u64 spare = tokens;
    if (queued >= drained) {
        queued -= drained;
    } else { /* the queue emptied: the rest of the time was idle, and idle time is tokens */
        spare += drained - queued;
        queued = 0;
    }
    if (spare > BURST)
        spare = BURST;
    if (queued == 0 && spare >= skb->len)
        spare -= skb->len; /* leaves within the burst, as htb sends it */
    else
        queued += skb->len;
    if (queued > CAP)
        queued = CAP;
    queue_bytes = queued;
    tokens = spare;
    last_ns = now;
    if (queued <= THRESHOLD || skb->protocol != __builtin_bswap16(0x0800))
        return TC_ACT_OK;
    __u16 word; /* IPv4 version/IHL and the DSCP/ECN byte, in network order */
    if (bpf_skb_load_bytes(skb, ETH_HLEN, &word, sizeof(word)))
        return TC_ACT_OK;
    __u8 tos = ((__u8 *)&word)[1];
    if ((tos & ECN_CE) == 0 || (tos & ECN_CE) == ECN_CE) /* Not-ECT: never marked; CE: already */
        return TC_ACT_OK;
    __u16 marked_word = word;
    ((__u8 *)&marked_word)[1] = tos | ECN_CE;
    bpf_l3_csum_replace(skb, IP_CHECKSUM, word, marked_word, sizeof(word));
    bpf_skb_store_bytes(skb, ETH_HLEN + 1, &((__u8 *)&marked_word)[1], 1, 0);
    marked++;
    return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
