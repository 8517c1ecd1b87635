/* The shared-memory path end to end: the segment exists exactly when every
 * rank is on one node, its name is gone from /dev/shm as soon as the
 * communicator exists, and allreduce, allgather and broadcast give exact
 * results with the node map as found and, on 4 ranks, as 1 node x 4 (direct
 * algorithms) and 2 nodes x 2 (hierarchical plans) through
 * HCOMM_OVERRIDE_TOPO; reduce_scatter (hierarchical across nodes) too;
 * and registered memory (hcomm_mem_alloc) on each. Across real hosts
 * (test/multinode/netns.sh), the world has no segment and each host's
 * communicator has one.
 *
 * test_shm PIDFILE [kill]: rank 0 writes its pid (which names the
 * segment) to PIDFILE; with "kill" the last rank dies by SIGKILL after the
 * first collective, so that shm_cleanup.sh can check that nothing is left. */
#include "core/comm.h"
#include "core/config.h"
#include "mpi_check.h"
#include "shm_tp/shm_layout.h"
#include "reference.h"

#include <dirent.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;

static int has_shm(hcomm_comm_t comm) {
    hcomm_comm_impl_t *c;
    return hcomm_comm_lookup(comm, &c) == HCOMM_SUCCESS && c->shm != NULL;
}

/* Names in /dev/shm that a segment of this job would have. */
static int leftover_segments(int pid0) {
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "hcomm-%d-", pid0);
    DIR *d = opendir("/dev/shm");
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void check_allreduce(hcomm_comm_t comm, const char *what) {
    static const size_t counts[] = {1, 7, 14, 15, 1031, 5003, 70001};
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
        for (int op = 0; op < HCOMM_OP_COUNT; op++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                size_t n = counts[c], es = hcomm_dtype_size(t);
                if (n > 2000 && (t + op) % 3) continue; /* keep it quick */
                int inplace = (int)((c + (size_t)op) % 2);
                char *s = malloc(n * es), *r = malloc(n * es);
                char *want = malloc(n * es);
                ref_fill(t, op, rank, s, n);
                for (size_t i = 0; i < n; i++)
                    ref_expect(t, op, nranks, 0, i, want);
                if (inplace) memcpy(r, s, n * es);
                CHECK_OK(hcomm_allreduce(inplace ? r : s, r, n, t, op, comm));
                CHECK(memcmp(r, want, n * es) == 0,
                      "%s: allreduce %s %s count %zu %s wrong", what,
                      ref_dtype_names[t], ref_op_names[op], n,
                      inplace ? "in place" : "out of place");
                free(s);
                free(r);
                free(want);
            }
}

static unsigned char byte_of(int r, size_t i) {
    return (unsigned char)(r * 37 + i * 11 + 3);
}

/* n bytes from every rank, in place and not. */
static void check_allgather(hcomm_comm_t comm, const char *what, size_t n) {
    unsigned char *all = malloc(n * (size_t)nranks), *mine = malloc(n);
    for (int inplace = 0; inplace < 2; inplace++) {
        memset(all, 0, n * (size_t)nranks);
        unsigned char *src = inplace ? all + (size_t)rank * n : mine;
        for (size_t i = 0; i < n; i++)
            src[i] = byte_of(rank, i);
        CHECK_OK(hcomm_allgather(src, all, n, HCOMM_UINT8, comm));
        size_t bad = 0;
        for (int q = 0; q < nranks; q++)
            for (size_t i = 0; i < n; i++)
                bad += all[(size_t)q * n + i] != byte_of(q, i);
        CHECK(bad == 0, "%s: allgather count %zu %s: %zu wrong", what, n,
              inplace ? "in place" : "out of place", bad);
    }
    free(all);
    free(mine);
}

static void check_allgather_bcast(hcomm_comm_t comm, const char *what) {
    static const size_t counts[] = {1, 3, 57, 1000, 20011, 70001, 300007};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        size_t n = counts[c];
        unsigned char *mine = malloc(n);
        check_allgather(comm, what, n);
        for (int root = 0; root < nranks; root++) {
            for (size_t i = 0; i < n; i++)
                mine[i] = rank == root ? byte_of(root, i) : 0;
            CHECK_OK(hcomm_broadcast(mine, n, HCOMM_UINT8, root, comm));
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += mine[i] != byte_of(root, i);
            CHECK(bad == 0, "%s: bcast count %zu root %d: %zu wrong", what, n,
                  root, bad);
        }
        free(mine);
    }
}

