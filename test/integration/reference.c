/* Reference inputs and results for the integration tests. */
#include "reference.h"
#include "kernels/reduce.h"

#include <string.h>

static int is_float(hcomm_dtype_t t) {
    return t >= HCOMM_FLOAT16;
}
static int is_signed(hcomm_dtype_t t) {
    return t == HCOMM_INT8 || t == HCOMM_INT32 || t == HCOMM_INT64;
}

/* The input of rank r at index i: small integers, chosen so that int8 and
 * uint8 sums and products wrap and float results stay exact. */
int64_t ref_input(hcomm_dtype_t t, hcomm_op_t op, int r, size_t i) {
    int narrow = t == HCOMM_INT8 || t == HCOMM_UINT8;
    switch (op) {
    case HCOMM_PROD: {
        static const int64_t s[3] = {1, -1, 2}, u[3] = {1, 2, 3};
        return (is_signed(t) || is_float(t) ? s : u)[(r + i) % 3];
    }
    case HCOMM_MAX:
    case HCOMM_MIN: {
        int64_t v = (int64_t)((r * 13 + i * 5) % 17);
        return is_signed(t) || is_float(t) ? v - 8 : v;
    }
    default: {
        if (narrow) return (int64_t)((r * 37 + i * 11) % 120);
        int64_t v = (int64_t)((r * 7 + i * 3) % 11);
        return is_signed(t) || is_float(t) ? v - 5 : v;
    }
    }
}

/* Through memcpy: the tests pass buffers at odd offsets on purpose. */
void ref_store(hcomm_dtype_t t, void *buf, size_t i, double f, int64_t v) {
    char *p = (char *)buf + i * hcomm_dtype_size(t);
    switch (t) {
    case HCOMM_INT8:
    case HCOMM_UINT8:
        *(uint8_t *)p = (uint8_t)v;
        break;
    case HCOMM_INT32:
    case HCOMM_UINT32: {
        uint32_t u = (uint32_t)v;
        memcpy(p, &u, 4);
        break;
    }
    case HCOMM_INT64:
    case HCOMM_UINT64: {
        uint64_t u = (uint64_t)v;
        memcpy(p, &u, 8);
        break;
    }
    case HCOMM_FLOAT16: {
        _Float16 h = (_Float16)(float)f;
        memcpy(p, &h, 2);
        break;
    }
    case HCOMM_BFLOAT16: {
        uint16_t b = hcomm_float_to_bf16((float)f);
        memcpy(p, &b, 2);
        break;
    }
    case HCOMM_FLOAT32: {
        float x = (float)f;
        memcpy(p, &x, 4);
        break;
    }
    case HCOMM_FLOAT64:
        memcpy(p, &f, 8);
        break;
    default:
        break;
    }
}

/* The reduction of every rank's input at index i, written into buf[i]. */
void ref_expect(hcomm_dtype_t t, hcomm_op_t op, int n, size_t base, size_t i,
                void *buf) {
    uint64_t acc = op == HCOMM_PROD ? 1 : 0;
    int64_t best = ref_input(t, op, 0, base + i);
    double facc = op == HCOMM_PROD ? 1 : 0;
    for (int r = 0; r < n; r++) {
        int64_t v = ref_input(t, op, r, base + i);
        if (op == HCOMM_PROD) {
            acc *= (uint64_t)v;
            facc *= (double)v;
        } else {
            acc += (uint64_t)v;
            facc += (double)v;
        }
        if (op == HCOMM_MAX && v > best) best = v;
        if (op == HCOMM_MIN && v < best) best = v;
    }
    if (op == HCOMM_MAX || op == HCOMM_MIN) {
        ref_store(t, buf, i, (double)best, best);
        return;
    }
    if (op != HCOMM_AVG || !is_float(t)) {
        ref_store(t, buf, i, facc, (int64_t)acc);
        if (op != HCOMM_AVG) return;
        /* Integer average: the wrapped sum, divided in the type. */
        char *p = (char *)buf + i * hcomm_dtype_size(t);
#define DIV_IN_PLACE(T, d)                                                     \
    {                                                                          \
        T x_;                                                                  \
        memcpy(&x_, p, sizeof(x_));                                            \
        x_ = (T)(x_ / (d));                                                    \
        memcpy(p, &x_, sizeof(x_));                                            \
    }
        switch (t) {
        case HCOMM_INT8:
            DIV_IN_PLACE(int8_t, n);
            break;
        case HCOMM_UINT8:
            DIV_IN_PLACE(uint8_t, n);
            break;
        case HCOMM_INT32:
            DIV_IN_PLACE(int32_t, n);
            break;
        case HCOMM_UINT32:
            DIV_IN_PLACE(uint32_t, (uint32_t)n);
            break;
        case HCOMM_INT64:
            DIV_IN_PLACE(int64_t, n);
            break;
        case HCOMM_UINT64:
            DIV_IN_PLACE(uint64_t, (uint64_t)n);
            break;
        default:
            break;
        }
#undef DIV_IN_PLACE
        return;
    }
    if (t == HCOMM_FLOAT64)
        ref_store(t, buf, i, facc / n, 0);
    else /* fp32, fp16, bf16: divided in fp32, then rounded to the type */
        ref_store(t, buf, i, (double)((float)facc / (float)n), 0);
}

const char *ref_dtype_names[HCOMM_DTYPE_COUNT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};
const char *ref_op_names[HCOMM_OP_COUNT] = {"sum", "prod", "max", "min", "avg"};

void ref_fill(hcomm_dtype_t t, hcomm_op_t op, int r, void *buf, size_t count) {
    for (size_t i = 0; i < count; i++) {
        int64_t v = ref_input(t, op, r, i);
        ref_store(t, buf, i, (double)v, v);
    }
}
