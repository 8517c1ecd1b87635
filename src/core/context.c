/* hcomm_init / hcomm_finalize and process-wide facts. */
#include "core/context.h"
#include "coll/select.h"
#include "coll/check.h"
#include "core/comm.h"
#include "core/config.h"
#include "core/gpu.h"
#include "core/log.h"
#include "core/flight.h"
#include "core/profile.h"
#include "core/stream_worker.h"
#include "ucx_tp/ucx_tp.h"

#include <mpi.h>
#include <string.h>
#include <unistd.h>

hcomm_context_t hcomm_ctx = {.lock = PTHREAD_MUTEX_INITIALIZER,
                             .probe_comm = MPI_COMM_NULL};
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int self_keyval = MPI_KEYVAL_INVALID;
static int detaching; /* hcomm_finalize is removing the attribute itself */

/* More ranks on this node than cores: spinning would starve the peer that
 * holds the data, so waiting ranks yield at once. */
static long auto_spin_count(void) {
    MPI_Comm node;
    int local = 1;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                             MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        PMPI_Comm_size(node, &local);
        PMPI_Comm_free(&node);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return local > cores ? 0 : 20000;
}

static void teardown(void) {
    hcomm_stream_worker_stop();
    hcomm_comm_free_all();
    if (hcomm_ctx.probe_comm != MPI_COMM_NULL)
        PMPI_Comm_free(&hcomm_ctx.probe_comm);
    hcomm_ucx_finalize();
    hcomm_pool_destroy(&hcomm_ctx.pool);
#ifdef HAVE_CUDA
    if (hcomm_gpu_present) hcomm_gpu_pools_release();
#endif
    hcomm_gpu_finalize();
    hcomm_log_close();
    hcomm_profile_close();
    hcomm_flight_shutdown();
    atomic_store(&hcomm_ctx.initialized, 0);
}

/* MPI_Finalize runs this while MPI still works, so a program that never
 * calls hcomm_finalize still frees what it holds in MPI and UCX. */
static int on_mpi_finalize(MPI_Comm comm, int keyval, void *attr, void *extra) {
    (void)comm;
    (void)keyval;
    (void)attr;
    (void)extra;
    if (detaching) return MPI_SUCCESS;
    pthread_mutex_lock(&init_lock);
    if (hcomm_is_initialized()) {
        teardown();
        hcomm_ctx.own_mpi = 0;
    }
    self_keyval = MPI_KEYVAL_INVALID;
    pthread_mutex_unlock(&init_lock);
    return MPI_SUCCESS;
}

static hcomm_status_t init_locked(int *argc, char ***argv) {
    int flag = 0, level = MPI_THREAD_SINGLE;
    hcomm_status_t st = hcomm_config_load();
    if (st == HCOMM_SUCCESS) st = hcomm_log_configure();
    if (st != HCOMM_SUCCESS) return st;
    if ((st = hcomm_select_configure(hcomm_cfg_str(HCOMM_CFG_ALGO))) !=
        HCOMM_SUCCESS)
        return st;
    PMPI_Finalized(&flag);
    if (flag)
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED,
                           "MPI is already finalized");
    PMPI_Initialized(&flag);
    hcomm_ctx.own_mpi = 0;
    if (!flag) {
        if (PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &level) !=
            MPI_SUCCESS)
            return hcomm_error(HCOMM_ERR_TRANSPORT, "MPI_Init_thread failed");
        hcomm_ctx.own_mpi = 1;
    }
    PMPI_Query_thread(&level);
    int world_rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    hcomm_log_set_rank(world_rank);
    if ((st = hcomm_profile_configure(world_rank)) != HCOMM_SUCCESS ||
        (st = hcomm_flight_configure(world_rank)) != HCOMM_SUCCESS) {
        if (hcomm_ctx.own_mpi) PMPI_Finalize();
        return st;
    }
    hcomm_ctx.thread_multiple = level == MPI_THREAD_MULTIPLE;
    hcomm_ctx.mpi_funneled = level == MPI_THREAD_FUNNELED;
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &hcomm_ctx.probe_comm) != MPI_SUCCESS)
        hcomm_ctx.probe_comm = MPI_COMM_NULL;
    long spin = hcomm_cfg_int(HCOMM_CFG_SPIN_COUNT);
    hcomm_ctx.spin_count = spin < 0 ? auto_spin_count() : spin;
    hcomm_pool_init(&hcomm_ctx.pool,
                    (size_t)hcomm_cfg_int(HCOMM_CFG_BUFFER_POOL_SIZE));
    hcomm_gpu_init();
    hcomm_check_on = strcmp(hcomm_cfg_str(HCOMM_CFG_CHECK), "1") == 0;
    hcomm_ctx.cuda_staging_forced =
        strcmp(hcomm_cfg_str(HCOMM_CFG_CUDA_STAGING), "1") == 0;
    memset(hcomm_ctx.id_used, 0, sizeof(hcomm_ctx.id_used));
    hcomm_ctx.ucx_ok = 0;
    if (strcmp(hcomm_cfg_str(HCOMM_CFG_TRANSPORT), "mpi") != 0)
        hcomm_ctx.ucx_ok =
            hcomm_ucx_init(hcomm_ctx.thread_multiple) == HCOMM_SUCCESS;
    if (self_keyval == MPI_KEYVAL_INVALID &&
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_mpi_finalize,
                                &self_keyval, NULL) == MPI_SUCCESS)
        PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL);
    hcomm_clear_error();
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_init(int *argc, char ***argv) {
    pthread_mutex_lock(&init_lock);
    hcomm_status_t st = HCOMM_SUCCESS;
    if (!hcomm_is_initialized()) st = init_locked(argc, argv);
    if (st == HCOMM_SUCCESS) atomic_fetch_add(&hcomm_ctx.initialized, 1);
    pthread_mutex_unlock(&init_lock);
    return st;
}

