/* Ranks that describe the same data with different datatypes, as MPI's
 * type-signature rule allows: for MPI_Bcast, MPI_Allgather and
 * MPI_Alltoall every rank picks its own (count, datatype) from predefined,
 * contiguous, vector, indexed and struct types of one signature (1 element
 * of a large type on one rank, many of a small one on another; types with
 * gaps, negative bounds, items out of memory order), in place or not; the
 * first call on a fresh communicator among them. libhcomm_mpi.so must take
 * such a call on every rank or on none: a rank taken alone waits forever.
 * Every item is checked, and every byte between items must stay as it was.
 * Then buffers given from MPI_BOTTOM on some ranks, reductions where only
 * the root passes MPI_IN_PLACE, and MPI_CHAR.
 *
 * With the argument "env", odd ranks change HCOMM_MPI_INTERCEPT before
 * MPI_Init: the preload must agree across ranks on what it takes. */
#define PU_MAIN
#include "preload_util.h"

#include <stddef.h>

#define MAX_PER 6
#ifdef MPICH
/* MPICH 4.0.2 alone fails ("Message truncated") allgather and alltoall
 * calls of the int and double family from 1200 items (4 ranks) or 120000
 * (2 ranks), which the preload serves: its plain run would fail. */
#define PAIR_MAX 12
#else
#define PAIR_MAX 300000
#endif
#define MARGIN 64 /* bytes before a buffer's base: negative lower bounds */

/* One way to lay out a signature: per items an element (0: n; -1: n
 * alternating int and double, 16 bytes a pair), at off[] bytes from the
 * element's start, or stride bytes apart when stride is not 0; elements
 * extent bytes apart. */
typedef struct {
    char name[40];
    MPI_Datatype type;
    int per;
    MPI_Aint stride;
    MPI_Aint extent;
    MPI_Aint off[MAX_PER];
    int derived;
} layout_t;

/* Two signatures: n ints, or n items alternating int and double. */
enum { FAM_INT, FAM_PAIR };

static size_t item_size(int fam, size_t i) {
    return fam == FAM_PAIR && i % 2 ? sizeof(double) : sizeof(int);
}

static MPI_Datatype commit(MPI_Datatype t) {
    PU_OK(MPI_Type_commit(&t));
    return t;
}

static MPI_Datatype make_struct(int n, const int *lens, const MPI_Aint *disp,
                                const MPI_Datatype *types, MPI_Aint lb,
                                MPI_Aint extent) {
    MPI_Datatype t, r;
    PU_OK(MPI_Type_create_struct(n, lens, disp, types, &t));
    if (extent < 0) return commit(t);
    PU_OK(MPI_Type_create_resized(t, lb, extent, &r));
    PU_OK(MPI_Type_free(&t));
    return commit(r);
}

