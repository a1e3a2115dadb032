/* test_state_store.c - snapshots, the job record, atomic files, content
 * identities and pruning (adaptshim(7) "CHECKPOINT BINDING").
 *
 * The decoding tests are adversarial: every truncation of a valid file, many
 * thousands of random byte flips (with the checksum left as is, and resealed
 * so that the structural checks behind it get exercised too), hand-crafted
 * maps with wrong types, missing and duplicate fields, lying array headers.
 * Whatever happens, a decode either fails with the output zeroed or yields a
 * complete state; under ASan/UBSan nothing may leak or crash.  File tests use
 * private mkdtemp directories and inject failures through the runtime_sysio
 * table (each Criterion test runs in its own process, so that is safe).
 * At the end, the schema-driven encoder and decoder themselves
 * (state_schema.h) on a probe format of every field kind. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include "state_schema.h"
#include "state_store.h"
#include "sysio.h"
#include "unit_helpers.h"

#include <sys/time.h>
#include <time.h>

#define MAYBE_UNUSED __attribute__((unused))

/* ---------------------------------------------------------------- helpers */

static char *make_temp_directory(void)
{
    return unit_make_temp_directory("/tmp/adaptshim-test-state-XXXXXX");
}

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *file = fopen(path, "wb");
    cr_assert_not_null(file, "fopen %s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(data, 1, size, file), size);
    cr_assert_eq(fclose(file), 0);
}

static void write_text_file(const char *path, const char *text)
{
    write_file(path, text, strlen(text));
}

static char *read_whole_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return NULL;
    char *data = NULL;
    size_t capacity = 0, used = 0;
    for (;;) {
        if (used == capacity) {
            capacity = capacity ? capacity * 2 : 4096;
            data = realloc(data, capacity);
            cr_assert_not_null(data);
        }
        size_t got = fread(data + used, 1, capacity - used, file);
        used += got;
        if (got == 0)
            break;
    }
    fclose(file);
    *size = used;
    return data;
}

/* Entries of a directory other than . and ..; counts those starting with a dot. */
static size_t count_directory_entries(const char *directory, size_t *hidden)
{
    DIR *listing = opendir(directory);
    cr_assert_not_null(listing);
    size_t count = 0;
    *hidden = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        count++;
        if (entry->d_name[0] == '.')
            (*hidden)++;
    }
    closedir(listing);
    return count;
}

static bool file_exists(const char *path)
{
    struct stat status;
    return stat(path, &status) == 0;
}

static bool is_all_zero(const void *data, size_t size)
{
    const unsigned char *bytes = data;
    for (size_t index = 0; index < size; index++)
        if (bytes[index] != 0)
            return false;
    return true;
}

/* xorshift64*: a reproducible stream for the fuzz loops. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * UINT64_C(2685821657736338717);
}

/* Recomputes the checksum trailer after a deliberate edit (format in state_store.h). */
static void reseal(unsigned char *data, size_t size)
{
    cr_assert_geq(size, STATE_CHECKSUM_TRAILER_SIZE);
    uint64_t checksum = content_hash_bytes(data, size - STATE_CHECKSUM_TRAILER_SIZE,
                                           STATE_CHECKSUM_SEED);
    for (int byte = 0; byte < 8; byte++)
        data[size - 8 + (size_t)byte] = (unsigned char)(checksum >> (56 - 8 * byte));
}

static unsigned char *find_bytes(unsigned char *haystack, size_t haystack_size,
                                 const void *needle, size_t needle_size)
{
    return memmem(haystack, haystack_size, needle, needle_size);
}

/* ------------------------------------------------------------ sample states */

#define LONG_PATH_LENGTH 3000
static const char unicode_name[] = "donn\xc3\xa9" "es_\xe8\xae\xad\xe7\xbb\x83_\xf0\x9f\x93\xa6.rec";

static void make_rich_snapshot(struct adaptdl_snapshot *snapshot)
{
    memset(snapshot, 0, sizeof *snapshot);
    snapshot->version = STATE_FORMAT_VERSION;
    snapshot->seed = UINT64_C(0xfedcba9876543210);
    snapshot->epoch = 17;
    snapshot->replicas = 8;
    snapshot->sequence = UINT64_MAX;
    snapshot->created_unix_time = 1712345678.125;
    char *long_path = malloc(LONG_PATH_LENGTH + 1);
    cr_assert_not_null(long_path);
    strcpy(long_path, "/checkpoints/");
    for (size_t index = strlen(long_path); index < LONG_PATH_LENGTH; index++)
        long_path[index] = (char)('a' + index % 26);
    long_path[LONG_PATH_LENGTH] = '\0';
    snapshot->checkpoint_path = long_path;
    snapshot->binding.size = UINT64_C(123456789012);
    snapshot->binding.hash = UINT64_C(0x0123456789abcdef);

    static const struct {
        const char *name;
        uint64_t records, pass, index;
        uint32_t role;
    } files[] = {
        {"train-00000.bin", 1000000, 3, 999000, 0},
        {unicode_name, 1, 0, 0, 0},
        {"eval.txt", UINT64_MAX, UINT64_MAX - 1, 12345, 1},
    };
    snapshot->file_count = 3;
    snapshot->files = calloc(3, sizeof *snapshot->files);
    cr_assert_not_null(snapshot->files);
    for (size_t index = 0; index < 3; index++) {
        snapshot->files[index].name = strdup(files[index].name);
        snapshot->files[index].record_count = files[index].records;
        snapshot->files[index].pass = files[index].pass;
        snapshot->files[index].current_index = files[index].index;
        snapshot->files[index].pass_length = files[index].records * (index + 1);
        snapshot->files[index].role = files[index].role;
    }
    /* a reader in its own order: records past current_index it consumed */
    static const unsigned char delivered_after[] = {0x06, 0x00, 0x81};
    snapshot->files[0].delivered_after = malloc(sizeof delivered_after);
    cr_assert_not_null(snapshot->files[0].delivered_after);
    memcpy(snapshot->files[0].delivered_after, delivered_after, sizeof delivered_after);
    snapshot->files[0].delivered_after_size = sizeof delivered_after;

    /* the cooperative API's state: negative epochs, NUL bytes in a buffer */
    snapshot->cooperative = true;
    snapshot->finished_epochs = 17;
    snapshot->cooperative_progress = 12.75;
    snapshot->loop_count = 2;
    snapshot->loops = calloc(2, sizeof *snapshot->loops);
    cr_assert_not_null(snapshot->loops);
    snapshot->loops[0].name = strdup("adaptdl-dataloader-epochNone-0");
    snapshot->loops[0].current_index = 120;
    snapshot->loops[0].end_index = 7;
    snapshot->loops[0].position_count = 2;
    snapshot->loops[0].last_positions = calloc(2, sizeof *snapshot->loops[0].last_positions);
    snapshot->loops[0].last_positions[0] = (struct snapshot_loop_position){-1, 3};
    snapshot->loops[0].last_positions[1] = (struct snapshot_loop_position){16, 0};
    snapshot->loops[1].name = strdup("adaptdl-dataloader-epoch16-0");
    static const struct {
        const char *key;
        double value;
    } values[] = {{"loss_sum", 1234.5678}, {"correct", 9e99}, {"neg", -0.001}, {"zero", 0.0}};
    snapshot->accumulator_count = 1;
    snapshot->accumulators = calloc(1, sizeof *snapshot->accumulators);
    cr_assert_not_null(snapshot->accumulators);
    struct snapshot_accumulator *accumulator = &snapshot->accumulators[0];
    accumulator->name = strdup("adaptdl-accumulator-epochNone-0");
    accumulator->value_count = 4;
    accumulator->values = calloc(4, sizeof *accumulator->values);
    for (size_t index = 0; index < 4; index++) {
        accumulator->values[index].key = strdup(values[index].key);
        accumulator->values[index].value = values[index].value;
    }
    accumulator->history_count = 2;
    accumulator->history = calloc(2, sizeof *accumulator->history);
    accumulator->history[0].epoch = -1;
    accumulator->history[1].epoch = 16;
    accumulator->history[1].value_count = 1;
    accumulator->history[1].values = calloc(1, sizeof *accumulator->history[1].values);
    accumulator->history[1].values[0].key = strdup("a");
    accumulator->history[1].values[0].value = 15;
    snapshot->registered_count = 2;
    snapshot->registered = calloc(2, sizeof *snapshot->registered);
    snapshot->registered[0].name = strdup("weights");
    snapshot->registered[0].size = 5;
    snapshot->registered[0].bytes = malloc(5);
    memcpy(snapshot->registered[0].bytes, "a\0b\0c", 5);
    snapshot->registered[1].name = strdup("empty");
    snapshot->step = 424242;
    snapshot->progress = 0.3333333333333333;
    snapshot->global_bsz = 96;
}

static void assert_snapshots_equal(const struct adaptdl_snapshot *a,
                                   const struct adaptdl_snapshot *b)
{
    cr_assert_eq(a->version, b->version);
    cr_assert_eq(a->seed, b->seed);
    cr_assert_eq(a->epoch, b->epoch);
    cr_assert_eq(a->replicas, b->replicas);
    cr_assert_eq(a->sequence, b->sequence);
    cr_assert_eq(a->created_unix_time, b->created_unix_time);
    cr_assert_str_eq(a->checkpoint_path, b->checkpoint_path);
    cr_assert_eq(a->binding.size, b->binding.size);
    cr_assert_eq(a->binding.hash, b->binding.hash);
    cr_assert_eq(a->file_count, b->file_count);
    for (size_t index = 0; index < a->file_count; index++) {
        cr_assert_str_eq(a->files[index].name, b->files[index].name);
        cr_assert_eq(a->files[index].record_count, b->files[index].record_count);
        cr_assert_eq(a->files[index].pass, b->files[index].pass);
        cr_assert_eq(a->files[index].current_index, b->files[index].current_index);
        cr_assert_eq(a->files[index].pass_length, b->files[index].pass_length);
        cr_assert_eq(a->files[index].role, b->files[index].role);
        cr_assert_eq(a->files[index].delivered_after_size, b->files[index].delivered_after_size);
        if (a->files[index].delivered_after_size > 0)
            cr_assert_arr_eq(a->files[index].delivered_after, b->files[index].delivered_after,
                             a->files[index].delivered_after_size);
    }
    cr_assert_eq(a->cooperative, b->cooperative);
    cr_assert_eq(a->finished_epochs, b->finished_epochs);
    cr_assert_eq(a->cooperative_progress, b->cooperative_progress);
    cr_assert_eq(a->loop_count, b->loop_count);
    for (size_t index = 0; index < a->loop_count; index++) {
        const struct snapshot_loop *x = &a->loops[index], *y = &b->loops[index];
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->current_index, y->current_index);
        cr_assert_eq(x->end_index, y->end_index);
        cr_assert_eq(x->position_count, y->position_count);
        for (size_t p = 0; p < x->position_count; p++) {
            cr_assert_eq(x->last_positions[p].epoch, y->last_positions[p].epoch);
            cr_assert_eq(x->last_positions[p].position, y->last_positions[p].position);
        }
    }
    cr_assert_eq(a->accumulator_count, b->accumulator_count);
    for (size_t index = 0; index < a->accumulator_count; index++) {
        const struct snapshot_accumulator *x = &a->accumulators[index];
        const struct snapshot_accumulator *y = &b->accumulators[index];
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->value_count, y->value_count);
        for (size_t v = 0; v < x->value_count; v++) {
            cr_assert_str_eq(x->values[v].key, y->values[v].key);
            cr_assert_eq(x->values[v].value, y->values[v].value);
        }
        cr_assert_eq(x->history_count, y->history_count);
        for (size_t h = 0; h < x->history_count; h++) {
            cr_assert_eq(x->history[h].epoch, y->history[h].epoch);
            cr_assert_eq(x->history[h].value_count, y->history[h].value_count);
            for (size_t v = 0; v < x->history[h].value_count; v++)
                cr_assert_eq(x->history[h].values[v].value, y->history[h].values[v].value);
        }
    }
    cr_assert_eq(a->registered_count, b->registered_count);
    for (size_t index = 0; index < a->registered_count; index++) {
        cr_assert_str_eq(a->registered[index].name, b->registered[index].name);
        cr_assert_eq(a->registered[index].size, b->registered[index].size);
        if (a->registered[index].size > 0)
            cr_assert_eq(memcmp(a->registered[index].bytes, b->registered[index].bytes,
                                a->registered[index].size), 0);
    }
    cr_assert_eq(a->step, b->step);
    cr_assert_eq(a->progress, b->progress);
    cr_assert_eq(a->global_bsz, b->global_bsz);
}

static void make_rich_job_record(struct adaptdl_job_record *record)
{
    job_record_init(record);
    record->restarts = 5;
    record->last_exit_unix_time = 1712345000.5;
    record->restart_cost_seconds = 37.25;
    record->grad_sqr = 1.5e-3;
    record->grad_var = 2.75e2;
    record->grad_sqr_biased = 1.4e-3;
    record->grad_var_biased = 2.5e2;
    record->grad_ema_weight = 0.999;
    record->max_replicas_profiled = 16;
    record->profile_count = 5;
    record->profiles = calloc(5, sizeof *record->profiles);
    cr_assert_not_null(record->profiles);
    for (uint32_t index = 0; index < 5; index++) {
        record->profiles[index] = (struct step_profile){
            .nodes = 1 + index / 2,
            .replicas = 1u << index,
            .local_bsz = 32u << index,
            .count = 100 + index,
            .step_time_sum = 10.0 * (index + 1) + 0.125,
            .sync_time_sum = 0.5 * index,
        };
    }
    record->initial_global_bsz = 256;
    record->decided_global_bsz = 1024;
    record->decided_local_bsz = 128;
    record->decided_replicas = 8;
    record->perf_params_valid = true;
    const double params[7] = {0.01, 1e-4, 0.02, 2e-4, 0.005, 5e-5, 1.75};
    memcpy(record->perf_params, params, sizeof params);
}

