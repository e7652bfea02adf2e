/* Block floating point (quantize.h): the native twin of hostlib/quantize.py. */
#include "quantize.h"

#include <math.h>
#include <string.h>

#include "protocol.h"

#define INT32_MAX_D 2147483647.0
#define OVERFLOW_BITS_F32 0x7E800000u /* 2^126 as float32 bits: the quantization cannot carry it */

static uint8_t wire_of_peak(double peak) {
    int exponent;
    if (peak == 0.0) {
        exponent = P4R_ZERO_EXPONENT;
    } else {
        frexp(peak, &exponent); /* peak = m * 2^exponent, 0.5 <= m < 1 */
    }
    if (exponent < P4R_MIN_EXPONENT) exponent = P4R_MIN_EXPONENT;
    if (exponent > P4R_MAX_EXPONENT) exponent = P4R_MAX_EXPONENT;
    return (uint8_t)(exponent + P4R_EXP_BIAS);
}

/* The largest magnitude as the largest sign-less bit pattern: IEEE magnitudes order like their bits,
 * Inf is the exponent field full and NaN above it, so one integer max finds all three. */
P4R_VECTORIZED uint8_t p4r_exponent_f32(const float *x, int n) {
    uint32_t peak = 0;
    for (int i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        bits &= 0x7FFFFFFFu;
        peak = bits > peak ? bits : peak;
    }
    if (peak >= OVERFLOW_BITS_F32) return P4R_EXP_NONFINITE; /* NaN, Inf or >= 2^126 */
    float value;
    memcpy(&value, &peak, 4);
    return wire_of_peak((double)value);
}

P4R_VECTORIZED uint8_t p4r_exponent_f16(const uint16_t *x, int n) {
    uint16_t peak = 0;
    for (int i = 0; i < n; i++) {
        uint16_t bits = x[i] & 0x7FFFu;
        peak = bits > peak ? bits : peak;
    }
    if (peak >= 0x7C00u) return P4R_EXP_NONFINITE; /* NaN or Inf; float16 never reaches 2^126 */
    return wire_of_peak(p4r_half_to_double(peak));
}

P4R_VECTORIZED uint8_t p4r_exponent_bf16(const uint16_t *x, int n) {
    uint16_t peak = 0;
    for (int i = 0; i < n; i++) {
        uint16_t bits = x[i] & 0x7FFFu;
        peak = bits > peak ? bits : peak;
    }
    if (peak >= (OVERFLOW_BITS_F32 >> 16)) return P4R_EXP_NONFINITE; /* NaN, Inf or >= 2^126 */
    return wire_of_peak(p4r_bf16_to_double(peak));
}

double p4r_scale(int exponent, int world_size) {
    return (double)(2147483647 / world_size) / ldexp(1.0, exponent);
}

double p4r_scale16(int exponent, int world_size) { return (double)(32767 / world_size) / ldexp(1.0, exponent); }

/* np.rint(y).astype(int32) on x86-64: round half to even, then cvttsd2si's INT32_MIN for NaN and
 * out-of-range values. Adding and subtracting 1.5 * 2^52 rounds any |y| < 2^51 to an integer in the
 * current (default: to nearest, ties to even) mode exactly as rint does; anything larger, Inf and
 * NaN stay outside int32's range and become INT32_MIN. No branch and no libm call: it vectorizes. */
static inline int32_t rint_to_int32(double y) {
    double r = (y + 0x1.8p52) - 0x1.8p52;
    return (int32_t)(r >= -2147483648.0 && r <= INT32_MAX_D ? r : -2147483648.0);
}

/* An element's code in a non-finite block, in the format's codes (hostlib.quantize.nonfinite_codes). */
static uint32_t code_of(double x, uint32_t positive, uint32_t negative, uint32_t nan) {
    if (isnan(x)) return nan;
    if (x >= 0x1p126) return positive;
    if (x <= -0x1p126) return negative;
    return 0;
}

