/* state_files.h - what the state store's files share: paths, the clock,
 * names of snapshot files (state_files.c). */
#ifndef ADAPTSHIM_STATE_FILES_H
#define ADAPTSHIM_STATE_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* State files are a few kilobytes; refuse to slurp anything absurd. */
#define STATE_FILE_MAX_SIZE ((uint64_t)1 << 30)
#define SNAPSHOT_FILE_PREFIX "snapshot-"
#define SNAPSHOT_FILE_SUFFIX ".msgpack"
/* Longest snapshot name: two 20-digit numbers worth of room and the affixes. */
#define SNAPSHOT_FILE_NAME_SIZE 80

/* Joins directory and name; -1 with ENAMETOOLONG when it does not fit. */
int state_file_join_path(char *path, size_t path_size, const char *directory, const char *name);
/* True for name[0, length) of the form snapshot-*.msgpack. */
bool state_file_is_snapshot_name(const char *name, size_t length);

#endif