/* The layouts of family fam for blocks of n items (n a multiple of 12). */
static int make_layouts(int fam, int n, layout_t *l) {
    const MPI_Datatype I = MPI_INT, D = MPI_DOUBLE;
    const int one[4] = {1, 1, 1, 1};
    int k = 0;
#define ADD(nm, t, p, st, ext, der, ...)                                       \
    do {                                                                       \
        layout_t *x = &l[k++];                                                 \
        snprintf(x->name, sizeof(x->name), "%s", nm);                          \
        x->type = (t);                                                         \
        x->per = (p);                                                          \
        x->stride = (st);                                                      \
        x->extent = (ext);                                                     \
        x->derived = (der);                                                    \
        const MPI_Aint o_[] = {__VA_ARGS__};                                   \
        memcpy(x->off, o_, sizeof(o_));                                        \
    } while (0)
    if (fam == FAM_INT) {
        MPI_Datatype t, u;
        ADD("int", I, 1, 0, 4, 0, 0);
        PU_OK(MPI_Type_contiguous(n, I, &t));
        ADD("contiguous(n)", commit(t), 0, 4, 4 * (MPI_Aint)n, 1, 0);
        PU_OK(MPI_Type_contiguous(4, I, &t));
        ADD("contiguous(4)", commit(t), 4, 4, 16, 1, 0);
        PU_OK(MPI_Type_vector(n, 1, 2, I, &t));
        ADD("vector(n,1,2)", commit(t), 0, 8, (2 * (MPI_Aint)n - 1) * 4, 1, 0);
        PU_OK(MPI_Type_vector(3, 1, 2, I, &t));
        ADD("vector(3,1,2)", commit(t), 3, 0, 20, 1, 0, 8, 16);
        int bl[3] = {1, 1}, dp[3] = {1, 0};
        PU_OK(MPI_Type_indexed(2, bl, dp, I, &t));
        ADD("indexed swapped", commit(t), 2, 0, 8, 1, 4, 0);
        int bl3[3] = {2, 1, 3}, dp3[3] = {0, 3, 5};
        PU_OK(MPI_Type_indexed(3, bl3, dp3, I, &t));
        ADD("indexed gaps", commit(t), 6, 0, 32, 1, 0, 4, 12, 20, 24, 28);
        const int l21[2] = {2, 1};
        const MPI_Aint d21[2] = {0, 8};
        const MPI_Datatype ii[4] = {I, I, I, I};
        ADD("struct dense", make_struct(2, l21, d21, ii, 0, -1), 3, 0, 12, 1, 0,
            4, 8);
        const MPI_Aint d08[2] = {0, 8};
        ADD("struct resized", make_struct(2, one, d08, ii, 0, 16), 2, 0, 16, 1,
            0, 8);
        const MPI_Aint dneg[2] = {-8, 0};
        ADD("struct lb -8", make_struct(2, one, dneg, ii, -8, 12), 2, 0, 12, 1,
            -8, 0);
        const int l2[1] = {2};
        const MPI_Aint d4[1] = {4};
        ADD("struct lb 0 true lb 4", make_struct(1, l2, d4, ii, 0, 12), 2, 0,
            12, 1, 4, 8);
        PU_OK(MPI_Type_contiguous(3, I, &u));
        PU_OK(MPI_Type_create_hvector(2, 1, 24, u, &t));
        PU_OK(MPI_Type_free(&u));
        ADD("hvector of contiguous(3)", commit(t), 6, 0, 36, 1, 0, 4, 8, 24, 28,
            32);
        PU_OK(MPI_Type_dup(I, &t));
        ADD("dup(int)", commit(t), 1, 0, 4, 1, 0);
    } else {
        MPI_Datatype t;
        const MPI_Datatype id[4] = {I, D, I, D};
        const MPI_Aint nat[2] = {0, 8}, packed[2] = {0, 4};
        const MPI_Aint two[4] = {0, 4, 12, 16}, rev[2] = {8, 0};
        MPI_Datatype pair = make_struct(2, one, nat, id, 0, 16);
        ADD("struct{int,double}", pair, 2, 0, 16, 1, 0, 8);
        PU_OK(MPI_Type_contiguous(n / 2, pair, &t));
        ADD("contiguous(n/2,pair)", commit(t), -1, 0, 8 * (MPI_Aint)n, 1, 0);
        ADD("packed pair", make_struct(2, one, packed, id, 0, 12), 2, 0, 12, 1,
            0, 4);
        ADD("two packed pairs", make_struct(4, one, two, id, 0, 24), 4, 0, 24,
            1, 0, 4, 12, 16);
        ADD("pair reversed in memory", make_struct(2, one, rev, id, 0, 12), 2,
            0, 12, 1, 8, 0);
    }
#undef ADD
    return k;
}

static void free_layouts(layout_t *l, int k) {
    for (int i = 0; i < k; i++) {
        /* contiguous(n/2, pair) is built on the first pair layout, which
         * MPI keeps alive for it: freeing both in any order is fine. */
        if (l[i].derived) PU_OK(MPI_Type_free(&l[i].type));
    }
}