static void assert_job_records_equal(const struct adaptdl_job_record *a,
                                     const struct adaptdl_job_record *b)
{
    cr_assert_eq(a->version, b->version);
    cr_assert_eq(a->restarts, b->restarts);
    cr_assert_eq(a->last_exit_unix_time, b->last_exit_unix_time);
    cr_assert_eq(a->restart_cost_seconds, b->restart_cost_seconds);
    cr_assert_eq(a->grad_sqr, b->grad_sqr);
    cr_assert_eq(a->grad_var, b->grad_var);
    cr_assert_eq(a->grad_sqr_biased, b->grad_sqr_biased);
    cr_assert_eq(a->grad_var_biased, b->grad_var_biased);
    cr_assert_eq(a->grad_ema_weight, b->grad_ema_weight);
    cr_assert_eq(a->max_replicas_profiled, b->max_replicas_profiled);
    cr_assert_eq(a->profile_count, b->profile_count);
    for (size_t index = 0; index < a->profile_count; index++) {
        const struct step_profile *x = &a->profiles[index], *y = &b->profiles[index];
        cr_assert_eq(x->nodes, y->nodes);
        cr_assert_eq(x->replicas, y->replicas);
        cr_assert_eq(x->local_bsz, y->local_bsz);
        cr_assert_eq(x->count, y->count);
        cr_assert_eq(x->step_time_sum, y->step_time_sum);
        cr_assert_eq(x->sync_time_sum, y->sync_time_sum);
    }
    cr_assert_eq(a->initial_global_bsz, b->initial_global_bsz);
    cr_assert_eq(a->decided_global_bsz, b->decided_global_bsz);
    cr_assert_eq(a->decided_local_bsz, b->decided_local_bsz);
    cr_assert_eq(a->decided_replicas, b->decided_replicas);
    cr_assert_eq(a->perf_params_valid, b->perf_params_valid);
    for (size_t index = 0; index < 7; index++)
        cr_assert_eq(a->perf_params[index], b->perf_params[index]);
}

static void encode_rich_snapshot(unsigned char **data, size_t *size)
{
    struct adaptdl_snapshot snapshot;
    make_rich_snapshot(&snapshot);
    void *buffer;
    cr_assert_eq(snapshot_encode(&snapshot, &buffer, size), 0);
    snapshot_free(&snapshot);
    *data = buffer;
}

/* A decoded state must be usable: re-encoding and decoding it again agrees. */
static void assert_snapshot_sane(const struct adaptdl_snapshot *snapshot)
{
    cr_assert_eq(snapshot->version, STATE_FORMAT_VERSION);
    cr_assert_not_null(snapshot->checkpoint_path);
    cr_assert(snapshot->file_count == 0 || snapshot->files != NULL);
    for (size_t index = 0; index < snapshot->file_count; index++)
        cr_assert_not_null(snapshot->files[index].name);
    cr_assert(snapshot->accumulator_count == 0 || snapshot->accumulators != NULL);
    for (size_t index = 0; index < snapshot->accumulator_count; index++)
        cr_assert_not_null(snapshot->accumulators[index].name);
    void *again;
    size_t again_size;
    cr_assert_eq(snapshot_encode(snapshot, &again, &again_size), 0);
    struct adaptdl_snapshot copy;
    char error[512];
    cr_assert_eq(snapshot_decode(again, again_size, &copy, error, sizeof error), 0, "%s", error);
    assert_snapshots_equal(snapshot, &copy);
    snapshot_free(&copy);
    free(again);
}

/* ------------------------------------------------------------- round trips */

Test(state_store, snapshot_round_trip_every_field)
{
    struct adaptdl_snapshot original, decoded;
    make_rich_snapshot(&original);
    void *data;
    size_t size;
    cr_assert_eq(snapshot_encode(&original, &data, &size), 0);
    char error[512] = "";
    cr_assert_eq(snapshot_decode(data, size, &decoded, error, sizeof error), 0, "%s", error);
    assert_snapshots_equal(&original, &decoded);
    cr_assert_eq(strlen(decoded.checkpoint_path), LONG_PATH_LENGTH);
    cr_assert_str_eq(decoded.files[1].name, unicode_name);
    /* Strings are private copies, not pointers into the buffer. */
    cr_assert(decoded.checkpoint_path != original.checkpoint_path);
    memset(data, 0, size);
    cr_assert_eq(decoded.checkpoint_path[0], '/');
    free(data);
    snapshot_free(&original);
    snapshot_free(&decoded);
    cr_assert(is_all_zero(&decoded, sizeof decoded), "snapshot_free zeroes the structure");
}

Test(state_store, empty_snapshot_round_trip)
{
    struct adaptdl_snapshot original = {.version = STATE_FORMAT_VERSION}, decoded;
    original.checkpoint_path = strdup("ckpt");
    void *data;
    size_t size;
    cr_assert_eq(snapshot_encode(&original, &data, &size), 0);
    char error[256];
    cr_assert_eq(snapshot_decode(data, size, &decoded, error, sizeof error), 0, "%s", error);
    assert_snapshots_equal(&original, &decoded);
    cr_assert_null(decoded.files);
    cr_assert_null(decoded.accumulators);
    free(data);
    snapshot_free(&original);
    snapshot_free(&decoded);
}

Test(state_store, null_strings_are_written_as_empty)
{
    struct adaptdl_snapshot original = {0}, decoded;
    void *data;
    size_t size;
    cr_assert_eq(snapshot_encode(&original, &data, &size), 0);
    cr_assert_eq(snapshot_decode(data, size, &decoded, NULL, 0), 0);
    cr_assert_str_eq(decoded.checkpoint_path, "");
    free(data);
    snapshot_free(&decoded);
}

Test(state_store, encode_refuses_count_without_array)
{
    struct adaptdl_snapshot broken = {.file_count = 2, .files = NULL};
    void *data = (void *)1;
    size_t size = 1;
    cr_assert_eq(snapshot_encode(&broken, &data, &size), -1);
    cr_assert_eq(errno, EINVAL);
    cr_assert_null(data);
    cr_assert_eq(size, 0);
}

Test(state_store, job_record_round_trip_every_field)
{
    struct adaptdl_job_record original, decoded;
    make_rich_job_record(&original);
    void *data;
    size_t size;
    cr_assert_eq(job_record_encode(&original, &data, &size), 0);
    char error[512] = "";
    cr_assert_eq(job_record_decode(data, size, &decoded, error, sizeof error), 0, "%s", error);
    assert_job_records_equal(&original, &decoded);
    free(data);
    job_record_free(&original);
    job_record_free(&decoded);
}

Test(state_store, job_record_init_defaults)
{
    struct adaptdl_job_record record;
    memset(&record, 0xab, sizeof record);
    job_record_init(&record);
    cr_assert_eq(record.version, STATE_FORMAT_VERSION);
    cr_assert_eq(record.restart_cost_seconds, -1.0);
    cr_assert_eq(record.restarts, 0);
    cr_assert_eq(record.profile_count, 0);
    cr_assert_null(record.profiles);
    cr_assert_eq(record.perf_params_valid, false);
    cr_assert_eq(record.decided_global_bsz, 0);
    cr_assert_eq(record.perf_params[6], 0.0);
    /* And it round-trips as is. */
    void *data;
    size_t size;
    cr_assert_eq(job_record_encode(&record, &data, &size), 0);
    struct adaptdl_job_record decoded;
    cr_assert_eq(job_record_decode(data, size, &decoded, NULL, 0), 0);
    assert_job_records_equal(&record, &decoded);
    free(data);
    job_record_free(&decoded);
}

Test(state_store, encoding_is_a_plain_map_ending_in_the_checksum_entry)
{
    unsigned char *data;
    size_t size;
    encode_rich_snapshot(&data, &size);
    cr_assert((data[0] & 0xf0) == 0x80 || data[0] == 0xde, "top level is a map");
    const unsigned char *trailer = data + size - STATE_CHECKSUM_TRAILER_SIZE;
    cr_assert_eq(trailer[0], 0xa8);
    cr_assert_eq(memcmp(trailer + 1, "checksum", 8), 0);
    cr_assert_eq(trailer[9], 0xcf);
    cr_assert_not_null(find_bytes(data, size, "\xb2" "adaptshim-snapshot", 19));
    /* msgpack-c itself reads it as one map with string keys. */
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    cr_assert_eq(msgpack_unpack_next(&unpacked, (const char *)data, size, &offset),
                 MSGPACK_UNPACK_SUCCESS);
    cr_assert_eq(offset, size);
    cr_assert_eq(unpacked.data.type, MSGPACK_OBJECT_MAP);
    msgpack_unpacked_destroy(&unpacked);
    free(data);
}

/* ------------------------------------------------------ corrupted encodings */

Test(state_store, every_truncation_is_rejected)
{
    unsigned char *data;
    size_t size;
    encode_rich_snapshot(&data, &size);
    for (size_t length = 0; length < size; length++) {
        /* A private copy, so ASan sees any read past the truncated end. */
        unsigned char *copy = malloc(length ? length : 1);
        memcpy(copy, data, length);
        struct adaptdl_snapshot snapshot;
        memset(&snapshot, 0x5a, sizeof snapshot);
        char error[256] = "";
        cr_assert_eq(snapshot_decode(copy, length, &snapshot, error, sizeof error), -1,
                     "truncation to %zu of %zu bytes accepted", length, size);
        cr_assert(is_all_zero(&snapshot, sizeof snapshot), "struct not zeroed at %zu", length);
        cr_assert_neq(error[0], '\0');
        cr_assert_null(strchr(error, '\n'));
        free(copy);
    }
    free(data);
}

Test(state_store, every_job_record_truncation_is_rejected)
{
    struct adaptdl_job_record record;
    make_rich_job_record(&record);
    void *data;
    size_t size;
    cr_assert_eq(job_record_encode(&record, &data, &size), 0);
    job_record_free(&record);
    for (size_t length = 0; length < size; length++) {
        unsigned char *copy = malloc(length ? length : 1);
        memcpy(copy, data, length);
        struct adaptdl_job_record decoded;
        cr_assert_eq(job_record_decode(copy, length, &decoded, NULL, 0), -1, "length %zu", length);
        cr_assert(is_all_zero(&decoded, sizeof decoded));
        free(copy);
    }
    free(data);
}

/* Flips 1-3 random bytes of a copy; reseal() optionally fixes the checksum so
 * that the decoder's structural and type checks face the damage alone. */
static void fuzz_byte_flips(bool resealed, uint64_t seed, unsigned iterations,
                            unsigned *accepted_count)
{
    unsigned char *data;
    size_t size;
    encode_rich_snapshot(&data, &size);
    uint64_t random_state = seed;
    unsigned char *copy = malloc(size);
    *accepted_count = 0;
    for (unsigned iteration = 0; iteration < iterations; iteration++) {
        memcpy(copy, data, size);
        unsigned flips = 1 + (unsigned)(next_random(&random_state) % 3);
        for (unsigned flip = 0; flip < flips; flip++) {
            size_t position = next_random(&random_state) % size;
            unsigned char mask = (unsigned char)(1 + next_random(&random_state) % 255);
            copy[position] ^= mask;
        }
        if (resealed)
            reseal(copy, size);
        struct adaptdl_snapshot snapshot;
        char error[512] = "";
        int result = snapshot_decode(copy, size, &snapshot, error, sizeof error);
        if (result == 0) {
            (*accepted_count)++;
            assert_snapshot_sane(&snapshot);
            snapshot_free(&snapshot);
        } else {
            cr_assert_eq(result, -1);
            cr_assert(is_all_zero(&snapshot, sizeof snapshot), "iteration %u", iteration);
            cr_assert_neq(error[0], '\0');
        }
    }
    free(copy);
    free(data);
}

Test(state_store, random_byte_flips_are_rejected_or_decode_cleanly)
{
    unsigned accepted;
    fuzz_byte_flips(false, UINT64_C(0x9e3779b97f4a7c15), 5000, &accepted);
    /* With the checksum intact, a damaged file should practically never pass. */
    cr_assert_eq(accepted, 0, "%u damaged files accepted", accepted);
}

Test(state_store, random_byte_flips_behind_a_resealed_checksum)
{
    unsigned accepted;
    fuzz_byte_flips(true, UINT64_C(0x243f6a8885a308d3), 5000, &accepted);
    /* Flips inside numbers or string contents legitimately decode; this only
     * shows both outcomes were exercised. */
    cr_assert_gt(accepted, 0);
    cr_assert_lt(accepted, 5000);
}

Test(state_store, wrong_version_names_both_versions)
{
    unsigned char *data;
    size_t size;
    encode_rich_snapshot(&data, &size);
    unsigned char *version = find_bytes(data, size, "\xa7version\x01", 9);
    cr_assert_not_null(version);
    version[8] = 7;
    reseal(data, size);
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), -1);
    cr_assert(is_all_zero(&snapshot, sizeof snapshot));
    cr_assert_not_null(strstr(error, "snapshot format version 7, this build reads version 1"),
                       "message: %s", error);
    /* Without a reseal too: the version is reported before the checksum. */
    version[8] = 9;
    cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "version 9, this build reads version 1"), "%s", error);
    free(data);
}

