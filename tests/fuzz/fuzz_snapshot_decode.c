/* fuzz_snapshot_decode.c - libFuzzer target: snapshot_decode of arbitrary
 * bytes (sealed as fuzz_seal.h says), then what a load does with a decoded
 * snapshot (the range check) and an encode of it, and snapshot_free.  A
 * refusal is fine; a crash, leak or undefined behaviour is not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_seal.h"
#include "log.h"
#include "snapshot_check.h"
#include "state_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet_logs();
    struct adaptdl_snapshot snapshot;
    char error[1024];
    if (fuzz_decode_sealed(data, size, &snapshot, error, sizeof error) != 0)
        return 0;
    (void)snapshot_check_ranges(&snapshot, error, sizeof error);
    void *again = NULL;
    size_t again_size = 0;
    if (snapshot_encode(&snapshot, &again, &again_size) == 0)
        free(again);
    snapshot_free(&snapshot);
    return 0;
}
