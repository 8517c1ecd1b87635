/* Topology without MPI: the node map built from rank labels, the
 * HCOMM_OVERRIDE_TOPO parser on good and malformed files (written to a
 * temporary directory) and on device strings that look almost like PCI
 * bus ids, hwloc's view of this process, and the links between GPUs (names,
 * the CUDA IPC rule, NVML's answers read through a stand-in table). */
#include "topo/topo.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* --- the node map -------------------------------------------------------- */

static void check_map(const hcomm_topo_map_t *m, int size, int nnodes,
                      const int *node_of, const int *local_rank,
                      const int *node_size, const int *ranks_by_node) {
    assert_int_equal(m->size, size);
    assert_int_equal(m->nnodes, nnodes);
    for (int r = 0; r < size; r++) {
        assert_int_equal(m->node_of[r], node_of[r]);
        assert_int_equal(m->local_rank[r], local_rank[r]);
        assert_int_equal(m->ranks_by_node[r], ranks_by_node[r]);
    }
    assert_int_equal(m->node_start[0], 0);
    for (int n = 0; n < nnodes; n++) {
        assert_int_equal(m->node_size[n], node_size[n]);
        assert_int_equal(m->node_start[n + 1], m->node_start[n] + node_size[n]);
    }
}

static void test_map_uneven(void **state) {
    (void)state;
    /* Labels in any order: nodes are numbered by their lowest rank. */
    const int label[] = {7, 7, 3, 7, 3, 9};
    const int node_of[] = {0, 0, 1, 0, 1, 2};
    const int local[] = {0, 1, 0, 2, 1, 0};
    const int sizes[] = {3, 2, 1};
    const int by_node[] = {0, 1, 3, 2, 4, 5};
    hcomm_topo_map_t m;
    assert_int_equal(hcomm_topo_map_build(6, label, &m), HCOMM_SUCCESS);
    check_map(&m, 6, 3, node_of, local, sizes, by_node);
    hcomm_topo_map_free(&m);
    assert_null(m.node_of);
}

static void test_map_extremes(void **state) {
    (void)state;
    hcomm_topo_map_t m;
    /* One rank. */
    const int one[] = {42}, zero[] = {0}, size1[] = {1};
    assert_int_equal(hcomm_topo_map_build(1, one, &m), HCOMM_SUCCESS);
    check_map(&m, 1, 1, zero, zero, size1, zero);
    hcomm_topo_map_free(&m);
    /* One node of five, and five nodes of one. */
    const int same[] = {5, 5, 5, 5, 5}, ids[] = {0, 1, 2, 3, 4};
    const int zeros[] = {0, 0, 0, 0, 0}, ones[] = {1, 1, 1, 1, 1};
    const int five[] = {5};
    assert_int_equal(hcomm_topo_map_build(5, same, &m), HCOMM_SUCCESS);
    check_map(&m, 5, 1, zeros, ids, five, ids);
    hcomm_topo_map_free(&m);
    const int distinct[] = {9, 8, 7, 6, 5};
    assert_int_equal(hcomm_topo_map_build(5, distinct, &m), HCOMM_SUCCESS);
    check_map(&m, 5, 5, ids, zeros, ones, ids);
    hcomm_topo_map_free(&m);
    /* Labels at the ends of the int range; the last rank alone. */
    const int wide[] = {INT_MIN, INT_MAX, INT_MIN, INT_MAX, -1};
    const int wide_node[] = {0, 1, 0, 1, 2}, wide_local[] = {0, 0, 1, 1, 0};
    const int wide_sizes[] = {2, 2, 1}, wide_by[] = {0, 2, 1, 3, 4};
    assert_int_equal(hcomm_topo_map_build(5, wide, &m), HCOMM_SUCCESS);
    check_map(&m, 5, 3, wide_node, wide_local, wide_sizes, wide_by);
    hcomm_topo_map_free(&m);
    /* No ranks is an error, not an empty map. */
    assert_int_equal(hcomm_topo_map_build(0, one, &m), HCOMM_ERR_INVALID_ARG);
    assert_int_equal(hcomm_topo_map_build(3, NULL, &m), HCOMM_ERR_INVALID_ARG);
}

/* Many ranks, round-robin over nodes of different sizes: every rank's
 * place agrees with ranks_by_node. */
