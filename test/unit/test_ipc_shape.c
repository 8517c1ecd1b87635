/* The CUDA IPC path's arithmetic, without a GPU: the kernel each call
 * gets, rounds that fit the data areas, and the split of every round into
 * chunks (two-shot) and blocks that covers each element exactly once, in
 * 16-byte aligned parts, for every kind, rank count, type size and count. */
#include "cuda_ipc/ipc_shape.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

/* Marks the parts of a round of len elements (of at most piece) that the
 * kernel's blocks take (in chunks of n for two-shot): each element taken
 * once, every part aligned, and each block's part of the round within its
 * part of a full round (the reuse of the areas relies on it). */
static void check_tiling(hcomm_ipc_kind_t kind, int n, size_t piece, size_t len,
                         int blocks, size_t vw, unsigned char *seen) {
    int chunks = kind == HCOMM_IPC_TWOSHOT ? n : 1;
    for (size_t i = 0; i < len; i++)
        seen[i] = 0;
    for (int c = 0; c < chunks; c++)
        for (int b = 0; b < blocks; b++) {
            size_t lo, hi, full_lo, full_hi;
            hcomm_ipc_slice(piece, len, chunks, c, blocks, b, vw, &lo, &hi);
            hcomm_ipc_slice(piece, piece, chunks, c, blocks, b, vw, &full_lo,
                            &full_hi);
            assert_true(lo <= hi && hi <= len);
            assert_true(lo == hi ||
                        (lo % vw == 0 && lo >= full_lo && hi <= full_hi));
            for (size_t i = lo; i < hi; i++)
                seen[i]++;
        }
    for (size_t i = 0; i < len; i++)
        assert_int_equal(seen[i], 1);
}

/* The blocks of a round: one per 8 KiB up to 8 blocks, then one per
 * 32 KiB, within 1 and the cap. */
static void test_blocks(void **state) {
    (void)state;
    const size_t k = 1024;
    assert_int_equal(hcomm_ipc_blocks(0, 32), 1);
    assert_int_equal(hcomm_ipc_blocks(1, 32), 1);
    assert_int_equal(hcomm_ipc_blocks(8 * k, 32), 1);
    assert_int_equal(hcomm_ipc_blocks(8 * k + 1, 32), 2);
    assert_int_equal(hcomm_ipc_blocks(32 * k, 32), 4);
    assert_int_equal(hcomm_ipc_blocks(32 * k, 3), 3);
    assert_int_equal(hcomm_ipc_blocks(64 * k, 32), 8);
    assert_int_equal(hcomm_ipc_blocks(256 * k, 32), 8);
    assert_int_equal(hcomm_ipc_blocks(256 * k + 1, 32), 9);
    assert_int_equal(hcomm_ipc_blocks(512 * k, 32), 16);
    assert_int_equal(hcomm_ipc_blocks((size_t)1 << 30, 32), 32);
    assert_int_equal(hcomm_ipc_blocks((size_t)1 << 30, 1000),
                     HCOMM_IPC_MAX_BLOCKS);
    assert_int_equal(hcomm_ipc_blocks((size_t)1 << 30, 0), 1);
}

static void test_shapes(void **state) {
    (void)state;
    const size_t esizes[] = {1, 2, 4, 8};
    const size_t counts[] = {1, 3, 7, 16, 1009, 65537, 1000003, 33554439};
    const size_t areas[] = {64u << 10, 1u << 20, 8u << 20};
    const long long caps[] = {0, 1, 7, 32, 64, 1000};
    unsigned char *seen = malloc((size_t)1 << 18);
    assert_non_null(seen);
    size_t cases = 0;
    for (int kind = 0; kind < HCOMM_IPC_NKINDS; kind++)
        for (int n = 1; n <= HCOMM_IPC_MAX_RANKS; n += (n < 5 ? 1 : 5))
            for (size_t e = 0; e < 4; e++)
                for (size_t k = 0; k < sizeof(counts) / sizeof(*counts); k++)
                    for (size_t a = 0; a < 3; a++)
                        for (size_t m = 0; m < 6; m++) {
                            size_t es = esizes[e], vw = 16 / es;
                            size_t count = counts[k];
                            hcomm_ipc_shape_t s;
                            hcomm_ipc_shape((hcomm_ipc_kind_t)kind, n, count,
                                            es, areas[a], caps[m], &s);
                            assert_true(s.piece > 0 && s.piece <= count);
                            assert_true(s.piece == count || s.piece % vw == 0);
                            assert_true(s.rounds * s.piece >= count);
                            assert_true((s.rounds - 1) * s.piece < count);
                            assert_true(
                                hcomm_ipc_round_bytes((hcomm_ipc_kind_t)kind, n,
                                                      s.piece, es) <= areas[a]);
                            long long cap = caps[m] < 1 ? 1 : caps[m];
                            if (cap > HCOMM_IPC_MAX_BLOCKS)
                                cap = HCOMM_IPC_MAX_BLOCKS;
                            assert_true(s.blocks >= 1 && s.blocks <= cap);
                            /* the first round and the last (shorter) one */
                            size_t last = count - (s.rounds - 1) * s.piece;
                            if (s.piece <= ((size_t)1 << 18)) {
                                check_tiling((hcomm_ipc_kind_t)kind, n, s.piece,
                                             s.piece, s.blocks, vw, seen);
                                check_tiling((hcomm_ipc_kind_t)kind, n, s.piece,
                                             last, s.blocks, vw, seen);
                            }
                            cases++;
                        }
    free(seen);
    assert_true(cases > 10000);
}

