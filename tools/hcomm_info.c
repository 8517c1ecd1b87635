/* hcomm_info: the version, build options and configuration of HCOMM.
 *   hcomm_info                  everything, values and where they came from
 *   hcomm_info --env-markdown   the README's table of variables */
#include "core/config.h"
#include "hcomm.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--env-markdown") == 0) {
        hcomm_config_print_markdown(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: %s [--env-markdown]\n", argv[0]);
        return 2;
    }
    if (hcomm_config_load() != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm_info: %s\n", hcomm_last_error());
        return 1;
    }
    printf("HCOMM %s\n", hcomm_version());
    printf("build: UCX transport %s, MPI transport yes, CUDA no (host memory)\n",
#ifdef HAVE_UCX
           "yes"
#else
           "no"
#endif
    );
    printf("configuration:\n");
    hcomm_config_print_values(stdout);
    return 0;
}