static void test_map_large(void **state) {
    (void)state;
    enum { N = 1000 };
    int label[N];
    for (int r = 0; r < N; r++)
        label[r] = (r * 7919) % 13 * 1000003;
    hcomm_topo_map_t m;
    assert_int_equal(hcomm_topo_map_build(N, label, &m), HCOMM_SUCCESS);
    assert_int_equal(m.nnodes, 13);
    int total = 0;
    for (int n = 0; n < m.nnodes; n++) {
        total += m.node_size[n];
        int prev = -1;
        for (int i = m.node_start[n]; i < m.node_start[n + 1]; i++) {
            int r = m.ranks_by_node[i];
            assert_true(r > prev);
            prev = r;
            assert_int_equal(m.node_of[r], n);
            assert_int_equal(m.local_rank[r], i - m.node_start[n]);
            assert_int_equal(label[r], label[m.ranks_by_node[m.node_start[n]]]);
        }
        if (n > 0)
            assert_true(m.ranks_by_node[m.node_start[n]] >
                        m.ranks_by_node[m.node_start[n - 1]]);
    }
    assert_int_equal(total, N);
    hcomm_topo_map_free(&m);
}

/* --- hwloc -----------------------------------------------------------------
 */

static void test_local(void **state) {
    (void)state;
    const hcomm_topo_local_t *l = hcomm_topo_local();
    assert_true(l->numa >= -1 && l->socket >= -1);
    assert_true(l->ngpus >= 0 && l->ngpus <= HCOMM_TOPO_MAX_DEVS);
    assert_true(l->nnics >= 0 && l->nnics <= HCOMM_TOPO_MAX_DEVS);
    for (int i = 0; i < l->nnics; i++)
        assert_true(l->nics[i].name[0]);
    assert_ptr_equal(hcomm_topo_local(), l); /* cached */
#ifndef HAVE_HWLOC
    assert_int_equal(l->numa, -1);
    assert_int_equal(l->ngpus + l->nnics, 0);
#endif
}

/* --- links between GPUs ---------------------------------------------------
 */

static void test_link_names(void **state) {
    (void)state;
    static const char *const want[] = {"unknown", "self", "nvlink",
                                       "pcie",    "p2p",  "none"};
    for (int l = 0; l < HCOMM_GPU_LINK_COUNT; l++)
        assert_string_equal(hcomm_gpu_link_name((hcomm_gpu_link_t)l), want[l]);
    assert_string_equal(hcomm_gpu_link_name(HCOMM_GPU_LINK_COUNT), "invalid");
    /* The override's words, exactly; not what only detection may say. */
    static const struct {
        const char *word;
        hcomm_gpu_link_t link;
    } words[] = {{"self", HCOMM_GPU_LINK_SAME},
                 {"nvlink", HCOMM_GPU_LINK_NVLINK},
                 {"pcie", HCOMM_GPU_LINK_PCIE},
                 {"none", HCOMM_GPU_LINK_NONE}};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        hcomm_gpu_link_t got = HCOMM_GPU_LINK_COUNT;
        assert_int_equal(hcomm_gpu_link_parse(words[i].word, &got), 0);
        assert_int_equal(got, words[i].link);
    }
    static const char *const refused[] = {"unknown", "p2p", "NVLink", "",
                                          "nvlink ", "pci", "nvlinks"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        hcomm_gpu_link_t got = HCOMM_GPU_LINK_COUNT;
        assert_int_equal(hcomm_gpu_link_parse(refused[i], &got), -1);
        assert_int_equal(got, HCOMM_GPU_LINK_COUNT); /* untouched */
    }
}

/* Only "none" blocks the CUDA IPC path; the first one is named. */
static void test_link_blocked(void **state) {
    (void)state;
    const hcomm_gpu_link_t open[] = {HCOMM_GPU_LINK_SAME, HCOMM_GPU_LINK_NVLINK,
                                     HCOMM_GPU_LINK_PCIE, HCOMM_GPU_LINK_P2P,
                                     HCOMM_GPU_LINK_UNKNOWN};
    assert_int_equal(hcomm_gpu_links_first_blocked(5, open), -1);
    assert_int_equal(hcomm_gpu_links_first_blocked(0, open), -1);
    const hcomm_gpu_link_t row[] = {HCOMM_GPU_LINK_NVLINK, HCOMM_GPU_LINK_SAME,
                                    HCOMM_GPU_LINK_PCIE, HCOMM_GPU_LINK_NONE,
                                    HCOMM_GPU_LINK_NONE};
    assert_int_equal(hcomm_gpu_links_first_blocked(5, row), 3);
    assert_int_equal(hcomm_gpu_links_first_blocked(3, row), -1);
    /* A whole matrix, row by row: 0-1 NVLink, 2 reached by 0 only. */
    const hcomm_gpu_link_t s = HCOMM_GPU_LINK_SAME, nv = HCOMM_GPU_LINK_NVLINK,
                           pc = HCOMM_GPU_LINK_PCIE, no = HCOMM_GPU_LINK_NONE;
    const hcomm_gpu_link_t matrix[] = {s, nv, pc, nv, s, no, pc, no, s};
    assert_int_equal(hcomm_gpu_links_first_blocked(9, matrix), 5);
}

