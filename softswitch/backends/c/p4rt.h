/*
 * p4rt.h: the hand-written half of every program the C backend generates.
 *
 * softswitch/backends/c/codegen.py writes one translation unit per P4 program
 * that includes this file first. Here live the parts that do not depend on the
 * program: bit-level packet access (every read bounds-checked by its caller),
 * P4_16 arithmetic helpers for bit<W>/int<W> up to 64 bits, the checksum and
 * hash externs, match-action tables that P4Runtime fills through the exported
 * p4_table_* functions, multicast groups, and the failure path (a packet whose
 * processing fails, e.g. a division by zero, is abandoned with longjmp and
 * reported to the caller, as the Python backend raises).
 *
 * Values of bit<W> and int<W> are uint64_t holding the W-bit pattern (int<W> in
 * two's complement), always masked to W bits, exactly as the Python backend
 * keeps them; int<W> is sign-extended only where an operation needs it.
 */
#ifndef P4RT_H
#define P4RT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define P4_EXPORT __attribute__((visibility("default")))
#define P4_UNUSED __attribute__((unused))

/* ------------------------------------------------------------------ arithmetic */

static inline uint64_t p4_mask(unsigned w) { return w >= 64 ? ~UINT64_C(0) : ((UINT64_C(1) << w) - 1); }

/* The two's-complement value of a w-bit pattern (1 <= w <= 64). */
static inline int64_t p4_sx(uint64_t v, unsigned w) {
    if (w >= 64) return (int64_t)v;
    uint64_t sign = UINT64_C(1) << (w - 1);
    return (int64_t)((v ^ sign) - sign);
}

/* Shifts by any amount: P4_16 defines shifting by the width or more (0, or all sign bits). */
static inline uint64_t p4_shl(uint64_t v, uint64_t n) { return n >= 64 ? 0 : v << n; }
static inline uint64_t p4_shr(uint64_t v, uint64_t n) { return n >= 64 ? 0 : v >> n; }
static inline int64_t p4_sar(int64_t v, uint64_t n) { return v >> (n >= 63 ? 63 : n); }

