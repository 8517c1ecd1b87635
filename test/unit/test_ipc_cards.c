/* The tables of ordinary device buffers the peers map (ipc_cards.h),
 * without a GPU: n ranks' tables exchange their agreements' heads and
 * tails as the shared segment would, over a fake CUDA whose allocations,
 * exports and mappings the test controls. Every rank must decide alike
 * (a call goes direct when every card of it is confirmed), a buffer must
 * go direct from the second call after the one that first offered it, a failed
 * mapping must stop its owner's offers, and freed allocations must be unmapped,
 * the mappings per peer staying within HCOMM_IPC_CARDS. */
#include "cuda_ipc/ipc_cards.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define NR 5
#define NALLOC 256

typedef struct {
    uint64_t id;
    uintptr_t base;
    size_t bytes;
    int alive;
} fake_alloc_t;

static struct {
    fake_alloc_t alloc[NR][NALLOC];
    int nalloc[NR];
    uint64_t ids;
    int fail_map[NR][NR]; /* [mapper][owner] */
    int no_export[NR];
    int exports[NR], maps[NR], unmaps[NR];
    int live_maps[NR][NR]; /* [mapper][owner] */
} w;

typedef struct {
    int rank;
} ctx_t;
static ctx_t ctxs[NR];

static int f_range(void *ctx, const void *p, uint64_t *id, uintptr_t *base,
                   size_t *bytes) {
    int r = ((ctx_t *)ctx)->rank;
    for (int i = 0; i < w.nalloc[r]; i++) {
        fake_alloc_t *a = &w.alloc[r][i];
        if (a->alive && (uintptr_t)p >= a->base &&
            (uintptr_t)p < a->base + a->bytes) {
            *id = a->id;
            *base = a->base;
            *bytes = a->bytes;
            return 0;
        }
    }
    return -1;
}

static int f_export(void *ctx, uintptr_t base, unsigned char handle[64]) {
    int r = ((ctx_t *)ctx)->rank;
    w.exports[r]++;
    if (w.no_export[r]) return -1;
    memset(handle, 0, 64);
    memcpy(handle, &r, sizeof(r));
    memcpy(handle + 8, &base, sizeof(base));
    return 0;
}

/* A peer's allocation maps at an address that names its owner. */
static int f_map(void *ctx, const unsigned char handle[64], char **mapped) {
    int r = ((ctx_t *)ctx)->rank, owner;
    uintptr_t base;
    memcpy(&owner, handle, sizeof(owner));
    memcpy(&base, handle + 8, sizeof(base));
    w.maps[r]++;
    if (w.fail_map[r][owner]) return -1;
    w.live_maps[r][owner]++;
    *mapped = (char *)(((uintptr_t)(owner + 1) << 40) + base);
    return 0;
}

static void f_unmap(void *ctx, char *mapped) {
    int r = ((ctx_t *)ctx)->rank;
    w.unmaps[r]++;
    w.live_maps[r][((uintptr_t)mapped >> 40) - 1]--;
}

static hcomm_ipc_cards_t *t[NR];

static void world(int n) {
    memset(&w, 0, sizeof(w));
    for (int r = 0; r < n; r++) {
        ctxs[r].rank = r;
        hcomm_ipc_card_ops_t ops = {f_range, f_export, f_map, f_unmap,
                                    &ctxs[r]};
        t[r] = hcomm_ipc_cards_new(r, n, &ops);
        assert_non_null(t[r]);
    }
}

static void world_end(int n) {
    for (int r = 0; r < n; r++) {
        hcomm_ipc_cards_free(t[r]);
        for (int o = 0; o < n; o++)
            assert_int_equal(w.live_maps[r][o], 0);
    }
}

/* A new allocation of rank r at base (a freed one there dies). */
static uintptr_t alloc_at(int r, uintptr_t base, size_t bytes) {
    for (int i = 0; i < w.nalloc[r]; i++)
        if (w.alloc[r][i].base == base) w.alloc[r][i].alive = 0;
    assert_true(w.nalloc[r] < NALLOC);
    w.alloc[r][w.nalloc[r]++] = (fake_alloc_t){++w.ids, base, bytes, 1};
    return base;
}

static void free_at(int r, uintptr_t base) {
    for (int i = 0; i < w.nalloc[r]; i++)
        if (w.alloc[r][i].base == base) w.alloc[r][i].alive = 0;
}

/* One allreduce on every rank's buffer buf[r] (in place, len bytes at
 * offset 4096): returns whether it went direct, checked alike on every
 * rank, and that every rank reaches every peer's buffer where it did. */