/* NVML stand-in: GPUs "a", "b", "c" are handles 1 to 3; status[x][y][caps]
 * is what nvmlDeviceGetP2PStatus says, or the call fails where ret is set. */
static struct {
    int status[4][4][3];
    int ret[4][4][3];
    int calls, caps_seen[8];
} fake;

static int fake_handle(const char *pci, void **device) {
    if (strlen(pci) != 1 || pci[0] < 'a' || pci[0] > 'c') return 2;
    *device = (void *)(uintptr_t)(pci[0] - 'a' + 1);
    return 0;
}

static int fake_p2p(void *a, void *b, int caps, int *status) {
    int x = (int)(uintptr_t)a, y = (int)(uintptr_t)b;
    assert_true(caps == 0 || caps == 2); /* read, NVLink */
    fake.caps_seen[fake.calls++ % 8] = caps;
    if (fake.ret[x][y][caps]) return fake.ret[x][y][caps];
    *status = fake.status[x][y][caps];
    return 0;
}

static void test_link_nvml(void **state) {
    (void)state;
    const hcomm_nvml_t nvml = {fake_handle, fake_p2p};
    enum { READ = 0, NVLINK = 2, OK = 0, NOT_SUPPORTED = 5, UNKNOWN = 6 };
    memset(&fake, 0, sizeof(fake));
    /* a-b: NVLink, asked first */
    fake.status[1][2][NVLINK] = OK;
    assert_int_equal(hcomm_gpu_link_nvml(&nvml, "a", "b"),
                     HCOMM_GPU_LINK_NVLINK);
    assert_int_equal(fake.calls, 1);
    assert_int_equal(fake.caps_seen[0], NVLINK);
    /* a-c: no NVLink, readable: PCIe */
    fake.calls = 0;
    fake.status[1][3][NVLINK] = NOT_SUPPORTED;
    fake.status[1][3][READ] = OK;
    assert_int_equal(hcomm_gpu_link_nvml(&nvml, "a", "c"), HCOMM_GPU_LINK_PCIE);
    assert_int_equal(fake.calls, 2);
    assert_int_equal(fake.caps_seen[1], READ);
    /* b-c: neither: no peer access (chipset, topology, regkey alike) */
    for (int why = 1; why <= NOT_SUPPORTED; why++) {
        fake.status[2][3][NVLINK] = NOT_SUPPORTED;
        fake.status[2][3][READ] = why;
        assert_int_equal(hcomm_gpu_link_nvml(&nvml, "b", "c"),
                         HCOMM_GPU_LINK_NONE);
    }
    /* NVML does not know, or fails: unknown, never none */
    fake.status[2][3][READ] = UNKNOWN;
    assert_int_equal(hcomm_gpu_link_nvml(&nvml, "b", "c"),
                     HCOMM_GPU_LINK_UNKNOWN);
    fake.status[2][3][READ] = OK;
    fake.ret[2][3][READ] = 999; /* NVML_ERROR_UNKNOWN */
    assert_int_equal(hcomm_gpu_link_nvml(&nvml, "b", "c"),
                     HCOMM_GPU_LINK_UNKNOWN);
    /* a failed NVLink query still lets the read index speak */
    fake.ret[2][3][READ] = 0;
    fake.ret[2][3][NVLINK] = 3; /* NVML_ERROR_NOT_SUPPORTED */
    assert_int_equal(hcomm_gpu_link_nvml(&nvml, "b", "c"), HCOMM_GPU_LINK_PCIE);
    /* a GPU NVML does not have */
    assert_int_equal(hcomm_gpu_link_nvml(&nvml, "a", "z"),
                     HCOMM_GPU_LINK_UNKNOWN);
    assert_int_equal(hcomm_gpu_link_nvml(&nvml, "z", "a"),
                     HCOMM_GPU_LINK_UNKNOWN);
}

/* Detection on any machine: ids that no GPU has are unknown (NVML and
 * CUDA find no such device), equal ids the same GPU. */
static void test_link_detect(void **state) {
    (void)state;
    assert_int_equal(hcomm_gpu_link_detect("0000:1b:00.0", "0000:1B:00.0"),
                     HCOMM_GPU_LINK_SAME);
    assert_int_equal(hcomm_gpu_link_detect("ffff:fe:1f.6", "ffff:fe:1f.7"),
                     HCOMM_GPU_LINK_UNKNOWN);
    assert_int_equal(hcomm_gpu_link_detect("", "0000:1b:00.0"),
                     HCOMM_GPU_LINK_UNKNOWN);
    assert_int_equal(hcomm_gpu_link_detect("", ""), HCOMM_GPU_LINK_UNKNOWN);
}