static uint32_t nonfinite_code(double x) { return code_of(x, P4R_CODE_POS_INF, P4R_CODE_NEG_INF, P4R_CODE_NAN); }

static uint32_t nonfinite_code16(double x) {
    return code_of(x, P4R_CODE16_POS_INF, P4R_CODE16_NEG_INF, P4R_CODE16_NAN);
}

/* rint_to_int32 for a y known to be inside int32 (|y| < 2^31 - 1): the same rounding, no range check. */
static inline int32_t rint_in_range(double y) { return (int32_t)((y + 0x1.8p52) - 0x1.8p52); }

/* The loop body of both dtypes: x is the float64 value of element i. The loops count in size_t: with
 * Python's -fwrapv an int `4 * i` may wrap, and GCC would not vectorize them (setup.py). With
 * |x| < 2^local and local <= agreed, |x * S| < floor((2^31 - 1) / N): no value leaves int32. */
#define QUANTIZE_CHUNK(LOAD)                                                                     \
    do {                                                                                         \
        if (wire_exponent == P4R_EXP_NONFINITE) {                                                \
            for (int i = 0; i < n; i++) p4r_store32(wire + 4 * i, nonfinite_code(LOAD));         \
        } else {                                                                                 \
            double s = p4r_scale((int)wire_exponent - P4R_EXP_BIAS, world_size);                 \
            if (local_exponent != P4R_EXP_NONFINITE && local_exponent <= wire_exponent) {        \
                for (size_t i = 0; i < (size_t)n; i++)                                           \
                    p4r_store32(wire + 4 * i, (uint32_t)rint_in_range((LOAD) * s));              \
            } else {                                                                             \
                for (size_t i = 0; i < (size_t)n; i++)                                           \
                    p4r_store32(wire + 4 * i, (uint32_t)rint_to_int32((LOAD) * s));              \
            }                                                                                    \
        }                                                                                        \
        memset(wire + 4 * n, 0, (size_t)(k - n) * 4);                                            \
    } while (0)

P4R_VECTORIZED void p4r_quantize_f32(const float *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent,
                                     int world_size, uint8_t *wire) {
    QUANTIZE_CHUNK((double)x[i]);
}

P4R_VECTORIZED void p4r_quantize_f16(const uint16_t *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent,
                                     int world_size, uint8_t *wire) {
    QUANTIZE_CHUNK(p4r_half_to_double(x[i]));
}

P4R_VECTORIZED void p4r_quantize_bf16(const uint16_t *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent,
                                      int world_size, uint8_t *wire) {
    QUANTIZE_CHUNK(p4r_bf16_to_double(x[i]));
}

/* Two int32 q (each inside int16 unless a switch lied) as one word, hi * 2^16 + lo, wrapping. */
static inline uint32_t pair_word(int32_t hi, int32_t lo) { return ((uint32_t)hi << 16) + (uint32_t)lo; }

/* QUANTIZE_CHUNK at 16 bits: Q(i) is element i's int32 (0 past n), paired into word i / 2. The full pairs
 * are a loop of their own so that it vectorizes; an odd n leaves one high lane with a zero low lane. */
#define QUANTIZE16_PAIRS(Q)                                                                      \
    do {                                                                                         \
        size_t pairs = (size_t)n / 2;                                                            \
        for (size_t j = 0; j < pairs; j++) p4r_store32(wire + 4 * j, pair_word(Q(2 * j), Q(2 * j + 1))); \
        if (n & 1) p4r_store32(wire + 4 * pairs, pair_word(Q((size_t)n - 1), 0));                \
        size_t filled = ((size_t)n + 1) / 2;                                                     \
        memset(wire + 4 * filled, 0, ((size_t)k - filled) * 4);                                  \
    } while (0)

