/* Plans (plan.h): IntPlan, FloatPlan and RefusedPlan of hostlib/reduction.py, fused with the buffers. */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "quantize.h"

/* hostlib.reduction.priming_uses: M packets of 4K bytes hold a byte per rank for each of W chunks. */
static long priming_uses(long width, int world_size, int k) {
    long bytes = 4L * k;
    return (width * world_size + bytes - 1) / bytes;
}

int p4r_plan_init(struct p4r_plan *plan, int kind, int input, const void *in, int output, void *out,
                  size_t size, int k, int world_size, int average, int raise_nonfinite, int bits) {
    memset(plan, 0, sizeof *plan);
    plan->kind = kind;
    plan->input = input;
    plan->output = output;
    plan->in = in;
    plan->out = out;
    plan->size = kind == P4R_PLAN_REFUSED ? 0 : size;
    plan->bits = kind == P4R_PLAN_FLOAT && bits == 16 ? 16 : 32;
    plan->block = plan->bits == 16 ? 2 * k : k;
    plan->count = (plan->size + (size_t)plan->block - 1) / (size_t)plan->block;
    plan->k = k;
    plan->world_size = world_size;
    plan->average = average;
    plan->raise_nonfinite = raise_nonfinite;
    if (kind == P4R_PLAN_REFUSED) {
        plan->uses = 1;
    } else if (kind == P4R_PLAN_INT) {
        plan->uses = (long)plan->count;
    } else if (plan->count) {
        plan->local = malloc(plan->count);
        plan->agreed = calloc(plan->count, 1);
        plan->table = malloc(priming_uses((long)plan->count, world_size, k) * (size_t)k * 4); /* W <= count */
        if (plan->local == NULL || plan->agreed == NULL || plan->table == NULL) {
            p4r_plan_free(plan);
            return -1;
        }
        size_t block = (size_t)plan->block;
        for (size_t c = 0; c < plan->count; c++) {
            size_t start = c * block;
            int n = (int)(plan->size - start < block ? plan->size - start : block);
            if (input == P4R_FLOAT16) {
                plan->local[c] = p4r_exponent_f16((const uint16_t *)in + start, n);
            } else if (input == P4R_BFLOAT16) {
                plan->local[c] = p4r_exponent_bf16((const uint16_t *)in + start, n);
            } else {
                plan->local[c] = p4r_exponent_f32((const float *)in + start, n);
            }
        }
    }
    return 0;
}

void p4r_plan_free(struct p4r_plan *plan) {
    free(plan->local);
    free(plan->agreed);
    free(plan->table);
    plan->local = plan->agreed = plan->table = NULL;
}

int p4r_plan_width(const struct p4r_plan *plan, int slots) {
    if (plan->kind == P4R_PLAN_REFUSED) return 1;
    return (size_t)slots < plan->count ? slots : (int)plan->count;
}

void p4r_plan_start(struct p4r_plan *plan, int width, int rank) {
    if (plan->kind != P4R_PLAN_FLOAT) return;
    plan->slots = width;
    plan->priming = plan->count ? priming_uses(width, plan->world_size, plan->k) : 0;
    plan->uses = (long)plan->count + plan->priming;
    if (plan->count == 0) return;
    size_t n = (size_t)plan->world_size;
    memset(plan->table, 0, (size_t)plan->priming * (size_t)plan->k * 4);
    for (size_t c = 0; c < (size_t)width; c++) plan->table[c * n + (size_t)rank] = plan->local[c];
}

P4R_VECTORIZED static void int_to_wire(const int32_t *in, int n, int k, uint8_t *wire) {
    for (size_t i = 0; i < (size_t)n; i++) p4r_store32(wire + 4 * i, (uint32_t)in[i]); /* size_t: see setup.py */
    memset(wire + 4 * n, 0, (size_t)(k - n) * 4);
}

/* Sums into int32; with `average` = N, op="avg": truncated towards zero, as NCCL (and
 * reduction.IntPlan through float64). */
P4R_VECTORIZED static void wire_to_int(const uint8_t *wire, int n, int average, int32_t *out) {
    if (average) {
        for (size_t i = 0; i < (size_t)n; i++) out[i] = (int32_t)trunc((double)(int32_t)p4r_load32(wire + 4 * i) / average);
    } else {
        for (size_t i = 0; i < (size_t)n; i++) out[i] = (int32_t)p4r_load32(wire + 4 * i);
    }
}

/* Elements of chunk c that are real (the last chunk may be short; the rest is zero padding). */
static int chunk_length(const struct p4r_plan *plan, size_t c) {
    size_t start = c * (size_t)plan->block;
    return plan->size - start < (size_t)plan->block ? (int)(plan->size - start) : plan->block;
}

