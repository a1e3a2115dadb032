/* config_paths.c - the settings checked against the start-up directory and
 * the file system (see config_paths.h).  Every path is looked at through
 * runtime_sysio, never through the shim's own wrappers. */
#include "config_paths.h"
#include "config_text.h"
#include "error_message.h"
#include "glob_pattern.h"
#include "path_normalize.h"
#include "sysio.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define COUNT_OF CONFIG_COUNT_OF

enum directory_state {
    DIRECTORY_PRESENT,
    DIRECTORY_MISSING,
    DIRECTORY_NOT_A_DIRECTORY,
    DIRECTORY_UNKNOWN,   /* cannot be looked at: no claim either way */
};

/* What a message says about a directory in each state that is a problem. */
static const struct {
    enum directory_state state;
    const char *phrase;
} directory_phrases[] = {
    {DIRECTORY_MISSING, "does not exist"},
    {DIRECTORY_NOT_A_DIRECTORY, "is not a directory"},
};

static const char *describe_directory_state(enum directory_state state)
{
    for (size_t i = 0; i < COUNT_OF(directory_phrases); i++)
        if (directory_phrases[i].state == state)
            return directory_phrases[i].phrase;
    return "cannot be looked at";
}

/* directory made absolute against cwd for messages and stat (as the kernel
 * would resolve it: joined, not normalized, so that symbolic links behave
 * as they will for the trainer).  An empty directory is cwd itself.  -1
 * when it does not fit. */
static int join_with_cwd(const char *directory, const char *cwd, char *out, size_t out_size)
{
    int length;

    if (directory[0] == '\0')
        length = snprintf(out, out_size, "%s", cwd != NULL ? cwd : ".");
    else if (directory[0] == '/' || cwd == NULL)
        length = snprintf(out, out_size, "%s", directory);
    else
        length = snprintf(out, out_size, "%s/%s", cwd, directory);
    return length < 0 || (size_t)length >= out_size ? -1 : 0;
}

static enum directory_state probe_directory(const char *path)
{
    struct stat status;

    if (runtime_sysio.stat(path, &status) == 0)
        return S_ISDIR(status.st_mode) ? DIRECTORY_PRESENT : DIRECTORY_NOT_A_DIRECTORY;
    if (errno == ENOENT)
        return DIRECTORY_MISSING;
    if (errno == ENOTDIR)
        return DIRECTORY_NOT_A_DIRECTORY;
    return DIRECTORY_UNKNOWN;
}

/* The fixed directory of a glob, absolute, and what state it is in;
 * DIRECTORY_UNKNOWN when the glob's directory is too long to look at. */
static enum directory_state probe_glob_directory(const char *glob, const char *cwd,
                                                 char *directory, size_t directory_size)
{
    char fixed[PATH_MAX];

    if (glob_pattern_fixed_directory(glob, fixed, sizeof fixed) != 0 ||
        join_with_cwd(fixed, cwd, directory, directory_size) != 0)
        return DIRECTORY_UNKNOWN;
    return probe_directory(directory);
}

/* Two globs that are one once made absolute ("data/a.bin" and
 * "$PWD/data/a.bin", "./a.bin" and "a.bin") match the same files through
 * the anchored form session_prepare_globs gives a relative glob; only the
 * first entry would apply.  Identical texts are config_parse_data's. */
static int check_distinct_anchored_globs(const struct adaptdl_config *config, const char *cwd,
                                         char *error, size_t error_size)
{
    char earlier_absolute[PATH_MAX], later_absolute[PATH_MAX];
    char earlier_quoted[QUOTED_SIZE], later_quoted[QUOTED_SIZE], absolute_quoted[QUOTED_SIZE];

    if (cwd == NULL)
        return 0;
    for (size_t later = 1; later < config->data_count; later++) {
        const char *later_glob = config->data[later].glob;
        if (path_normalize_absolute(cwd, later_glob, later_absolute, sizeof later_absolute) != 0)
            continue;
        for (size_t earlier = 0; earlier < later; earlier++) {
            const char *earlier_glob = config->data[earlier].glob;
            if (path_normalize_absolute(cwd, earlier_glob, earlier_absolute,
                                        sizeof earlier_absolute) != 0 ||
                strcmp(earlier_absolute, later_absolute) != 0)
                continue;
            return error_message(
                error, error_size,
                "ADAPTDL_DATA entries %zu (\"%s\") and %zu (\"%s\") are the same glob \"%s\" "
                "once made absolute against the start-up directory; accepted: each glob in one "
                "entry only, with all the keys its files need",
                earlier + 1,
                config_quote_for_message(earlier_quoted, sizeof earlier_quoted, earlier_glob,
                                         strlen(earlier_glob)),
                later + 1,
                config_quote_for_message(later_quoted, sizeof later_quoted, later_glob,
                                         strlen(later_glob)),
                config_quote_for_message(absolute_quoted, sizeof absolute_quoted,
                                         later_absolute, strlen(later_absolute)));
        }
    }
    return 0;
}

