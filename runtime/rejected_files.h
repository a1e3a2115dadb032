/* rejected_files.h - data files whose registration failed (a size that is
 * not header plus whole records, a line file without its last newline),
 * remembered by identity and version: a stat() then an open() of the same
 * broken file report it once, and each later attempt fails the same way at
 * once.  A file changed since (another size or modification time) is
 * tried again.  The set is small and forgets its oldest entries. */
#ifndef ADAPTSHIM_REJECTED_FILES_H
#define ADAPTSHIM_REJECTED_FILES_H

#include <stdbool.h>
#include <stdint.h>

#define REJECTED_FILES_MAX 64

struct file_version {
    uint64_t device, inode, size;
    int64_t modified_seconds, modified_nanoseconds;
};

struct rejected_files {
    struct file_version versions[REJECTED_FILES_MAX];
    unsigned count;               /* ever remembered; the newest 64 are kept */
};

bool rejected_files_contains(const struct rejected_files *rejected,
                             const struct file_version *version);
void rejected_files_remember(struct rejected_files *rejected, const struct file_version *version);

#endif