/* Items in one element of l. */
static int items_per(const layout_t *l, int n) {
    return l->per > 0 ? l->per : n;
}

/* Byte offset from the base of item i of a buffer laid out as l. */
static MPI_Aint item_offset(const layout_t *l, int n, size_t i) {
    size_t per = (size_t)items_per(l, n), j = i % per;
    MPI_Aint e = (MPI_Aint)(i / per) * l->extent;
    if (l->per == -1) return e + (MPI_Aint)((j / 2) * 16 + (j % 2) * 8);
    return e + (l->stride ? (MPI_Aint)j * l->stride : l->off[j]);
}

typedef struct {
    char *alloc, *base;
    size_t bytes;
} buf_t;

/* A buffer for items items laid out as l, every byte 0xa5. */
static buf_t buf_new(const layout_t *l, int n, size_t items) {
    size_t elems = items / (size_t)items_per(l, n);
    buf_t b;
    b.bytes = 2 * MARGIN + elems * (size_t)l->extent + 64;
    b.alloc = malloc(b.bytes);
    memset(b.alloc, 0xa5, b.bytes);
    b.base = b.alloc + MARGIN;
    return b;
}

/* Item i of block blk: ints count up, doubles by quarters. */
static void put_item(int fam, const layout_t *l, int n, buf_t *b, size_t i,
                     size_t item, int blk) {
    char *p = b->base + item_offset(l, n, i);
    if (item_size(fam, item) == sizeof(int)) {
        int v = blk * 1000003 + (int)item * 7 + 1;
        memcpy(p, &v, sizeof(v));
    } else {
        double v = blk + (double)item * 0.25;
        memcpy(p, &v, sizeof(v));
    }
}

static void fill(int fam, const layout_t *l, int n, buf_t *b, size_t first,
                 size_t items, int blk, size_t item0) {
    for (size_t i = 0; i < items; i++)
        put_item(fam, l, n, b, first + i, item0 + i, blk);
}

/* Every item as blk_of() says, every other byte untouched; the hash of
 * the items in signature order (the same whatever the layout). */
static uint64_t verify(const char *what, int fam, const layout_t *l, int n,
                       const buf_t *b, size_t items, size_t block,
                       int (*blk_of)(size_t blk)) {
    buf_t want = {malloc(b->bytes), NULL, b->bytes};
    uint64_t h = 0;
    long bad = 0;
    want.base = want.alloc + MARGIN;
    memset(want.alloc, 0xa5, want.bytes);
    for (size_t i = 0; i < items; i++) {
        MPI_Aint o = item_offset(l, n, i);
        size_t sz = item_size(fam, i % block);
        put_item(fam, l, n, &want, i, i % block, blk_of(i / block));
        h = pu_hash(b->base + o, sz, h);
    }
    for (size_t k = 0; k < b->bytes; k++)
        bad += b->alloc[k] != want.alloc[k];
    PU_CHECK(bad == 0, "%s, %s: %ld bytes wrong", what, l->name, bad);
    free(want.alloc);
    return h;
}

static int g_root, g_rank;
static int blk_root(size_t b) {
    (void)b;
    return g_root;
}
static int blk_same(size_t b) {
    return (int)b;
}
/* alltoall: block s of rank r's result came from s, meant for r. */
static int blk_a2a_recv(size_t s) {
    return (int)s * 64 + g_rank;
}

static MPI_Comm fresh_or_world(int fresh) {
    MPI_Comm c = MPI_COMM_WORLD;
    if (fresh) PU_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    return c;
}
static void done_with(MPI_Comm *c) {
    if (*c != MPI_COMM_WORLD) PU_OK(MPI_Comm_free(c));
}

static int count_of(const layout_t *l, int n, size_t items) {
    return (int)(items / (size_t)items_per(l, n));
}

