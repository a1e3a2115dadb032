/* state_files.h - the state directory and its files (state_files.c):
 * paths, snapshot file names, preparing the directory, removing what killed
 * writers left behind, atomic writes and whole-file reads.
 *
 * Who includes it: state_store.h (which passes it on to the store's
 * callers) and the store's own files.  It knows nothing of what the files
 * hold and includes nothing of the project's: including state_store.h here
 * would make the store and its files depend on each other. */
#ifndef ADAPTSHIM_STATE_FILES_H
#define ADAPTSHIM_STATE_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* State files are a few kilobytes; refuse to slurp anything absurd. */
#define STATE_FILE_MAX_SIZE ((uint64_t)1 << 30)
#define JOB_RECORD_FILE_NAME "job.msgpack"
#define SNAPSHOT_FILE_PREFIX "snapshot-"
#define SNAPSHOT_FILE_SUFFIX ".msgpack"
/* Longest snapshot name: two 20-digit numbers worth of room and the affixes. */
#define SNAPSHOT_FILE_NAME_SIZE 80

/* Joins directory and name; -1 with ENAMETOOLONG when it does not fit. */
int state_file_join_path(char *path, size_t path_size, const char *directory, const char *name);
/* True for name[0, length) of the form snapshot-*.msgpack. */
bool state_file_is_snapshot_name(const char *name, size_t length);

/* Creates the state directory if its parent exists, proves it writable and
 * removes the leftovers of killed writers (state_directory_remove_leftovers).
 * -1 with a message. */
int state_directory_prepare(const char *directory, char *error, size_t error_size);

/* Temp files and writability probes younger than this may belong to a write
 * in flight (on any host sharing the directory); older ones are leftovers of
 * a writer that was killed between creating and renaming them. */
#define STATE_LEFTOVER_GRACE_SECONDS 600.0

/* Removes the temp files (".NAME.tmp.PID.N") and probes (".adaptshim-probe.PID.N")
 * of this module's writers whose modification time is older than the grace
 * period at `now` (Unix seconds); nothing else in the directory is touched.
 * Returns how many were removed, or -1 with a message when the directory
 * cannot be listed. */
int state_directory_remove_leftovers(const char *directory, double now, char *error,
                                     size_t error_size);

/* Atomic write of `name` inside `directory`: temp file, fsync, rename, fsync
 * of the directory.  The previous file stays intact until the rename. */
int state_file_write_atomic(const char *directory, const char *name, const void *data,
                            size_t size, char *error, size_t error_size);
/* Reads a whole file; *data is malloc'd.  -1 with a message (ENOENT kept in errno). */
int state_file_read(const char *directory, const char *name, void **data, size_t *size,
                    char *error, size_t error_size);

#endif
