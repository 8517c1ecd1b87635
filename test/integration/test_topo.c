/* Topology end to end, at any rank count: the node map MPI finds (checked
 * against host names gathered here), HCOMM_OVERRIDE_TOPO files written by
 * the test (two even nodes; an uneven split listed out of order), split
 * communicators mapped through their MPI_COMM_WORLD ranks,
 * HCOMM_ENABLE_TOPOLOGY_AWARE=0, and bad files failing on every rank. */
#include "core/config.h"
#include "mpi_check.h"
#include "topo/topo.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static char dir[64];

/* The node map that labels (one per communicator rank) must give, worked
 * out the slow way and compared with what HCOMM found. */
static void check_map(const hcomm_topo_t *t, const int *label, int size,
                      const char *what) {
    const hcomm_topo_map_t *m = &t->map;
    int nnodes = 0;
    CHECK(m->size == size, "%s: size %d, want %d", what, m->size, size);
    if (m->size != size) return;
    for (int r = 0; r < size; r++) {
        int first = r, local = 0, node = 0;
        for (int q = 0; q < r; q++) {
            if (label[q] != label[r]) continue;
            first = first < q ? first : q;
            local++;
        }
        /* Nodes before this one: those whose lowest rank is below first. */
        for (int q = 0; q < first; q++) {
            int lowest = 1;
            for (int p = 0; p < q && lowest; p++)
                lowest = label[p] != label[q];
            node += lowest;
        }
        if (first == r) nnodes++;
        CHECK(m->node_of[r] == node && m->local_rank[r] == local,
              "%s: rank %d on node %d as local %d, want node %d local %d", what,
              r, m->node_of[r], m->local_rank[r], node, local);
        int n = m->node_of[r];
        CHECK(n >= 0 && n < m->nnodes &&
                  m->ranks_by_node[m->node_start[n] + m->local_rank[r]] == r,
              "%s: ranks_by_node disagrees for rank %d", what, r);
    }
    CHECK(m->nnodes == nnodes, "%s: %d nodes, want %d", what, m->nnodes,
          nnodes);
    CHECK(t->rank >= 0 && t->rank < size, "%s: rank %d", what, t->rank);
}

static hcomm_comm_t create(MPI_Comm mc) {
    hcomm_comm_t c = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_create(mc, &c));
    CHECK(hcomm_comm_topology(c) != NULL, "no topology on a communicator");
    return c;
}

static void test_detected(void) {
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    char *hosts = calloc((size_t)nranks, sizeof(host));
    int *label = malloc((size_t)nranks * sizeof(int)), len;
    MPI_Get_processor_name(host, &len);
    MPI_Allgather(host, sizeof(host), MPI_CHAR, hosts, sizeof(host), MPI_CHAR,
                  MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) {
        label[r] = r;
        for (int q = 0; q < r && label[r] == r; q++)
            if (strcmp(hosts + (size_t)q * sizeof(host),
                       hosts + (size_t)r * sizeof(host)) == 0)
                label[r] = q;
    }
    hcomm_comm_t c = create(MPI_COMM_WORLD);
    const hcomm_topo_t *t = hcomm_comm_topology(c);
    if (t) {
        check_map(t, label, nranks, "detected");
        CHECK(!t->from_override && t->aware, "detected: override %d aware %d",
              t->from_override, t->aware);
        CHECK(strncmp(t->node_name, host, HCOMM_TOPO_NAME_LEN - 1) == 0,
              "detected: node name %s, host %s", t->node_name, host);
        const hcomm_topo_local_t *l = hcomm_topo_local();
        CHECK(t->numa == l->numa && t->socket == l->socket &&
                  t->ngpus == l->ngpus && t->nnics == l->nnics,
              "detected: local facts differ from hwloc's");
        CHECK(t->numa >= -1 && t->socket >= -1, "numa %d socket %d", t->numa,
              t->socket);
        if (rank == 0)
            printf("detected: %d ranks on %d node(s); rank 0: NUMA %d, socket "
                   "%d, %d GPUs, %d NICs\n",
                   nranks, t->map.nnodes, t->numa, t->socket, t->ngpus,
                   t->nnics);
    }
    CHECK_OK(hcomm_comm_free(&c));
    free(hosts);
    free(label);
}

static void test_not_aware(void) {
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", ""));
    CHECK(hcomm_config_set("HCOMM_ENABLE_TOPOLOGY_AWARE", "2") ==
              HCOMM_ERR_INVALID_ARG,
          "HCOMM_ENABLE_TOPOLOGY_AWARE=2 accepted");
    CHECK_OK(hcomm_config_set("HCOMM_ENABLE_TOPOLOGY_AWARE", "0"));
    hcomm_comm_t c = create(MPI_COMM_WORLD);
    const hcomm_topo_t *t = hcomm_comm_topology(c);
    /* Still found (and reported); only marked for algorithms to ignore. */
    CHECK(t && !t->aware && t->map.nnodes >= 1 && t->map.size == nranks,
          "topology-aware off: aware %d", t ? t->aware : -1);
    CHECK_OK(hcomm_comm_free(&c));
    CHECK_OK(hcomm_config_set("HCOMM_ENABLE_TOPOLOGY_AWARE", "1"));
}