/* The quantizer for an input dtype and wire format; the input dtypes are checked at init. */
static void quantize_chunk(const struct p4r_plan *plan, size_t start, int n, uint8_t agreed, uint8_t local,
                           uint8_t *values) {
    int k = plan->k, world = plan->world_size;
    if (plan->input == P4R_FLOAT32) {
        const float *x = (const float *)plan->in + start;
        if (plan->bits == 16) {
            p4r_quantize16_f32(x, n, k, agreed, local, world, values);
        } else {
            p4r_quantize_f32(x, n, k, agreed, local, world, values);
        }
        return;
    }
    const uint16_t *x = (const uint16_t *)plan->in + start;
    if (plan->input == P4R_FLOAT16) {
        (plan->bits == 16 ? p4r_quantize16_f16 : p4r_quantize_f16)(x, n, k, agreed, local, world, values);
    } else {
        (plan->bits == 16 ? p4r_quantize16_bf16 : p4r_quantize_bf16)(x, n, k, agreed, local, world, values);
    }
}

/* The agreed exponent of one of the first W chunks: the largest any rank put in the priming (255,
 * non-finite, wins as in the switch's maximum). */
static uint8_t primed(const struct p4r_plan *plan, size_t chunk) {
    const uint8_t *bytes = plan->table + chunk * (size_t)plan->world_size;
    uint8_t most = 0;
    for (int r = 0; r < plan->world_size; r++) most = bytes[r] > most ? bytes[r] : most;
    return most;
}

uint8_t p4r_plan_payload(struct p4r_plan *plan, long use, uint8_t agreed_exp, uint8_t *values) {
    int k = plan->k;
    if (plan->kind == P4R_PLAN_REFUSED) {
        memset(values, 0, (size_t)k * 4);
        return P4R_EXP_NONE;
    }
    if (plan->kind == P4R_PLAN_INT) {
        size_t start = (size_t)use * (size_t)k;
        int n = chunk_length(plan, (size_t)use);
        int_to_wire((const int32_t *)plan->in + start, n, k, values);
        return P4R_EXP_NONE;
    }
    /* float: uses 0 .. M-1 carry the priming's table; use u >= M carries chunk u - M, scaled with the
     * priming's agreement for the first W chunks, and announces chunk u - M + W */
    size_t bytes = (size_t)k * 4;
    if (use < plan->priming) {
        memcpy(values, plan->table + (size_t)use * bytes, bytes);
        return P4R_EXP_NONE;
    }
    size_t c = (size_t)(use - plan->priming), start = c * (size_t)plan->block;
    if (c < (size_t)plan->slots) agreed_exp = primed(plan, c);
    plan->agreed[c] = agreed_exp;
    quantize_chunk(plan, start, chunk_length(plan, c), agreed_exp, plan->local[c], values);
    size_t announce = c + (size_t)plan->slots;
    return announce < plan->count ? plan->local[announce] : P4R_EXP_NONE;
}

void p4r_plan_deliver(struct p4r_plan *plan, long use, const uint8_t *values) {
    int k = plan->k;
    if (plan->kind == P4R_PLAN_FLOAT && use < plan->priming) {
        /* the priming's sums: every rank's exponents of the first W chunks */
        memcpy(plan->table + (size_t)use * (size_t)k * 4, values, (size_t)k * 4);
        return;
    }
    if (plan->kind == P4R_PLAN_REFUSED || plan->out == NULL) return;
    if (plan->kind == P4R_PLAN_INT) {
        size_t start = (size_t)use * (size_t)k;
        int n = chunk_length(plan, (size_t)use);
        wire_to_int(values, n, plan->average ? plan->world_size : 0, (int32_t *)plan->out + start);
        return;
    }
    size_t c = (size_t)(use - plan->priming), start = c * (size_t)plan->block;
    int n = chunk_length(plan, c), world = plan->world_size, average = plan->average, wide = plan->bits == 32;
    uint8_t e = plan->agreed[c];
    if (plan->output == P4R_FLOAT32) {
        float *out = (float *)plan->out + start;
        (wide ? p4r_dequantize_f32 : p4r_dequantize16_f32)(values, n, e, world, average, out);
    } else if (plan->output == P4R_FLOAT16) {
        uint16_t *out = (uint16_t *)plan->out + start;
        (wide ? p4r_dequantize_f16 : p4r_dequantize16_f16)(values, n, e, world, average, out);
    } else if (plan->output == P4R_BFLOAT16) {
        uint16_t *out = (uint16_t *)plan->out + start;
        (wide ? p4r_dequantize_bf16 : p4r_dequantize16_bf16)(values, n, e, world, average, out);
    } else if (plan->output == P4R_FLOAT64) {
        double *out = (double *)plan->out + start;
        (wide ? p4r_dequantize_f64 : p4r_dequantize16_f64)(values, n, e, world, average, out);
    }
}

size_t p4r_plan_nonfinite_blocks(const struct p4r_plan *plan, size_t *first) {
    size_t blocks = 0;
    *first = 0;
    if (plan->kind != P4R_PLAN_FLOAT) return 0;
    for (size_t c = 0; c < plan->count; c++) {
        if (plan->agreed[c] == P4R_EXP_NONFINITE) {
            if (blocks++ == 0) *first = c;
        }
    }
    return blocks;
}
