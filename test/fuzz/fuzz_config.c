/* libFuzzer target: the configuration parser (src/core/config.c). An input
 * is NAME=VALUE: set through hcomm_config_set, then through the
 * environment and hcomm_config_load (defaults, every variable, the typo
 * search over unknown HCOMM_* names). Without '=', the input is a name
 * for the typo search alone. Nothing may crash or read out of bounds. */
#include "core/config.h"
#include "core/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char buf[1024];
    if (size >= sizeof(buf)) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    /* Warnings about unknown names would flood stderr. */
    setenv("HCOMM_DEBUG", "none", 1);
    hcomm_log_level = HCOMM_LOG_NONE;
    char *eq = strchr(buf, '=');
    if (!eq) {
        (void)hcomm_config_nearest(buf);
        return 0;
    }
    *eq = '\0';
    const char *value = eq + 1;
    (void)hcomm_config_set(buf, value);
    (void)hcomm_config_nearest(buf);
    if (buf[0] && strcmp(buf, "HCOMM_DEBUG") != 0 &&
        setenv(buf, value, 1) == 0) {
        (void)hcomm_config_load();
        unsetenv(buf);
    }
    hcomm_log_level = HCOMM_LOG_NONE;
    return 0;
}
