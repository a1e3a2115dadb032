/* path_normalize.h - absolute paths built lexically, as adaptshim(7) "ENVIRONMENT" matches
 * them: the ADAPTDL_DATA and ADAPTDL_SAVE globs are matched against the
 * path the trainer passed and against its absolute form.  "." and ".."
 * are resolved by text, not by following symbolic links (the trainer named
 * the file through its own path; a glob over that path must match it). */
#ifndef ADAPTSHIM_PATH_NORMALIZE_H
#define ADAPTSHIM_PATH_NORMALIZE_H

#include <stddef.h>

/* Writes into out the absolute form of `path` relative to `base` (itself
 * absolute; ignored when path is absolute), with empty, "." and ".."
 * components resolved ("/" has no parent).  0, or -1 when it does not fit. */
int path_normalize_absolute(const char *base, const char *path, char *out, size_t out_size);

#endif
