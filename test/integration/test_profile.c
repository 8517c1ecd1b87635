/* The profiler: with HCOMM_PROFILE set, every call leaves one record in its
 * rank's file; the records are read back with jansson and their fields,
 * byte counts and bandwidth factors checked, in both formats. The files
 * stay (in HCOMM_TEST_PROFILE_DIR) for tools/hcomm_prof's test. */
#include "mpi_check.h"

#include <jansson.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;

/* What every rank calls, and what its record must say. */
typedef struct {
    const char *op;
    size_t count, bytes_per_count; /* bytes = count * this */
    double factor;                 /* busbw / algbw */
} expect_t;

static int run_calls(hcomm_comm_t comm, expect_t *e) {
    float f[1000];
    double d[7] = {0};
    int32_t in[10], out[10 * 64];
    hcomm_request_t req;
    double n = nranks;
    for (int i = 0; i < 1000; i++)
        f[i] = (float)i;
    for (int i = 0; i < 10; i++)
        in[i] = rank;
    CHECK_OK(hcomm_allreduce(f, f, 1000, HCOMM_FLOAT32, HCOMM_SUM, comm));
    e[0] = (expect_t){"allreduce", 1000, 4, 2 * (n - 1) / n};
    CHECK_OK(hcomm_allgather(in, out, 10, HCOMM_INT32, comm));
    e[1] = (expect_t){"allgather", 10, 4 * (size_t)nranks, (n - 1) / n};
    CHECK_OK(hcomm_ibroadcast(d, 7, HCOMM_FLOAT64, 0, comm, &req));
    CHECK_OK(hcomm_wait(&req));
    e[2] = (expect_t){"bcast", 7, 8, 1};
    return 3;
}

static json_t *load_records(const char *path, int chrome, size_t *n) {
    json_error_t err;
    json_t *all;
    if (chrome) {
        all = json_load_file(path, 0, &err);
    } else {
        FILE *f = fopen(path, "r");
        char line[2048];
        all = json_array();
        while (f && fgets(line, sizeof(line), f))
            json_array_append_new(all, json_loads(line, 0, &err));
        if (f) fclose(f);
    }
    CHECK(all && json_is_array(all), "%s: not JSON (%s)", path, err.text);
    *n = all ? json_array_size(all) : 0;
    return all;
}

static void check_record(json_t *r, const expect_t *e, int chrome, int owner) {
    json_t *a = chrome ? json_object_get(r, "args") : r;
    const char *op =
        json_string_value(json_object_get(r, chrome ? "name" : "op"));
    size_t bytes = (size_t)json_integer_value(json_object_get(a, "bytes"));
    double dur =
        json_number_value(json_object_get(r, chrome ? "dur" : "duration_us"));
    double busbw = json_number_value(json_object_get(a, "busbw_gbps"));
    CHECK(op && strcmp(op, e->op) == 0, "op %s, expected %s", op, e->op);
    CHECK(bytes == e->count * e->bytes_per_count, "%s: %zu bytes, expected %zu",
          e->op, bytes, e->count * e->bytes_per_count);
    CHECK((size_t)json_integer_value(json_object_get(a, "num_elements")) ==
              e->count,
          "%s: num_elements", e->op);
    CHECK(dur > 0, "%s: duration %g", e->op, dur);
    double algbw = (double)bytes / (dur * 1e3);
    CHECK(fabs(busbw - algbw * e->factor) <= 1e-3 * busbw + 1e-9,
          "%s: busbw %g, expected %g x algbw %g", e->op, busbw, e->factor,
          algbw);
    CHECK(json_string_length(json_object_get(a, "transport")) > 0 &&
              json_string_length(json_object_get(a, "algorithm")) > 0,
          "%s: transport and algorithm named", e->op);
    int who =
        (int)json_integer_value(json_object_get(r, chrome ? "pid" : "rank"));
    CHECK(who == owner, "%s: rank %d in rank %d's file", e->op, who, owner);
    if (!chrome) {
        CHECK(json_integer_value(json_object_get(r, "nranks")) == nranks &&
                  json_is_integer(json_object_get(r, "comm_id")) &&
                  json_is_string(json_object_get(r, "datatype")) &&
                  json_number_value(json_object_get(r, "start_us")) > 0 &&
                  json_is_number(json_object_get(r, "algbw_gbps")),
              "%s: the documented fields", e->op);
    }
}

static void one_format(const char *dir, int chrome, int *argc, char ***argv) {
    char pattern[512], path[600];
    expect_t e[8];
    snprintf(pattern, sizeof(pattern), "%s/%s.%%r", dir,
             chrome ? "trace" : "calls");
    setenv("HCOMM_PROFILE", pattern, 1);
    setenv("HCOMM_PROFILE_FORMAT", chrome ? "chrome" : "json", 1);
    CHECK_OK(hcomm_init(argc, argv));
    hcomm_comm_t comm;
    CHECK_OK(hcomm_comm_create(MPI_COMM_WORLD, &comm));
    int ncalls = run_calls(comm, e);
    CHECK_OK(hcomm_comm_free(&comm));
    CHECK_OK(hcomm_finalize()); /* closes the file */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) {
        size_t n;
        snprintf(path, sizeof(path), "%s/%s.%d", dir,
                 chrome ? "trace" : "calls", r);
        json_t *all = load_records(path, chrome, &n);
        CHECK(n == (size_t)ncalls, "%s: %zu records, expected %d", path, n,
              ncalls);
        for (size_t i = 0; i < n && i < (size_t)ncalls; i++)
            check_record(json_array_get(all, i), &e[i], chrome, r);
        json_decref(all);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_rank = rank;
    const char *dir = getenv("HCOMM_TEST_PROFILE_DIR");
    char tmp[64] = "/tmp/hcomm_profile_XXXXXX";
    if (!dir) {
        if (rank == 0 && !mkdtemp(tmp)) return 1;
        MPI_Bcast(tmp, sizeof(tmp), MPI_CHAR, 0, MPI_COMM_WORLD);
        dir = tmp;
    }
    one_format(dir, 0, &argc, &argv);
    one_format(dir, 1, &argc, &argv);
    int rc = check_summary("test_profile");
    MPI_Finalize();
    return rc;
}
