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

double p4r_scale(int exponent, int world_size) {
    return (double)(2147483647 / world_size) / ldexp(1.0, exponent);
}

/* np.rint(y).astype(int32) on x86-64: round half to even, then cvttsd2si's INT32_MIN for NaN and
 * out-of-range values. Adding and subtracting 1.5 * 2^52 rounds any |y| < 2^51 to an integer in the
 * current (default: to nearest, ties to even) mode exactly as rint does; anything larger, Inf and
 * NaN stay outside int32's range and become INT32_MIN. No branch and no libm call: it vectorizes. */
static inline int32_t rint_to_int32(double y) {
    double r = (y + 0x1.8p52) - 0x1.8p52;
    return (int32_t)(r >= -2147483648.0 && r <= INT32_MAX_D ? r : -2147483648.0);
}

static uint32_t nonfinite_code(double x) {
    if (isnan(x)) return P4R_CODE_NAN;
    if (x >= 0x1p126) return P4R_CODE_POS_INF;
    if (x <= -0x1p126) return P4R_CODE_NEG_INF;
    return 0;
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

/* hostlib.quantize.decode_nonfinite: NaN unless exactly one infinity's sign (and no NaN) was counted. */
static double decode_code(uint32_t counts) {
    uint32_t positive = counts & 0xFF, negative = (counts >> 8) & 0xFF, nan = (counts >> 16) & 0xFF;
    if (nan == 0 && positive > 0 && negative == 0) return INFINITY;
    if (nan == 0 && negative > 0 && positive == 0) return -INFINITY;
    return NAN;
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

double p4r_half_to_double(uint16_t h) {
    int sign = h >> 15, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    double value;
    if (exponent == 0) {
        value = ldexp((double)mantissa, -24);
    } else if (exponent == 31) {
        value = mantissa ? NAN : INFINITY;
    } else {
        value = ldexp((double)(mantissa | 0x400), exponent - 25);
    }
    return sign ? -value : value;
}

/* Correctly rounded (to nearest, ties to even) from float64, as numpy's astype(float16): one
 * rounding, not two through float32. NaN keeps its sign and the top bits of its payload. */
uint16_t p4r_double_to_half(double d) {
    uint64_t bits;
    memcpy(&bits, &d, 8);
    uint16_t sign = (uint16_t)((bits >> 48) & 0x8000u);
    uint64_t exponent = (bits >> 52) & 0x7FF, mantissa = bits & 0xFFFFFFFFFFFFFull;
    if (exponent == 0x7FF) {
        if (mantissa == 0) return sign | 0x7C00u;
        uint16_t payload = (uint16_t)(mantissa >> 42);
        return sign | 0x7C00u | (payload ? payload : 1u);
    }
    double magnitude = fabs(d);
    if (magnitude >= 65520.0) return sign | 0x7C00u; /* rounds to Inf: 65504 + half an ulp and above */
    if (magnitude < 0x1p-14) {
        /* subnormal half: a multiple of 2^-24; scaling by a power of two is exact, rint rounds half-even */
        return sign | (uint16_t)rint(magnitude * 0x1p24);
    }
    int e;
    double m = frexp(magnitude, &e); /* magnitude = m * 2^e, 0.5 <= m < 1; half exponent = e - 1 */
    double scaled = rint(ldexp(m, 11)); /* 11 significant bits: 1024 .. 2048 */
    if (scaled == 2048.0) {
        scaled = 1024.0;
        e += 1;
    }
    return sign | (uint16_t)((e - 1 + 15) << 10) | ((uint16_t)scaled & 0x3FFu);
}