static void t_bcast(int fam, int n, const layout_t *l, int root, int fresh) {
    MPI_Comm c = fresh_or_world(fresh);
    buf_t b = buf_new(l, n, (size_t)n);
    if (pu_rank == root) fill(fam, l, n, &b, 0, (size_t)n, root, 0);
    PU_OK(MPI_Bcast(b.base, count_of(l, n, (size_t)n), l->type, root, c));
    g_root = root;
    uint64_t h = verify("bcast", fam, l, n, &b, (size_t)n, (size_t)n, blk_root);
    pu_report(h, "bcast fam=%d n=%d root=%d%s", fam, n, root,
              fresh ? " fresh" : "");
    free(b.alloc);
    done_with(&c);
}

static void t_allgather(int fam, int n, const layout_t *s, const layout_t *r,
                        int inplace, int fresh) {
    MPI_Comm c = fresh_or_world(fresh);
    size_t all = (size_t)n * (size_t)pu_size;
    buf_t sb = buf_new(s, n, (size_t)n), rb = buf_new(r, n, all);
    if (inplace)
        fill(fam, r, n, &rb, (size_t)pu_rank * (size_t)n, (size_t)n, pu_rank,
             0);
    else
        fill(fam, s, n, &sb, 0, (size_t)n, pu_rank, 0);
    PU_OK(MPI_Allgather(inplace ? MPI_IN_PLACE : sb.base,
                        inplace ? 0 : count_of(s, n, (size_t)n), s->type,
                        rb.base, count_of(r, n, (size_t)n), r->type, c));
    uint64_t h = verify("allgather", fam, r, n, &rb, all, (size_t)n, blk_same);
    pu_report(h, "allgather fam=%d n=%d%s%s", fam, n,
              inplace ? " in-place" : "", fresh ? " fresh" : "");
    free(sb.alloc);
    free(rb.alloc);
    done_with(&c);
}

static void t_alltoall(int fam, int n, const layout_t *s, const layout_t *r,
                       int inplace, int fresh) {
    MPI_Comm c = fresh_or_world(fresh);
    size_t all = (size_t)n * (size_t)pu_size;
    buf_t sb = buf_new(s, n, all), rb = buf_new(r, n, all);
    for (int d = 0; d < pu_size; d++) {
        if (inplace)
            fill(fam, r, n, &rb, (size_t)d * (size_t)n, (size_t)n,
                 pu_rank * 64 + d, 0);
        else
            fill(fam, s, n, &sb, (size_t)d * (size_t)n, (size_t)n,
                 pu_rank * 64 + d, 0);
    }
    PU_OK(MPI_Alltoall(inplace ? MPI_IN_PLACE : sb.base,
                       inplace ? 0 : count_of(s, n, (size_t)n), s->type,
                       rb.base, count_of(r, n, (size_t)n), r->type, c));
    g_rank = pu_rank;
    uint64_t h =
        verify("alltoall", fam, r, n, &rb, all, (size_t)n, blk_a2a_recv);
    pu_report(h, "alltoall fam=%d n=%d%s%s", fam, n, inplace ? " in-place" : "",
              fresh ? " fresh" : "");
    free(sb.alloc);
    free(rb.alloc);
    done_with(&c);
}

/* Odd ranks name their n ints by absolute addresses from MPI_BOTTOM, in
 * pieces of 1, 2 and 3 ints with a gap after each (few pieces: a copy
 * loop; many, irregular: MPI_Pack); even ranks pass n MPI_INT. */
typedef struct {
    int *w; /* the pieces, 2n ints, -3 in the gaps */
    MPI_Datatype type;
} pieces_t;