static int call(int n, const uintptr_t *buf, size_t len) {
    hcomm_shm_devreg_t head[NR];
    hcomm_shm_devtail_t tail[NR];
    memset(head, 0, sizeof(head));
    for (int r = 0; r < n; r++) {
        const void *p = (const void *)(buf[r] + 4096);
        hcomm_ipc_cards_publish(t[r], p, len, p, len, &head[r], &tail[r]);
    }
    for (int r = 0; r < n; r++)
        hcomm_ipc_cards_learn(t[r], head, tail);
    int direct = 1;
    for (int p = 0; p < n; p++)
        for (int io = 0; io < 2; io++)
            direct &= head[p].has_tail && tail[p].card[io].id &&
                      tail[p].card[io].confirmed;
    for (int r = 0; direct && r < n; r++)
        for (int p = 0; p < n; p++) {
            if (p == r) continue;
            char *at = hcomm_ipc_cards_peer(t[r], p, &tail[p].card[0], len);
            assert_ptr_equal(
                at, (char *)(((uintptr_t)(p + 1) << 40) + buf[p] + 4096));
            /* beyond the allocation */
            assert_null(hcomm_ipc_cards_peer(t[r], p, &tail[p].card[0],
                                             tail[p].card[0].bytes));
        }
    return direct;
}

static void test_third_call(void **state) {
    (void)state;
    for (int n = 2; n <= NR; n++) {
        world(n);
        uintptr_t a[NR], b[NR];
        for (int r = 0; r < n; r++) {
            a[r] = alloc_at(r, 0x10000000, (size_t)8 << 20);
            b[r] = alloc_at(r, 0x20000000, (size_t)8 << 20);
        }
        assert_false(call(n, a, 1 << 20));
        assert_false(call(n, a, 1 << 20));
        assert_true(call(n, a, 1 << 20));
        assert_true(call(n, a, 1 << 20));
        /* a second buffer: confirmed by the reports a call on another
         * buffer carries */
        assert_false(call(n, b, 1 << 20));
        assert_true(call(n, a, 1 << 20));
        assert_true(call(n, b, 1 << 20));
        for (int r = 0; r < n; r++) {
            assert_int_equal(w.exports[r], 2); /* once per allocation */
            assert_int_equal(w.maps[r], 2 * (n - 1));
        }
        world_end(n);
    }
}

static void test_small_or_foreign(void **state) {
    (void)state;
    world(3);
    uintptr_t small[NR], none[NR] = {0x5000000, 0x5000000, 0x5000000};
    for (int r = 0; r < 3; r++)
        small[r] = alloc_at(r, 0x10000000, (size_t)1 << 20);
    for (int i = 0; i < 4; i++) {
        assert_false(call(3, small, 4096)); /* may share CUDA's block */
        assert_false(call(3, none, 4096));  /* not device memory */
    }
    for (int r = 0; r < 3; r++)
        assert_int_equal(w.exports[r], 0);
    world_end(3);
}

static void test_map_fails(void **state) {
    (void)state;
    world(4);
    uintptr_t a[NR], b[NR];
    for (int r = 0; r < 4; r++) {
        a[r] = alloc_at(r, 0x10000000, (size_t)4 << 20);
        b[r] = alloc_at(r, 0x20000000, (size_t)4 << 20);
    }
    w.fail_map[2][1] = 1; /* rank 2 cannot map rank 1's buffers */
    for (int i = 0; i < 6; i++)
        assert_false(call(4, i % 2 ? b : a, 1 << 20));
    /* rank 1 offered b before it read rank 2's report, then stopped */
    assert_int_equal(w.exports[1], 2);
    assert_int_equal(w.maps[2], 2 * 2 + 1);
    world_end(4);
}

static void test_unexportable(void **state) {
    (void)state;
    world(2);
    uintptr_t a[NR];
    for (int r = 0; r < 2; r++)
        a[r] = alloc_at(r, 0x10000000, (size_t)4 << 20);
    w.no_export[0] = 1;
    for (int i = 0; i < 5; i++)
        assert_false(call(2, a, 1 << 20));
    assert_int_equal(w.exports[0], 1); /* asked once, not every call */
    world_end(2);
}

/* A buffer freed and allocated anew every call, at one address or at a
 * new one each time: the peers unmap what was freed, never hold more than
 * HCOMM_IPC_CARDS mappings of a peer, and a buffer kept afterwards still
 * goes direct. */
static void test_churn(void **state) {
    (void)state;
    for (int moving = 0; moving < 2; moving++) {
        world(3);
        uintptr_t a[NR];
        for (int i = 0; i < 100; i++) {
            for (int r = 0; r < 3; r++) {
                if (i) free_at(r, a[r]);
                a[r] = alloc_at(
                    r, 0x10000000 + (uintptr_t)(moving ? i : 0) * 0x1000000,
                    (size_t)4 << 20);
            }
            assert_false(call(3, a, 1 << 20));
            for (int r = 0; r < 3; r++)
                for (int o = 0; o < 3; o++)
                    assert_true(w.live_maps[r][o] <= HCOMM_IPC_CARDS);
        }
        call(3, a, 1 << 20);
        call(3, a, 1 << 20);
        assert_true(call(3, a, 1 << 20));
        for (int r = 0; r < 3 && !moving; r++)
            assert_int_equal(w.unmaps[r], 2 * 99);
        world_end(3);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_third_call),
        cmocka_unit_test(test_small_or_foreign),
        cmocka_unit_test(test_map_fails),
        cmocka_unit_test(test_unexportable),
        cmocka_unit_test(test_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
