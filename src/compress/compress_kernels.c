/* The compressors' CPU kernels: 16-bit conversion, top-k selection, sign
 * packing (compress.h). */
#include "compress/compress.h"
#include "core/log.h"
#include "kernels/reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void hcomm_cmp_to16(uint16_t *dst, const float *src, size_t n, int bf16) {
    if (bf16)
        for (size_t i = 0; i < n; i++)
            dst[i] = hcomm_float_to_bf16(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = hcomm_float_to_half(src[i]);
}

void hcomm_cmp_from16(float *acc, const uint16_t *src, size_t n, int bf16,
                      int add) {
    for (size_t i = 0; i < n; i++) {
        float v =
            bf16 ? hcomm_bf16_to_float(src[i]) : hcomm_half_to_float(src[i]);
        acc[i] = add ? acc[i] + v : v;
    }
}

/* a before b: larger magnitude, then lower index. */
static int before(const float *x, uint32_t a, uint32_t b) {
    float ma = fabsf(x[a]), mb = fabsf(x[b]);
    if (ma != mb) return ma > mb;
    return a < b;
}

static int by_index(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Quickselect on an index array: afterwards its first k entries are the k
 * first in before()'s order (in no particular order among themselves). */
void hcomm_topk_select(const float *x, size_t n, size_t k, uint32_t *idx) {
    uint32_t *all = malloc(n * sizeof(*all));
    if (!all) { /* no scratch: a full sort of the first pass is no better */
        for (size_t i = 0; i < k; i++)
            idx[i] = (uint32_t)i;
        return;
    }
    for (size_t i = 0; i < n; i++)
        all[i] = (uint32_t)i;
    size_t lo = 0, hi = n; /* the k-th lies in [lo, hi) */
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    while (hi - lo > 1) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t pivot = all[lo + (size_t)(seed >> 33) % (hi - lo)];
        /* three-way partition: before pivot | pivot | after */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (all[i] == pivot) {
                i++;
            } else if (before(x, all[i], pivot)) {
                uint32_t t = all[lt];
                all[lt++] = all[i];
                all[i++] = t;
            } else {
                uint32_t t = all[--gt];
                all[gt] = all[i];
                all[i] = t;
            }
        }
        if (k <= lt)
            hi = lt;
        else if (k > lt + (gt - lt))
            lo = gt;
        else
            break;
    }
    memcpy(idx, all, k * sizeof(*idx));
    free(all);
    qsort(idx, k, sizeof(*idx), by_index);
}

float hcomm_onebit_pack(const float *x, size_t n, uint8_t *bits) {
    double sum = 0;
    memset(bits, 0, hcomm_onebit_bytes(n));
    for (size_t i = 0; i < n; i++) {
        sum += fabs((double)x[i]);
        if (x[i] >= 0) bits[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    return n ? (float)(sum / (double)n) : 0.0f;
}

void hcomm_onebit_unpack(float *acc, const uint8_t *bits, float scale, size_t n,
                         int add) {
    for (size_t i = 0; i < n; i++) {
        float v = bits[i / 8] >> (i % 8) & 1 ? scale : -scale;
        acc[i] = add ? acc[i] + v : v;
    }
}

hcomm_status_t hcomm_compress_parse(const char *s, hcomm_compress_t *kind,
                                    double *density) {
    *density = 0;
    if (!s || !*s || strcmp(s, "none") == 0) {
        *kind = HCOMM_COMPRESS_NONE;
    } else if (strcmp(s, "bf16") == 0) {
        *kind = HCOMM_COMPRESS_BF16;
    } else if (strcmp(s, "fp16") == 0) {
        *kind = HCOMM_COMPRESS_FP16;
    } else if (strcmp(s, "onebit") == 0) {
        *kind = HCOMM_COMPRESS_ONEBIT;
    } else if (strncmp(s, "topk:", 5) == 0) {
        char *end;
        double d = strtod(s + 5, &end);
        if (end == s + 5 || *end || !(d > 0 && d <= 1))
            return hcomm_error(HCOMM_ERR_INVALID_ARG,
                               "HCOMM_COMPRESS=%s: top-k needs a density in "
                               "(0, 1], as topk:0.01",
                               s);
        *kind = HCOMM_COMPRESS_TOPK;
        *density = d;
    } else {
        return hcomm_error(HCOMM_ERR_INVALID_ARG,
                           "HCOMM_COMPRESS=%s: expected none, bf16, fp16, "
                           "topk:<density> or onebit",
                           s);
    }
    return HCOMM_SUCCESS;
}