/* A topology's links: the override's matrix by index or by PCI bus id (any
 * case); detection for GPUs outside it or without one. */
static void test_topo_links(void **state) {
    (void)state;
    hcomm_topo_dev_t gpus[3] = {{"0000:1b:00.0", "0000:1b:00.0"},
                                {"0000:1c:00.0", "0000:1c:00.0"},
                                {"cuda2", ""}};
    const hcomm_gpu_link_t s = HCOMM_GPU_LINK_SAME, nv = HCOMM_GPU_LINK_NVLINK,
                           pc = HCOMM_GPU_LINK_PCIE, no = HCOMM_GPU_LINK_NONE;
    hcomm_gpu_link_t links[9] = {s, no, pc, no, s, nv, pc, nv, s};
    hcomm_topo_t t = {.ngpus = 3, .gpus = gpus, .gpu_links = links};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            assert_int_equal(hcomm_topo_gpu_link(&t, i, j), links[i * 3 + j]);
    assert_int_equal(
        hcomm_topo_gpu_link_pci(&t, "0000:1B:00.0", "0000:1c:00.0"),
        HCOMM_GPU_LINK_NONE);
    assert_int_equal(
        hcomm_topo_gpu_link_pci(&t, "0000:1c:00.0", "0000:1c:00.0"),
        HCOMM_GPU_LINK_SAME);
    /* not among the override's GPUs: detected (no such GPU: unknown) */
    assert_int_equal(
        hcomm_topo_gpu_link_pci(&t, "0000:1b:00.0", "ffff:fe:1f.7"),
        HCOMM_GPU_LINK_UNKNOWN);
    assert_int_equal(hcomm_topo_gpu_link_pci(&t, "", "0000:1b:00.0"),
                     HCOMM_GPU_LINK_UNKNOWN);
    /* no stated links: detected between the ids, unknown without one */
    t.gpu_links = NULL;
    gpus[0] = (hcomm_topo_dev_t){"x", "ffff:fe:1f.6"};
    gpus[1] = (hcomm_topo_dev_t){"y", "ffff:fe:1f.7"};
    assert_int_equal(hcomm_topo_gpu_link(&t, 0, 0), HCOMM_GPU_LINK_SAME);
    assert_int_equal(hcomm_topo_gpu_link(&t, 0, 1), HCOMM_GPU_LINK_UNKNOWN);
    assert_int_equal(hcomm_topo_gpu_link(&t, 1, 2), HCOMM_GPU_LINK_UNKNOWN);
    assert_int_equal(
        hcomm_topo_gpu_link_pci(&t, "0000:1b:00.0", "0000:1c:00.0"),
        HCOMM_GPU_LINK_UNKNOWN);
}

/* --- the override file -----------------------------------------------------
 */

#ifdef HAVE_JANSSON
static char dir[64];
static char path[128];