hcomm_status_t hcomm_finalize(void) {
    pthread_mutex_lock(&init_lock);
    if (!hcomm_is_initialized()) {
        pthread_mutex_unlock(&init_lock);
        return hcomm_error(HCOMM_ERR_NOT_INITIALIZED,
                           "hcomm_finalize without hcomm_init");
    }
    if (atomic_fetch_sub(&hcomm_ctx.initialized, 1) == 1) {
        atomic_store(&hcomm_ctx.initialized, 1);
        teardown();
        if (self_keyval != MPI_KEYVAL_INVALID) {
            int keyval = self_keyval;
            self_keyval = MPI_KEYVAL_INVALID;
            detaching = 1;
            PMPI_Comm_delete_attr(MPI_COMM_SELF, keyval);
            PMPI_Comm_free_keyval(&keyval);
            detaching = 0;
        }
        if (hcomm_ctx.own_mpi) PMPI_Finalize();
        hcomm_ctx.own_mpi = 0;
    }
    pthread_mutex_unlock(&init_lock);
    return HCOMM_SUCCESS;
}

/* A large MPI send (a rendezvous without single-copy reads, in Open MPI's
 * shared-memory transport or MPICH's) moves only while its sender's MPI
 * progresses; a correct program may start one, enter a collective, and
 * wait for the send after it while the receiver completes its receive
 * before joining. A probe runs the engine in Open MPI and MPICH alike; on
 * a duplicate of MPI_COMM_WORLD it matches nothing of the program's (MPICH
 * answers one on a communicator of one rank without running the engine). */
_Thread_local int hcomm_in_mpi_progress;

void hcomm_mpi_progress(void) {
    int flag = 1;
    if (hcomm_in_mpi_progress || hcomm_ctx.probe_comm == MPI_COMM_NULL) return;
    if (hcomm_ctx.mpi_funneled) PMPI_Is_thread_main(&flag);
    if (!flag) return;
    hcomm_in_mpi_progress++;
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, hcomm_ctx.probe_comm, &flag,
                MPI_STATUS_IGNORE);
    hcomm_in_mpi_progress--;
}

int hcomm_initialized(void) {
    return hcomm_is_initialized();
}

const char *hcomm_version(void) {
    return PACKAGE_VERSION;
}

size_t hcomm_dtype_size(hcomm_dtype_t dtype) {
    static const size_t sizes[HCOMM_DTYPE_COUNT] = {1, 1, 4, 4, 8,
                                                    8, 2, 2, 4, 8};
    return (unsigned)dtype < HCOMM_DTYPE_COUNT ? sizes[dtype] : 0;
}