#define QUANTIZE16_CHUNK()                                                                       \
    do {                                                                                         \
        if (wire_exponent == P4R_EXP_NONFINITE) {                                                \
            QUANTIZE16_PAIRS(CODE16_OF);                                                         \
            return;                                                                              \
        }                                                                                        \
        double s = p4r_scale16((int)wire_exponent - P4R_EXP_BIAS, world_size);                   \
        if (local_exponent != P4R_EXP_NONFINITE && local_exponent <= wire_exponent) {            \
            QUANTIZE16_PAIRS(IN_RANGE_OF);                                                       \
        } else {                                                                                 \
            QUANTIZE16_PAIRS(CHECKED_OF);                                                        \
        }                                                                                        \
    } while (0)

#define CODE16_OF(i) ((int32_t)nonfinite_code16(LOAD_AT(i)))
#define IN_RANGE_OF(i) rint_in_range(LOAD_AT(i) * s)
#define CHECKED_OF(i) rint_to_int32(LOAD_AT(i) * s)

#define LOAD_AT(i) ((double)x[i])
P4R_VECTORIZED void p4r_quantize16_f32(const float *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent,
                                       int world_size, uint8_t *wire) {
    QUANTIZE16_CHUNK();
}
#undef LOAD_AT

#define LOAD_AT(i) p4r_half_to_double(x[i])
P4R_VECTORIZED void p4r_quantize16_f16(const uint16_t *x, int n, int k, uint8_t wire_exponent,
                                       uint8_t local_exponent, int world_size, uint8_t *wire) {
    QUANTIZE16_CHUNK();
}
#undef LOAD_AT

#define LOAD_AT(i) p4r_bf16_to_double(x[i])
P4R_VECTORIZED void p4r_quantize16_bf16(const uint16_t *x, int n, int k, uint8_t wire_exponent,
                                        uint8_t local_exponent, int world_size, uint8_t *wire) {
    QUANTIZE16_CHUNK();
}
#undef LOAD_AT

/* hostlib.quantize.decode_nonfinite: NaN unless exactly one infinity's sign (and no NaN) was counted. */
static double decode_counts(uint32_t positive, uint32_t negative, uint32_t nan) {
    if (nan == 0 && positive > 0 && negative == 0) return INFINITY;
    if (nan == 0 && negative > 0 && positive == 0) return -INFINITY;
    return NAN;
}

static double decode_code(uint32_t counts) {
    return decode_counts(counts & 0xFF, (counts >> 8) & 0xFF, (counts >> 16) & 0xFF);
}

/* sum * (1 / S) (then / N for an average) for every element, in float64, cast to the output by STORE:
 * a multiplication by the reciprocal, as hostlib.quantize.dequantize, costs a fraction of a division per
 * element. The common case (finite, a sum) is a loop of its own so that it vectorizes. */
#define DEQUANTIZE_CHUNK(STORE)                                                                  \
    do {                                                                                         \
        if (wire_exponent == P4R_EXP_NONFINITE) {                                                \
            for (int i = 0; i < n; i++) {                                                        \
                double v = decode_code(p4r_load32(wire + 4 * i));                                \
                STORE(average ? v / world_size : v);                                             \
            }                                                                                    \
            return;                                                                              \
        }                                                                                        \
        double r = 1.0 / p4r_scale((int)wire_exponent - P4R_EXP_BIAS, world_size), w = world_size; \
        if (average) {                                                                           \
            for (size_t i = 0; i < (size_t)n; i++) STORE((double)(int32_t)p4r_load32(wire + 4 * i) * r / w); \
        } else {                                                                                 \
            for (size_t i = 0; i < (size_t)n; i++) STORE((double)(int32_t)p4r_load32(wire + 4 * i) * r); \
        }                                                                                        \
    } while (0)

#define STORE_F64(v) (out[i] = (v))
#define STORE_F32(v) (out[i] = (float)(v))
#define STORE_F16(v) (out[i] = p4r_double_to_half(v))
#define STORE_BF16(v) (out[i] = p4r_double_to_bf16(v))