/* n elements per rank of t and op, in place (hcomm.h's form: this rank's
 * block of the input) or not. */
static void check_reduce_scatter_case(hcomm_comm_t comm, const char *what,
                                      hcomm_dtype_t t, hcomm_op_t op, size_t n,
                                      int inplace) {
    size_t es = hcomm_dtype_size(t), total = n * (size_t)nranks;
    char *s = malloc(total * es), *r = malloc(n * es), *want = malloc(n * es);
    ref_fill(t, op, rank, s, total);
    for (size_t i = 0; i < n; i++)
        ref_expect(t, op, nranks, (size_t)rank * n, i, want);
    char *out = inplace ? s + (size_t)rank * n * es : r;
    CHECK_OK(hcomm_reduce_scatter(s, out, n, t, op, comm));
    CHECK(memcmp(out, want, n * es) == 0,
          "%s: reduce_scatter %s %s count %zu %s wrong", what,
          ref_dtype_names[t], ref_op_names[op], n,
          inplace ? "in place" : "out of place");
    free(s);
    free(r);
    free(want);
}

/* Every dtype and op: direct on one node, node stages or plans across
 * nodes. */
static void check_reduce_scatter(hcomm_comm_t comm, const char *what) {
    static const size_t counts[] = {1, 7, 1000, 70001};
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
        for (int op = 0; op < HCOMM_OP_COUNT; op++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                if (counts[c] > 2000 && (t + op) % 3) continue; /* quick */
                check_reduce_scatter_case(comm, what, t, op, counts[c],
                                          (int)((c + (size_t)op) % 2));
            }
}

/* Reduce at every root, every dtype and op: on the segment one-shot at
 * the root (small), two-shot (each rank reduces a block, the root copies
 * them) up to 256 KiB, the plans past it; in place at the root and not. */
static void check_reduce(hcomm_comm_t comm, const char *what) {
    static const size_t counts[] = {1, 1000, 20001, 70001};
    for (int t = 0; t < HCOMM_DTYPE_COUNT; t++)
        for (int op = 0; op < HCOMM_OP_COUNT; op++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                size_t n = counts[c], es = hcomm_dtype_size(t);
                if (n > 2000 && (t + op) % 3) continue; /* keep it quick */
                char *s = malloc(n * es), *r = malloc(n * es);
                char *want = malloc(n * es);
                for (size_t i = 0; i < n; i++)
                    ref_expect(t, op, nranks, 0, i, want);
                for (int root = 0; root < nranks; root++) {
                    int inplace = (int)((c + (size_t)root) % 2);
                    ref_fill(t, op, rank, s, n);
                    if (inplace) memcpy(r, s, n * es);
                    CHECK_OK(hcomm_reduce(inplace && rank == root ? r : s, r, n,
                                          t, op, root, comm));
                    CHECK(rank != root || memcmp(r, want, n * es) == 0,
                          "%s: reduce %s %s count %zu root %d %s wrong", what,
                          ref_dtype_names[t], ref_op_names[op], n, root,
                          inplace ? "in place" : "out of place");
                }
                free(s);
                free(r);
                free(want);
            }
}

/* hcomm_mem_alloc: collectives on registered buffers (large enough for
 * the direct-read path), in place and not; and its errors, on every rank
 * alike. */