Test(state_store, job_record_wrong_version_names_both_versions)
{
    struct adaptdl_job_record record;
    job_record_init(&record);
    void *buffer;
    size_t size;
    cr_assert_eq(job_record_encode(&record, &buffer, &size), 0);
    unsigned char *data = buffer;
    unsigned char *version = find_bytes(data, size, "\xa7version\x01", 9);
    cr_assert_not_null(version);
    version[8] = 0x02;
    reseal(data, size);
    char error[256] = "";
    struct adaptdl_job_record decoded;
    cr_assert_eq(job_record_decode(data, size, &decoded, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "job record format version 2, this build reads version 1"),
                       "%s", error);
    free(data);
}

Test(state_store, wrong_magic_is_rejected)
{
    /* A job record is not a snapshot, and vice versa. */
    struct adaptdl_job_record record;
    job_record_init(&record);
    void *job_data;
    size_t job_size;
    cr_assert_eq(job_record_encode(&record, &job_data, &job_size), 0);
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    cr_assert_eq(snapshot_decode(job_data, job_size, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not an adaptshim snapshot"), "%s", error);
    cr_assert_not_null(strstr(error, "adaptshim-job"), "%s", error);
    free(job_data);

    unsigned char *data;
    size_t size;
    encode_rich_snapshot(&data, &size);
    struct adaptdl_job_record decoded;
    cr_assert_eq(job_record_decode(data, size, &decoded, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not an adaptshim job record"), "%s", error);

    /* One letter of the magic changed, checksum made valid again. */
    unsigned char *magic = find_bytes(data, size, "adaptshim-snapshot", 18);
    cr_assert_not_null(magic);
    magic[0] = 'A';
    reseal(data, size);
    cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not an adaptshim snapshot"), "%s", error);
    free(data);
}

Test(state_store, trailing_garbage_is_rejected)
{
    unsigned char *data;
    size_t size;
    encode_rich_snapshot(&data, &size);
    unsigned char *longer = malloc(size + 3);
    memcpy(longer, data, size);
    memcpy(longer + size, "\xc0\x00\x01", 3);
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    for (size_t extra = 1; extra <= 3; extra++) {
        cr_assert_eq(snapshot_decode(longer, size + extra, &snapshot, error, sizeof error), -1);
        cr_assert_not_null(strstr(error, "trailing"), "%s", error);
        cr_assert(is_all_zero(&snapshot, sizeof snapshot));
    }
    free(longer);
    free(data);
}

Test(state_store, checksum_catches_a_flip_inside_a_number)
{
    unsigned char *data;
    size_t size;
    encode_rich_snapshot(&data, &size);
    /* "step": 424242 is a uint32 (0xce); change its low byte: still valid msgpack. */
    unsigned char *step = find_bytes(data, size, "\xa4step\xce", 6);
    cr_assert_not_null(step);
    step[9] ^= 0x01;
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "checksum mismatch"), "%s", error);
    /* Resealed, the changed value is simply what the file says. */
    reseal(data, size);
    cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), 0, "%s", error);
    cr_assert_eq(snapshot.step, 424242 ^ 1);
    snapshot_free(&snapshot);
    free(data);
}

Test(state_store, empty_and_null_buffers_are_rejected)
{
    struct adaptdl_snapshot snapshot;
    char error[128] = "";
    cr_assert_eq(snapshot_decode(NULL, 0, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "empty"), "%s", error);
    cr_assert_eq(snapshot_decode("", 0, &snapshot, NULL, 0), -1);
    /* A short error buffer is truncated, never overrun. */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    cr_assert_eq(snapshot_decode("\x01", 1, &snapshot, tiny, 4), -1);
    cr_assert_eq(tiny[3], '\0');
    cr_assert_eq(tiny[4], 'x');
}

/* ------------------------------------------- hand-crafted maps (via msgpack) */

typedef void (*entry_packer)(msgpack_packer *packer);

struct crafted_entry {
    const char *key;
    entry_packer pack;
};

static void pack_text(msgpack_packer *packer, const char *text)
{
    msgpack_pack_str(packer, strlen(text));
    msgpack_pack_str_body(packer, text, strlen(text));
}

static void pack_magic(msgpack_packer *packer) { pack_text(packer, "adaptshim-snapshot"); }
static void pack_one(msgpack_packer *packer) { msgpack_pack_uint64(packer, 1); }
static void pack_seven(msgpack_packer *packer) { msgpack_pack_uint64(packer, 7); }
static void pack_float(msgpack_packer *packer) { msgpack_pack_double(packer, 0.5); }
static void pack_float32(msgpack_packer *packer) { msgpack_pack_float(packer, 0.25f); }
static void pack_path(msgpack_packer *packer) { pack_text(packer, "/ckpt/model.pt"); }
static void pack_nil(msgpack_packer *packer) { msgpack_pack_nil(packer); }
static void pack_negative(msgpack_packer *packer) { msgpack_pack_int64(packer, -3); }
static void pack_too_big_u32(msgpack_packer *packer) { msgpack_pack_uint64(packer, UINT64_C(1) << 32); }
static void pack_string_seed(msgpack_packer *packer) { pack_text(packer, "42"); }
static void pack_empty_array(msgpack_packer *packer) { msgpack_pack_array(packer, 0); }
static void pack_false(msgpack_packer *packer) { msgpack_pack_false(packer); }

static void pack_binding(msgpack_packer *packer)
{
    msgpack_pack_map(packer, 2);
    pack_text(packer, "size");
    msgpack_pack_uint64(packer, 100);
    pack_text(packer, "hash");
    msgpack_pack_uint64(packer, 200);
}

static void pack_binding_missing_hash(msgpack_packer *packer)
{
    msgpack_pack_map(packer, 1);
    pack_text(packer, "size");
    msgpack_pack_uint64(packer, 100);
}

static void pack_file(msgpack_packer *packer, const char *name, bool with_role)
{
    msgpack_pack_map(packer, with_role ? 6 : 5);
    pack_text(packer, "name");
    pack_text(packer, name);
    pack_text(packer, "record_count");
    msgpack_pack_uint64(packer, 10);
    pack_text(packer, "pass");
    msgpack_pack_uint64(packer, 1);
    pack_text(packer, "current_index");
    msgpack_pack_uint64(packer, 5);
    pack_text(packer, "pass_length");
    msgpack_pack_uint64(packer, 10);
    if (with_role) {
        pack_text(packer, "role");
        msgpack_pack_uint32(packer, 0);
    }
}

static void pack_two_files(msgpack_packer *packer)
{
    msgpack_pack_array(packer, 2);
    pack_file(packer, "a.bin", true);
    pack_file(packer, "b.bin", true);
}

static void pack_second_file_without_role(msgpack_packer *packer)
{
    msgpack_pack_array(packer, 2);
    pack_file(packer, "a.bin", true);
    pack_file(packer, "b.bin", false);
}

static void pack_file_name_with_nul(msgpack_packer *packer)
{
    msgpack_pack_array(packer, 1);
    msgpack_pack_map(packer, 6);
    pack_text(packer, "name");
    msgpack_pack_str(packer, 3);
    msgpack_pack_str_body(packer, "a\0b", 3);
    pack_text(packer, "record_count");
    msgpack_pack_uint64(packer, 10);
    pack_text(packer, "pass");
    msgpack_pack_uint64(packer, 1);
    pack_text(packer, "current_index");
    msgpack_pack_uint64(packer, 5);
    pack_text(packer, "pass_length");
    msgpack_pack_uint64(packer, 10);
    pack_text(packer, "role");
    msgpack_pack_uint32(packer, 0);
}

static void pack_deep_nesting(msgpack_packer *packer)
{
    for (int depth = 0; depth < 100; depth++)
        msgpack_pack_array(packer, 1);
    msgpack_pack_nil(packer);
}

static const struct crafted_entry baseline_snapshot[] = {
    {"format", pack_magic},       {"version", pack_one},
    {"seed", pack_seven},         {"epoch", pack_one},
    {"replicas", pack_one},       {"sequence", pack_seven},
    {"created_unix_time", pack_float}, {"checkpoint_path", pack_path},
    {"binding", pack_binding},    {"files", pack_two_files},
    {"cooperative", pack_false},  {"finished_epochs", pack_seven},
    {"cooperative_progress", pack_float},
    {"loops", pack_empty_array},  {"accumulators", pack_empty_array},
    {"registered", pack_empty_array}, {"step", pack_seven},
    {"progress", pack_float32},   {"global_bsz", pack_seven},
};
#define BASELINE_COUNT (sizeof baseline_snapshot / sizeof baseline_snapshot[0])

/* Packs a map of the given entries plus a valid checksum trailer. */
static void *craft_sealed_map(const struct crafted_entry *entries, size_t count, size_t *size)
{
    msgpack_sbuffer buffer;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer packer;
    msgpack_packer_init(&packer, &buffer, msgpack_sbuffer_write);
    msgpack_pack_map(&packer, count + 1);
    for (size_t index = 0; index < count; index++) {
        pack_text(&packer, entries[index].key);
        entries[index].pack(&packer);
    }
    msgpack_sbuffer_write(&buffer, "\xa8" "checksum" "\xcf" "\0\0\0\0\0\0\0\0", 18);
    *size = buffer.size;
    unsigned char *data = (unsigned char *)msgpack_sbuffer_release(&buffer);
    reseal(data, *size);
    return data;
}

/* Baseline with one entry replaced (pack != NULL), dropped (pack == NULL) or,
 * when `key` is not in the baseline, appended. */
static int decode_crafted(const char *key, entry_packer pack, struct adaptdl_snapshot *snapshot,
                          char *error, size_t error_size)
{
    struct crafted_entry entries[BASELINE_COUNT + 1];
    size_t count = 0;
    bool replaced = false;
    for (size_t index = 0; index < BASELINE_COUNT; index++) {
        if (key != NULL && strcmp(baseline_snapshot[index].key, key) == 0) {
            replaced = true;
            if (pack != NULL)
                entries[count++] = (struct crafted_entry){key, pack};
        } else {
            entries[count++] = baseline_snapshot[index];
        }
    }
    if (key != NULL && !replaced)
        entries[count++] = (struct crafted_entry){key, pack};
    size_t size;
    void *data = craft_sealed_map(entries, count, &size);
    memset(snapshot, 0x77, sizeof *snapshot);
    int result = snapshot_decode(data, size, snapshot, error, error_size);
    free(data);
    if (result != 0)
        cr_assert(is_all_zero(snapshot, sizeof *snapshot));
    return result;
}

Test(state_store, crafted_baseline_decodes)
{
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    cr_assert_eq(decode_crafted(NULL, NULL, &snapshot, error, sizeof error), 0, "%s", error);
    cr_assert_eq(snapshot.seed, 7);
    cr_assert_eq(snapshot.file_count, 2);
    cr_assert_str_eq(snapshot.files[1].name, "b.bin");
    cr_assert_eq(snapshot.progress, 0.25, "float32 is accepted for doubles");
    cr_assert_eq(snapshot.binding.hash, 200);
    /* its files have no delivered_after, as an earlier build wrote them */
    cr_assert_eq(snapshot.files[0].delivered_after_size, 0);
    cr_assert_null(snapshot.files[0].delivered_after);
    snapshot_free(&snapshot);
}

Test(state_store, unknown_fields_are_ignored)
{
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    cr_assert_eq(decode_crafted("added_by_a_later_build", pack_two_files, &snapshot, error,
                                sizeof error),
                 0, "%s", error);
    snapshot_free(&snapshot);
}

struct crafted_failure {
    const char *key;
    entry_packer pack;       /* NULL: the field is left out */
    const char *message_part;
};

Test(state_store, crafted_maps_are_rejected_with_precise_messages)
{
    static const struct crafted_failure cases[] = {
        {"seed", NULL, "missing field \"seed\""},
        {"seed", pack_string_seed, "seed: expected an unsigned integer, found string"},
        {"epoch", pack_negative, "epoch: expected an unsigned integer, found negative integer"},
        {"replicas", pack_too_big_u32, "replicas: 4294967296 does not fit in 32 bits"},
        {"checkpoint_path", pack_nil, "checkpoint_path: expected a string, found nil"},
        {"created_unix_time", pack_one, "created_unix_time: expected a float"},
        {"binding", pack_binding_missing_hash, "binding: missing field \"hash\""},
        {"files", pack_second_file_without_role, "files[1]: missing field \"role\""},
        {"files", pack_file_name_with_nul, "files[0].name: string contains a NUL byte"},
        {"accumulators", pack_binding, "accumulators: expected an array, found map"},
        {"format", NULL, "no \"format\" field"},
        {"version", NULL, "no valid format version"},
        {"deep", pack_deep_nesting, "msgpack rejects"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        struct adaptdl_snapshot snapshot;
        char error[256] = "";
        cr_assert_eq(decode_crafted(cases[index].key, cases[index].pack, &snapshot, error,
                                    sizeof error),
                     -1, "case %zu accepted", index);
        cr_assert_not_null(strstr(error, cases[index].message_part), "case %zu: \"%s\"", index,
                           error);
    }
}

Test(state_store, duplicate_field_is_rejected)
{
    struct crafted_entry entries[BASELINE_COUNT + 1];
    memcpy(entries, baseline_snapshot, sizeof baseline_snapshot);
    entries[BASELINE_COUNT] = (struct crafted_entry){"seed", pack_one};
    size_t size;
    void *data = craft_sealed_map(entries, BASELINE_COUNT + 1, &size);
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "seed: field appears twice"), "%s", error);
    free(data);
}