static int make_dir(void **state) {
    (void)state;
    strcpy(dir, "/tmp/hcomm_test_topo_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    unlink(path);
    return rmdir(dir);
}

/* Writes text to the test's file and returns its path. */
static const char *file(const char *text) {
    snprintf(path, sizeof(path), "%s/topo.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Loading fails with a message that names the file and holds each of the
 * NULL-terminated fragments. */
static void fails(int world, const char *text, ...) {
    hcomm_topo_override_t ov;
    const char *p = file(text);
    assert_int_equal(hcomm_topo_override_load(p, world, &ov),
                     HCOMM_ERR_INVALID_ARG);
    assert_null(ov.nodes); /* nothing left to free */
    const char *msg = hcomm_last_error();
    if (!strstr(msg, p) || !strstr(msg, "HCOMM_OVERRIDE_TOPO"))
        fail_msg("message does not name the file: %s", msg);
    va_list ap;
    va_start(ap, text);
    for (const char *want; (want = va_arg(ap, const char *));)
        if (!strstr(msg, want)) fail_msg("expected \"%s\" in: %s", want, msg);
    va_end(ap);
}

static void test_override_good(void **state) {
    (void)state;
    hcomm_topo_override_t ov;
    const char *p = file(
        "{\"nodes\": [\n"
        "  {\"name\": \"n0\", \"ranks\": [0, 1], \"gpus\": [\"0000:1b:00.0\", "
        "\"cuda1\"], \"nics\": [\"mlx5_0\"]},\n"
        "  {\"name\": \"n1\", \"ranks\": [3, 2], \"gpus\": []},\n"
        "  {\"ranks\": [4]}\n"
        "]}\n");
    assert_int_equal(hcomm_topo_override_load(p, 5, &ov), HCOMM_SUCCESS);
    assert_int_equal(ov.world_size, 5);
    assert_int_equal(ov.nnodes, 3);
    const int node_of[] = {0, 0, 1, 1, 2};
    for (int r = 0; r < 5; r++)
        assert_int_equal(ov.node_of[r], node_of[r]);
    assert_string_equal(ov.nodes[0].name, "n0");
    assert_string_equal(ov.nodes[1].name, "n1");
    assert_string_equal(ov.nodes[2].name, "node2"); /* default name */
    assert_int_equal(ov.nodes[0].ngpus, 2);
    assert_string_equal(ov.nodes[0].gpus[0].name, "0000:1b:00.0");
    assert_string_equal(ov.nodes[0].gpus[0].pci, "0000:1b:00.0");
    assert_string_equal(ov.nodes[0].gpus[1].name, "cuda1");
    assert_string_equal(ov.nodes[0].gpus[1].pci, "");
    assert_int_equal(ov.nodes[0].nnics, 1);
    assert_string_equal(ov.nodes[0].nics[0].name, "mlx5_0");
    assert_int_equal(ov.nodes[1].ngpus, 0);  /* stated: none */
    assert_int_equal(ov.nodes[1].nnics, -1); /* not stated: keep hwloc's */
    assert_int_equal(ov.nodes[2].ngpus, -1);
    hcomm_topo_override_free(&ov);
    assert_null(ov.nodes);

    /* The brief's example: 4 ranks as 2 nodes x 2. */
    p = file("{\"nodes\": [{\"name\": \"n0\", \"ranks\": [0,1]}, "
             "{\"name\": \"n1\", \"ranks\": [2,3]}]}");
    assert_int_equal(hcomm_topo_override_load(p, 4, &ov), HCOMM_SUCCESS);
    assert_int_equal(ov.nnodes, 2);
    assert_int_equal(ov.node_of[2], 1);
    hcomm_topo_override_free(&ov);
}

static void test_override_syntax(void **state) {
    (void)state;
    /* The trailing comma is on line 3. */
    fails(4,
          "{\"nodes\": [\n  {\"ranks\": [0, 1]},\n  {\"ranks\": [2, 3,]}\n]}",
          "line 3", "column", NULL);
    fails(4, "", "line 1", NULL);
    fails(4, "{\"nodes\": [{\"ranks\": [0, 1, 2, 3]}]", "line 1", NULL);
    /* A key given twice would otherwise mean what its last copy says. */
    fails(4,
          "{\"nodes\": [{\"ranks\": [0, 1]}],\n"
          " \"nodes\": [{\"ranks\": [0, 1, 2, 3]}]}",
          "line 2", "duplicate", NULL);
}

static void test_override_ranks(void **state) {
    (void)state;
    fails(4, "{\"nodes\": [{\"ranks\": [0, 1]}, {\"ranks\": [1, 2, 3]}]}",
          "nodes[1].ranks[0]", "rank 1 is listed twice", "node0", NULL);
    fails(4, "{\"nodes\": [{\"name\": \"a\", \"ranks\": [0, 1, 1, 2, 3]}]}",
          "nodes[0].ranks[2]", "listed twice", "\"a\"", NULL);
    fails(4, "{\"nodes\": [{\"ranks\": [0, 1]}, {\"ranks\": [3]}]}",
          "1 of the 4", "on no node: 2", NULL);
    fails(20, "{\"nodes\": [{\"ranks\": [0]}]}", "19 of the 20",
          "1, 2, 3, 4, 5, 6, 7, 8, ...", NULL);
    fails(4, "{\"nodes\": [{\"ranks\": [0, 1, 2, 3, 4]}]}", "nodes[0].ranks[4]",
          "rank 4 is not in MPI_COMM_WORLD", "0 to 3", NULL);
    fails(4, "{\"nodes\": [{\"ranks\": [-1, 0, 1, 2, 3]}]}", "rank -1", NULL);
}

static void test_override_types(void **state) {
    (void)state;
    fails(2, "{\"nodes\": [{\"ranks\": [0, \"1\"]}]}", "nodes[0].ranks[1]",
          "expected an integer rank, got a string", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1.5]}]}", "got a real number", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1.0]}]}", "got a real", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, null]}]}", "got null", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": 0}]}", "nodes[0].ranks",
          "expected an array of ranks, got an integer", NULL);
    fails(2, "{\"nodes\": {\"ranks\": [0, 1]}}",
          "nodes:", "expected an array of nodes, got an object", NULL);
    fails(2, "{\"nodes\": [[0, 1]]}", "nodes[0]",
          "expected an object, got an array", NULL);
    fails(2, "[{\"ranks\": [0, 1]}]", "must hold an object, not an array",
          NULL);
    fails(2, "{\"nodes\": [{\"name\": 3, \"ranks\": [0, 1]}]}",
          "\"name\" must be a string, got an integer", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1], \"gpus\": \"cuda0\"}]}",
          "nodes[0].gpus", "expected an array of strings, got a string", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1], \"nics\": [\"eth0\", 7]}]}",
          "nodes[0].nics[1]", "expected a string, got an integer", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1], \"nics\": [\"\"]}]}",
          "nodes[0].nics[0]", "1 to 63 characters", NULL);
}