static void test_kinds(void **state) {
    (void)state;
    size_t max = 8u << 20;
    assert_int_equal(hcomm_ipc_kind(HCOMM_COLL_ALLREDUCE, 8, "auto", max),
                     HCOMM_IPC_ONESHOT);
    assert_int_equal(hcomm_ipc_kind(HCOMM_COLL_ALLREDUCE, max, "auto", max),
                     HCOMM_IPC_ONESHOT);
    assert_int_equal(hcomm_ipc_kind(HCOMM_COLL_ALLREDUCE, max + 1, "auto", max),
                     HCOMM_IPC_TWOSHOT);
    assert_int_equal(hcomm_ipc_kind(HCOMM_COLL_ALLREDUCE, 8, "twoshot", max),
                     HCOMM_IPC_TWOSHOT);
    assert_int_equal(
        hcomm_ipc_kind(HCOMM_COLL_ALLREDUCE, 1u << 30, "oneshot", max),
        HCOMM_IPC_ONESHOT);
    assert_int_equal(
        hcomm_ipc_kind(HCOMM_COLL_REDUCE_SCATTER, 8, "oneshot", max),
        HCOMM_IPC_REDUCE_SCATTER);
    assert_int_equal(hcomm_ipc_kind(HCOMM_COLL_ALLGATHER, 8, "auto", max),
                     HCOMM_IPC_ALLGATHER);
    assert_int_equal(hcomm_ipc_kind(HCOMM_COLL_BCAST, 8, "auto", max),
                     HCOMM_IPC_BCAST);
}

/* Co-resident blocks: the GPU the most ranks share, the fewest
 * multiprocessors, bounded by 1 and HCOMM_IPC_MAX_BLOCKS. */
static void test_resident_blocks(void **state) {
    (void)state;
    int h200[16], one_gpu[16], own_gpu[16];
    for (int p = 0; p < 16; p++) {
        h200[p] = 132;
        one_gpu[p] = 0;
        own_gpu[p] = p;
    }
    assert_int_equal(hcomm_ipc_resident_blocks(1, h200, one_gpu), 64);
    assert_int_equal(hcomm_ipc_resident_blocks(2, h200, one_gpu), 64);
    assert_int_equal(hcomm_ipc_resident_blocks(3, h200, one_gpu), 44);
    assert_int_equal(hcomm_ipc_resident_blocks(4, h200, one_gpu), 33);
    assert_int_equal(hcomm_ipc_resident_blocks(5, h200, one_gpu), 26);
    assert_int_equal(hcomm_ipc_resident_blocks(16, h200, one_gpu), 8);
    assert_int_equal(hcomm_ipc_resident_blocks(8, h200, own_gpu), 64);
    /* ranks 0-2 on GPU 0, 3 on GPU 3 (8 multiprocessors), 4-5 on GPU 4 */
    int sms[6] = {132, 132, 132, 8, 132, 132}, gpu_of[6] = {0, 0, 0, 3, 4, 4};
    assert_int_equal(hcomm_ipc_resident_blocks(6, sms, gpu_of), 8);
    sms[3] = 132;
    assert_int_equal(hcomm_ipc_resident_blocks(6, sms, gpu_of), 44);
    int tiny[4] = {2, 2, 2, 2};
    assert_int_equal(hcomm_ipc_resident_blocks(4, tiny, one_gpu), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes), cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_blocks), cmocka_unit_test(test_resident_blocks)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
