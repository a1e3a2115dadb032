/* config_paths.h - the settings checked against the start-up directory and
 * the file system, once config_parse (pure, config.h) has read them: paths
 * whose directory does not exist, and ADAPTDL_DATA entries that turn out to
 * be one glob once made absolute.  The shim runs these at start-up, after
 * the state directory is prepared (a hints file may live in it). */
#ifndef ADAPTSHIM_CONFIG_PATHS_H
#define ADAPTSHIM_CONFIG_PATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The errors, first found first: two ADAPTDL_DATA entries whose globs are
 * the same once made absolute against cwd (the start-up directory; NULL
 * when unknown: relative globs are then taken as written); an ADAPTDL_DATA
 * glob whose fixed directory (glob_pattern_fixed_directory) does not exist
 * or is no directory (data is in place before a job starts); on rank 0,
 * which writes it, an ADAPTDL_HINTS_FILE whose directory does not exist.
 * 0, or -1 with one line naming the variable, the value and what is
 * accepted.  A directory that cannot be looked at (EACCES...) is no error:
 * the trainer may see it with other rights. */
int config_check_paths(const struct adaptdl_config *config, const char *cwd, char *error,
                       size_t error_size);

/* The trainer often creates its checkpoint directory itself, so an
 * ADAPTDL_SAVE glob whose fixed directory does not exist yet is a warning,
 * not an error: true with one line in message saying so. */
bool config_describe_missing_save_directory(const struct adaptdl_config *config,
                                            const char *cwd, char *message,
                                            size_t message_size);

#endif
