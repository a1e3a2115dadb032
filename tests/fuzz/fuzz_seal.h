/* fuzz_seal.h - the fuzz targets' way past the state files' checksum.
 *
 * A state file ends in a checksum entry over everything before it; random
 * bytes almost never carry the right one, so a fuzzer would only ever test
 * the checksum.  The targets take their input as the body of a file and
 * seal it as the writer does (state_store.h describes the trailer), so the
 * decoder behind the checksum is what gets fuzzed.  Input whose first byte
 * is odd is passed unsealed, so the trailer check is fuzzed too. */
#ifndef ADAPTSHIM_FUZZ_SEAL_H
#define ADAPTSHIM_FUZZ_SEAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "state_store.h"

/* Refusals log an error line each: to /dev/null, once. */
static void fuzz_quiet_logs(void)
{
    static bool quiet;
    if (!quiet)
        quiet = log_configure(LOG_LEVEL_ERROR, "/dev/null", 0, NULL, 0) == 0;
}

/* A malloc'ed copy of data[1..size) sealed (or not); *sealed_size its size. */
static unsigned char *fuzz_seal(const uint8_t *data, size_t size, size_t *sealed_size)
{
    if (size == 0)
        return NULL;
    bool unsealed = data[0] & 1;
    size_t body = size - 1;
    unsigned char *out = malloc(body + STATE_CHECKSUM_TRAILER_SIZE);
    if (out == NULL)
        return NULL;
    memcpy(out, data + 1, body);
    if (unsealed) {
        *sealed_size = body;
        return out;
    }
    uint64_t checksum = content_hash_bytes(out, body, STATE_CHECKSUM_SEED);
    unsigned char *trailer = out + body;
    trailer[0] = 0xa8;                 /* fixstr of 8: "checksum" */
    memcpy(trailer + 1, "checksum", 8);
    trailer[9] = 0xcf;                 /* uint 64, big-endian */
    for (int byte = 0; byte < 8; byte++)
        trailer[10 + byte] = (unsigned char)(checksum >> (56 - 8 * byte));
    *sealed_size = body + STATE_CHECKSUM_TRAILER_SIZE;
    return out;
}


/* Seals the input as fuzz_seal does and decodes it: 0 with *snapshot
 * filled (the caller frees it with snapshot_free), or -1 where the input
 * was empty, could not be copied or was refused by the decoder. */
static int fuzz_decode_sealed(const uint8_t *data, size_t size,
                              struct adaptdl_snapshot *snapshot, char *error,
                              size_t error_size)
{
    size_t sealed_size;
    unsigned char *sealed = fuzz_seal(data, size, &sealed_size);
    if (sealed == NULL)
        return -1;
    int decoded = snapshot_decode(sealed, sealed_size, snapshot, error, error_size);
    free(sealed);
    return decoded == 0 ? 0 : -1;
}

#endif