/* Data files are in place before a job starts: a glob under a directory
 * that does not exist is a typo in the path, and would match nothing. */
static int check_data_directories(const struct adaptdl_config *config, const char *cwd,
                                  char *error, size_t error_size)
{
    char directory[PATH_MAX];
    char glob_quoted[QUOTED_SIZE], directory_quoted[QUOTED_SIZE];

    for (size_t i = 0; i < config->data_count; i++) {
        const char *glob = config->data[i].glob;
        enum directory_state state = probe_glob_directory(glob, cwd, directory, sizeof directory);
        if (state == DIRECTORY_PRESENT || state == DIRECTORY_UNKNOWN)
            continue;
        return error_message(
            error, error_size,
            "ADAPTDL_DATA entry %zu (\"%s\"): its directory \"%s\" %s; accepted: a glob whose "
            "directory (the part before its first wildcard) exists when the job starts",
            i + 1, config_quote_for_message(glob_quoted, sizeof glob_quoted, glob, strlen(glob)),
            config_quote_for_message(directory_quoted, sizeof directory_quoted, directory,
                                     strlen(directory)),
            describe_directory_state(state));
    }
    return 0;
}

/* Rank 0 writes the hints file at each batch-size decision (hints_file.h),
 * replacing it through a file beside it: a missing directory would fail
 * every write, each with a warning, long after the start.  The other ranks
 * never write it, and on another host the directory may well be absent. */
static int check_hints_directory(const struct adaptdl_config *config, const char *cwd,
                                 char *error, size_t error_size)
{
    char parent[PATH_MAX], directory[PATH_MAX];
    char path_quoted[QUOTED_SIZE], directory_quoted[QUOTED_SIZE];
    const char *path = config->hints_file;

    if (path == NULL || config->replica_rank != 0)
        return 0;
    const char *last_slash = strrchr(path, '/');
    size_t parent_length = last_slash == NULL ? 0 : (size_t)(last_slash - path);
    if (last_slash == path)
        parent_length = 1; /* "/hints.json": the root */
    if (parent_length >= sizeof parent)
        return 0;
    memcpy(parent, path, parent_length);
    parent[parent_length] = '\0';
    if (join_with_cwd(parent, cwd, directory, sizeof directory) != 0)
        return 0;
    enum directory_state state = probe_directory(directory);
    if (state == DIRECTORY_PRESENT || state == DIRECTORY_UNKNOWN)
        return 0;
    return error_message(error, error_size,
                         "ADAPTDL_HINTS_FILE: the directory \"%s\" of \"%s\" %s; accepted: a "
                         "file path in an existing directory",
                         config_quote_for_message(directory_quoted, sizeof directory_quoted,
                                                  directory, strlen(directory)),
                         config_quote_for_message(path_quoted, sizeof path_quoted, path,
                                                  strlen(path)),
                         describe_directory_state(state));
}

int config_check_paths(const struct adaptdl_config *config, const char *cwd, char *error,
                       size_t error_size)
{
    if (check_distinct_anchored_globs(config, cwd, error, error_size) < 0 ||
        check_data_directories(config, cwd, error, error_size) < 0 ||
        check_hints_directory(config, cwd, error, error_size) < 0)
        return -1;
    return 0;
}

bool config_describe_missing_save_directory(const struct adaptdl_config *config,
                                            const char *cwd, char *message,
                                            size_t message_size)
{
    char directory[PATH_MAX];
    char glob_quoted[QUOTED_SIZE], directory_quoted[QUOTED_SIZE];
    const char *glob = config->save_glob;

    if (glob == NULL)
        return false;
    enum directory_state state = probe_glob_directory(glob, cwd, directory, sizeof directory);
    if (state == DIRECTORY_PRESENT || state == DIRECTORY_UNKNOWN)
        return false;
    snprintf(message, message_size,
             "ADAPTDL_SAVE: the directory \"%s\" of \"%s\" %s at start-up; unless the trainer "
             "creates it, no checkpoint matches and no snapshot is bound; accepted: a glob whose "
             "directory (the part before its first wildcard) exists or is created by the trainer",
             config_quote_for_message(directory_quoted, sizeof directory_quoted, directory,
                                      strlen(directory)),
             config_quote_for_message(glob_quoted, sizeof glob_quoted, glob, strlen(glob)),
             describe_directory_state(state));
    return true;
}