static void test_override_empty(void **state) {
    (void)state;
    fails(2, "{\"nodes\": []}", "nodes: empty", NULL);
    fails(2, "{}", "no \"nodes\"", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1]}, {\"ranks\": []}]}",
          "nodes[1].ranks: empty", NULL);
    fails(2, "{\"nodes\": [{\"name\": \"n0\"}]}", "nodes[0]", "no \"ranks\"",
          NULL);
    fails(2, "{\"nodes\": [{\"name\": \"\", \"ranks\": [0, 1]}]}",
          "node name needs 1 to 63", NULL);
}

static void test_override_keys(void **state) {
    (void)state;
    /* Unknown keys are errors, at both levels. */
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1], \"gpu\": [\"cuda0\"]}]}",
          "nodes[0]", "unknown key \"gpu\"", NULL);
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1]}], \"version\": 1}",
          "unknown key \"version\"", NULL);
    fails(4,
          "{\"nodes\": [{\"name\": \"a\", \"ranks\": [0, 1]}, "
          "{\"name\": \"a\", \"ranks\": [2, 3]}]}",
          "nodes[1]", "node name \"a\" is used twice", NULL);
}

/* A NIC near some ranks of its node only: {"name", "ranks"}, beside plain
 * names (near every rank); the ranks must be the node's. */
static void test_override_nic_ranks(void **state) {
    (void)state;
    hcomm_topo_override_t ov;
    const char *p =
        file("{\"nodes\": [{\"ranks\": [0, 1, 2], \"nics\": [\"eth9\", "
             "{\"name\": \"eth0\", \"ranks\": [2, 0]}, "
             "{\"name\": \"eth1\", \"ranks\": [1]}]}, "
             "{\"ranks\": [3], \"nics\": [\"eth0\", \"eth1\"]}]}");
    assert_int_equal(hcomm_topo_override_load(p, 4, &ov), HCOMM_SUCCESS);
    const hcomm_topo_onode_t *n = &ov.nodes[0];
    assert_int_equal(n->nnics, 3);
    assert_string_equal(n->nics[1].name, "eth0");
    assert_non_null(n->nic_first);
    const int first[] = {0, 0, 2, 3}, ranks[] = {2, 0, 1};
    for (int i = 0; i < 4; i++)
        assert_int_equal(n->nic_first[i], first[i]);
    for (int i = 0; i < 3; i++)
        assert_int_equal(n->nic_ranks[i], ranks[i]);
    assert_null(ov.nodes[1].nic_first); /* every NIC near every rank */
    hcomm_topo_override_free(&ov);

    fails(4,
          "{\"nodes\": [{\"ranks\": [0, 1], \"nics\": [{\"name\": "
          "\"eth0\", \"ranks\": [3]}]}, {\"ranks\": [2, 3]}]}",
          "nodes[0].nics[0]", "ranks[0] is not a rank of this node", NULL);
    fails(2,
          "{\"nodes\": [{\"ranks\": [0, 1], \"nics\": [{\"ranks\": "
          "[0]}]}]}",
          "nodes[0].nics[0]", "has no \"name\"", NULL);
    fails(2,
          "{\"nodes\": [{\"ranks\": [0, 1], \"nics\": [{\"name\": "
          "\"eth0\", \"ranks\": []}]}]}",
          "nodes[0].nics[0]", "array of 1 to 2 ranks", NULL);
    fails(2,
          "{\"nodes\": [{\"ranks\": [0, 1], \"nics\": [{\"name\": "
          "\"eth0\", \"rank\": [0]}]}]}",
          "nodes[0].nics[0]", "unknown key \"rank\"", NULL);
    fails(2,
          "{\"nodes\": [{\"ranks\": [0, 1], \"gpus\": [{\"name\": "
          "\"cuda0\"}]}]}",
          "nodes[0].gpus[0]", "expected a string, got an object", NULL);
}

/* Device strings that hold a PCI bus id ("dddd:bb:dd.f", hex) fill pci
 * too; nothing else does, and nothing is written past either field. A
 * string of leading blanks and an id passed sscanf's "%4x" and was then
 * copied whole into the 16 bytes of pci, over the next device's name. */
