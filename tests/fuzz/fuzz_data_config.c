/* fuzz_data_config.c - libFuzzer target: config_parse of an environment
 * whose ADAPTDL_DATA is the input (up to its first NUL), beside other
 * ADAPTDL_* settings a job would have, and config_parse_data of it alone.
 * Bad input must be refused with a message, never crash or leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *setting = malloc(size + sizeof "ADAPTDL_DATA=");
    if (setting == NULL)
        return 0;
    memcpy(setting, "ADAPTDL_DATA=", sizeof "ADAPTDL_DATA=" - 1);
    memcpy(setting + sizeof "ADAPTDL_DATA=" - 1, data, size);
    setting[sizeof "ADAPTDL_DATA=" - 1 + size] = '\0';
    char *environment[] = {"PATH=/usr/bin",
                           setting,
                           "ADAPTDL_NUM_REPLICAS=3",
                           "ADAPTDL_REPLICA_RANK=1",
                           "ADAPTDL_SEED=7",
                           "ADAPTDL_SAVE=ck*",
                           "ADAPTDL_RESUME=continue",
                           NULL};
    struct adaptdl_config config;
    char error[1024];
    if (config_parse(&config, environment, error, sizeof error) == 0)
        config_free(&config);
    else if (error[0] == '\0' || memchr(error, '\n', strlen(error)) != NULL)
        abort();  /* a refusal is one line that says what was wrong */
    struct data_entry *entries = NULL;
    size_t count = 0;
    if (config_parse_data(setting + sizeof "ADAPTDL_DATA=" - 1, &entries, &count, error,
                          sizeof error) == 0) {
        for (size_t i = 0; i < count; i++)
            free(entries[i].glob);
        free(entries);
    }
    free(setting);
    return 0;
}
