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
    /* shifted into a float's fields, a finite half is 2^-112 of its value, subnormals included: the
     * product by 2^112 is exact. Inf and NaN (payload kept) go to the float's top exponent instead. */
    uint32_t finite_bits, special = 0x7F800000u | (magnitude & 0x3FFu) << 13;
    float finite = p4r_float_of_bits(magnitude << 13) * 0x1p112f;
    memcpy(&finite_bits, &finite, 4);
    uint32_t is_special = 0u - (uint32_t)(magnitude >= 0x7C00u); /* all ones or zero: no branch */
    return (double)p4r_float_of_bits(sign | (special & is_special) | (finite_bits & ~is_special));
}

/* Integer selects only, so that the loops storing float16 vectorize: |d| + c with c = 2^(e + 42) (never
 * under 2^28, the subnormals' fixed step) rounds |d| to float16's step at its exponent, to nearest even,
 * in one float64 addition; the rounded magnitude's bits then are the float16's (for a subnormal, the
 * sum's mantissa counts its steps of 2^-24). Magnitudes from 65520 (65504 and half a step) are Inf. */
static inline uint16_t p4r_double_to_half(double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    uint64_t sign = (bits >> 48) & 0x8000u, magnitude = bits & 0x7FFFFFFFFFFFFFFFull;
    uint64_t clamped_bits = magnitude < 0x40F0000000000000ull ? magnitude : 0x40F0000000000000ull; /* 65536 */
    uint64_t exponent = clamped_bits >> 52;
    exponent = exponent > 1009 ? exponent : 1009; /* 2^-14: below it the step is 2^-24 */
    uint64_t step_bits = (exponent + 42) << 52, sum_bits, rounded_bits;
    double clamped, step;
    memcpy(&clamped, &clamped_bits, 8);
    memcpy(&step, &step_bits, 8);
    double sum = clamped + step, rounded = sum - step;
    memcpy(&sum_bits, &sum, 8);
    memcpy(&rounded_bits, &rounded, 8);
    uint64_t normal = (rounded_bits >> 42) - (1008ull << 10); /* rebias 1023 -> 15 */
    uint64_t subnormal = sum_bits & 0xFFFFFFFFFFFFFull;
    uint64_t half = rounded_bits >= 0x3F10000000000000ull ? normal : subnormal; /* 2^-14 */
    half = magnitude >= 0x40EFFE0000000000ull ? 0x7C00u : half;                  /* 65520 */
    uint64_t payload = (bits >> 42) & 0x3FFu; /* a NaN keeps its sign and its payload's top bits */
    uint64_t nan = 0x7C00u | (payload ? payload : 1u);
    half = magnitude > 0x7FF0000000000000ull ? nan : half;
    return (uint16_t)(sign | half);
}

static inline double p4r_bf16_to_double(uint16_t b) { return (double)p4r_float_of_bits((uint32_t)b << 16); }

static inline uint16_t p4r_double_to_bf16(double d) {
    float value = (float)d; /* to nearest, ties to even; past float32's range Inf */
    uint32_t bits;
    memcpy(&bits, &value, 4);
    uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    uint32_t is_nan = 0u - (uint32_t)((bits & 0x7FFFFFFFu) > 0x7F800000u); /* no branch */
    return (uint16_t)((0x7FC0u & is_nan) | (rounded & ~is_nan));
}

#endif
