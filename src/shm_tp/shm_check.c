/* What a mismatch of descriptors (shm_layout.h) says: the fields that
 * differ, and between which ranks. */
#include "shm_tp/shm_layout.h"
#include "core/log.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    hcomm_coll_t coll;
    unsigned long long count;
    unsigned type, op, root, gpu;
} fields_t;

static fields_t fields(const uint64_t *d) {
    return (fields_t){
        (hcomm_coll_t)(d[1] & 0xff),   (unsigned long long)d[0],
        (unsigned)(d[1] >> 16 & 0xff), (unsigned)(d[1] >> 24 & 0xff),
        (unsigned)(d[1] >> 32),        (d[1] & HCOMM_SHM_DESC_GPU) != 0};
}

static const char *type_text(unsigned type, char *buf, size_t len) {
    static const char *names[HCOMM_DTYPE_COUNT] = {
        "int8",   "uint8",   "int32",    "uint32",  "int64",
        "uint64", "float16", "bfloat16", "float32", "float64"};
    if (type & HCOMM_SHM_DESC_SIZE)
        snprintf(buf, len, "%u-byte elements", type & ~HCOMM_SHM_DESC_SIZE);
    else
        snprintf(buf, len, "%s", type < HCOMM_DTYPE_COUNT ? names[type] : "?");
    return buf;
}

static const char *op_text(unsigned op) {
    static const char *names[HCOMM_OP_COUNT] = {"sum", "prod", "max", "min",
                                                "avg"};
    return op < HCOMM_OP_COUNT ? names[op] : "?";
}

/* Appends "; <what> differs: rank a passed x, rank b passed y". */
static void add(char *out, size_t len, const char *what, int a, const char *x,
                int b, const char *y) {
    size_t used = strlen(out);
    if (used < len)
        snprintf(out + used, len - used, "%s%s differs: rank %d %s, rank %d %s",
                 used ? "; " : "", what, a, x, b, y);
}

/* Names what differs between rank 0 and the first rank that differs from
 * it, the same words on every rank (all see every descriptor). */
static void explain(const hcomm_shm_t *shm, uint64_t seq, char *out,
                    size_t len) {
    const uint64_t *ref = hcomm_shm_desc(shm, 0, seq);
    int first = -1, more = 0;
    for (int r = 1; r < shm->size; r++) {
        const uint64_t *d = hcomm_shm_desc(shm, r, seq);
        if (hcomm_shm_desc_equal(d, ref)) continue;
        if (first < 0)
            first = r;
        else
            more++;
    }
    out[0] = '\0';
    if (first < 0) return; /* cannot be: some rank differs from another */
    fields_t a = fields(ref), b = fields(hcomm_shm_desc(shm, first, seq));
    char x[64], y[64];
    if (a.coll != b.coll) {
        snprintf(x, sizeof(x), "called %s", hcomm_coll_name(a.coll));
        snprintf(y, sizeof(y), "called %s", hcomm_coll_name(b.coll));
        add(out, len, "collective", 0, x, first, y);
    } else {
        if (a.count != b.count) {
            snprintf(x, sizeof(x), "passed %llu", a.count);
            snprintf(y, sizeof(y), "passed %llu", b.count);
            add(out, len, "count", 0, x, first, y);
        }
        if (a.type != b.type) {
            char ta[32], tb[32];
            snprintf(x, sizeof(x), "passed %s",
                     type_text(a.type, ta, sizeof(ta)));
            snprintf(y, sizeof(y), "passed %s",
                     type_text(b.type, tb, sizeof(tb)));
            add(out, len,
                a.type & HCOMM_SHM_DESC_SIZE ? "element size" : "data type", 0,
                x, first, y);
        }
        if (a.op != b.op) {
            snprintf(x, sizeof(x), "passed %s", op_text(a.op));
            snprintf(y, sizeof(y), "passed %s", op_text(b.op));
            add(out, len, "operation", 0, x, first, y);
        }
        if (a.gpu != b.gpu) {
            add(out, len, "memory", 0,
                a.gpu ? "passed GPU memory" : "passed host memory", first,
                b.gpu ? "passed GPU memory" : "passed host memory");
        }
        if (a.root != b.root) {
            snprintf(x, sizeof(x), "passed root %u", a.root);
            snprintf(y, sizeof(y), "passed root %u", b.root);
            add(out, len, "root", 0, x, first, y);
        }
    }
    size_t used = strlen(out);
    if (more && used < len)
        snprintf(out + used, len - used, " (and %d more rank%s differ%s)", more,
                 more > 1 ? "s" : "", more > 1 ? "" : "s");
}

hcomm_status_t hcomm_shm_desc_mismatch(hcomm_shm_t *shm, uint64_t seq,
                                       int earlier) {
    char why[400];
    explain(shm, seq, why, sizeof(why));
    hcomm_shm_fail_mismatch(shm);
    hcomm_coll_t coll =
        (hcomm_coll_t)(hcomm_shm_desc(shm, shm->rank, seq)[1] & 0xff);
    return hcomm_error(HCOMM_ERR_MISMATCH, "%s%s: %s", hcomm_coll_name(coll),
                       earlier ? " (an earlier call, found now)" : "", why);
}
