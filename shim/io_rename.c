/* io_rename.c - a rename onto a checkpoint name commits the checkpoint.
 * The snapshot is bound to the source's content and written *before* the
 * rename, so no crash point leaves a checkpoint without its snapshot. */
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "fault_injection.h"
#include "real_functions.h"
#include "shim.h"

/* 0: go on with the rename; -1 with errno: the snapshot could not be
 * written, so the rename must not happen (the trainer's previous checkpoint
 * stays the one that resumes).  *commits says whether it was a commit. */
static int shim_before_rename(int from_dirfd, const char *from, int to_dirfd, const char *to,
                              bool *commits)
{
    *commits = false;
    if (!shim_paths_active())
        return 0;
    char absolute_to[PATH_MAX];
    const char *absolute = shim_absolute_path(to_dirfd, to, absolute_to,
                                              sizeof absolute_to) == 0 ? absolute_to : NULL;
    if (absolute == NULL || !session_match_save(&shim_session, to, absolute))
        return 0;
    char absolute_from[PATH_MAX];
    if (shim_absolute_path(from_dirfd, from, absolute_from, sizeof absolute_from) != 0)
        return 0;
    *commits = true;
    return shim_commit_checkpoint_path(absolute_from, absolute_to);
}

/* The rename of a commit is done: the test build's last kill point. */
static int shim_after_rename(int result, bool commits)
{
    if (result == 0 && commits)
        fault_injection_reach(FAULT_AFTER_RENAME);
    return result;
}

SHIM_EXPORT int rename(const char *from, const char *to)
{
    bool commits;
    if (shim_before_rename(AT_FDCWD, from, AT_FDCWD, to, &commits) != 0)
        return -1;
    return shim_after_rename(REAL(rename)(from, to), commits);
}

SHIM_EXPORT int renameat(int from_dirfd, const char *from, int to_dirfd, const char *to)
{
    bool commits;
    if (shim_before_rename(from_dirfd, from, to_dirfd, to, &commits) != 0)
        return -1;
    return shim_after_rename(REAL(renameat)(from_dirfd, from, to_dirfd, to), commits);
}

SHIM_EXPORT int renameat2(int from_dirfd, const char *from, int to_dirfd, const char *to,
                          unsigned int flags)
{
    bool commits;
    if (shim_before_rename(from_dirfd, from, to_dirfd, to, &commits) != 0)
        return -1;
    return shim_after_rename(REAL(renameat2)(from_dirfd, from, to_dirfd, to, flags), commits);
}