/* One lane sum at 16 bits: a NaN was counted as both infinities. */
static double decode_code16(int32_t counts) { return decode_counts(counts & 63, (counts >> 6) & 63, 0); }

/* The lane sums of a summed word (hostlib.quantize.unpack_pairs): lo is its low 16 bits as a signed
 * number, hi what remains once lo is taken away. */
static inline int32_t low_lane(uint32_t w) { return (int32_t)(int16_t)(uint16_t)w; }
static inline int32_t high_lane(uint32_t w) { return (int32_t)(int16_t)(uint16_t)((w - (uint32_t)low_lane(w)) >> 16); }
/* DEQUANTIZE_CHUNK at 16 bits: word j holds elements 2j (high lane) and 2j + 1 (low lane). The full
 * words are a loop of their own so that it vectorizes; an odd n ends in a word's high lane alone. */
#define DEQUANTIZE16_WORDS(VALUE, STORE)                                                         \
    do {                                                                                         \
        size_t words = (size_t)n / 2;                                                            \
        for (size_t j = 0; j < words; j++) {                                                     \
            uint32_t word = p4r_load32(wire + 4 * j);                                            \
            size_t i = 2 * j;                                                                    \
            STORE(VALUE(high_lane(word)));                                                       \
            i = 2 * j + 1;                                                                       \
            STORE(VALUE(low_lane(word)));                                                        \
        }                                                                                        \
        if (n & 1) {                                                                             \
            size_t i = (size_t)n - 1;                                                            \
            STORE(VALUE(high_lane(p4r_load32(wire + 4 * words))));                               \
        }                                                                                        \
    } while (0)

#define DEQUANTIZE16_CHUNK(STORE)                                                                \
    do {                                                                                         \
        if (wire_exponent == P4R_EXP_NONFINITE) {                                                \
            DEQUANTIZE16_WORDS(DECODED, STORE);                                                  \
            return;                                                                              \
        }                                                                                        \
        double r = 1.0 / p4r_scale16((int)wire_exponent - P4R_EXP_BIAS, world_size), w = world_size; \
        if (average) {                                                                           \
            DEQUANTIZE16_WORDS(AVERAGED, STORE);                                                 \
        } else {                                                                                 \
            DEQUANTIZE16_WORDS(SUMMED, STORE);                                                   \
        }                                                                                        \
    } while (0)

#define DECODED(lane) (average ? decode_code16(lane) / world_size : decode_code16(lane))
#define SUMMED(lane) ((double)(lane) * r)
#define AVERAGED(lane) ((double)(lane) * r / w)

P4R_VECTORIZED void p4r_dequantize_bf16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size,
                                        int average, uint16_t *out) {
    DEQUANTIZE_CHUNK(STORE_BF16);
}

P4R_VECTORIZED void p4r_dequantize16_f64(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size,
                                         int average, double *out) {
    DEQUANTIZE16_CHUNK(STORE_F64);
}

P4R_VECTORIZED void p4r_dequantize16_f32(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size,
                                         int average, float *out) {
    DEQUANTIZE16_CHUNK(STORE_F32);
}

P4R_VECTORIZED void p4r_dequantize16_f16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size,
                                         int average, uint16_t *out) {
    DEQUANTIZE16_CHUNK(STORE_F16);
}

P4R_VECTORIZED void p4r_dequantize16_bf16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size,
                                          int average, uint16_t *out) {
    DEQUANTIZE16_CHUNK(STORE_BF16);
}

P4R_VECTORIZED void p4r_dequantize_f64(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average, double *out) {
    DEQUANTIZE_CHUNK(STORE_F64);
}

P4R_VECTORIZED void p4r_dequantize_f32(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average, float *out) {
    DEQUANTIZE_CHUNK(STORE_F32);
}

P4R_VECTORIZED void p4r_dequantize_f16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                        uint16_t *out) {
    DEQUANTIZE_CHUNK(STORE_F16);
}