static void test_override_pci(void **state) {
    (void)state;
    static const char *const not_pci[] = {
        "                                        0000:1b:00.0", /* 52 */
        " 0000:1b:00.0",
        "\t0000:1b:00.0",
        "0000:1b:00.0 ",
        "0x00:1b:00.0",
        "+000:1b:00.0",
        "000:1b:00.0",
        "0000:1b:0.0",
        "0000:1b:00.00",
        "0000:1g:00.0",
        "0000-1b-00.0",
        "00000:1b:00.0",
        "0000:1b:00:0"};
    size_t n = sizeof(not_pci) / sizeof(not_pci[0]);
    char text[4096] = "{\"nodes\": [{\"ranks\": [0], \"gpus\": [";
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(text);
        snprintf(text + used, sizeof(text) - used, "%s\"%s\"", i ? ", " : "",
                 not_pci[i][0] == '\t' ? "\\t0000:1b:00.0" : not_pci[i]);
    }
    size_t used = strlen(text);
    snprintf(text + used, sizeof(text) - used,
             "], \"nics\": [\"0000:1B:00.0\", \"abcd:ef:1f.7\"]}]}");
    hcomm_topo_override_t ov;
    assert_int_equal(hcomm_topo_override_load(file(text), 1, &ov),
                     HCOMM_SUCCESS);
    const hcomm_topo_onode_t *node = &ov.nodes[0];
    assert_int_equal(node->ngpus, (int)n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(node->gpus[i].name, not_pci[i]);
        assert_string_equal(node->gpus[i].pci, "");
    }
    /* The list's zeroed terminator: a long copy into the last pci ran on
     * into it. */
    const unsigned char *end = (const unsigned char *)&node->gpus[n];
    for (size_t i = 0; i < sizeof(node->gpus[n]); i++)
        assert_int_equal(end[i], 0);
    /* Ids: as hwloc writes them (lower case), the name as given. */
    assert_string_equal(node->nics[0].name, "0000:1B:00.0");
    assert_string_equal(node->nics[0].pci, "0000:1b:00.0");
    assert_string_equal(node->nics[1].pci, "abcd:ef:1f.7");
    hcomm_topo_override_free(&ov);
}

/* "gpu_links": the matrix in the order of "gpus", either key first. */
static void test_override_gpu_links(void **state) {
    (void)state;
    hcomm_topo_override_t ov;
    const char *p =
        file("{\"nodes\": [{\"ranks\": [0], \"gpu_links\": [\n"
             "   [\"self\", \"nvlink\", \"pcie\"],\n"
             "   [\"nvlink\", \"self\", \"none\"],\n"
             "   [\"pcie\", \"none\", \"self\"]],\n"
             "  \"gpus\": [\"0000:1b:00.0\", \"0000:1c:00.0\", \"cuda2\"]},\n"
             " {\"ranks\": [1], \"gpus\": [\"cuda0\"], \"gpu_links\": "
             "[[\"self\"]]},\n"
             " {\"ranks\": [2], \"gpus\": [], \"gpu_links\": []},\n"
             " {\"ranks\": [3], \"gpus\": [\"cuda0\", \"cuda1\"]}]}\n");
    assert_int_equal(hcomm_topo_override_load(p, 4, &ov), HCOMM_SUCCESS);
    const hcomm_gpu_link_t s = HCOMM_GPU_LINK_SAME, nv = HCOMM_GPU_LINK_NVLINK,
                           pc = HCOMM_GPU_LINK_PCIE, no = HCOMM_GPU_LINK_NONE;
    const hcomm_gpu_link_t want[9] = {s, nv, pc, nv, s, no, pc, no, s};
    assert_int_equal(ov.nodes[0].ngpus, 3);
    assert_non_null(ov.nodes[0].gpu_links);
    for (int i = 0; i < 9; i++)
        assert_int_equal(ov.nodes[0].gpu_links[i], want[i]);
    assert_int_equal(ov.nodes[1].gpu_links[0], s);
    assert_int_equal(ov.nodes[2].ngpus, 0);
    assert_null(ov.nodes[3].gpu_links); /* not stated: detection's */
    hcomm_topo_override_free(&ov);
    assert_null(ov.nodes);
}

