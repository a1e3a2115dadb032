/* state_store.c - saving and loading the shim's persistent state:
 * bound snapshots, named after the checkpoint content they are bound to,
 * and the job record.  The formats are state_schema.c's tables, written by
 * state_encode.c and read back by state_decode.c; the files are written
 * atomically and read by state_files.c, whose file operations go through
 * runtime_sysio (sysio.h): inside the preloaded library the plain libc names
 * are the shim's own wrappers. */
#include "error_message.h"
#include "state_store.h"

#include "snapshot_check.h"
#include "state_files.h"
#include "state_schema.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void snapshot_file_name(const struct content_identity *binding, char *name, size_t name_size)
{
    snprintf(name, name_size, SNAPSHOT_FILE_PREFIX "%" PRIu64 "-%016" PRIx64 SNAPSHOT_FILE_SUFFIX,
             binding->size, binding->hash);
}

static int state_save(const char *directory, const char *name, const struct record_schema *schema,
                      const void *structure, char *error, size_t error_size)
{
    void *data;
    size_t size;
    if (state_encode(schema, structure, &data, &size) != 0) {
        int saved_errno = errno;
        error_message(error, error_size, "cannot encode %s for '%s/%s': %s", schema->label, directory,
                  name, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    int result = state_file_write_atomic(directory, name, data, size, error, error_size);
    int saved_errno = errno;
    free(data);
    errno = saved_errno;
    return result;
}

/* Reads and decodes one state file.  1 when missing (structure zeroed). */
static int state_load(const char *directory, const char *name, const struct record_schema *schema,
                      void *structure, char *error, size_t error_size)
{
    memset(structure, 0, schema->structure_size);
    void *data;
    size_t size;
    if (state_file_read(directory, name, &data, &size, error, error_size) != 0)
        return errno == ENOENT ? 1 : -1;
    char decode_error[384];
    int result = state_decode(data, size, schema, structure, decode_error, sizeof decode_error);
    free(data);
    if (result != 0) {
        error_message(error, error_size, "%s file '%s/%s': %s", schema->label, directory, name,
                  decode_error);
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int snapshot_save(const char *directory, const struct adaptdl_snapshot *snapshot, char *error,
                  size_t error_size)
{
    char name[SNAPSHOT_FILE_NAME_SIZE];
    snapshot_file_name(&snapshot->binding, name, sizeof name);
    return state_save(directory, name, &snapshot_schema, snapshot, error, error_size);
}

int snapshot_load_bound(const char *directory, const struct content_identity *binding,
                        struct adaptdl_snapshot *snapshot, char *error, size_t error_size)
{
    char name[SNAPSHOT_FILE_NAME_SIZE];
    snapshot_file_name(binding, name, sizeof name);
    int result = state_load(directory, name, &snapshot_schema, snapshot, error, error_size);
    if (result != 0)
        return result;
    /* The name says which content it is bound to; the inside must agree,
     * or the file was copied or renamed by hand. */
    if (!content_identity_equal(&snapshot->binding, binding)) {
        error_message(error, error_size,
                  "snapshot file '%s/%s' is bound to size %" PRIu64 " hash %016" PRIx64
                  ", not to size %" PRIu64 " hash %016" PRIx64,
                  directory, name, snapshot->binding.size, snapshot->binding.hash, binding->size,
                  binding->hash);
        snapshot_free(snapshot);
        errno = EINVAL;
        return -1;
    }
    /* Well formed and sealed is not yet sane: a value no capture writes
     * (an index past its pass...) refuses the whole snapshot. */
    char range_error[320];
    if (snapshot_check_ranges(snapshot, range_error, sizeof range_error) != 0) {
        error_message(error, error_size, "snapshot file '%s/%s': %s", directory, name, range_error);
        snapshot_free(snapshot);
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int job_record_save(const char *directory, const struct adaptdl_job_record *record, char *error,
                    size_t error_size)
{
    return state_save(directory, JOB_RECORD_FILE_NAME, &job_record_schema, record, error,
                      error_size);
}

int job_record_load(const char *directory, struct adaptdl_job_record *record, char *error,
                    size_t error_size)
{
    int result = state_load(directory, JOB_RECORD_FILE_NAME, &job_record_schema, record, error,
                            error_size);
    if (result != 0)
        job_record_init(record);
    return result;
}