static void check_registered(hcomm_comm_t comm, const char *what) {
    size_t n = (size_t)1 << 20; /* float32: 4 MiB */
    float *a = NULL, *b = NULL;
    CHECK_OK(hcomm_mem_alloc(comm, n * sizeof(float), (void **)&a));
    CHECK_OK(hcomm_mem_alloc(comm, n * sizeof(float), (void **)&b));
    if (!a || !b) return;
    /* Repeated: across nodes the rails carry two chunks at once, and a
     * mix-up of their messages showed only in some calls. */
    for (int k = 0; k < 2 * 16; k++) {
        int inplace = k % 2;
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = (float)((size_t)(rank + 1) * (i % 100));
        CHECK_OK(hcomm_allreduce(inplace ? b : a, b, n, HCOMM_FLOAT32,
                                 HCOMM_SUM, comm));
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad +=
                b[i] != (float)((size_t)nranks * (nranks + 1) / 2 * (i % 100));
        CHECK(bad == 0, "%s: registered allreduce %s, call %d: %zu wrong", what,
              inplace ? "in place" : "out of place", k, bad);
    }
    size_t block = (size_t)256 << 10;
    unsigned char *all = NULL;
    CHECK_OK(hcomm_mem_alloc(comm, block * (size_t)nranks, (void **)&all));
    if (all) {
        for (size_t i = 0; i < block; i++)
            all[(size_t)rank * block + i] = byte_of(rank, i);
        CHECK_OK(hcomm_allgather(all + (size_t)rank * block, all, block,
                                 HCOMM_UINT8, comm));
        size_t bad = 0;
        for (int q = 0; q < nranks; q++)
            for (size_t i = 0; i < block; i++)
                bad += all[(size_t)q * block + i] != byte_of(q, i);
        CHECK(bad == 0, "%s: registered allgather: %zu wrong", what, bad);
        for (int root = 0; root < nranks; root++) {
            for (size_t i = 0; i < block; i++)
                all[i] = rank == root ? byte_of(root, i) : 0;
            CHECK_OK(hcomm_broadcast(all, block, HCOMM_UINT8, root, comm));
            bad = 0;
            for (size_t i = 0; i < block; i++)
                bad += all[i] != byte_of(root, i);
            CHECK(bad == 0, "%s: registered bcast root %d: %zu wrong", what,
                  root, bad);
        }
    }
    CHECK_OK(hcomm_mem_free(comm, a));
    CHECK_OK(hcomm_mem_free(comm, b));
    CHECK_OK(hcomm_mem_free(comm, all));
    CHECK_OK(hcomm_mem_free(comm, NULL));
    int local = 0;
    CHECK(hcomm_mem_free(comm, &local) == HCOMM_ERR_INVALID_ARG,
          "%s: freeing memory hcomm_mem_alloc did not give", what);
    void *p = &local;
    CHECK_OK(hcomm_mem_alloc(comm, 0, &p));
    CHECK(p == NULL, "%s: 0 bytes gave %p", what, p);
    if (nranks > 1) {
        CHECK(hcomm_mem_alloc(comm, rank ? 200 : 100, &p) ==
                  HCOMM_ERR_INVALID_ARG,
              "%s: different sizes accepted", what);
        CHECK(hcomm_mem_alloc(comm, 64, rank ? &p : NULL) ==
                  HCOMM_ERR_INVALID_ARG,
              "%s: a NULL output pointer on rank 0 accepted", what);
    }
}

/* Receivers start late here, so the root waits for them in its first
 * call; then broadcasts of every small size (rotating roots) mix with
 * allreduce and allgather rounds that use the slots. */
static void check_run_ahead(hcomm_comm_t comm, const char *what) {
    enum { CALLS = 300, ALONE = 100, MAX = 600 };
    unsigned char buf[MAX], gathered[MAX * 8];
    if (rank != 0) usleep(20000);
    size_t bad = 0;
    for (int k = 0; k < CALLS; k++) {
        /* First all in ring entries (504 B), then across the boundary too. */
        size_t n = 1 + (size_t)(k * 37) % (k < ALONE ? 500 : MAX);
        int root = k < ALONE ? 0 : (k / 50) % nranks;
        for (size_t i = 0; i < n; i++)
            buf[i] = rank == root ? byte_of(k, i) : 0;
        CHECK_OK(hcomm_broadcast(buf, n, HCOMM_UINT8, root, comm));
        for (size_t i = 0; i < n; i++)
            bad += buf[i] != byte_of(k, i);
        if (k >= ALONE && k % 7 == 6) {
            int32_t v = rank + k, sum = 0;
            CHECK_OK(
                hcomm_allreduce(&v, &sum, 1, HCOMM_INT32, HCOMM_SUM, comm));
            bad += sum != nranks * k + nranks * (nranks - 1) / 2;
        }
        if (k >= ALONE && k % 13 == 12 && nranks <= 8) {
            for (size_t i = 0; i < MAX; i++)
                buf[i] = byte_of(rank + k, i);
            CHECK_OK(hcomm_allgather(buf, gathered, MAX, HCOMM_UINT8, comm));
            for (int q = 0; q < nranks; q++)
                for (size_t i = 0; i < MAX; i++)
                    bad += gathered[(size_t)q * MAX + i] != byte_of(q + k, i);
        }
    }
    CHECK(bad == 0, "%s: %zu wrong bytes in back-to-back small calls", what,
          bad);
}