#ifdef HAVE_JANSSON
/* Rank 0 writes the file; everyone gets its path once it exists. */
static const char *write_file(const char *name, const char *fmt, ...) {
    static char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (rank == 0) {
        FILE *f = fopen(path, "w");
        va_list ap;
        va_start(ap, fmt);
        if (f) vfprintf(f, fmt, ap);
        va_end(ap);
        CHECK(f && fclose(f) == 0, "cannot write %s", path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return path;
}

/* A JSON array of the ranks [lo, hi) in the given direction. */
static char *rank_list(int lo, int hi, int reverse) {
    char *s = malloc(16 * (size_t)(hi - lo) + 3), *p = s;
    p += sprintf(p, "[");
    for (int i = 0; i < hi - lo; i++)
        p += sprintf(p, "%s%d", i ? ", " : "", reverse ? hi - 1 - i : lo + i);
    sprintf(p, "]");
    return s;
}

/* The world labels of the even file: first half on n0, the rest on n1. */
static const char *even_file(int *label) {
    int half = (nranks + 1) / 2;
    char *a = rank_list(0, half, 0), *b = rank_list(half, nranks, 0);
    const char *p;
    if (nranks == 1)
        p = write_file("even.json",
                       "{\"nodes\": [{\"name\": \"n0\", \"ranks\": "
                       "%s, \"gpus\": [\"0000:1b:00.0\"], "
                       "\"nics\": [\"mlx5_0\"]}]}\n",
                       a);
    else
        p = write_file("even.json",
                       "{\"nodes\": [\n"
                       "  {\"name\": \"n0\", \"ranks\": %s, \"gpus\": "
                       "[\"0000:1b:00.0\"], \"nics\": [\"mlx5_0\"]},\n"
                       "  {\"name\": \"n1\", \"ranks\": %s}\n]}\n",
                       a, b);
    for (int r = 0; r < nranks; r++)
        label[r] = r < half ? 0 : 1;
    free(a);
    free(b);
    return p;
}

static void test_override_even(void) {
    int *label = malloc((size_t)nranks * sizeof(int));
    const char *path = even_file(label);
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", path));
    hcomm_comm_t c = create(MPI_COMM_WORLD);
    const hcomm_topo_t *t = hcomm_comm_topology(c);
    if (t) {
        check_map(t, label, nranks, "even override");
        int on_n0 = label[rank] == 0;
        CHECK(t->from_override, "even override: not from the file");
        CHECK(strcmp(t->node_name, on_n0 ? "n0" : "n1") == 0,
              "even override: node name %s", t->node_name);
        if (on_n0)
            CHECK(t->ngpus == 1 && t->nnics == 1 &&
                      strcmp(t->gpus[0].pci, "0000:1b:00.0") == 0 &&
                      strcmp(t->nics[0].name, "mlx5_0") == 0,
                  "even override: the file's devices are not n0's");
        else
            CHECK(t->ngpus == hcomm_topo_local()->ngpus,
                  "even override: n1 should keep hwloc's GPUs");
    }
    CHECK_OK(hcomm_comm_free(&c));

    free(label);
}

/* Communicators other than MPI_COMM_WORLD under the override in force:
 * their ranks reach the file through their MPI_COMM_WORLD ranks. label is
 * per world rank. */
static void test_subcomms(const int *label) {
    const hcomm_topo_t *t;
    hcomm_comm_t c;
    int *sub = malloc((size_t)nranks * sizeof(int));
    /* Reversed order: communicator rank i is world rank n-1-i. */
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, nranks - rank, &rev);
    for (int i = 0; i < nranks; i++)
        sub[i] = label[nranks - 1 - i];
    c = create(rev);
    if ((t = hcomm_comm_topology(c)))
        check_map(t, sub, nranks, "reversed communicator");
    CHECK_OK(hcomm_comm_free(&c));
    MPI_Comm_free(&rev);

    /* Even and odd world ranks, through hcomm_comm_split. */
    hcomm_comm_t world = create(MPI_COMM_WORLD), part = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_comm_split(world, rank % 2, rank, &part));
    int psize = (nranks - rank % 2 + 1) / 2;
    for (int i = 0; i < psize; i++)
        sub[i] = label[2 * i + rank % 2];
    if ((t = hcomm_comm_topology(part)))
        check_map(t, sub, psize, "split communicator");
    CHECK_OK(hcomm_comm_free(&part));
    CHECK_OK(hcomm_comm_free(&world));
    free(sub);
}

/* The last rank alone, listed first; the others in reverse order. Nodes are
 * still numbered by their lowest rank. */
