/* Block floating point, bit for bit as hostlib/quantize.py computes it (docs/protocol.md, Quantization).
 *
 * Every step is the same float64 operation in the same order as numpy's: the scale
 * floor((2^31-1)/N) / 2^E, q = rint(x * S) with rint rounding half to even, out-of-range and NaN
 * products cast to INT32_MIN as numpy's cast does on x86-64, sums divided by the same scale, and
 * float16 rounded once, correctly, from float64 (as numpy's astype). Build with
 * -ffp-contract=off so that no multiply-add is fused. */
#ifndef P4R_QUANTIZE_H
#define P4R_QUANTIZE_H

#include <stdint.h>
#include <string.h>

#define P4R_CODE_POS_INF 1
#define P4R_CODE_NEG_INF (1 << 8)
#define P4R_CODE_NAN (1 << 16)
/* At 16 bits (two values per 32-bit word, hi * 2^16 + lo): two 6-bit counts per lane, NaN as both. */
#define P4R_CODE16_POS_INF 1
#define P4R_CODE16_NEG_INF (1 << 6)
#define P4R_CODE16_NAN (P4R_CODE16_POS_INF | P4R_CODE16_NEG_INF)
#define P4R_MIN_EXPONENT (1 - 128)
#define P4R_MAX_EXPONENT (255 - 1 - 128)
#define P4R_ZERO_EXPONENT (-126)

/* The wire exponent a chunk of n values announces: e + EXP_BIAS with max|x| < 2^e, or EXP_NONFINITE. */
uint8_t p4r_exponent_f32(const float *x, int n);
uint8_t p4r_exponent_f16(const uint16_t *x, int n);
uint8_t p4r_exponent_bf16(const uint16_t *x, int n); /* bfloat16 bit patterns */

/* S = floor((2^31 - 1) / N) / 2^e; at 16 bits floor((2^15 - 1) / N) / 2^e. */
double p4r_scale(int exponent, int world_size);
double p4r_scale16(int exponent, int world_size);

/* One chunk of n <= k values into k big-endian int32 on the wire (zeros past n), scaled with the
 * agreed wire exponent, or the non-finite codes when it is EXP_NONFINITE. `local_exponent` is the
 * chunk's own (p4r_exponent_*): when the agreed one is at least as large, every scaled value is
 * inside int32 and the range check (which only a switch lying about the maximum needs) is skipped;
 * either way the result is hostlib.quantize.quantize's. */
void p4r_quantize_f32(const float *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent, int world_size,
                      uint8_t *wire);
void p4r_quantize_f16(const uint16_t *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent, int world_size,
                      uint8_t *wire);
void p4r_quantize_bf16(const uint16_t *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent, int world_size,
                       uint8_t *wire);

/* At 16 bits: one chunk of n <= 2k values into k words, element 2j in the high lane of word j and 2j + 1
 * in its low lane, as hostlib.quantize.quantize(..., bits=16). */
void p4r_quantize16_f32(const float *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent, int world_size,
                        uint8_t *wire);
void p4r_quantize16_f16(const uint16_t *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent,
                        int world_size, uint8_t *wire);
void p4r_quantize16_bf16(const uint16_t *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent,
                         int world_size, uint8_t *wire);

/* The first n sums of a chunk of big-endian int32 sums as hostlib.quantize.dequantize gives them
 * (NaN/±Inf decoded from the codes of a non-finite block), divided by N when `average`, stored in
 * the output's dtype (numpy's cast from float64). */
void p4r_dequantize_f64(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average, double *out);
void p4r_dequantize_f32(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average, float *out);
void p4r_dequantize_f16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                        uint16_t *out);
void p4r_dequantize_bf16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                         uint16_t *out);
/* The first n lane sums of a chunk of summed words at 16 bits (n <= 2k values from k words). */
void p4r_dequantize16_f64(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                          double *out);
void p4r_dequantize16_f32(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                          float *out);
void p4r_dequantize16_f16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                          uint16_t *out);
void p4r_dequantize16_bf16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                           uint16_t *out);

/* The conversions, inline so that the loops over a chunk vectorize: integer work on the bit patterns,
 * no libm. float16 and bfloat16 widen exactly (NaN stays a NaN); float64 rounds to float16 correctly
 * (to nearest, ties to even), once, as numpy's astype(float16), NaN keeping its sign and the top bits
 * of its payload; and to bfloat16 through float32, to nearest, ties to even, NaN as 0x7FC0 (torch's
 * rule for that float32; hostlib.quantize.float_to_bfloat16). */
static inline float p4r_float_of_bits(uint32_t bits) {
    float value;
    memcpy(&value, &bits, 4);
    return value;
}

static inline double p4r_half_to_double(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, magnitude = h & 0x7FFFu;
    /* shifted into a float's fields, a finite half is 2^-112 of its value, subnormals included */
    float finite = p4r_float_of_bits(magnitude << 13) * 0x1p112f;
    uint32_t special = 0x7F800000u | (magnitude & 0x3FFu) << 13; /* Inf, or NaN with its payload */
    uint32_t bits;
    memcpy(&bits, &finite, 4);
    return (double)p4r_float_of_bits(sign | (magnitude >= 0x7C00u ? special : bits));
}

static inline uint16_t p4r_double_to_half(double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    uint16_t sign = (uint16_t)((bits >> 48) & 0x8000u);
    uint64_t magnitude = bits & 0x7FFFFFFFFFFFFFFFull, mantissa = bits & 0xFFFFFFFFFFFFFull;
    int exponent = (int)(magnitude >> 52) - 1023;
    if (exponent == 1024) {
        if (mantissa == 0) return sign | 0x7C00u;
        uint16_t payload = (uint16_t)(mantissa >> 42);
        return sign | 0x7C00u | (payload ? payload : 1u);
    }
    if (exponent >= 16) return sign | 0x7C00u;
    uint64_t significand = mantissa | (exponent > -1023 ? 1ull << 52 : 0);
    /* the half's unit in the last place, as a shift of the significand: 2^(e-10), or 2^-24 below 2^-14 */
    int shift = exponent >= -14 ? 42 : 28 - exponent;
    if (exponent == -1023) shift = 28 + 1022; /* float64 subnormals: far below half a float16 step */
    if (shift > 53) return sign;               /* under half of 2^-24 (2^-25 itself is a tie: to 0) */
    uint64_t kept = significand >> shift, rest = significand & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    kept += rest > half || (rest == half && (kept & 1));
    /* kept counts units of the last place; a carry out of the significand moves into the exponent */
    uint32_t base = exponent >= -14 ? (uint32_t)(exponent + 14) << 10 : 0;
    return sign | (uint16_t)(base + kept);
}

static inline double p4r_bf16_to_double(uint16_t b) { return (double)p4r_float_of_bits((uint32_t)b << 16); }

static inline uint16_t p4r_double_to_bf16(double d) {
    float value = (float)d; /* to nearest, ties to even; past float32's range Inf */
    uint32_t bits;
    memcpy(&bits, &value, 4);
    uint16_t rounded = (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    return d != d ? 0x7FC0u : rounded;
}

#endif
