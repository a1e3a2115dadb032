/* rejected_files.c - data files whose registration failed (see
 * rejected_files.h). */
#include "rejected_files.h"

static bool file_version_equal(const struct file_version *a, const struct file_version *b)
{
    return a->device == b->device && a->inode == b->inode && a->size == b->size &&
           a->modified_seconds == b->modified_seconds &&
           a->modified_nanoseconds == b->modified_nanoseconds;
}

bool rejected_files_contains(const struct rejected_files *rejected,
                             const struct file_version *version)
{
    unsigned kept = rejected->count < REJECTED_FILES_MAX ? rejected->count : REJECTED_FILES_MAX;
    for (unsigned i = 0; i < kept; i++)
        if (file_version_equal(&rejected->versions[i], version))
            return true;
    return false;
}

void rejected_files_remember(struct rejected_files *rejected, const struct file_version *version)
{
    rejected->versions[rejected->count++ % REJECTED_FILES_MAX] = *version;
}