/* Every way "gpu_links" can be wrong, each named by its JSON path. */
static void test_override_gpu_links_bad(void **state) {
    (void)state;
#define NODE(gpus, links)                                                      \
    "{\"nodes\": [{\"ranks\": [0]}, {\"ranks\": [1], \"gpus\": " gpus          \
    ", \"gpu_links\": " links "}]}"
#define TWO "[\"cuda0\", \"cuda1\"]"
    fails(2, "{\"nodes\": [{\"ranks\": [0, 1], \"gpu_links\": []}]}",
          "nodes[0]: \"gpu_links\" needs \"gpus\"", NULL);
    fails(2, NODE(TWO, "{\"0\": \"nvlink\"}"),
          "nodes[1].gpu_links: expected an array of rows, got an object", NULL);
    fails(2, NODE(TWO, "[[\"self\", \"pcie\"]]"),
          "nodes[1].gpu_links: expected 2 rows (one per GPU of \"gpus\"), "
          "got 1",
          NULL);
    fails(2, NODE(TWO, "[[\"self\", \"pcie\"], \"pcie\"]"),
          "nodes[1].gpu_links[1]: expected an array of links, got a string",
          NULL);
    fails(2,
          NODE(TWO, "[[\"self\", \"pcie\"], [\"pcie\", \"self\", \"none\"]]"),
          "nodes[1].gpu_links[1]: expected 2 links (one per GPU of "
          "\"gpus\"), got 3",
          NULL);
    fails(2, NODE(TWO, "[[\"self\", 1], [\"pcie\", \"self\"]]"),
          "nodes[1].gpu_links[0][1]: expected \"nvlink\", \"pcie\" or "
          "\"none\", got an integer",
          NULL);
    fails(2, NODE(TWO, "[[\"self\", \"NVLink\"], [\"nvlink\", \"self\"]]"),
          "nodes[1].gpu_links[0][1]: expected \"nvlink\", \"pcie\" or "
          "\"none\", got \"NVLink\"",
          NULL);
    fails(2, NODE(TWO, "[[\"self\", \"p2p\"], [\"p2p\", \"self\"]]"),
          "nodes[1].gpu_links[0][1]:", "got \"p2p\"", NULL);
    fails(2, NODE(TWO, "[[\"self\", \"unknown\"], [\"unknown\", \"self\"]]"),
          "nodes[1].gpu_links[0][1]:", "got \"unknown\"", NULL);
    fails(2, NODE(TWO, "[[\"self\", \"self\"], [\"self\", \"self\"]]"),
          "nodes[1].gpu_links[0][1]: expected \"nvlink\", \"pcie\" or "
          "\"none\", got \"self\"",
          NULL);
    fails(2, NODE(TWO, "[[\"self\", \"none\"], [\"none\", \"none\"]]"),
          "nodes[1].gpu_links[1][1]: expected \"self\" (a GPU's link to "
          "itself), got \"none\"",
          NULL);
    fails(2, NODE(TWO, "[[null, \"none\"], [\"none\", \"self\"]]"),
          "nodes[1].gpu_links[0][0]: expected \"self\"", "got null", NULL);
    fails(2, NODE(TWO, "[[\"self\", \"nvlink\"], [\"pcie\", \"self\"]]"),
          "nodes[1].gpu_links[1][0]: \"pcie\", but gpu_links[0][1] is "
          "\"nvlink\" (a link joins both GPUs)",
          NULL);
    fails(2,
          "{\"nodes\": [{\"ranks\": [0, 1], \"gpus\": [\"cuda0\"], "
          "\"gpu_link\": [[\"self\"]]}]}",
          "nodes[0]: unknown key \"gpu_link\"", NULL);
#undef NODE
#undef TWO
}

static void test_override_no_file(void **state) {
    (void)state;
    hcomm_topo_override_t ov;
    const char *missing = "/nonexistent/hcomm/topo.json";
    assert_int_equal(hcomm_topo_override_load(missing, 2, &ov),
                     HCOMM_ERR_INVALID_ARG);
    assert_non_null(strstr(hcomm_last_error(), missing));
}
#endif /* HAVE_JANSSON */

int main(void) {
    const struct CMUnitTest map_tests[] = {
        cmocka_unit_test(test_map_uneven), cmocka_unit_test(test_map_extremes),
        cmocka_unit_test(test_map_large),  cmocka_unit_test(test_local),
        cmocka_unit_test(test_link_names), cmocka_unit_test(test_link_blocked),
        cmocka_unit_test(test_link_nvml),  cmocka_unit_test(test_link_detect),
        cmocka_unit_test(test_topo_links),
    };
    int failed = cmocka_run_group_tests_name("topo_map", map_tests, NULL, NULL);
#ifdef HAVE_JANSSON
    const struct CMUnitTest override_tests[] = {
        cmocka_unit_test(test_override_good),
        cmocka_unit_test(test_override_syntax),
        cmocka_unit_test(test_override_ranks),
        cmocka_unit_test(test_override_types),
        cmocka_unit_test(test_override_empty),
        cmocka_unit_test(test_override_keys),
        cmocka_unit_test(test_override_nic_ranks),
        cmocka_unit_test(test_override_pci),
        cmocka_unit_test(test_override_gpu_links),
        cmocka_unit_test(test_override_gpu_links_bad),
        cmocka_unit_test(test_override_no_file),
    };
    failed += cmocka_run_group_tests_name("topo_override", override_tests,
                                          make_dir, remove_dir);
#endif
    return failed ? 1 : 0;
}
