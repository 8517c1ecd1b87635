/* hcomm_sim's command line and its report (tools/hcomm_sim_report.c). */
#ifndef HCOMM_TOOLS_SIM_CLI_H
#define HCOMM_TOOLS_SIM_CLI_H

#include "hcomm_sim.h"

#include <stdio.h>

typedef struct {
    hcomm_sim_model_t model;
    hcomm_sim_shape_t shape;
    hcomm_coll_t coll;
    hcomm_dtype_t dtype;
    const char *algos; /* comma-separated, NULL: every one of coll */
    size_t minbytes, maxbytes;
    int factor, root, json, no_symmetry, sweep_from, calls;
    uint64_t max_steps;
} hcomm_sim_opts_t;

int hcomm_sim_dtype_by_name(const char *name, hcomm_dtype_t *out);
int hcomm_sim_coll_by_name(const char *name, hcomm_coll_t *out);
/* Runs every size x algorithm (x node count with a sweep); 0 on success. */
int hcomm_sim_cli_run(const hcomm_sim_opts_t *o, FILE *out);

#endif