/* n bytes a rank gathered to and scattered from every root, in place and
 * not: from 2 MiB in all (past it at 2 ranks), a gather's ranks write
 * their blocks into the root's buffer; past it a scatter's read theirs
 * from it, and below 8 MiB its root writes part of each into its
 * receiver. The line past a receiver's block must stay as it was. */
static void check_gather_scatter(hcomm_comm_t comm, const char *what,
                                 size_t n) {
    enum { GUARD = 64 };
    size_t all_bytes = n * (size_t)nranks;
    unsigned char *all = malloc(all_bytes), *mine = malloc(n + GUARD);
    memset(mine + n, 0xa5, GUARD);
    for (int root = 0; root < nranks; root++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int ip = inplace && rank == root;
            unsigned char *own = ip ? all + (size_t)rank * n : mine;
            memset(all, 0, all_bytes);
            for (size_t i = 0; i < n; i++)
                own[i] = byte_of(rank, i);
            CHECK_OK(hcomm_gather(own, all, n, HCOMM_UINT8, root, comm));
            size_t bad = 0;
            for (size_t i = 0; rank == root && i < all_bytes; i++)
                bad += all[i] != byte_of((int)(i / n), i % n);
            CHECK(bad == 0, "%s: gather count %zu root %d %s: %zu wrong", what,
                  n, root, inplace ? "in place" : "out of place", bad);
            for (size_t i = 0; i < all_bytes; i++)
                all[i] = byte_of((int)(i / n) + root, i % n);
            memset(mine, 0, n);
            CHECK_OK(hcomm_scatter(all, own, n, HCOMM_UINT8, root, comm));
            bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += own[i] != byte_of(rank + root, i);
            for (size_t i = n; !ip && i < n + GUARD; i++)
                bad += own[i] != 0xa5;
            CHECK(bad == 0, "%s: scatter count %zu root %d %s: %zu wrong", what,
                  n, root, inplace ? "in place" : "out of place", bad);
        }
    free(all);
    free(mine);
}

/* AllToAll of n bytes a block, in place (sendbuf == recvbuf) and not. */
static void check_alltoall(hcomm_comm_t comm, const char *what, size_t n) {
    size_t all_bytes = n * (size_t)nranks;
    unsigned char *send = malloc(all_bytes), *recv = malloc(all_bytes);
    for (int inplace = 0; inplace < 2; inplace++) {
        unsigned char *src = inplace ? recv : send;
        memset(recv, 0, all_bytes);
        for (size_t i = 0; i < all_bytes; i++)
            src[i] = byte_of(rank * nranks + (int)(i / n), i % n);
        CHECK_OK(hcomm_alltoall(src, recv, n, HCOMM_UINT8, comm));
        size_t bad = 0;
        for (size_t i = 0; i < all_bytes; i++)
            bad += recv[i] != byte_of((int)(i / n) * nranks + rank, i % n);
        CHECK(bad == 0, "%s: alltoall count %zu %s: %zu wrong", what, n,
              inplace ? "in place" : "out of place", bad);
    }
    free(send);
    free(recv);
}

/* Past 4 MiB in all, allgather and reduce_scatter take the node stages
 * on even nodes too. Gather, scatter and alltoall either side of where
 * the slots give way to direct copies (256 KiB, 512 KiB at 2 ranks and 2
 * MiB in all); a 2-rank scatter's root writing 3/4 of its receiver's
 * block (128 KiB), half (600,001 B) or none (1 MiB, 1,100,007 B), as
 * above 2 ranks a quarter of each (2 to 5.5 MB in all; from 8 MiB none,
 * the path of the 2-rank 1 MiB blocks). */