static inline uint64_t p4_sat_add_u(uint64_t a, uint64_t b, unsigned w) {
    uint64_t m = p4_mask(w), s = a + b;
    return (s < a || s > m) ? m : s;
}
static inline uint64_t p4_sat_sub_u(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

static inline uint64_t p4_clamp_s(__int128 v, unsigned w) {
    __int128 hi = ((__int128)1 << (w - 1)) - 1, lo = -((__int128)1 << (w - 1));
    if (v > hi) v = hi;
    if (v < lo) v = lo;
    return (uint64_t)v & p4_mask(w);
}
static inline uint64_t p4_sat_add_s(uint64_t a, uint64_t b, unsigned w) {
    return p4_clamp_s((__int128)p4_sx(a, w) + p4_sx(b, w), w);
}
static inline uint64_t p4_sat_sub_s(uint64_t a, uint64_t b, unsigned w) {
    return p4_clamp_s((__int128)p4_sx(a, w) - p4_sx(b, w), w);
}

/* ------------------------------------------------------------------ bits of a packet */

/* `w` bits (w <= 64) at bit offset `bit` of `p`, most significant first. The caller checked the bounds. */
static inline uint64_t p4_get_bits(const uint8_t *p, size_t bit, unsigned w) {
    uint64_t v = 0;
    if (!((bit | w) & 7)) { /* whole bytes */
        for (const uint8_t *q = p + (bit >> 3), *end = q + (w >> 3); q < end; q++) v = (v << 8) | *q;
        return v;
    }
    size_t end = bit + w;
    while (bit < end) {
        size_t byte = bit >> 3;
        unsigned used = (unsigned)(bit & 7), take = 8 - used;
        if (take > end - bit) take = (unsigned)(end - bit);
        unsigned shift = 8 - used - take;
        v = (v << take) | ((uint64_t)(p[byte] >> shift) & ((1u << take) - 1));
        bit += take;
    }
    return v;
}

/* Write the low `w` bits of `v` at bit offset `bit` of `p` (bits outside are kept). */
static inline void p4_put_bits(uint8_t *p, size_t bit, uint64_t v, unsigned w) {
    if (!((bit | w) & 7)) { /* whole bytes */
        for (uint8_t *q = p + ((bit + w) >> 3); q > p + (bit >> 3); v >>= 8) *--q = (uint8_t)v;
        return;
    }
    size_t end = bit + w;
    while (bit < end) {
        size_t byte = bit >> 3;
        unsigned used = (unsigned)(bit & 7), take = 8 - used;
        if (take > end - bit) take = (unsigned)(end - bit);
        unsigned shift = 8 - used - take;
        uint8_t m = (uint8_t)(((1u << take) - 1) << shift);
        uint8_t bits = (uint8_t)(((v >> (end - bit - take)) & ((1u << take) - 1)) << shift);
        p[byte] = (uint8_t)((p[byte] & ~m) | bits);
        bit += take;
    }
}

static inline uint64_t p4_be16(const uint8_t *p) { return ((uint64_t)p[0] << 8) | p[1]; }
static inline uint64_t p4_be32(const uint8_t *p) {
    return ((uint64_t)p[0] << 24) | ((uint64_t)p[1] << 16) | ((uint64_t)p[2] << 8) | p[3];
}
static inline uint64_t p4_be48(const uint8_t *p) { return (p4_be16(p) << 32) | p4_be32(p + 2); }
static inline uint64_t p4_be64(const uint8_t *p) { return (p4_be32(p) << 32) | p4_be32(p + 4); }
static inline void p4_put16(uint8_t *p, uint64_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void p4_put32(uint8_t *p, uint64_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void p4_put64(uint8_t *p, uint64_t v) { p4_put32(p, v >> 32); p4_put32(p + 4, v); }

/*
 * `n` (1..8) bytes at `p` as a big-endian integer, and its inverse. The generator
 * passes a constant `n` at every call (a field's bit position in its header is
 * known when the program is compiled), so each call unrolls to at most three
 * loads or stores of 1, 2 and 4 bytes (one of 8), each a byte swap: a 6-byte
 * MAC address is a 2-byte and a 4-byte access, not six.
 */
static inline __attribute__((always_inline)) uint64_t p4_load_be(const uint8_t *p, unsigned n) {
    if (n == 8) return p4_be64(p);
    uint64_t v = 0;
    unsigned i = 0;
    if (n & 1) v = p[i++];
    if (n & 2) v = (v << 16) | p4_be16(p + i), i += 2;
    if (n & 4) v = (v << 32) | p4_be32(p + i);
    return v;
}
static inline __attribute__((always_inline)) void p4_store_be(uint8_t *p, uint64_t v, unsigned n) {
    if (n == 8) {
        p4_put64(p, v);
        return;
    }
    if (n & 4) n -= 4, p4_put32(p + n, v), v >>= 32;
    if (n & 2) n -= 2, p4_put16(p + n, v), v >>= 16;
    if (n & 1) p[0] = (uint8_t)v;
}

/*
 * `n` 32-bit words from `src` to `dst`, each byte-swapped: big-endian words of the
 * packet into a run of consecutive bit<32> fields of a header struct (uint32_t,
 * host order, contiguous), or back. On x86 (little-endian, SSE2 in the baseline)
 * four words at a time, in registers; elsewhere one at a time.
 */
static inline void p4_swap32_words(uint8_t *dst, const uint8_t *src, unsigned n) {
    unsigned i = 0;
#if defined(__SSE2__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 4 <= n; i += 4) {
        __m128i x = _mm_loadu_si128((const __m128i *)(src + 4 * i));
        x = _mm_shufflehi_epi16(_mm_shufflelo_epi16(x, 0xB1), 0xB1); /* swap the halves of each word */
        x = _mm_or_si128(_mm_slli_epi16(x, 8), _mm_srli_epi16(x, 8)); /* swap the bytes of each half */
        _mm_storeu_si128((__m128i *)(dst + 4 * i), x);
    }
#endif
    for (; i < n; i++) {
        uint32_t v = (uint32_t)p4_be32(src + 4 * i); /* read big-endian, stored in host order: either way */
        memcpy(dst + 4 * i, &v, 4);
    }
}

/* ------------------------------------------------------------------ checksums and hashes */

/* Bits of a field list, packed most significant first, as the hash externs see them. */
typedef struct {
    uint8_t bytes[1024];
    size_t bits;
} p4_bits_t;

static inline void p4_bits_add(p4_bits_t *b, uint64_t v, unsigned w) {
    if (b->bits + w <= sizeof b->bytes * 8) p4_put_bits(b->bytes, b->bits, v, w);
    b->bits += w;
}

/* A varbit field's bytes (whole bytes: bmv2 extracts no other lengths). */
static P4_UNUSED void p4_bits_add_bytes(p4_bits_t *b, const uint8_t *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) p4_bits_add(b, bytes[i], 8);
}

/* The Internet checksum of a sum of 16-bit words: end-around carries folded, then complemented. */
static inline uint64_t p4_csum_fold(uint64_t total) {
    while (total >> 16) total = (total & 0xFFFF) + (total >> 16);
    return ~total & 0xFFFF;
}

/* Internet checksum of the bits, padded with zero bits to a multiple of 16 at the end. */
static P4_UNUSED uint64_t p4_csum16(const p4_bits_t *b) {
    size_t words = (b->bits + 15) / 16;
    uint64_t total = 0;
    if (!(b->bits & 15)) { /* whole 16-bit words */
        for (size_t i = 0; i < words; i++) total += (uint64_t)(b->bytes[2 * i] << 8 | b->bytes[2 * i + 1]);
        words = 0;
    }
    for (size_t i = 0; i < words; i++) {
        size_t bit = i * 16, left = b->bits - bit;
        uint64_t word = left >= 16 ? p4_get_bits(b->bytes, bit, 16) : p4_get_bits(b->bytes, bit, (unsigned)left) << (16 - left);
        total += word;
    }
    return p4_csum_fold(total);
}

/* The bits as ceil(bits/8) bytes, padded with zero bits at the front (a right-aligned big integer). */
static P4_UNUSED size_t p4_bits_bytes(const p4_bits_t *b, uint8_t *out) {
    size_t n = (b->bits + 7) / 8, pad = n * 8 - b->bits;
    memset(out, 0, n);
    for (size_t bit = 0; bit < b->bits;) {
        unsigned take = b->bits - bit >= 32 ? 32 : (unsigned)(b->bits - bit);
        p4_put_bits(out, pad + bit, p4_get_bits(b->bytes, bit, take), take);
        bit += take;
    }
    return n;
}

static P4_UNUSED uint64_t p4_crc32(const p4_bits_t *b) {
    uint8_t data[sizeof b->bytes];
    size_t n = p4_bits_bytes(b, data);
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= data[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc & 0xFFFFFFFFu;
}

/* CRC-16/ARC (polynomial 0x8005, reflected), bmv2's crc16. */
static P4_UNUSED uint64_t p4_crc16(const p4_bits_t *b) {
    uint8_t data[sizeof b->bytes];
    size_t n = p4_bits_bytes(b, data);
    uint32_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= data[i];
        for (int k = 0; k < 8; k++) crc = (crc & 1) ? (crc >> 1) ^ 0xA001 : crc >> 1;
    }
    return crc;
}

/* ------------------------------------------------------------------ tables */

enum { P4_EXACT = 0, P4_LPM = 1, P4_TERNARY = 2, P4_RANGE = 3, P4_OPTIONAL = 4 };

typedef struct {
    uint8_t kind;
    uint8_t width;
} p4_key_t;

/*
 * A match-action table. Entries live in a pool of `capacity` records addressed
 * by a stable handle (P4Runtime's writes name them by handle; a direct counter
 * is the pair ctr[2h], ctr[2h+1]). An all-exact table finds them through an
 * open-addressing hash of the key; any other table scans `order`, kept sorted
 * best first: priority, then prefix length, then age (the first inserted wins a
 * tie), which is the Python backend's order.
 * An all-exact table whose key fields fit 64 bits together is `packed`: each
 * entry's key is also kept as one word (`word`, the fields concatenated, first
 * most significant), which the packet's code builds directly, so a lookup hashes
 * and compares one word.
 * For range fields `val` holds the low and `msk` the high bound.
 */
typedef struct {
    const char *name;
    uint32_t nkeys, nargs, capacity;
    const p4_key_t *keys;
    int all_exact, packed;
    uint64_t *val, *msk, *args, *ctr, *seq, *word;
    int32_t *prio;
    uint32_t *plen, *action, *free_list;
    uint8_t *used;
    uint32_t nfree, count;
    uint64_t next_seq;
    int32_t *hash; /* exact: -1 empty, -2 deleted, else a handle */
    uint32_t hcap, tombstones;
    int32_t *order; /* others: handles, best first */
    uint32_t default_action;
    uint64_t *default_args;
} p4_table_t;

#define P4_EMPTY (-1)
#define P4_DELETED (-2)

static inline uint64_t p4_key_hash(const uint64_t *k, uint32_t n) {
    uint64_t h = 0x9E3779B97F4A7C15u;
    for (uint32_t i = 0; i < n; i++) {
        h ^= k[i] + 0x9E3779B97F4A7C15u + (h << 6) + (h >> 2);
        h *= 0xBF58476D1CE4E5B9u;
    }
    return h ^ (h >> 31);
}

/*
 * The entry of an all-exact table whose key is `key` (`n` values), or -1.
 * The generated table functions call it with their key's length as a constant
 * (always inlined): the hash and the comparison then unroll, with no call to
 * memcmp per probe.
 */
static inline __attribute__((always_inline)) int32_t p4_exact_find_n(const p4_table_t *t, const uint64_t *key,
                                                                     uint32_t n) {
    if (!t->count) return -1;
    uint32_t m = t->hcap - 1, i = (uint32_t)p4_key_hash(key, n) & m;
    for (uint32_t probes = 0; probes < t->hcap; probes++, i = (i + 1) & m) {
        int32_t h = t->hash[i];
        if (h == P4_EMPTY) return -1;
        if (h < 0) continue;
        const uint64_t *v = t->val + (size_t)h * n;
        uint32_t k = 0;
        while (k < n && v[k] == key[k]) k++;
        if (k == n) return h;
    }
    return -1;
}

/* A key of one word: multiplied, then its high half folded into the low bits the table's mask keeps. */
static inline uint64_t p4_word_hash(uint64_t w) {
    w *= 0x9E3779B97F4A7C15u;
    return w ^ (w >> 32);
}

/* The key fields of a packed table as one word, first most significant (what the generated code builds). */
static inline uint64_t p4_pack(const p4_table_t *t, const uint64_t *key) {
    uint64_t w = 0;
    for (uint32_t i = 0; i < t->nkeys; i++) w = p4_shl(w, t->keys[i].width) | (key[i] & p4_mask(t->keys[i].width));
    return w;
}

/* The entry of a packed table whose key is `word`, or -1. */
static inline int32_t p4_exact_find_word(const p4_table_t *t, uint64_t word) {
    if (!t->count) return -1;
    uint32_t m = t->hcap - 1, i = (uint32_t)p4_word_hash(word) & m;
    for (uint32_t probes = 0; probes < t->hcap; probes++, i = (i + 1) & m) {
        int32_t h = t->hash[i];
        if (h == P4_EMPTY) return -1;
        if (h >= 0 && t->word[h] == word) return h;
    }
    return -1;
}

static inline int32_t p4_exact_find(const p4_table_t *t, const uint64_t *key) {
    return t->packed ? p4_exact_find_word(t, p4_pack(t, key)) : p4_exact_find_n(t, key, t->nkeys);
}

/* Where entry h's key hashes to. */
static inline uint64_t p4_entry_hash(const p4_table_t *t, int32_t h) {
    return t->packed ? p4_word_hash(t->word[h]) : p4_key_hash(t->val + (size_t)h * t->nkeys, t->nkeys);
}

static inline int p4_entry_matches(const p4_table_t *t, int32_t h, const uint64_t *key) {
    const uint64_t *v = t->val + (size_t)h * t->nkeys, *m = t->msk + (size_t)h * t->nkeys;
    for (uint32_t i = 0; i < t->nkeys; i++) {
        if (t->keys[i].kind == P4_RANGE) {
            if (key[i] < v[i] || key[i] > m[i]) return 0;
        } else if ((key[i] & m[i]) != v[i]) {
            return 0;
        }
    }
    return 1;
}

/* The best entry for `key` (one value per key field), or -1: a miss. */
static inline int32_t p4_table_find(const p4_table_t *t, const uint64_t *key) {
    if (t->all_exact) return p4_exact_find(t, key);
    for (uint32_t i = 0; i < t->count; i++)
        if (p4_entry_matches(t, t->order[i], key)) return t->order[i];
    return -1;
}

/* `packed`: the generator decided it (all exact, the key fields fit 64 bits), and packs each packet's key so. */
static P4_UNUSED int p4_table_init(p4_table_t *t, const char *name, const p4_key_t *keys, uint32_t nkeys,
                                   uint32_t nargs, uint32_t capacity, int packed) {
    memset(t, 0, sizeof *t);
    t->name = name;
    t->keys = keys;
    t->nkeys = nkeys;
    t->nargs = nargs;
    t->capacity = capacity;
    t->all_exact = 1;
    for (uint32_t i = 0; i < nkeys; i++)
        if (keys[i].kind != P4_EXACT) t->all_exact = 0;
    t->packed = packed;
    size_t c = capacity ? capacity : 1, kw = nkeys ? nkeys : 1, aw = nargs ? nargs : 1;
    t->val = calloc(c * kw, sizeof(uint64_t));
    t->msk = calloc(c * kw, sizeof(uint64_t));
    t->args = calloc(c * aw, sizeof(uint64_t));
    t->ctr = calloc(2 * c, sizeof(uint64_t));
    t->seq = calloc(c, sizeof(uint64_t));
    t->word = calloc(c, sizeof(uint64_t));
    t->prio = calloc(c, sizeof(int32_t));
    t->plen = calloc(c, sizeof(uint32_t));
    t->action = calloc(c, sizeof(uint32_t));
    t->free_list = calloc(c, sizeof(uint32_t));
    t->used = calloc(c, 1);
    t->order = calloc(c, sizeof(int32_t));
    t->default_args = calloc(aw, sizeof(uint64_t));
    t->hcap = 8;
    while (t->hcap < 2 * c) t->hcap <<= 1;
    t->hash = malloc(t->hcap * sizeof(int32_t));
    if (!t->val || !t->msk || !t->args || !t->ctr || !t->seq || !t->word || !t->prio || !t->plen || !t->action ||
        !t->free_list || !t->used || !t->order || !t->default_args || !t->hash)
        return -1;
    for (uint32_t i = 0; i < t->hcap; i++) t->hash[i] = P4_EMPTY;
    for (uint32_t i = 0; i < capacity; i++) t->free_list[i] = capacity - 1 - i;
    t->nfree = capacity;
    return 0;
}

static P4_UNUSED void p4_table_free(p4_table_t *t) {
    free(t->val); free(t->msk); free(t->args); free(t->ctr); free(t->seq); free(t->word); free(t->prio); free(t->plen);
    free(t->action); free(t->free_list); free(t->used); free(t->order); free(t->default_args); free(t->hash);
}

static void p4_hash_place(p4_table_t *t, int32_t h) {
    uint32_t m = t->hcap - 1, i = (uint32_t)p4_entry_hash(t, h) & m;
    while (t->hash[i] >= 0) i = (i + 1) & m;
    if (t->hash[i] == P4_DELETED) t->tombstones--;
    t->hash[i] = h;
}

static void p4_hash_rebuild(p4_table_t *t) {
    for (uint32_t i = 0; i < t->hcap; i++) t->hash[i] = P4_EMPTY;
    t->tombstones = 0;
    for (uint32_t h = 0; h < t->capacity; h++)
        if (t->used[h]) p4_hash_place(t, (int32_t)h);
}

/* Whether handle a ranks before b: higher priority, longer prefix, then older. */
static inline int p4_before(const p4_table_t *t, int32_t a, int32_t b) {
    if (t->prio[a] != t->prio[b]) return t->prio[a] > t->prio[b];
    if (t->plen[a] != t->plen[b]) return t->plen[a] > t->plen[b];
    return t->seq[a] < t->seq[b];
}

/* ------------------------------------------------------------------ P4Runtime's side of a table */

/* Insert an entry; its handle, or -1 when the table is full. The caller checked that it is new. */
P4_EXPORT int32_t p4_table_insert(p4_table_t *t, const uint64_t *val, const uint64_t *msk, int32_t prio,
                                  uint32_t plen, uint32_t action, const uint64_t *args, uint64_t packets,
                                  uint64_t bytes) {
    if (!t->nfree) return -1;
    int32_t h = (int32_t)t->free_list[--t->nfree];
    t->used[h] = 1;
    memcpy(t->val + (size_t)h * t->nkeys, val, t->nkeys * sizeof *val);
    t->word[h] = t->packed ? p4_pack(t, val) : 0;
    memcpy(t->msk + (size_t)h * t->nkeys, msk, t->nkeys * sizeof *msk);
    memcpy(t->args + (size_t)h * t->nargs, args, t->nargs * sizeof *args);
    t->prio[h] = prio;
    t->plen[h] = plen;
    t->action[h] = action;
    t->seq[h] = t->next_seq++;
    t->ctr[2 * h] = packets;
    t->ctr[2 * h + 1] = bytes;
    if (t->all_exact) {
        p4_hash_place(t, h);
    } else {
        uint32_t at = t->count;
        while (at > 0 && p4_before(t, h, t->order[at - 1])) at--;
        memmove(t->order + at + 1, t->order + at, (t->count - at) * sizeof *t->order);
        t->order[at] = h;
    }
    t->count++;
    return h;
}

P4_EXPORT void p4_table_modify(p4_table_t *t, int32_t h, uint32_t action, const uint64_t *args) {
    t->action[h] = action;
    memcpy(t->args + (size_t)h * t->nargs, args, t->nargs * sizeof *args);
}

P4_EXPORT void p4_table_delete(p4_table_t *t, int32_t h) {
    if (h < 0 || (uint32_t)h >= t->capacity || !t->used[h]) return;
    if (t->all_exact) {
        uint32_t m = t->hcap - 1, i = (uint32_t)p4_entry_hash(t, h) & m;
        for (uint32_t probes = 0; probes < t->hcap; probes++, i = (i + 1) & m) {
            if (t->hash[i] == h) {
                t->hash[i] = P4_DELETED;
                t->tombstones++;
                break;
            }
        }
    } else {
        uint32_t at = 0;
        while (at < t->count && t->order[at] != h) at++;
        memmove(t->order + at, t->order + at + 1, (t->count - at - 1) * sizeof *t->order);
    }
    t->used[h] = 0;
    t->ctr[2 * h] = t->ctr[2 * h + 1] = 0;
    t->free_list[t->nfree++] = (uint32_t)h;
    t->count--;
    if (t->all_exact && t->tombstones > t->hcap / 4) p4_hash_rebuild(t);
}

P4_EXPORT void p4_table_set_default(p4_table_t *t, uint32_t action, const uint64_t *args) {
    t->default_action = action;
    memcpy(t->default_args, args, t->nargs * sizeof *args);
}

P4_EXPORT int32_t p4_table_lookup(const p4_table_t *t, const uint64_t *key) { return p4_table_find(t, key); }

/* Where P4Runtime reads an entry back: its action, arguments and direct counter. */
P4_EXPORT uint32_t p4_table_entry_action(const p4_table_t *t, int32_t h) { return t->action[h]; }
P4_EXPORT const uint64_t *p4_table_entry_args(const p4_table_t *t, int32_t h) {
    return t->args + (size_t)h * t->nargs;
}
P4_EXPORT uint64_t *p4_table_counters(p4_table_t *t) { return t->ctr; }

/* ------------------------------------------------------------------ multicast groups */

typedef struct {
    uint32_t n;
    uint64_t *port, *rid;
} p4_group_t;

#define P4_GROUPS 65536

/* Replace group `id`'s replicas (n = 0 deletes it); -1 when out of memory or id out of range. */
static int p4_groups_set(p4_group_t *groups, uint64_t id, uint32_t n, const uint64_t *port, const uint64_t *rid) {
    if (id >= P4_GROUPS) return -1;
    p4_group_t *g = &groups[id];
    uint64_t *p = NULL, *r = NULL;
    if (n) {
        p = malloc(n * sizeof *p);
        r = malloc(n * sizeof *r);
        if (!p || !r) {
            free(p);
            free(r);
            return -1;
        }
        memcpy(p, port, n * sizeof *p);
        memcpy(r, rid, n * sizeof *r);
    }
    free(g->port);
    free(g->rid);
    g->n = n;
    g->port = p;
    g->rid = r;
    return 0;
}

/* ------------------------------------------------------------------ per-context runtime */

typedef struct {
    uint64_t port;
    uint32_t offset, length;
} p4_out_t;

/*
 * What every generated context starts with: the failure exit, the frames a
 * packet produced (an arena of bytes and their descriptors) and the groups.
 */
typedef struct {
    jmp_buf fail;
    char error[256];
    p4_out_t *outs;
    uint32_t nouts, outs_cap;
    uint8_t *arena;
    size_t arena_used, arena_cap;
    p4_group_t *groups;
    uint64_t rng;
    uint64_t plen; /* the frame's length as it came in: what counters add */
} p4_base_t;

/* What applying a table tells its caller. */
typedef struct {
    int hit;
    uint32_t action;
    int exited;
} p4_applied_t;

/* Abandon the packet: the Python backend raises here; the caller drops the packet and reports why. */
static __attribute__((noreturn)) P4_UNUSED void p4_fail(p4_base_t *b, const char *what, const char *where) {
    size_t n = strlen(what);
    if (n > 120) n = 120;
    memcpy(b->error, what, n);
    b->error[n] = 0;
    strncat(b->error, " at ", sizeof b->error - strlen(b->error) - 1);
    strncat(b->error, where, sizeof b->error - strlen(b->error) - 1);
    longjmp(b->fail, 1);
}

static inline uint64_t p4_div(p4_base_t *b, uint64_t x, uint64_t y, const char *where) {
    if (!y) p4_fail(b, "division by zero", where);
    return x / y;
}
static inline uint64_t p4_mod(p4_base_t *b, uint64_t x, uint64_t y, const char *where) {
    if (!y) p4_fail(b, "modulo by zero", where);
    return x % y;
}

/* Room for one more output frame of at most `cap` bytes; its bytes start at the returned pointer. */
static uint8_t *p4_out_begin(p4_base_t *b, size_t cap) {
    if (b->nouts == b->outs_cap) {
        uint32_t n = b->outs_cap ? 2 * b->outs_cap : 16;
        p4_out_t *o = realloc(b->outs, n * sizeof *o);
        if (!o) p4_fail(b, "out of memory", "output");
        b->outs = o;
        b->outs_cap = n;
    }
    if (b->arena_used + cap > b->arena_cap) {
        size_t n = b->arena_cap ? 2 * b->arena_cap : 65536;
        while (n < b->arena_used + cap) n *= 2;
        uint8_t *a = realloc(b->arena, n);
        if (!a) p4_fail(b, "out of memory", "output");
        b->arena = a;
        b->arena_cap = n;
    }
    return b->arena + b->arena_used;
}

static void p4_out_end(p4_base_t *b, uint64_t port, size_t length) {
    b->outs[b->nouts].port = port;
    b->outs[b->nouts].offset = (uint32_t)b->arena_used;
    b->outs[b->nouts].length = (uint32_t)length;
    b->nouts++;
    b->arena_used += length;
}

/* random(lo, hi): uniform in [lo, hi] (splitmix64; not reproducible across backends, as in bmv2). */
static inline uint64_t p4_random(p4_base_t *b, uint64_t lo, uint64_t hi) {
    if (lo > hi) return lo;
    uint64_t z = (b->rng += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    uint64_t span = hi - lo + 1;
    return span ? lo + z % span : z;
}

#endif /* P4RT_H */