static void test_override_uneven(void) {
    char *rest = rank_list(0, nranks - 1, 1);
    const char *path;
    if (nranks == 1)
        path =
            write_file("uneven.json",
                       "{\"nodes\": [{\"name\": \"last\", \"ranks\": [0]}]}");
    else
        path = write_file("uneven.json",
                          "{\"nodes\": [{\"name\": \"last\", \"ranks\": [%d]},"
                          " {\"name\": \"rest\", \"ranks\": %s}]}",
                          nranks - 1, rest);
    free(rest);
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", path));
    int *label = malloc((size_t)nranks * sizeof(int));
    for (int r = 0; r < nranks; r++)
        label[r] = r == nranks - 1;
    hcomm_comm_t c = create(MPI_COMM_WORLD);
    const hcomm_topo_t *t = hcomm_comm_topology(c);
    if (t) {
        check_map(t, label, nranks, "uneven override");
        int last = rank == nranks - 1;
        CHECK(strcmp(t->node_name, last ? "last" : "rest") == 0,
              "uneven override: node name %s", t->node_name);
        if (nranks > 1)
            CHECK(t->map.nnodes == 2 && t->map.node_size[0] == nranks - 1 &&
                      t->map.node_size[1] == 1 &&
                      t->map.ranks_by_node[t->map.node_start[1]] == nranks - 1,
                  "uneven override: not %d + 1", nranks - 1);
    }
    CHECK_OK(hcomm_comm_free(&c));
    test_subcomms(label);
    free(label);
}

/* Bad files fail hcomm_comm_create on every rank, with the file, the place
 * and the problem in the message; a good setting works again after. */
static void expect_failure(const char *path, const char *want) {
    hcomm_comm_t c = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", path));
    hcomm_status_t st = hcomm_comm_create(MPI_COMM_WORLD, &c);
    const char *msg = hcomm_last_error();
    CHECK(st == HCOMM_ERR_INVALID_ARG && c == HCOMM_COMM_NULL,
          "%s: created anyway (%s)", path, hcomm_strerror(st));
    CHECK(strstr(msg, path) && strstr(msg, want), "%s: message \"%s\"", path,
          msg);
}

static void test_bad_files(void) {
    expect_failure(write_file("syntax.json", "{\"nodes\": [\n  {\"ranks\": "
                                             "[0,]}\n]}\n"),
                   "line 2");
    char *all = rank_list(0, nranks, 0);
    expect_failure(write_file("twice.json",
                              "{\"nodes\": [{\"ranks\": %s}, {\"ranks\": "
                              "[0]}]}\n",
                              all),
                   "rank 0 is listed twice");
    expect_failure(write_file("key.json",
                              "{\"nodes\": [{\"ranks\": %s, \"gpu\": []}]}\n",
                              all),
                   "unknown key \"gpu\"");
    expect_failure(write_file("missing.json",
                              "{\"nodes\": [{\"ranks\": [%d]}]}\n", nranks),
                   "not in MPI_COMM_WORLD");
    free(all);
    expect_failure("/nonexistent/topo.json", "/nonexistent/topo.json");
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", ""));
    hcomm_comm_t c = create(MPI_COMM_WORLD);
    CHECK_OK(hcomm_comm_free(&c));
    CHECK(hcomm_comm_topology(HCOMM_COMM_NULL) == NULL,
          "a topology for HCOMM_COMM_NULL");
}

#else
/* A build without jansson refuses the file and says why. */
static void test_no_json(void) {
    hcomm_comm_t c = HCOMM_COMM_NULL;
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", "/tmp/any.json"));
    CHECK(hcomm_comm_create(MPI_COMM_WORLD, &c) == HCOMM_ERR_UNSUPPORTED &&
              strstr(hcomm_last_error(), "without JSON support"),
          "no jansson: %s", hcomm_last_error());
    CHECK_OK(hcomm_config_set("HCOMM_OVERRIDE_TOPO", ""));
}
#endif

static void remove_files(void) {
    static const char *names[] = {"even.json",  "uneven.json", "syntax.json",
                                  "twice.json", "key.json",    "missing.json"};
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) return;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Whether every rank runs on one host (not so under test/multinode). */
static int on_one_host(void) {
    MPI_Comm host;
    int host_ranks, all;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                        MPI_INFO_NULL, &host);
    MPI_Comm_size(host, &host_ranks);
    MPI_Comm_free(&host);
    MPI_Allreduce(&(int){host_ranks == nranks}, &all, 1, MPI_INT, MPI_MIN,
                  MPI_COMM_WORLD);
    return all;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    if (rank == 0) {
        strcpy(dir, "/tmp/hcomm_topo_XXXXXX");
        if (!mkdtemp(dir)) dir[0] = '\0';
    }
    MPI_Bcast(dir, sizeof(dir), MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK_OK(hcomm_init(&argc, &argv));
    test_detected();
#ifdef HAVE_JANSSON
    /* The override splits a host into nodes; it cannot join hosts. */
    if (on_one_host()) {
        test_override_even();
        test_override_uneven();
    }
    test_bad_files();
#else
    test_no_json();
#endif
    test_not_aware();
    CHECK_OK(hcomm_finalize());
    remove_files();
    int rc = check_summary("test_topo");
    MPI_Finalize();
    return rc;
}