static pieces_t pieces_new(int n) {
    pieces_t p = {malloc(sizeof(int) * 2 * (size_t)n), MPI_DATATYPE_NULL};
    int *lens = malloc(sizeof(int) * (size_t)n), k = 0;
    MPI_Aint *at = malloc(sizeof(MPI_Aint) * (size_t)n);
    for (int i = 0; i < 2 * n; i++)
        p.w[i] = -3;
    for (int i = 0; i < n; k++) {
        lens[k] = 1 + k % 3 < n - i ? 1 + k % 3 : n - i;
        PU_OK(MPI_Get_address(p.w + 2 * i, &at[k]));
        i += lens[k];
    }
    PU_OK(MPI_Type_create_hindexed(k, lens, at, MPI_INT, &p.type));
    PU_OK(MPI_Type_commit(&p.type));
    free(lens);
    free(at);
    return p;
}

/* Item i of the pieces: pieces of 1, 2, 3 ints cycle, each followed by as
 * many unused ints. */
static int *piece_item(const pieces_t *p, int i) {
    int start = 0, k = 0;
    while (i >= start + 1 + k % 3) {
        start += 1 + k % 3;
        k++;
    }
    return p->w + 2 * start + (i - start);
}

static void t_bottom(int n, int root) {
    MPI_Comm c = fresh_or_world(1);
    int *a = malloc(sizeof(int) * (size_t)n), odd = pu_rank % 2, unused = 0;
    int *g = malloc(sizeof(int) * (size_t)n * (size_t)pu_size);
    pieces_t p = pieces_new(n);
    for (int i = 0; i < n; i++)
        *piece_item(&p, i) = a[i] = pu_rank == root ? i * 5 + root : -1;
    if (odd)
        PU_OK(MPI_Bcast(MPI_BOTTOM, 1, p.type, root, c));
    else
        PU_OK(MPI_Bcast(a, n, MPI_INT, root, c));
    for (int i = 0; i < n; i++) {
        int v = odd ? *piece_item(&p, i) : a[i];
        PU_CHECK(v == i * 5 + root, "bcast from MPI_BOTTOM: %d", v);
        *piece_item(&p, i) = a[i] = pu_rank * 7 + i;
    }
    PU_OK(MPI_Allgather(odd ? MPI_BOTTOM : (void *)a, odd ? 1 : n,
                        odd ? p.type : MPI_INT, g, n, MPI_INT, c));
    for (int r = 0; r < pu_size; r++)
        for (int i = 0; i < n; i++)
            PU_CHECK(g[(size_t)r * (size_t)n + (size_t)i] == r * 7 + i,
                     "allgather from MPI_BOTTOM");
    for (int i = 0; i < 2 * n; i++)
        unused += p.w[i] == -3;
    PU_CHECK(unused == n, "MPI_BOTTOM: %d gaps written", n - unused);
    pu_report(pu_hash(g, sizeof(int) * (size_t)n * (size_t)pu_size, 0),
              "bcast, allgather MPI_BOTTOM n=%d root=%d", n, root);
    PU_OK(MPI_Type_free(&p.type));
    free(a), free(g), free(p.w);
    done_with(&c);
}

/* MPI_Reduce where only the root passes MPI_IN_PLACE, as the first call
 * on a fresh communicator; MPI_CHAR sums (small: no overflow). */