static void check_large(hcomm_comm_t comm, const char *what) {
    for (size_t all = 128u << 10; all <= (2u << 20); all *= 2)
        check_alltoall(comm, what, all / (size_t)nranks);
    check_alltoall(comm, what, ((256u << 10) - 1) / (size_t)nranks);
    check_gather_scatter(comm, what, (256u << 10) / (size_t)nranks);
    check_gather_scatter(comm, what, ((512u << 10) - 1) / (size_t)nranks);
    check_gather_scatter(comm, what, (512u << 10) / (size_t)nranks);
    check_gather_scatter(comm, what, (2u << 20) / (size_t)nranks);
    check_gather_scatter(comm, what, 600001);
    check_gather_scatter(comm, what, 1100007);
    check_allgather(comm, what, 1100007);
    check_reduce_scatter_case(comm, what, HCOMM_INT32, HCOMM_SUM, 300007, 0);
    check_reduce_scatter_case(comm, what, HCOMM_FLOAT64, HCOMM_AVG, 300007, 1);
}

/* Whether the communicator has split itself into nodes and rails: the
 * hierarchical allreduce and broadcast on even nodes run their node stages
 * on shared memory. */
static int has_node_stages(hcomm_comm_t comm) {
    hcomm_comm_impl_t *c;
    return hcomm_comm_lookup(comm, &c) == HCOMM_SUCCESS && c->node_comm;
}

static void check_all(hcomm_comm_t comm, const char *what) {
    check_run_ahead(comm, what);
    check_allreduce(comm, what);
    check_allgather_bcast(comm, what);
    check_reduce_scatter(comm, what);
    check_reduce(comm, what);
    check_registered(comm, what);
    check_large(comm, what);
    /* Small chunks: the hierarchical pipelines run many chunks, with a
     * remainder, and several in flight. */
    CHECK_OK(hcomm_config_set("HCOMM_CHUNK_SIZE", "4K"));
    check_allreduce(comm, what);
    check_allgather_bcast(comm, what);
    check_reduce_scatter(comm, what);
    CHECK_OK(hcomm_config_set("HCOMM_CHUNK_SIZE", "1M"));
}

/* Cross-memory copies aim at the pids MPI reported at setup, never at one
 * read back from the segment: with every rank's pid in the segment
 * overwritten (here with 1, init's), a CMA allreduce still reaches the
 * right processes and is exact (it read init's memory, or failed, when
 * the pid came from the segment). */
static void check_cma_pids(hcomm_comm_t comm) {
    hcomm_comm_impl_t *c;
    if (hcomm_comm_lookup(comm, &c) != HCOMM_SUCCESS || !c->shm || !c->shm->cma)
        return;
    const size_t n = 1 << 20; /* 4 MiB: the CMA path at any rank count */
    int32_t *s = malloc(n * sizeof(*s)), *r = malloc(n * sizeof(*r));
    for (size_t i = 0; i < n; i++)
        s[i] = (int32_t)(i % 1000) + rank;
    volatile int32_t *pid = &hcomm_shm_info(c->shm, rank)->pid;
    int32_t mine = *pid;
    MPI_Barrier(MPI_COMM_WORLD);
    *pid = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(hcomm_shm_select(c->shm, HCOMM_COLL_ALLREDUCE, n * sizeof(*s)) ==
              HCOMM_SHM_CMA,
          "cma pids: %zu bytes do not take the CMA path", n * sizeof(*s));
    CHECK_OK(hcomm_allreduce(s, r, n, HCOMM_INT32, HCOMM_SUM, comm));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += r[i] != (int32_t)((i % 1000) * (size_t)nranks) +
                           nranks * (nranks - 1) / 2;
    CHECK(bad == 0,
          "cma pids: %zu wrong elements with the segment's pids "
          "overwritten",
          bad);
    MPI_Barrier(MPI_COMM_WORLD);
    *pid = mine;
    free(s);
    free(r);
}

/* 4 ranks through an override file: ranks_of_node0 on one node, the rest
 * on another (or all on one). */
