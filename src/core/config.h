/* The table of every HCOMM_* environment variable: name, type, default and
 * one line of documentation. The README's table and hcomm_info are made from
 * it. */
#ifndef HCOMM_CORE_CONFIG_H
#define HCOMM_CORE_CONFIG_H

#include "hcomm.h"

#include <stdio.h>

typedef enum {
    HCOMM_CFG_DEBUG = 0,
    HCOMM_CFG_TRANSPORT,
    HCOMM_CFG_ALGO,
    HCOMM_CFG_CHUNK_SIZE,
    HCOMM_CFG_BUFFER_POOL_SIZE,
    HCOMM_CFG_TIMEOUT,
    HCOMM_CFG_SPIN_COUNT,
    HCOMM_CFG_MPI_INTERCEPT,
    HCOMM_CFG_MPI_STATS,
    HCOMM_CFG_ENABLE_TOPOLOGY_AWARE,
    HCOMM_CFG_OVERRIDE_TOPO,
    HCOMM_CFG_SHM_SLOT_SIZE,
    HCOMM_CFG_FAST_PATH_SMALL_MSG,
    HCOMM_CFG_CUDA,
    HCOMM_CFG_CUDA_STAGING,
    HCOMM_CFG_CUDA_CHUNK_SIZE,
    HCOMM_CFG_MEMLOG,
    HCOMM_CFG_CUDA_IPC,
    HCOMM_CFG_CUDA_IPC_ALGO,
    HCOMM_CFG_CUDA_IPC_BUFFER,
    HCOMM_CFG_CUDA_IPC_ONESHOT_MAX,
    HCOMM_CFG_CUDA_IPC_BLOCKS,
    HCOMM_CFG_CUDA_IPC_DIRECT_MIN,
    HCOMM_CFG_CUDA_IPC_EARLY,
    HCOMM_CFG_CUDA_NODE_STAGES_MAX,
    HCOMM_CFG_DEBUG_SUBSYS,
    HCOMM_CFG_DEBUG_FILE,
    HCOMM_CFG_PROFILE,
    HCOMM_CFG_PROFILE_FORMAT,
    HCOMM_CFG_FLIGHT_RECORDER,
    HCOMM_CFG_FLIGHT_RECORDER_DEPTH,
    HCOMM_CFG_CHECK,
    HCOMM_CFG_COMPRESS,
    HCOMM_CFG_USE_MULTIPATH,
    HCOMM_CFG_SOCKET_THREADS,
    HCOMM_CFG_COUNT
} hcomm_cfg_id_t;

typedef enum {
    HCOMM_CFG_SRC_DEFAULT,
    HCOMM_CFG_SRC_ENV,
    HCOMM_CFG_SRC_SET
} hcomm_cfg_src_t;

/* Reads every variable from the environment (defaults for unset ones) and
 * warns about HCOMM_* variables that are not in the table, naming the nearest
 * real one. A malformed value is an error that names the variable. */
hcomm_status_t hcomm_config_load(void);
/* Sets one variable as if from the environment (tools and tests). */
hcomm_status_t hcomm_config_set(const char *name, const char *value);

long long hcomm_cfg_int(hcomm_cfg_id_t id); /* int, size, bool, level */
double hcomm_cfg_double(hcomm_cfg_id_t id);
const char *hcomm_cfg_str(hcomm_cfg_id_t id); /* the value as given */
hcomm_cfg_src_t hcomm_cfg_source(hcomm_cfg_id_t id);

/* The nearest variable name to a misspelt one (NULL if none is close). */
const char *hcomm_config_nearest(const char *name);
/* Markdown table of the variables (for the README) or "name=value (source)"
 * lines (for hcomm_info). */
void hcomm_config_print_markdown(FILE *out);
void hcomm_config_print_values(FILE *out);

#endif