static void t_reductions(int n, int root) {
    MPI_Comm c = fresh_or_world(1);
    int *v = malloc(sizeof(int) * (size_t)n),
        *r = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        v[i] = r[i] = pu_rank * 3 + i % 11;
    PU_OK(MPI_Reduce(pu_rank == root ? MPI_IN_PLACE : v, r, n, MPI_INT, MPI_SUM,
                     root, c));
    uint64_t h = 0;
    if (pu_rank == root) {
        for (int i = 0; i < n; i++)
            PU_CHECK(r[i] ==
                         3 * pu_size * (pu_size - 1) / 2 + pu_size * (i % 11),
                     "reduce in place at the root only: %d", r[i]);
        h = pu_hash(r, sizeof(int) * (size_t)n, 0);
    }
    pu_report(h, "reduce n=%d root=%d in place at root", n, root);
    char cs[7], cr[7];
    for (int i = 0; i < 7; i++)
        cs[i] = (char)(i - 3 + pu_rank % 3);
    PU_OK(MPI_Allreduce(cs, cr, 7, MPI_CHAR, MPI_SUM, c));
    for (int i = 0; i < 7; i++) {
        int want = 0;
        for (int k = 0; k < pu_size; k++)
            want += i - 3 + k % 3;
        PU_CHECK(cr[i] == (char)want, "MPI_CHAR sum %d != %d", cr[i], want);
    }
    pu_report(pu_hash(cr, sizeof(cr), 0), "allreduce MPI_CHAR");
    free(v);
    free(r);
    done_with(&c);
}

/* Odd ranks take less (and in other windows) than even ones. */
static void mixed_settings(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r) r = getenv("PMI_RANK");
    if (r && atoi(r) % 2)
        setenv("HCOMM_MPI_INTERCEPT",
               "allreduce:64-8K,bcast:1K,allgather,reduce", 1);
}

static void sums(int n) {
    int *v = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        v[i] = pu_rank + i;
    PU_OK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++)
        PU_CHECK(v[i] == pu_size * (pu_size - 1) / 2 + pu_size * i, "sum");
    pu_report(pu_hash(v, sizeof(int) * (size_t)n, 0), "allreduce n=%d", n);
    free(v);
}

int main(int argc, char **argv) {
    static const int sizes[] = {12, 1200, 120000};
    layout_t l[16];
    if (argc > 1 && strcmp(argv[1], "env") == 0) mixed_settings();
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &pu_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &pu_size);
    for (int ni = 0; ni < 3; ni++)
        sums(ni == 0   ? 2
             : ni == 1 ? 1000
                       : 100000); /* the env case's windows */
    for (int fam = FAM_INT; fam <= FAM_PAIR; fam++) {
        for (int si = 0; si < 3; si++) {
            int n = sizes[si], k;
            if (fam == FAM_PAIR && n > PAIR_MAX) continue;
            k = make_layouts(fam, n, l);
            /* Each rank its own layout, every layout at every rank. */
            for (int v = 0; v < k; v++) {
                const layout_t *mine = &l[(pu_rank + v) % k];
                const layout_t *send = &l[(pu_rank * 3 + v + 1) % k];
                int fresh = v == 0;
                t_bcast(fam, n, mine, (v + si) % pu_size, fresh);
                t_allgather(fam, n, send, mine, v % 2, fresh);
                t_allgather(fam, n, send, mine, 0, 0);
                t_alltoall(fam, n, send, mine, v % 2, fresh);
                t_alltoall(fam, n, send, mine, 0, 0);
            }
            free_layouts(l, k);
        }
        /* Types past what the preload probes (1 MiB): their constructor
         * tells, or MPI_Pack does the packing. */
        int n = 300000, k;
        if (fam == FAM_PAIR && n > PAIR_MAX) continue;
        k = make_layouts(fam, n, l);
        for (int v = 0; v < k; v++) {
            const layout_t *mine = &l[(pu_rank + v) % k];
            t_bcast(fam, n, mine, v % pu_size, 0);
            t_allgather(fam, n, &l[(pu_rank * 3 + v + 1) % k], mine, 0, 0);
        }
        free_layouts(l, k);
    }
    for (int root = 0; root < pu_size && root < 3; root++) {
        /* 2000 bytes: MPICH 4.0.2 alone crashes on an in-place reduce
         * past 2 KiB at a root other than 0. */
        t_reductions(root ? 500 : 7, root);
        t_bottom(root ? 3001 : 7, root);
    }
    PU_OK(MPI_Barrier(MPI_COMM_WORLD));
    int rc = pu_finish("test_preload_mixed");
    MPI_Finalize();
    return rc;
}
