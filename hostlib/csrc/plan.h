/* What one call sends and where its results go: the native twin of hostlib/reduction.py.
 *
 * The plan reads the caller's input buffer and writes the caller's output buffer directly:
 * quantization happens as each DATA is built (p4r_plan_payload) and dequantization as each
 * RESULT arrives (p4r_plan_deliver), so no intermediate arrays exist. */
#ifndef P4R_PLAN_H
#define P4R_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* BFLOAT16: bfloat16 bit patterns (uint16), as torch holds them. */
enum p4r_dtype { P4R_NONE = 0, P4R_INT32 = 1, P4R_FLOAT32 = 2, P4R_FLOAT16 = 3, P4R_FLOAT64 = 4, P4R_BFLOAT16 = 5 };
enum p4r_plan_kind { P4R_PLAN_INT = 1, P4R_PLAN_FLOAT = 2, P4R_PLAN_REFUSED = 3 };

struct p4r_plan {
    int kind;
    int input;  /* enum p4r_dtype of `in` */
    int output; /* enum p4r_dtype of `out`: int32 for int plans; float32, float16, bfloat16 or float64 */
    const void *in;
    void *out;
    size_t size;  /* elements */
    size_t count; /* chunks of `block` elements */
    int k, world_size, average, raise_nonfinite;
    int bits;  /* the wire format: 32, or 16 (floats: two values per word) */
    int block; /* elements per chunk: k, or 2k at 16 bits */
    int slots;    /* W, once started */
    long priming; /* M: the uses that prime the first W chunks (float plans, once started) */
    long uses;
    uint8_t *local;  /* per chunk: the wire exponent it announces (float plans) */
    uint8_t *agreed; /* per chunk: the exponent it was sent with (float plans) */
    uint8_t *table;  /* the priming's payloads, then its sums: byte c * N + r is rank r's exponent of chunk c */
};

/* Sets up a plan over caller-owned buffers; returns 0, or -1 when out of memory. Float plans
 * compute every chunk's exponent here. */
int p4r_plan_init(struct p4r_plan *plan, int kind, int input, const void *in, int output, void *out,
                  size_t size, int k, int world_size, int average, int raise_nonfinite, int bits);
void p4r_plan_free(struct p4r_plan *plan);

int p4r_plan_width(const struct p4r_plan *plan, int slots);
/* The engine's W and rank: a float plan's uses become count + M (hostlib.reduction.priming_uses). */
void p4r_plan_start(struct p4r_plan *plan, int width, int rank);

/* Use `use`'s K values (big-endian) into `values`; returns the exponent its header carries. */
uint8_t p4r_plan_payload(struct p4r_plan *plan, long use, uint8_t agreed_exp, uint8_t *values);

/* The result of `use`: values is K big-endian int32 sums (words of two lane sums at 16 bits). */
void p4r_plan_deliver(struct p4r_plan *plan, long use, const uint8_t *values);

/* Chunks whose agreed exponent said non-finite; the first's index in *first. */
size_t p4r_plan_nonfinite_blocks(const struct p4r_plan *plan, size_t *first);

#endif
