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

#define P4R_CODE_POS_INF 1
#define P4R_CODE_NEG_INF (1 << 8)
#define P4R_CODE_NAN (1 << 16)
#define P4R_MIN_EXPONENT (1 - 128)
#define P4R_MAX_EXPONENT (255 - 1 - 128)
#define P4R_ZERO_EXPONENT (-126)

/* The wire exponent a chunk of n values announces: e + EXP_BIAS with max|x| < 2^e, or EXP_NONFINITE. */
uint8_t p4r_exponent_f32(const float *x, int n);
uint8_t p4r_exponent_f16(const uint16_t *x, int n);

/* S = floor((2^31 - 1) / N) / 2^e. */
double p4r_scale(int exponent, int world_size);

/* One chunk of n <= k values into k big-endian int32 on the wire (zeros past n), scaled with the
 * agreed wire exponent, or the non-finite codes when it is EXP_NONFINITE. `local_exponent` is the
 * chunk's own (p4r_exponent_*): when the agreed one is at least as large, every scaled value is
 * inside int32 and the range check (which only a switch lying about the maximum needs) is skipped;
 * either way the result is hostlib.quantize.quantize's. */
void p4r_quantize_f32(const float *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent, int world_size,
                      uint8_t *wire);
void p4r_quantize_f16(const uint16_t *x, int n, int k, uint8_t wire_exponent, uint8_t local_exponent, int world_size,
                      uint8_t *wire);

/* The first n sums of a chunk of big-endian int32 sums as hostlib.quantize.dequantize gives them
 * (NaN/±Inf decoded from the codes of a non-finite block), divided by N when `average`, stored in
 * the output's dtype (numpy's cast from float64). */
void p4r_dequantize_f64(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average, double *out);
void p4r_dequantize_f32(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average, float *out);
void p4r_dequantize_f16(const uint8_t *wire, int n, uint8_t wire_exponent, int world_size, int average,
                        uint16_t *out);

double p4r_half_to_double(uint16_t h);
uint16_t p4r_double_to_half(double d);

#endif