static void check_override(const char *json, int want_shm, const char *what) {
    char path[64];
    snprintf(path, sizeof(path), "/tmp/hcomm_test_shm_%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(json, f);
    fclose(f);
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", path));
    hcomm_comm_t comm = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    CHECK(has_shm(comm) == want_shm, "%s: shared segment %s", what,
          want_shm ? "missing" : "present across nodes");
    check_all(comm, what);
    CHECK(has_node_stages(comm) == !want_shm,
          "%s: node stages on shared memory %s", what,
          want_shm ? "made on one node" : "not used on even nodes");
    CHECK_OK(hcomm_comm_free(&comm));
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", ""));
    remove(path);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    int pid0 = (int)getpid();
    MPI_Bcast(&pid0, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0 && argc > 1) {
        FILE *f = fopen(argv[1], "w");
        if (f) {
            fprintf(f, "%d\n", pid0);
            fclose(f);
        }
    }
    /* On several hosts (test/multinode), the world has no segment; each
     * host's communicator has its own. */
    MPI_Comm host_mpi;
    int host_ranks, one_host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                        MPI_INFO_NULL, &host_mpi);
    MPI_Comm_size(host_mpi, &host_ranks);
    MPI_Allreduce(&(int){host_ranks == nranks}, &one_host, 1, MPI_INT, MPI_MIN,
                  MPI_COMM_WORLD);
    CHECK_OK(hcomm_init(&argc, &argv));
    hcomm_comm_t world = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &world));
    CHECK(has_shm(world) == (one_host && nranks > 1),
          "world: shared segment %s",
          one_host ? "missing on one host" : "present across hosts");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(leftover_segments(pid0) == 0, "a segment name is left in /dev/shm");
    if (argc > 2 && strcmp(argv[2], "kill") == 0) {
        int one = 1, sum = 0;
        CHECK_OK(hcomm_allreduce(&one, &sum, 1, HCOMM_INT32, HCOMM_SUM, world));
        if (rank == nranks - 1) raise(SIGKILL);
        /* The others block until mpirun tears the job down. */
        hcomm_barrier(world);
    }
    check_all(world, "world");
    /* 4 KiB slots: a reduce of 160 KiB takes 40 rounds; an allgather of
     * 20011 bytes a rank (below the sizes that read directly) 5 or more */
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "4K"));
    hcomm_comm_t small = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_dup(world, &small));
    check_reduce(small, "4 KiB slots");
    check_allgather_bcast(small, "4 KiB slots");
    check_reduce_scatter(small, "4 KiB slots");
    CHECK_OK(hcomm_comm_free(&small));
    CHECK_OK(hcomm_config_set("HCOMM_SHM_SLOT_SIZE", "256K"));
    check_cma_pids(world);
    int fewest, most;
    MPI_Allreduce(&host_ranks, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&host_ranks, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(has_node_stages(world) == (!one_host && fewest == most && most > 1),
          "world: node stages %s",
          has_node_stages(world) ? "on uneven hosts" : "not used");
    if (!one_host) {
        hcomm_comm_t host = HCOMM_COMM_NULL;
        CHECK_OK(hcomm_comm_create(host_mpi, &host));
        CHECK(has_shm(host) == (host_ranks > 1), "host: shared segment %s",
              host_ranks > 1 ? "missing" : "made for one rank");
        /* The checks read rank and nranks: the host communicator's. */
        int world_rank = rank, world_size = nranks;
        MPI_Comm_rank(host_mpi, &rank);
        nranks = host_ranks;
        check_all(host, "host");
        rank = world_rank;
        nranks = world_size;
        CHECK_OK(hcomm_comm_free(&host));
    }
    MPI_Comm_free(&host_mpi);
    /* The override may only split a host, never join hosts. */
    if (nranks == 4 && one_host) {
        check_override("{\"nodes\": [{\"ranks\": [0, 1, 2, 3]}]}", 1,
                       "1 node x 4");
        check_override("{\"nodes\": [{\"ranks\": [0, 1]}, "
                       "{\"ranks\": [2, 3]}]}",
                       0, "2 nodes x 2");
    }
    CHECK_OK(hcomm_comm_free(&world));
    CHECK_OK(hcomm_finalize());
    int rc = check_summary("test_shm");
    MPI_Finalize();
    return rc;
}