Test(state_store, lying_container_headers_are_rejected_before_allocation)
{
    /* map32 claiming 4 billion entries, array32 likewise, str32 of 4 GiB. */
    static const unsigned char map_claim[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0, 0xc0};
    static const unsigned char array_claim[] = {0x81, 0xa1, 'x', 0xdd, 0xff, 0xff, 0xff, 0xf0, 0xc0};
    static const unsigned char string_claim[] = {0x81, 0xa1, 'x', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'};
    static const unsigned char reserved_byte[] = {0x81, 0xa1, 'x', 0xc1};
    struct {
        const unsigned char *data;
        size_t size;
    } cases[] = {
        {map_claim, sizeof map_claim},
        {array_claim, sizeof array_claim},
        {string_claim, sizeof string_claim},
        {reserved_byte, sizeof reserved_byte},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        struct adaptdl_snapshot snapshot;
        char error[256] = "";
        cr_assert_eq(snapshot_decode(cases[index].data, cases[index].size, &snapshot, error,
                                     sizeof error),
                     -1);
        cr_assert_neq(error[0], '\0');
    }
}

Test(state_store, non_map_top_level_is_rejected)
{
    struct adaptdl_snapshot snapshot;
    char error[256] = "";
    cr_assert_eq(snapshot_decode("\x93\x01\x02\x03", 4, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not a map"), "%s", error);
}

/* ------------------------------------------------------------- content hash */

Test(state_hash, deterministic_seeded_and_length_sensitive)
{
    unsigned char bytes[256];
    for (size_t index = 0; index < sizeof bytes; index++)
        bytes[index] = (unsigned char)(index * 7 + 1);
    cr_assert_eq(content_hash_bytes(bytes, 100, 1), content_hash_bytes(bytes, 100, 1));
    cr_assert_neq(content_hash_bytes(bytes, 100, 1), content_hash_bytes(bytes, 100, 2));
    /* Every prefix length, and zero bytes appended, give distinct values. */
    unsigned char zeros[64] = {0};
    uint64_t seen[129];
    for (size_t length = 0; length <= 64; length++)
        seen[length] = content_hash_bytes(bytes, length, 0);
    for (size_t length = 1; length <= 64; length++)
        seen[64 + length] = content_hash_bytes(zeros, length, 0);
    for (size_t a = 0; a < 129; a++)
        for (size_t b = a + 1; b < 129; b++)
            cr_assert_neq(seen[a], seen[b], "collision between %zu and %zu", a, b);
}

Test(state_hash, every_single_bit_flip_changes_the_hash)
{
    unsigned char bytes[97];
    for (size_t index = 0; index < sizeof bytes; index++)
        bytes[index] = (unsigned char)(index * 31 + 5);
    uint64_t reference = content_hash_bytes(bytes, sizeof bytes, 0);
    for (size_t bit = 0; bit < sizeof bytes * 8; bit++) {
        bytes[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        cr_assert_neq(content_hash_bytes(bytes, sizeof bytes, 0), reference, "bit %zu", bit);
        bytes[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
}

Test(state_hash, unaligned_input_gives_the_same_hash)
{
    unsigned char storage[200];
    for (size_t index = 0; index < sizeof storage; index++)
        storage[index] = (unsigned char)(index ^ 0x5c);
    unsigned char shifted[208];
    for (size_t offset = 1; offset < 8; offset++) {
        memcpy(shifted + offset, storage, sizeof storage);
        cr_assert_eq(content_hash_bytes(shifted + offset, sizeof storage, 3),
                     content_hash_bytes(storage, sizeof storage, 3));
    }
}

static struct content_identity identity_of_new_file(const char *path, const void *data, size_t size)
{
    write_file(path, data, size);
    struct content_identity identity;
    cr_assert_eq(content_identity_of_path(path, &identity), 0, "%s", strerror(errno));
    return identity;
}

Test(state_identity, same_content_same_identity_and_one_byte_matters)
{
    char *directory = make_temp_directory();
    char *first = unit_path_join(directory, "a"), *second = unit_path_join(directory, "b");
    char content[5000];
    for (size_t index = 0; index < sizeof content; index++)
        content[index] = (char)(index % 251);
    struct content_identity a = identity_of_new_file(first, content, sizeof content);
    struct content_identity b = identity_of_new_file(second, content, sizeof content);
    cr_assert_eq(a.size, sizeof content);
    cr_assert_eq(a.size, b.size);
    cr_assert_eq(a.hash, b.hash);
    cr_assert_eq(a.hash, content_hash_bytes(content, sizeof content, CONTENT_IDENTITY_SEED));

    content[4321] ^= 1;
    struct content_identity changed = identity_of_new_file(second, content, sizeof content);
    cr_assert_eq(changed.size, a.size);
    cr_assert_neq(changed.hash, a.hash);

    /* A trailing zero byte changes the size, and the hash too. */
    content[4321] ^= 1;
    char *third = unit_path_join(directory, "c");
    char longer[5001];
    memcpy(longer, content, sizeof content);
    longer[5000] = 0;
    struct content_identity extended = identity_of_new_file(third, longer, sizeof longer);
    cr_assert_eq(extended.size, 5001);
    cr_assert_neq(extended.hash, a.hash);

    struct content_identity empty = identity_of_new_file(third, "", 0);
    cr_assert_eq(empty.size, 0);
    cr_assert_eq(empty.hash, content_hash_bytes("", 0, CONTENT_IDENTITY_SEED));

    free(first);
    free(second);
    free(third);
    unit_remove_temp_directory(directory);
}

Test(state_identity, fd_offset_is_not_moved)
{
    char *directory = make_temp_directory();
    char *path = unit_path_join(directory, "f");
    write_text_file(path, "0123456789abcdef0123456789abcdef0123456789");
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(lseek(fd, 7, SEEK_SET), 7);
    struct content_identity identity;
    cr_assert_eq(content_identity_of_fd(fd, &identity), 0);
    cr_assert_eq(lseek(fd, 0, SEEK_CUR), 7);
    cr_assert_eq(identity.size, 42);
    char next;
    cr_assert_eq(read(fd, &next, 1), 1);
    cr_assert_eq(next, '7');
    close(fd);
    free(path);
    unit_remove_temp_directory(directory);
}

Test(state_identity, large_files_stream_consistently)
{
    static const size_t sizes[] = {
        (3u << 20) + 17,      /* several chunks plus a tail */
        2u << 20,             /* an exact multiple of the 1 MiB chunk */
        (1u << 20) - 1,
        (1u << 20) + 31,
    };
    char *directory = make_temp_directory();
    char *path = unit_path_join(directory, "big");
    unsigned char *content = malloc((3u << 20) + 17);
    uint64_t random_state = 12345;
    for (size_t index = 0; index < (3u << 20) + 17; index++)
        content[index] = (unsigned char)next_random(&random_state);
    for (size_t index = 0; index < sizeof sizes / sizeof sizes[0]; index++) {
        struct content_identity identity = identity_of_new_file(path, content, sizes[index]);
        cr_assert_eq(identity.size, sizes[index]);
        cr_assert_eq(identity.hash, content_hash_bytes(content, sizes[index], CONTENT_IDENTITY_SEED),
                     "size %zu", sizes[index]);
    }
    free(content);
    free(path);
    unit_remove_temp_directory(directory);
}

Test(state_identity, missing_file_sets_errno)
{
    struct content_identity identity;
    errno = 0;
    cr_assert_eq(content_identity_of_path("/nonexistent/adaptshim/file", &identity), -1);
    cr_assert_eq(errno, ENOENT);
    cr_assert_eq(content_identity_of_fd(-1, &identity), -1);
    cr_assert_eq(errno, EBADF);
}

/* ------------------------------------------------------------ the directory */

Test(state_directory, creates_a_missing_directory_once)
{
    char *directory = make_temp_directory();
    char *state = unit_path_join(directory, "state");
    char error[512] = "";
    umask(022);
    cr_assert_eq(state_directory_prepare(state, error, sizeof error), 0, "%s", error);
    struct stat status;
    cr_assert_eq(stat(state, &status), 0);
    cr_assert(S_ISDIR(status.st_mode));
    cr_assert_eq(status.st_mode & 0777, 0755);
    /* Again: already there, still fine, and no probe file left behind. */
    cr_assert_eq(state_directory_prepare(state, error, sizeof error), 0, "%s", error);
    size_t hidden;
    cr_assert_eq(count_directory_entries(state, &hidden), 0);
    free(state);
    unit_remove_temp_directory(directory);
}

Test(state_directory, missing_parent_is_a_clear_error)
{
    char *directory = make_temp_directory();
    char *state = unit_path_join(directory, "no/such/parent");
    char error[512] = "";
    cr_assert_eq(state_directory_prepare(state, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, state), "%s", error);
    cr_assert_not_null(strstr(error, "parent directory does not exist"), "%s", error);
    cr_assert_null(strchr(error, '\n'));
    cr_assert_not(file_exists(state));
    free(state);
    unit_remove_temp_directory(directory);
}

Test(state_directory, regular_file_is_a_clear_error)
{
    char *directory = make_temp_directory();
    char *state = unit_path_join(directory, "plain");
    write_text_file(state, "x");
    char error[512] = "";
    cr_assert_eq(state_directory_prepare(state, error, sizeof error), -1);
    cr_assert_eq(errno, ENOTDIR);
    cr_assert_not_null(strstr(error, "is not a directory"), "%s", error);
    cr_assert_not_null(strstr(error, state), "%s", error);
    free(state);
    unit_remove_temp_directory(directory);
}

static int refuse_create(const char *path MAYBE_UNUSED, int flags MAYBE_UNUSED, ...)
{
    errno = EROFS;
    return -1;
}

Test(state_directory, unwritable_directory_is_an_error)
{
    /* As root chmod cannot make a directory unwritable; fail the probe instead. */
    char *directory = make_temp_directory();
    runtime_sysio.open = refuse_create;
    char error[512] = "";
    cr_assert_eq(state_directory_prepare(directory, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not writable"), "%s", error);
    cr_assert_not_null(strstr(error, strerror(EROFS)), "%s", error);
    unit_remove_temp_directory(directory);
}

/* ----------------------------------------------------------- atomic writes */

Test(state_atomic_write, writes_content_and_leaves_no_temp_files)
{
    char *directory = make_temp_directory();
    char error[512] = "";
    umask(022);
    cr_assert_eq(state_file_write_atomic(directory, "state.bin", "first version", 13, error,
                                         sizeof error),
                 0, "%s", error);
    cr_assert_eq(state_file_write_atomic(directory, "state.bin", "second", 6, error, sizeof error),
                 0, "%s", error);
    char *path = unit_path_join(directory, "state.bin");
    size_t size;
    char *content = read_whole_file(path, &size);
    cr_assert_eq(size, 6);
    cr_assert_eq(memcmp(content, "second", 6), 0);
    struct stat status;
    cr_assert_eq(stat(path, &status), 0);
    cr_assert_eq(status.st_mode & 0777, 0644);
    size_t hidden;
    cr_assert_eq(count_directory_entries(directory, &hidden), 1);
    cr_assert_eq(hidden, 0);

    /* And state_file_read gives it back. */
    void *data;
    cr_assert_eq(state_file_read(directory, "state.bin", &data, &size, error, sizeof error), 0);
    cr_assert_eq(size, 6);
    cr_assert_eq(memcmp(data, "second", 6), 0);
    free(data);
    /* An empty file too. */
    cr_assert_eq(state_file_write_atomic(directory, "empty", "", 0, error, sizeof error), 0);
    cr_assert_eq(state_file_read(directory, "empty", &data, &size, error, sizeof error), 0);
    cr_assert_eq(size, 0);
    free(data);
    free(content);
    free(path);
    unit_remove_temp_directory(directory);
}

Test(state_atomic_write, missing_directory_fails_with_the_step_named)
{
    char *directory = make_temp_directory();
    char *missing = unit_path_join(directory, "gone");
    char error[512] = "";
    cr_assert_eq(state_file_write_atomic(missing, "x", "data", 4, error, sizeof error), -1);
    cr_assert_eq(errno, ENOENT);
    cr_assert_not_null(strstr(error, "creating temp file"), "%s", error);
    cr_assert_not_null(strstr(error, strerror(ENOENT)), "%s", error);
    cr_assert_null(strchr(error, '\n'));
    free(missing);
    unit_remove_temp_directory(directory);
}

Test(state_file, read_of_missing_file_keeps_enoent)
{
    char *directory = make_temp_directory();
    void *data = (void *)1;
    size_t size = 9;
    char error[512] = "";
    cr_assert_eq(state_file_read(directory, "nothing", &data, &size, error, sizeof error), -1);
    cr_assert_eq(errno, ENOENT);
    cr_assert_null(data);
    cr_assert_eq(size, 0);
    cr_assert_not_null(strstr(error, "nothing"), "%s", error);
    /* A directory is not a state file. */
    char *sub = unit_path_join(directory, "sub");
    cr_assert_eq(mkdir(sub, 0755), 0);
    free(sub);
    cr_assert_eq(state_file_read(directory, "sub", &data, &size, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not a regular file"), "%s", error);
    unit_remove_temp_directory(directory);
}

/* Failure injection: each fake fails one step of the atomic write. */
static unsigned fsync_calls;

static ssize_t failing_write(int fd MAYBE_UNUSED, const void *buffer MAYBE_UNUSED, size_t size MAYBE_UNUSED)
{
    errno = ENOSPC;
    return -1;
}

static ssize_t short_then_failing_write(int fd, const void *buffer, size_t size)
{
    static bool wrote_once;
    if (!wrote_once && size > 1) {
        wrote_once = true;
        return write(fd, buffer, 1);
    }
    errno = EDQUOT;
    return -1;
}

static int failing_fsync(int fd MAYBE_UNUSED)
{
    errno = EIO;
    return -1;
}

static int failing_second_fsync(int fd)
{
    if (++fsync_calls == 2) {
        errno = EIO;
        return -1;
    }
    return fsync(fd);
}

static int failing_close(int fd)
{
    close(fd);
    errno = EIO;
    return -1;
}

static int failing_rename(const char *from MAYBE_UNUSED, const char *to MAYBE_UNUSED)
{
    errno = EXDEV;
    return -1;
}

static void install_failing_write(void) { runtime_sysio.write = failing_write; }
static void install_short_write(void) { runtime_sysio.write = short_then_failing_write; }
static void install_failing_fsync(void) { runtime_sysio.fsync = failing_fsync; }
static void install_failing_close(void) { runtime_sysio.close = failing_close; }
static void install_failing_rename(void) { runtime_sysio.rename = failing_rename; }
static void install_failing_open(void) { runtime_sysio.open = refuse_create; }

Test(state_atomic_write, every_failed_step_keeps_the_previous_file_and_no_temp)
{
    static const struct {
        void (*install)(void);
        const char *step;
        int error_number;
    } cases[] = {
        {install_failing_open, "creating temp file", EROFS},
        {install_failing_write, "writing temp file", ENOSPC},
        {install_short_write, "writing temp file", EDQUOT},
        {install_failing_fsync, "fsync of temp file", EIO},
        {install_failing_close, "closing temp file", EIO},
        {install_failing_rename, "renaming temp file", EXDEV},
    };
    const struct runtime_sysio original = runtime_sysio;
    char *directory = make_temp_directory();
    char *path = unit_path_join(directory, "job.msgpack");
    for (size_t index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        runtime_sysio = original;
        char error[512] = "";
        cr_assert_eq(state_file_write_atomic(directory, "job.msgpack", "old", 3, error,
                                             sizeof error),
                     0, "%s", error);
        cases[index].install();
        cr_assert_eq(state_file_write_atomic(directory, "job.msgpack", "new content", 11, error,
                                             sizeof error),
                     -1, "case %zu", index);
        cr_assert_eq(errno, cases[index].error_number, "case %zu errno %d", index, errno);
        runtime_sysio = original;
        cr_assert_not_null(strstr(error, cases[index].step), "case %zu: %s", index, error);
        cr_assert_not_null(strstr(error, strerror(cases[index].error_number)), "%s", error);
        size_t size;
        char *content = read_whole_file(path, &size);
        cr_assert_not_null(content);
        cr_assert_eq(size, 3, "case %zu", index);
        cr_assert_eq(memcmp(content, "old", 3), 0);
        free(content);
        size_t hidden;
        cr_assert_eq(count_directory_entries(directory, &hidden), 1, "case %zu", index);
        cr_assert_eq(hidden, 0, "case %zu: temp file left behind", index);
    }
    free(path);
    unit_remove_temp_directory(directory);
}

Test(state_atomic_write, failed_directory_fsync_is_reported_after_the_rename)
{
    char *directory = make_temp_directory();
    fsync_calls = 0;
    runtime_sysio.fsync = failing_second_fsync;
    char error[512] = "";
    cr_assert_eq(state_file_write_atomic(directory, "f", "abc", 3, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "fsync of directory"), "%s", error);
    cr_assert_eq(fsync_calls, 2);
    /* The content did land; only its durability is in doubt. */
    char *path = unit_path_join(directory, "f");
    size_t size;
    char *content = read_whole_file(path, &size);
    cr_assert_eq(size, 3);
    free(content);
    free(path);
    unit_remove_temp_directory(directory);
}

Test(state_atomic_write, rlimit_fsize_failure_keeps_the_previous_file)
{
    /* A real (not injected) write failure: the file size limit. */
    char *directory = make_temp_directory();
    char error[512] = "";
    cr_assert_eq(state_file_write_atomic(directory, "s", "previous", 8, error, sizeof error), 0);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {.rlim_cur = 1024, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &limit), 0);
    static char big[4096];
    memset(big, 'z', sizeof big);
    cr_assert_eq(state_file_write_atomic(directory, "s", big, sizeof big, error, sizeof error), -1);
    cr_assert_eq(errno, EFBIG);
    cr_assert_not_null(strstr(error, "writing temp file"), "%s", error);
    void *data;
    size_t size;
    cr_assert_eq(state_file_read(directory, "s", &data, &size, error, sizeof error), 0);
    cr_assert_eq(size, 8);
    cr_assert_eq(memcmp(data, "previous", 8), 0);
    free(data);
    size_t hidden;
    cr_assert_eq(count_directory_entries(directory, &hidden), 1);
    unit_remove_temp_directory(directory);
}

/* ----------------------------------------------------- snapshots as files */

Test(state_snapshot_files, file_name_format)
{
    struct content_identity identity = {.size = 1234, .hash = UINT64_C(0xab)};
    char name[128];
    snapshot_file_name(&identity, name, sizeof name);
    cr_assert_str_eq(name, "snapshot-1234-00000000000000ab.msgpack");
    identity = (struct content_identity){UINT64_MAX, UINT64_MAX};
    snapshot_file_name(&identity, name, sizeof name);
    cr_assert_str_eq(name, "snapshot-18446744073709551615-ffffffffffffffff.msgpack");
}

/* The rich snapshot with every position in range (snapshot_check.h), as
 * a load accepts it: the round-trip tests keep the extreme values. */
static void make_loadable_snapshot(struct adaptdl_snapshot *snapshot)
{
    make_rich_snapshot(snapshot);
    struct snapshot_file_position *eval = &snapshot->files[2];
    eval->pass_length = eval->record_count;
    snapshot->epoch = 3; /* the highest train pass */
}

Test(state_snapshot_files, save_then_load_bound)
{
    char *directory = make_temp_directory();
    struct adaptdl_snapshot original, loaded;
    make_loadable_snapshot(&original);
    char error[512] = "";
    cr_assert_eq(snapshot_save(directory, &original, error, sizeof error), 0, "%s", error);
    cr_assert_eq(snapshot_load_bound(directory, &original.binding, &loaded, error, sizeof error),
                 0, "%s", error);
    assert_snapshots_equal(&original, &loaded);
    char name[128];
    snapshot_file_name(&original.binding, name, sizeof name);
    char *path = unit_path_join(directory, name);
    cr_assert(file_exists(path));
    size_t hidden;
    cr_assert_eq(count_directory_entries(directory, &hidden), 1);
    free(path);
    snapshot_free(&original);
    snapshot_free(&loaded);
    unit_remove_temp_directory(directory);
}

Test(state_snapshot_files, load_bound_returns_1_when_missing)
{
    char *directory = make_temp_directory();
    struct content_identity binding = {10, 20};
    struct adaptdl_snapshot snapshot;
    memset(&snapshot, 0x11, sizeof snapshot);
    char error[512] = "";
    cr_assert_eq(snapshot_load_bound(directory, &binding, &snapshot, error, sizeof error), 1);
    cr_assert(is_all_zero(&snapshot, sizeof snapshot));
    unit_remove_temp_directory(directory);
}

Test(state_snapshot_files, load_bound_of_corrupt_file_names_it)
{
    char *directory = make_temp_directory();
    struct adaptdl_snapshot original, loaded;
    make_rich_snapshot(&original);
    char error[512] = "";
    cr_assert_eq(snapshot_save(directory, &original, error, sizeof error), 0, "%s", error);
    char name[128];
    snapshot_file_name(&original.binding, name, sizeof name);
    char *path = unit_path_join(directory, name);
    size_t size;
    char *content = read_whole_file(path, &size);
    write_file(path, content, size / 2); /* torn by hand */
    cr_assert_eq(snapshot_load_bound(directory, &original.binding, &loaded, error, sizeof error),
                 -1);
    cr_assert_not_null(strstr(error, name), "%s", error);
    cr_assert_not_null(strstr(error, "truncated"), "%s", error);
    cr_assert(is_all_zero(&loaded, sizeof loaded));

    /* A complete snapshot under a name that is not its own binding. */
    write_file(path, content, size);
    struct content_identity other = {original.binding.size, original.binding.hash ^ 1};
    char other_name[128];
    snapshot_file_name(&other, other_name, sizeof other_name);
    char *other_path = unit_path_join(directory, other_name);
    cr_assert_eq(rename(path, other_path), 0);
    cr_assert_eq(snapshot_load_bound(directory, &other, &loaded, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, other_name), "%s", error);
    cr_assert_not_null(strstr(error, "bound to"), "%s", error);
    cr_assert(is_all_zero(&loaded, sizeof loaded));
    free(other_path);
    free(content);
    free(path);
    snapshot_free(&original);
    unit_remove_temp_directory(directory);
}

Test(state_job_record_files, save_load_missing_and_corrupt)
{
    char *directory = make_temp_directory();
    struct adaptdl_job_record record, loaded;
    char error[512] = "";
    memset(&loaded, 0x22, sizeof loaded);
    cr_assert_eq(job_record_load(directory, &loaded, error, sizeof error), 1);
    cr_assert_eq(loaded.version, STATE_FORMAT_VERSION);
    cr_assert_eq(loaded.restart_cost_seconds, -1.0);
    cr_assert_null(loaded.profiles);

    make_rich_job_record(&record);
    cr_assert_eq(job_record_save(directory, &record, error, sizeof error), 0, "%s", error);
    cr_assert_eq(job_record_load(directory, &loaded, error, sizeof error), 0, "%s", error);
    assert_job_records_equal(&record, &loaded);
    job_record_free(&loaded);

    char *path = unit_path_join(directory, JOB_RECORD_FILE_NAME);
    write_text_file(path, "{\"not\": \"msgpack\"}");
    cr_assert_eq(job_record_load(directory, &loaded, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, JOB_RECORD_FILE_NAME), "%s", error);
    cr_assert_eq(loaded.restart_cost_seconds, -1.0, "initialised after an error");
    cr_assert_null(loaded.profiles);
    free(path);
    job_record_free(&record);
    unit_remove_temp_directory(directory);
}

/* ------------------------------------------------------------------ pruning */

/* Writes `content` to path and a snapshot bound to it (path recorded as the
 * checkpoint path); returns the binding. */
static struct content_identity commit_checkpoint(const char *directory, const char *checkpoint,
                                                 const char *content, uint64_t sequence)
{
    write_text_file(checkpoint, content);
    struct adaptdl_snapshot snapshot = {0};
    cr_assert_eq(content_identity_of_path(checkpoint, &snapshot.binding), 0);
    snapshot.checkpoint_path = strdup(checkpoint);
    snapshot.sequence = sequence;
    char error[512] = "";
    cr_assert_eq(snapshot_save(directory, &snapshot, error, sizeof error), 0, "%s", error);
    struct content_identity binding = snapshot.binding;
    snapshot_free(&snapshot);
    return binding;
}

static bool snapshot_exists(const char *directory, const struct content_identity *binding)
{
    char name[128];
    snapshot_file_name(binding, name, sizeof name);
    char *path = unit_path_join(directory, name);
    bool exists = file_exists(path);
    free(path);
    return exists;
}

Test(state_prune, deletes_only_snapshots_whose_content_is_gone)
{
    char *state = make_temp_directory();
    char *work = make_temp_directory();
    char *model = unit_path_join(work, "model.ckpt"), *best = unit_path_join(work, "best.ckpt");
    char error[512] = "";

    /* Same-sized contents, so pruning must compare hashes, not just sizes. */
    struct content_identity first = commit_checkpoint(state, model, "content-1", 1);
    struct content_identity second = commit_checkpoint(state, model, "content-2", 2);
    write_text_file(best, "content-2"); /* a copy of the second survives elsewhere */
    struct content_identity lost_best = commit_checkpoint(state, best, "content-5", 2);
    write_text_file(best, "content-2");
    struct content_identity current = commit_checkpoint(state, model, "content-3", 3);
    /* Newer than keep: possibly a commit in flight, spared. */
    struct content_identity in_flight = {999, 999};
    {
        struct adaptdl_snapshot pending = {.binding = in_flight, .sequence = 4};
        pending.checkpoint_path = strdup(best); /* keeps best.ckpt a named checkpoint path */
        cr_assert_eq(snapshot_save(state, &pending, error, sizeof error), 0);
        snapshot_free(&pending);
    }
    /* Corrupt snapshot and unrelated files: never touched. */
    char *corrupt = unit_path_join(state, "snapshot-9-0000000000000009.msgpack");
    write_text_file(corrupt, "garbage");
    char *other = unit_path_join(state, JOB_RECORD_FILE_NAME);
    write_text_file(other, "job");

    int deleted = snapshot_prune(state, &current, NULL, error, sizeof error);
    cr_assert_eq(deleted, 2, "deleted %d: %s", deleted, error);
    cr_assert_not(snapshot_exists(state, &first), "content-1 is gone everywhere");
    cr_assert(snapshot_exists(state, &second), "content-2 still lives in best.ckpt");
    cr_assert_not(snapshot_exists(state, &lost_best), "content-5 is gone everywhere");
    cr_assert(snapshot_exists(state, &current), "keep is kept");
    cr_assert(snapshot_exists(state, &in_flight), "newer than keep is kept");
    cr_assert(file_exists(corrupt));
    cr_assert(file_exists(other));

    /* Nothing more to do on a second pass. */
    cr_assert_eq(snapshot_prune(state, &current, NULL, error, sizeof error), 0, "%s", error);

    /* Once best.ckpt changes, the second snapshot goes too. */
    write_text_file(best, "content-6");
    cr_assert_eq(snapshot_prune(state, &current, NULL, error, sizeof error), 1, "%s", error);
    cr_assert_not(snapshot_exists(state, &second));

    free(corrupt);
    free(other);
    free(model);
    free(best);
    unit_remove_temp_directory(work);
    unit_remove_temp_directory(state);
}

Test(state_prune, never_deletes_keep_even_when_its_content_is_gone)
{
    char *state = make_temp_directory();
    char *work = make_temp_directory();
    char *model = unit_path_join(work, "model.ckpt");
    struct content_identity older = commit_checkpoint(state, model, "older", 1);
    struct content_identity keep = commit_checkpoint(state, model, "keep!", 2);
    unlink(model);
    char error[512] = "";
    cr_assert_eq(snapshot_prune(state, &keep, NULL, error, sizeof error), 1, "%s", error);
    cr_assert(snapshot_exists(state, &keep));
    cr_assert_not(snapshot_exists(state, &older));
    free(model);
    unit_remove_temp_directory(work);
    unit_remove_temp_directory(state);
}

Test(state_prune, missing_directory_is_an_error)
{
    struct content_identity keep = {1, 2};
    char error[512] = "";
    cr_assert_eq(snapshot_prune("/nonexistent/adaptshim-state", &keep, NULL, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "/nonexistent/adaptshim-state"), "%s", error);
}

Test(state_store, load_latest_picks_the_newest_snapshot)
{
    char *directory = make_temp_directory();
    struct adaptdl_snapshot found;
    char error[256];
    cr_assert_eq(snapshot_load_latest(directory, &found, error, sizeof error), 1,
                 "an empty directory holds no snapshot");
    struct adaptdl_snapshot older, newer;
    make_rich_snapshot(&older);
    make_rich_snapshot(&newer);
    older.binding.hash ^= 1;
    older.created_unix_time = 1000.0;
    newer.created_unix_time = 2000.0;
    cr_assert_eq(snapshot_save(directory, &newer, error, sizeof error), 0, "%s", error);
    cr_assert_eq(snapshot_save(directory, &older, error, sizeof error), 0, "%s", error);
    char *garbage = unit_path_join(directory, "snapshot-1-00000000000000ff.msgpack");
    write_text_file(garbage, "garbage");
    free(garbage);
    cr_assert_eq(snapshot_load_latest(directory, &found, error, sizeof error), 0, "%s", error);
    cr_expect_eq(found.created_unix_time, 2000.0);
    cr_expect_eq(found.binding.hash, newer.binding.hash);
    snapshot_free(&found);
    snapshot_free(&older);
    snapshot_free(&newer);
    cr_expect_eq(snapshot_load_latest("/nonexistent/adaptshim", &found, error, sizeof error), -1);
    unit_remove_temp_directory(directory);
}

/* ------------------------------------------------ FIFOs and other non-files */

/* A FIFO under a state file's name: opened blocking, every read of it would
 * wait for a writer that never comes, before the trainer's main. */
Test(state_file, a_fifo_is_refused_without_waiting_for_a_writer, .timeout = 10)
{
    char *directory = make_temp_directory();
    char *job = unit_path_join(directory, JOB_RECORD_FILE_NAME);
    cr_assert_eq(mkfifo(job, 0644), 0);
    struct adaptdl_job_record record;
    char error[512] = "";
    cr_assert_eq(job_record_load(directory, &record, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not a regular file"), "%s", error);
    cr_assert_not_null(strstr(error, JOB_RECORD_FILE_NAME), "%s", error);
    cr_assert_eq(record.restart_cost_seconds, -1.0, "initialised after the error");
    /* a FIFO where a snapshot should be: the bound load and pruning */
    struct content_identity binding = {48, 0x1234};
    char name[128];
    snapshot_file_name(&binding, name, sizeof name);
    char *snapshot_path = unit_path_join(directory, name);
    cr_assert_eq(mkfifo(snapshot_path, 0644), 0);
    struct adaptdl_snapshot snapshot;
    cr_assert_eq(snapshot_load_bound(directory, &binding, &snapshot, error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "not a regular file"), "%s", error);
    struct content_identity keep = {1, 2};
    cr_assert_eq(snapshot_prune(directory, &keep, NULL, error, sizeof error), 0, "%s", error);
    cr_assert(file_exists(snapshot_path), "what cannot be decoded is left alone");
    cr_assert_eq(snapshot_load_latest(directory, &snapshot, error, sizeof error), 1);
    free(snapshot_path);
    free(job);
    unit_remove_temp_directory(directory);
}

Test(state_identity, only_regular_files_have_a_content_identity, .timeout = 10)
{
    char *directory = make_temp_directory();
    char *fifo = unit_path_join(directory, "ck.fifo");
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    struct content_identity identity;
    cr_assert_eq(content_identity_of_path(fifo, &identity), -1);
    cr_assert_eq(errno, EINVAL);
    cr_assert_eq(content_identity_of_path(directory, &identity), -1);
    cr_assert_eq(errno, EISDIR);
    /* a device that never ends would be hashed forever */
    cr_assert_eq(content_identity_of_path("/dev/zero", &identity), -1);
    cr_assert_eq(errno, EINVAL);
    free(fifo);
    unit_remove_temp_directory(directory);
}

/* ---------------------------------------------- leftovers of killed writers */

static void make_file_aged(const char *directory, const char *name, double age_seconds)
{
    char *path = unit_path_join(directory, name);
    write_text_file(path, "partial");
    struct timeval now;
    gettimeofday(&now, NULL);
    struct timespec times[2];
    times[0].tv_sec = now.tv_sec - (time_t)age_seconds;
    times[0].tv_nsec = 0;
    times[1] = times[0];
    cr_assert_eq(utimensat(AT_FDCWD, path, times, 0), 0, "%s", strerror(errno));
    free(path);
}

static bool exists_in(const char *directory, const char *name)
{
    char *path = unit_path_join(directory, name);
    bool exists = file_exists(path);
    free(path);
    return exists;
}

static double unix_now(void)
{
    struct timeval now;
    gettimeofday(&now, NULL);
    return (double)now.tv_sec + (double)now.tv_usec * 1e-6;
}

Test(state_leftovers, old_temp_files_and_probes_go_young_ones_and_lookalikes_stay)
{
    char *directory = make_temp_directory();
    double old = STATE_LEFTOVER_GRACE_SECONDS + 60, young = 5;
    static const char *const stale[] = {
        ".job.msgpack.tmp.4242.1",
        ".snapshot-48-00000000deadbeef.msgpack.tmp.17.3",
        ".adaptshim-probe.99.12",
    };
    static const char *const kept_old[] = {
        "job.msgpack",                            /* the state itself */
        "snapshot-48-00000000deadbeef.msgpack",
        ".ck.tmp.12.3",                           /* a trainer's own temp file */
        ".job.msgpack.tmp.12",                    /* not our pattern */
        ".job.msgpack.tmp.12.x",
        ".snapshot-48.tmp.1.2",
        "job.msgpack.tmp.1.2",
        ".adaptshim-probe.1",
    };
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++)
        make_file_aged(directory, stale[i], old);
    for (size_t i = 0; i < sizeof kept_old / sizeof kept_old[0]; i++)
        make_file_aged(directory, kept_old[i], old);
    make_file_aged(directory, ".job.msgpack.tmp.4243.2", young); /* a write in flight */
    char error[256] = "";
    cr_assert_eq(state_directory_remove_leftovers(directory, unix_now(), error, sizeof error),
                 3, "%s", error);
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++)
        cr_expect_not(exists_in(directory, stale[i]), "%s is a leftover", stale[i]);
    for (size_t i = 0; i < sizeof kept_old / sizeof kept_old[0]; i++)
        cr_expect(exists_in(directory, kept_old[i]), "%s is not ours to remove", kept_old[i]);
    cr_expect(exists_in(directory, ".job.msgpack.tmp.4243.2"), "young: maybe in flight");
    cr_assert_eq(state_directory_remove_leftovers("/nonexistent/adaptshim", unix_now(), error,
                                                  sizeof error), -1);
    cr_expect_not_null(strstr(error, "/nonexistent/adaptshim"), "%s", error);
    unit_remove_temp_directory(directory);
}

Test(state_leftovers, preparing_the_directory_and_pruning_remove_them)
{
    char *directory = make_temp_directory();
    double old = STATE_LEFTOVER_GRACE_SECONDS + 60;
    make_file_aged(directory, ".job.msgpack.tmp.4242.1", old);
    char error[256] = "";
    cr_assert_eq(state_directory_prepare(directory, error, sizeof error), 0, "%s", error);
    cr_expect_not(exists_in(directory, ".job.msgpack.tmp.4242.1"));
    make_file_aged(directory, ".snapshot-1-0000000000000001.msgpack.tmp.4242.2", old);
    struct content_identity keep = {1, 1};
    cr_assert_geq(snapshot_prune(directory, &keep, NULL, error, sizeof error), 0, "%s", error);
    cr_expect_not(exists_in(directory, ".snapshot-1-0000000000000001.msgpack.tmp.4242.2"));
    unit_remove_temp_directory(directory);
}

/* ------------------------------------------------ pruning with the save glob */

/* A copy of a checkpoint that no snapshot names (ck.bak, a new replica's
 * ck1) still resumes: its snapshot must stay. */
Test(state_prune, a_copy_matching_the_save_glob_keeps_its_snapshot)
{
    char *state = make_temp_directory();
    char *work = make_temp_directory();
    char *model = unit_path_join(work, "ck0"), *backup = unit_path_join(work, "ck0.bak");
    char *replica = unit_path_join(work, "ck1"), *elsewhere = unit_path_join(work, "other.bin");
    char glob[PATH_MAX];
    snprintf(glob, sizeof glob, "%s/ck*", work);
    char error[512] = "";

    struct content_identity first = commit_checkpoint(state, model, "content-1", 1);
    write_text_file(backup, "content-1");
    struct content_identity second = commit_checkpoint(state, model, "content-2", 2);
    write_text_file(replica, "content-2");
    struct content_identity third = commit_checkpoint(state, model, "content-3", 3);
    struct content_identity fourth = commit_checkpoint(state, model, "content-4", 4);
    write_text_file(elsewhere, "content-3"); /* does not match the glob */

    cr_assert_eq(snapshot_prune(state, &fourth, glob, error, sizeof error), 1, "%s", error);
    cr_expect(snapshot_exists(state, &first), "ck0.bak holds content-1");
    cr_expect(snapshot_exists(state, &second), "ck1 holds content-2");
    cr_expect_not(snapshot_exists(state, &third), "only other.bin holds content-3");
    cr_expect(snapshot_exists(state, &fourth));

    /* without the glob only the recorded paths count (the old rule) */
    cr_assert_eq(snapshot_prune(state, &fourth, NULL, error, sizeof error), 2, "%s", error);
    cr_expect_not(snapshot_exists(state, &first));
    cr_expect_not(snapshot_exists(state, &second));
    free(model);
    free(backup);
    free(replica);
    free(elsewhere);
    unit_remove_temp_directory(work);
    unit_remove_temp_directory(state);
}

/* The glob's own directory is searched even when no snapshot recorded a
 * path there, and a relative glob is matched against the current
 * directory; a FIFO matching the glob does not hang the search. */
Test(state_prune, the_globs_directory_counts_relative_globs_too, .timeout = 10)
{
    char *state = make_temp_directory();
    char *work = make_temp_directory();
    char *other = make_temp_directory();
    char *model = unit_path_join(work, "model.pt");
    char *copy = unit_path_join(other, "model.pt.copy");
    char *fifo = unit_path_join(other, "model.pt.fifo");
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    char error[512] = "";
    struct content_identity first = commit_checkpoint(state, model, "content-1", 1);
    write_text_file(copy, "content-1");
    struct content_identity second = commit_checkpoint(state, model, "content-2", 2);

    char absolute_glob[PATH_MAX];
    snprintf(absolute_glob, sizeof absolute_glob, "%s/model.pt*", other);
    cr_assert_eq(snapshot_prune(state, &second, absolute_glob, error, sizeof error), 0, "%s",
                 error);
    cr_expect(snapshot_exists(state, &first), "the copy in the glob's directory holds it");

    char cwd[PATH_MAX];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(other), 0);
    cr_assert_eq(snapshot_prune(state, &second, "model.pt.*", error, sizeof error), 0, "%s",
                 error);
    cr_expect(snapshot_exists(state, &first), "relative glob, current directory");
    cr_assert_eq(chdir(cwd), 0);

    cr_assert_eq(snapshot_prune(state, &second, "model.pt.*", error, sizeof error), 1, "%s",
                 error);
    cr_expect_not(snapshot_exists(state, &first), "a directory neither named nor recorded is not searched");
    free(model);
    free(copy);
    free(fifo);
    unit_remove_temp_directory(other);
    unit_remove_temp_directory(work);
    unit_remove_temp_directory(state);
}

/* ------------------------------------------------------ range-checked loads */

Test(state_snapshot_files, a_sealed_snapshot_out_of_range_is_not_loaded)
{
    char *directory = make_temp_directory();
    struct adaptdl_snapshot original, loaded;
    make_loadable_snapshot(&original);
    original.files[0].current_index = original.files[0].pass_length + 1;
    char error[512] = "";
    cr_assert_eq(snapshot_save(directory, &original, error, sizeof error), 0, "%s", error);
    memset(&loaded, 0x5a, sizeof loaded);
    cr_assert_eq(snapshot_load_bound(directory, &original.binding, &loaded, error, sizeof error),
                 -1);
    cr_assert_eq(errno, EINVAL);
    cr_expect_not_null(strstr(error, "current_index"), "%s", error);
    cr_expect_not_null(strstr(error, "snapshot-"), "names the file: %s", error);
    cr_assert(is_all_zero(&loaded, sizeof loaded), "never half-loaded");
    snapshot_free(&original);
    unit_remove_temp_directory(directory);
}

/* ------------------------------------------ the schema-driven encoder itself */

/* state_encode and state_decode follow any schema table: a probe format
 * with one field of every kind, nested records that own memory, and
 * "liar" formats with the same magic whose fields differ in kind or are
 * missing, so that every message of the decoder can be reached through
 * the encoder's own valid checksums.  member_of and record_free_members,
 * which both directions use to reach and free members, are checked on the
 * probe too. */
struct probe_inner {
    char *note;
    int64_t offset;
    double scale;
};

struct probe_item {
    char *label;
    uint64_t weight;
};

struct probe {
    uint32_t version;
    uint32_t small;
    uint64_t big;
    int64_t signed_value;
    double ratio;
    bool flag;
    char *name;
    double vector[3];
    struct probe_inner inner;
    struct probe_item *items;
    size_t item_count;
    unsigned char *blob;
    size_t blob_size;
};

static const struct field_spec probe_inner_fields[] = {
    {.name = "note", .kind = FIELD_STRING, .offset = offsetof(struct probe_inner, note)},
    {.name = "offset", .kind = FIELD_I64, .offset = offsetof(struct probe_inner, offset)},
    {.name = "scale", .kind = FIELD_DOUBLE, .offset = offsetof(struct probe_inner, scale)},
};
static const struct record_schema probe_inner_schema = {
    "inner", NULL, sizeof(struct probe_inner), COUNT_OF(probe_inner_fields), probe_inner_fields,
};

static const struct field_spec probe_item_fields[] = {
    {.name = "label", .kind = FIELD_STRING, .offset = offsetof(struct probe_item, label)},
    {.name = "weight", .kind = FIELD_U64, .offset = offsetof(struct probe_item, weight)},
};
static const struct record_schema probe_item_schema = {
    "item", NULL, sizeof(struct probe_item), COUNT_OF(probe_item_fields), probe_item_fields,
};

#define PROBE_FIELDS(item_schema)                                                           \
    {.name = "format", .kind = FIELD_MAGIC},                                                \
    {.name = "version", .kind = FIELD_VERSION, .offset = offsetof(struct probe, version)},  \
    {.name = "small", .kind = FIELD_U32, .offset = offsetof(struct probe, small)},          \
    {.name = "big", .kind = FIELD_U64, .offset = offsetof(struct probe, big)},              \
    {.name = "signed_value", .kind = FIELD_I64, .offset = offsetof(struct probe, signed_value)}, \
    {.name = "ratio", .kind = FIELD_DOUBLE, .offset = offsetof(struct probe, ratio)},       \
    {.name = "flag", .kind = FIELD_BOOL, .offset = offsetof(struct probe, flag)},           \
    {.name = "name", .kind = FIELD_STRING, .offset = offsetof(struct probe, name)},         \
    {.name = "vector", .kind = FIELD_DOUBLE_VECTOR, .offset = offsetof(struct probe, vector), \
     .length = 3},                                                                          \
    {.name = "inner", .kind = FIELD_RECORD, .offset = offsetof(struct probe, inner),        \
     .element = &probe_inner_schema},                                                       \
    {.name = "items", .kind = FIELD_RECORD_ARRAY, .offset = offsetof(struct probe, items),  \
     .count_offset = offsetof(struct probe, item_count), .element = &(item_schema)}

static const struct field_spec probe_fields[] = {
    PROBE_FIELDS(probe_item_schema),
    {.name = "blob", .kind = FIELD_BYTES, .offset = offsetof(struct probe, blob),
     .count_offset = offsetof(struct probe, blob_size)},
};
static const struct record_schema probe_schema = {
    "probe", "adaptshim-probe", sizeof(struct probe), COUNT_OF(probe_fields), probe_fields,
};

/* The same format without its last field, "blob". */
static const struct record_schema probe_without_blob_schema = {
    "probe", "adaptshim-probe", sizeof(struct probe), COUNT_OF(probe_fields) - 1, probe_fields,
};

/* The same format where an item's weight is a string (in the label's place). */
static const struct field_spec liar_item_fields[] = {
    {.name = "label", .kind = FIELD_STRING, .offset = offsetof(struct probe_item, label)},
    {.name = "weight", .kind = FIELD_STRING, .offset = offsetof(struct probe_item, label)},
};
static const struct record_schema liar_item_schema = {
    "item", NULL, sizeof(struct probe_item), COUNT_OF(liar_item_fields), liar_item_fields,
};
static const struct field_spec liar_fields[] = {
    PROBE_FIELDS(liar_item_schema),
    {.name = "blob", .kind = FIELD_BYTES, .offset = offsetof(struct probe, blob),
     .count_offset = offsetof(struct probe, blob_size)},
};
static const struct record_schema liar_schema = {
    "probe", "adaptshim-probe", sizeof(struct probe), COUNT_OF(liar_fields), liar_fields,
};

static void make_probe(struct probe *probe)
{
    memset(probe, 0, sizeof *probe);
    probe->version = 77;   /* the encoder writes its own version */
    probe->small = UINT32_MAX;
    probe->big = UINT64_MAX - 5;
    probe->signed_value = INT64_MIN + 3;
    probe->ratio = -0.125;
    probe->flag = true;
    probe->name = strdup("probe \xc3\xa9");
    probe->vector[0] = 1.5, probe->vector[1] = -2.25, probe->vector[2] = 1e300;
    probe->inner = (struct probe_inner){.note = strdup("inside"), .offset = -9, .scale = 4.0};
    probe->item_count = 2;
    probe->items = calloc(2, sizeof *probe->items);
    cr_assert_not_null(probe->items);
    probe->items[0] = (struct probe_item){.label = strdup("first"), .weight = 3};
    probe->items[1] = (struct probe_item){.label = NULL, .weight = 0};
    probe->blob_size = 5;
    probe->blob = malloc(5);
    cr_assert_not_null(probe->blob);
    memcpy(probe->blob, "\0\1\2\3\xff", 5);
}

/* The size a member of each kind must have: the decoder writes that many
 * bytes at its offset, so a table row whose kind does not match its member
 * (a uint32_t read as FIELD_U64) would write past it. */
static size_t schema_kind_size(const struct field_spec *field)
{
    switch (field->kind) {
    case FIELD_MAGIC:
        return 0;
    case FIELD_VERSION:
    case FIELD_U32:
        return sizeof(uint32_t);
    case FIELD_U64:
        return sizeof(uint64_t);
    case FIELD_I64:
        return sizeof(int64_t);
    case FIELD_DOUBLE:
        return sizeof(double);
    case FIELD_BOOL:
        return sizeof(bool);
    case FIELD_STRING:
        return sizeof(char *);
    case FIELD_DOUBLE_VECTOR:
        return field->length * sizeof(double);
    case FIELD_RECORD:
        return field->element->structure_size;
    case FIELD_RECORD_ARRAY:
    case FIELD_BYTES:
        return sizeof(void *);
    default:
        return SIZE_MAX;
    }
}

/* Checks every row of `schema` and of the schemas it nests; returns the
 * rows checked. */
static size_t schema_expect_members_fit(const struct record_schema *schema)
{
    size_t checked = 0;
    for (size_t index = 0; index < schema->field_count; index++) {
        const struct field_spec *field = &schema->fields[index];
        cr_expect_eq(field->member_size, schema_kind_size(field),
                     "%s.%s: a member of %zu bytes described as kind %d", schema->label,
                     field->name, field->member_size, (int)field->kind);
        cr_expect_leq(field->offset + field->member_size, schema->structure_size,
                      "%s.%s lies inside its structure", schema->label, field->name);
        checked++;
        if (field->kind == FIELD_RECORD || field->kind == FIELD_RECORD_ARRAY)
            checked += schema_expect_members_fit(field->element);
    }
    return checked;
}

Test(state_schema, every_row_of_both_formats_has_a_member_of_its_kinds_size)
{
    cr_expect_gt(schema_expect_members_fit(&snapshot_schema), 30);
    cr_expect_gt(schema_expect_members_fit(&job_record_schema), 25);
}

Test(state_schema, member_of_is_the_member_at_its_offset)
{
    struct probe probe;
    cr_expect_eq(member_of(&probe, 0), (void *)&probe);
    cr_expect_eq(member_of(&probe, offsetof(struct probe, big)), (void *)&probe.big);
    cr_expect_eq(member_of(&probe, offsetof(struct probe, inner)), (void *)&probe.inner);
    cr_expect_eq(member_of(&probe.inner, offsetof(struct probe_inner, scale)),
                 (void *)&probe.inner.scale, "relative to the structure it is given");
}

Test(state_schema, record_free_members_frees_what_the_members_own_and_keeps_the_rest)
{
    struct probe probe;
    make_probe(&probe);
    record_free_members(&probe_schema, &probe);
    cr_expect_null(probe.name);
    cr_expect_null(probe.inner.note, "an embedded record's members are freed too");
    cr_expect_null(probe.items);
    cr_expect_eq(probe.item_count, 0, "the count goes with its array");
    cr_expect_null(probe.blob);
    cr_expect_eq(probe.blob_size, 0);
    cr_expect_eq(probe.big, UINT64_MAX - 5, "scalars are left as they are");
    cr_expect_eq(probe.inner.offset, -9);
    cr_expect(probe.flag);
    cr_expect_eq(probe.vector[2], 1e300);
    /* freeing again, or an empty structure, is harmless */
    record_free_members(&probe_schema, &probe);
    struct probe empty = {0};
    record_free_members(&probe_schema, &empty);
    cr_expect_null(empty.items);
}

Test(state_schema, state_encode_and_decode_round_trip_every_field_kind)
{
    struct probe original, decoded;
    make_probe(&original);
    void *data = NULL;
    size_t size = 0;
    cr_assert_eq(state_encode(&probe_schema, &original, &data, &size), 0, "errno %d", errno);
    cr_assert_not_null(data);
    cr_assert_gt(size, STATE_CHECKSUM_TRAILER_SIZE);
    char error[512] = "";
    cr_assert_eq(state_decode(data, size, &probe_schema, &decoded, error, sizeof error), 0,
                 "%s", error);
    cr_expect_eq(decoded.version, STATE_FORMAT_VERSION, "this build's version, not 77");
    cr_expect_eq(decoded.small, UINT32_MAX);
    cr_expect_eq(decoded.big, UINT64_MAX - 5);
    cr_expect_eq(decoded.signed_value, INT64_MIN + 3);
    cr_expect_eq(decoded.ratio, -0.125);
    cr_expect(decoded.flag);
    cr_expect_str_eq(decoded.name, original.name);
    cr_expect_neq(decoded.name, original.name, "a copy");
    for (int i = 0; i < 3; i++)
        cr_expect_eq(decoded.vector[i], original.vector[i], "vector[%d]", i);
    cr_expect_str_eq(decoded.inner.note, "inside");
    cr_expect_eq(decoded.inner.offset, -9);
    cr_expect_eq(decoded.inner.scale, 4.0);
    cr_assert_eq(decoded.item_count, 2);
    cr_expect_str_eq(decoded.items[0].label, "first");
    cr_expect_eq(decoded.items[0].weight, 3);
    cr_expect_str_eq(decoded.items[1].label, "", "NULL is written as an empty string");
    cr_assert_eq(decoded.blob_size, 5);
    cr_expect_eq(memcmp(decoded.blob, "\0\1\2\3\xff", 5), 0);

    /* one map: every field and the checksum entry, "format" first */
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    cr_assert_eq(msgpack_unpack_next(&unpacked, data, size, &offset), MSGPACK_UNPACK_SUCCESS);
    cr_expect_eq(offset, size);
    cr_assert_eq(unpacked.data.type, MSGPACK_OBJECT_MAP);
    cr_expect_eq(unpacked.data.via.map.size, COUNT_OF(probe_fields) + 1);
    const msgpack_object *key = &unpacked.data.via.map.ptr[0].key;
    cr_expect(key->type == MSGPACK_OBJECT_STR && key->via.str.size == 6 &&
              memcmp(key->via.str.ptr, "format", 6) == 0);
    msgpack_unpacked_destroy(&unpacked);
    cr_expect_eq(memcmp((unsigned char *)data + size - STATE_CHECKSUM_TRAILER_SIZE,
                        "\xa8" "checksum" "\xcf", 10), 0, "the fixed trailer");
    free(data);
    record_free_members(&probe_schema, &original);
    record_free_members(&probe_schema, &decoded);
}

static void pack_signed_seven(msgpack_packer *packer) { msgpack_pack_uint64(packer, 7); }
static void pack_two_to_the_63(msgpack_packer *packer) { msgpack_pack_uint64(packer, UINT64_C(1) << 63); }
static void pack_word(msgpack_packer *packer) { pack_text(packer, "x"); }
static void pack_float_string_float(msgpack_packer *packer)
{
    msgpack_pack_array(packer, 3);
    msgpack_pack_double(packer, 1.0);
    pack_text(packer, "x");
    msgpack_pack_double(packer, 2.0);
}
static void pack_two_floats(msgpack_packer *packer)
{
    msgpack_pack_array(packer, 2);
    msgpack_pack_double(packer, 1.0);
    msgpack_pack_double(packer, 2.0);
}
static void pack_three_float32(msgpack_packer *packer)
{
    msgpack_pack_array(packer, 3);
    for (int index = 0; index < 3; index++)
        msgpack_pack_float(packer, 0.5f);
}

/* The probe, encoded, with the value under `key` replaced by what `pack`
 * writes, resealed: what a hostile or mistaken writer would leave. */
static void *probe_with_entry(const char *key, entry_packer pack, size_t *size)
{
    struct probe probe;
    make_probe(&probe);
    void *encoded = NULL;
    size_t encoded_size = 0;
    cr_assert_eq(state_encode(&probe_schema, &probe, &encoded, &encoded_size), 0);
    record_free_members(&probe_schema, &probe);
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    cr_assert_eq(msgpack_unpack_next(&unpacked, encoded, encoded_size, &offset),
                 MSGPACK_UNPACK_SUCCESS);
    const msgpack_object_map *map = &unpacked.data.via.map;
    msgpack_sbuffer buffer;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer packer;
    msgpack_packer_init(&packer, &buffer, msgpack_sbuffer_write);
    msgpack_pack_map(&packer, map->size);
    for (uint32_t entry = 0; entry + 1 < map->size; entry++) { /* the last is the checksum */
        const msgpack_object *entry_key = &map->ptr[entry].key;
        msgpack_pack_object(&packer, *entry_key);
        if (entry_key->via.str.size == strlen(key) &&
            memcmp(entry_key->via.str.ptr, key, strlen(key)) == 0)
            pack(&packer);
        else
            msgpack_pack_object(&packer, map->ptr[entry].val);
    }
    msgpack_sbuffer_write(&buffer, "\xa8" "checksum" "\xcf" "\0\0\0\0\0\0\0\0", 18);
    msgpack_unpacked_destroy(&unpacked);
    free(encoded);
    *size = buffer.size;
    unsigned char *data = (unsigned char *)msgpack_sbuffer_release(&buffer);
    reseal(data, *size);
    return data;
}

Test(state_schema, every_field_kind_names_the_types_it_accepts_and_the_field_it_refused)
{
    static const struct {
        const char *key;
        entry_packer pack;
        const char *message; /* NULL: accepted */
    } cases[] = {
        {"small", pack_nil, "probe field small: expected an unsigned integer, found nil"},
        {"big", pack_negative, "probe field big: expected an unsigned integer, found negative integer"},
        {"signed_value", pack_signed_seven, NULL},
        {"signed_value", pack_two_to_the_63,
         "probe field signed_value: 9223372036854775808 does not fit in a signed 64-bit integer"},
        {"signed_value", pack_word, "probe field signed_value: expected an integer, found string"},
        {"ratio", pack_float32, NULL},
        {"ratio", pack_one, "probe field ratio: expected a float, found unsigned integer"},
        {"flag", pack_one, "probe field flag: expected a boolean, found unsigned integer"},
        {"name", pack_false, "probe field name: expected a string, found boolean"},
        {"vector", pack_three_float32, NULL},
        {"vector", pack_float_string_float, "probe field vector[1]: expected a float, found string"},
        {"vector", pack_two_floats, "probe field vector: expected 3 elements, found 2"},
        {"vector", pack_word, "probe field vector: expected an array, found string"},
        {"inner", pack_empty_array, "probe field inner: expected a map, found array"},
        {"items", pack_binding, "probe field items: expected an array, found map"},
        {"blob", pack_word, "probe field blob: expected binary data, found string"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        size_t size = 0;
        void *data = probe_with_entry(cases[index].key, cases[index].pack, &size);
        struct probe decoded;
        char error[256] = "";
        int status = state_decode(data, size, &probe_schema, &decoded, error, sizeof error);
        free(data);
        if (cases[index].message == NULL) {
            cr_expect_eq(status, 0, "case %zu: %s", index, error);
            if (status == 0)
                record_free_members(&probe_schema, &decoded);
        } else {
            cr_expect_eq(status, -1, "case %zu accepted", index);
            cr_expect_str_eq(error, cases[index].message, "case %zu", index);
        }
    }
}

Test(state_schema, a_signed_field_reads_positive_and_negative_integers)
{
    size_t size = 0;
    void *data = probe_with_entry("signed_value", pack_signed_seven, &size);
    struct probe decoded;
    char error[256] = "";
    cr_assert_eq(state_decode(data, size, &probe_schema, &decoded, error, sizeof error), 0,
                 "%s", error);
    cr_expect_eq(decoded.signed_value, 7);
    record_free_members(&probe_schema, &decoded);
    free(data);
    data = probe_with_entry("signed_value", pack_negative, &size);
    cr_assert_eq(state_decode(data, size, &probe_schema, &decoded, error, sizeof error), 0,
                 "%s", error);
    cr_expect_eq(decoded.signed_value, -3);
    record_free_members(&probe_schema, &decoded);
    free(data);
}

Test(state_schema, state_encode_refuses_a_count_without_its_memory)
{
    struct probe probe;
    make_probe(&probe);
    struct probe_item *items = probe.items;
    probe.items = NULL;
    void *data = (void *)1;
    size_t size = 1;
    errno = 0;
    cr_expect_eq(state_encode(&probe_schema, &probe, &data, &size), -1);
    cr_expect_eq(errno, EINVAL, "errno %d", errno);
    cr_expect_null(data);
    cr_expect_eq(size, 0);
    probe.items = items;

    unsigned char *blob = probe.blob;
    probe.blob = NULL;
    data = (void *)1;
    errno = 0;
    cr_expect_eq(state_encode(&probe_schema, &probe, &data, &size), -1, "bytes without memory");
    cr_expect_eq(errno, EINVAL);
    cr_expect_null(data);
    probe.blob_size = 0;
    cr_expect_eq(state_encode(&probe_schema, &probe, &data, &size), 0, "no bytes, no memory");
    free(data);
    probe.blob = blob;
    record_free_members(&probe_schema, &probe);
}

/* Encodes `probe` with `schema` and decodes it as a probe: the decoder's
 * message, with the output expected zeroed. */
static int decode_as_probe(const struct record_schema *schema, struct probe *probe,
                           char *error, size_t error_size)
{
    void *data;
    size_t size;
    cr_assert_eq(state_encode(schema, probe, &data, &size), 0);
    struct probe decoded;
    memset(&decoded, 0x5a, sizeof decoded);
    int status = state_decode(data, size, &probe_schema, &decoded, error, error_size);
    if (status != 0)
        cr_expect(is_all_zero(&decoded, sizeof decoded), "a failed decode leaves zeros");
    else
        record_free_members(&probe_schema, &decoded);
    free(data);
    return status;
}

Test(state_schema, state_decode_names_the_schema_and_the_field_path)
{
    struct probe probe;
    make_probe(&probe);
    char error[512] = "";
    cr_expect_eq(decode_as_probe(&liar_schema, &probe, error, sizeof error), -1);
    cr_expect_str_eq(error, "probe field items[0].weight: expected an unsigned integer, found "
                            "string");
    cr_expect_eq(decode_as_probe(&probe_without_blob_schema, &probe, error, sizeof error), -1);
    cr_expect_str_eq(error, "probe: missing field \"blob\"");
    cr_expect_eq(decode_as_probe(&probe_schema, &probe, error, sizeof error), 0, "%s", error);
    record_free_members(&probe_schema, &probe);
}

Test(state_schema, state_decode_refuses_another_format_empty_or_corrupt_data)
{
    struct probe probe;
    make_probe(&probe);
    void *data;
    size_t size;
    cr_assert_eq(state_encode(&probe_schema, &probe, &data, &size), 0);
    char error[512] = "";
    struct adaptdl_snapshot snapshot;
    memset(&snapshot, 0x5a, sizeof snapshot);
    cr_expect_eq(state_decode(data, size, &snapshot_schema, &snapshot, error, sizeof error), -1);
    cr_expect_str_eq(error, "not an adaptshim snapshot (format \"adaptshim-probe\", expected "
                            "\"adaptshim-snapshot\")");
    cr_expect(is_all_zero(&snapshot, sizeof snapshot));

    struct probe decoded;
    memset(&decoded, 0x5a, sizeof decoded);
    cr_expect_eq(state_decode(data, 0, &probe_schema, &decoded, error, sizeof error), -1);
    cr_expect_str_eq(error, "probe is empty");
    cr_expect(is_all_zero(&decoded, sizeof decoded));
    cr_expect_eq(state_decode(NULL, size, &probe_schema, &decoded, error, sizeof error), -1);
    cr_expect_str_eq(error, "probe is empty");

    cr_expect_eq(state_decode(data, size - 1, &probe_schema, &decoded, error, sizeof error), -1);
    cr_expect_eq(strncmp(error, "probe: truncated", 16), 0, "the structural pass: %s", error);

    /* a flipped bit inside the blob keeps the structure: the checksum catches it */
    unsigned char *blob = find_bytes(data, size, "\0\1\2\3\xff", 5);
    cr_assert_not_null(blob);
    blob[4] ^= 1;
    memset(&decoded, 0x5a, sizeof decoded);
    cr_expect_eq(state_decode(data, size, &probe_schema, &decoded, error, sizeof error), -1);
    cr_expect_eq(strncmp(error, "probe checksum mismatch", 23), 0, "%s", error);
    cr_expect(is_all_zero(&decoded, sizeof decoded));
    free(data);
    record_free_members(&probe_schema, &probe);
}

/* A member added to a state structure but not to its schema is silently
 * not saved: the round trips above only check the members they name.  The
 * schema itself says which bytes of the structure it covers; every byte it
 * does not cover must be padding, a run shorter than the alignment of what
 * follows it.  This catches any missing pointer, count, double or 64-bit
 * integer; a 4-byte or smaller member could hide where padding may be. */
static size_t schema_member_size(const struct field_spec *field)
{
    switch (field->kind) {
    case FIELD_MAGIC: return 0;
    case FIELD_VERSION:
    case FIELD_U32: return sizeof(uint32_t);
    case FIELD_U64: return sizeof(uint64_t);
    case FIELD_I64: return sizeof(int64_t);
    case FIELD_DOUBLE: return sizeof(double);
    case FIELD_BOOL: return sizeof(bool);
    case FIELD_STRING: return sizeof(char *);
    case FIELD_DOUBLE_VECTOR: return field->length * sizeof(double);
    case FIELD_RECORD: return field->element->structure_size;
    case FIELD_RECORD_ARRAY:
    case FIELD_BYTES: return sizeof(void *);
    default: cr_assert_fail("field %s: kind %d has no size here", field->name, field->kind);
    }
    return 0;
}

static size_t alignment_at(size_t offset)
{
    size_t alignment = 1;
    while (alignment < 8 && offset % (alignment * 2) == 0)
        alignment *= 2;
    return alignment;
}

static void expect_schema_covers_its_structure(const struct record_schema *schema)
{
    bool covered[512] = {false};
    cr_assert_leq(schema->structure_size, sizeof covered, "%s", schema->label);
    for (size_t index = 0; index < schema->field_count; index++) {
        const struct field_spec *field = &schema->fields[index];
        size_t size = schema_member_size(field);
        for (size_t byte = 0; byte < size; byte++)
            covered[field->offset + byte] = true;
        if (field->kind == FIELD_RECORD_ARRAY || field->kind == FIELD_BYTES)
            for (size_t byte = 0; byte < sizeof(size_t); byte++)
                covered[field->count_offset + byte] = true;
        if (field->kind == FIELD_RECORD || field->kind == FIELD_RECORD_ARRAY)
            expect_schema_covers_its_structure(field->element);
    }
    size_t gap_start = 0;
    for (size_t byte = 0; byte <= schema->structure_size; byte++) {
        bool end = byte == schema->structure_size;
        if (!end && !covered[byte])
            continue;
        size_t gap = byte - gap_start;
        size_t allowed = end ? 8 : alignment_at(byte);
        cr_expect_lt(gap, allowed,
                     "%s: bytes %zu to %zu are in no field of the schema: a member missing "
                     "from state_schema.c?", schema->label, gap_start, byte);
        gap_start = byte + 1;
    }
}

Test(state_schema, every_member_of_the_state_structures_is_in_its_schema)
{
    expect_schema_covers_its_structure(&snapshot_schema);
    expect_schema_covers_its_structure(&job_record_schema);
}
