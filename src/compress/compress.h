/* Compression inside AllReduce (hcomm.h, "compression"): the CPU kernels
 * (compress_kernels.c) and the per-tensor error-feedback state. */
#ifndef HCOMM_COMPRESS_H
#define HCOMM_COMPRESS_H

#include "hcomm.h"

#include <stddef.h>
#include <stdint.h>

struct hcomm_compress_state {
    hcomm_comm_t comm;
    size_t count;
    int device;    /* where the residuals are: that GPU's memory, or -1 */
    float *worker; /* count: what this rank's input did not send */
    float *server; /* a chunk: what this rank's reduced chunk did not */
    size_t chunk;  /* the server residual's length (0 until first use) */
};

/* dst[i] = src[i] as bfloat16 (bf16 != 0) or float16, nearest even. */
void hcomm_cmp_to16(uint16_t *dst, const float *src, size_t n, int bf16);
/* acc[i] += (float)src[i] (assign when add is 0). */
void hcomm_cmp_from16(float *acc, const uint16_t *src, size_t n, int bf16,
                      int add);

/* out = the 16-bit rounding of the fp32 sum of the nin chunks of m values
 * at in (chunk p at in + p * m, added in that order), divided by divisor
 * when it is above 1: the reduction of what nin ranks sent in 16 bits. */
void hcomm_cmp_sum16(uint16_t *out, const uint16_t *in, size_t nin, size_t m,
                     int bf16, int divisor);

/* The k (at most n; none for 0) indices of the values of largest
 * magnitude, in increasing order (ties: the lower index first, so every
 * rank and every run pick alike; NaN counts as larger than infinity, as on
 * the GPU). */
void hcomm_topk_select(const float *x, size_t n, size_t k, uint32_t *idx);

/* hcomm_topk_select's k values of x as (index, value bits) pairs, in
 * increasing index order; where residual is not NULL, residual = x with
 * those k set to 0 (residual may be x itself). 0, or HCOMM_ERR_NO_MEMORY. */
hcomm_status_t hcomm_topk_pairs(const float *x, size_t n, size_t k,
                                uint32_t *pairs, float *residual);
/* out[index] += value for each of the k pairs whose index is below n (a
 * peer's wrong index changes nothing). */
void hcomm_topk_add(float *out, const uint32_t *pairs, size_t k, size_t n);

/* Bytes of n signs, packed 8 to a byte. */
static inline size_t hcomm_onebit_bytes(size_t n) {
    return (n + 7) / 8;
}
/* Packs the signs of x (bit set: x >= 0) and returns the scale, the mean
 * of |x| (0 for n 0): x is sent as scale * sign. */
float hcomm_onebit_pack(const float *x, size_t n, uint8_t *bits);
/* acc[i] += scale * sign (assign when add is 0). */
void hcomm_onebit_unpack(float *acc, const uint8_t *bits, float scale, size_t n,
                         int add);

/* One chunk of m values as 1-bit: its record (the scale's 4 bytes, then
 * the signs; 4-byte aligned), of hcomm_onebit_record_bytes(m) bytes. */
static inline size_t hcomm_onebit_record_bytes(size_t m) {
    return (4 + hcomm_onebit_bytes(m) + 3) / 4 * 4;
}
/* The record of x; where res is not NULL, res = x - scale * sign (what
 * the record did not carry; res may be x itself). */
void hcomm_onebit_encode(const float *x, size_t m, uint8_t *rec, float *res);
/* acc[i] (+)= scale * sign of the record's element i. */
void hcomm_onebit_decode(float *acc, const uint8_t *rec, size_t m, int add);

/* "none", "bf16", "fp16", "topk:<density>", "onebit", "auto" into *kind
 * and *density, and "auto:topk:<density>" or "auto:onebit" into AUTO with
 * *lossy the lossy scheme it may pick (else NONE); an error naming the
 * value otherwise. */
hcomm_status_t hcomm_compress_parse(const char *s, hcomm_compress_t *kind,
                                    double *density, hcomm_compress_t *lossy);
/* How many pieces a by-node call of count floats on L ranks a node runs
 * in (compress_coll.c), each of *S elements (a multiple of L) from the
 * start; 0 where it runs whole. */
size_t hcomm_compress_pieces(hcomm_compress_t kind, int on_gpu, size_t count,
                             size_t L, size_t *S);
/* A scheme's name, as HCOMM_COMPRESS spells it ("topk", "bf16", ...). */
const char *hcomm_compress_name(hcomm_compress_t k);
/* What AUTO picks from the times it measured (us; lossy_us where lossy is
 * not NONE): a lossier scheme only where it is 20% faster than the best
 * less lossy one. */
hcomm_compress_t hcomm_compress_auto_pick(double none_us, double bf16_us,
                                          double lossy_us,
                                          hcomm_compress_t lossy);

#endif
