/* test_rejected_files.c - data files whose registration failed
 * (runtime/rejected_files.h): the same version is known, a changed file
 * (size, modification time) or another file is not, and the oldest of
 * more than REJECTED_FILES_MAX entries are forgotten. */
#include <criterion/criterion.h>

#include <string.h>

#include "rejected_files.h"

static struct file_version version_of(uint64_t inode, uint64_t size, int64_t seconds)
{
    return (struct file_version){.device = 2049, .inode = inode, .size = size,
                                 .modified_seconds = seconds, .modified_nanoseconds = 7};
}

Test(rejected_files, the_same_version_is_known_a_changed_file_is_not)
{
    struct rejected_files rejected;
    memset(&rejected, 0, sizeof rejected);
    struct file_version broken = version_of(5, 1001, 100);
    cr_expect(!rejected_files_contains(&rejected, &broken));
    rejected_files_remember(&rejected, &broken);
    cr_expect(rejected_files_contains(&rejected, &broken));
    struct file_version grown = version_of(5, 1016, 100);
    struct file_version touched = version_of(5, 1001, 101);
    struct file_version other = version_of(6, 1001, 100);
    cr_expect(!rejected_files_contains(&rejected, &grown), "fixed since: try again");
    cr_expect(!rejected_files_contains(&rejected, &touched));
    cr_expect(!rejected_files_contains(&rejected, &other));
}

Test(rejected_files, the_oldest_entries_are_forgotten)
{
    struct rejected_files rejected;
    memset(&rejected, 0, sizeof rejected);
    for (uint64_t inode = 0; inode < REJECTED_FILES_MAX + 3; inode++) {
        struct file_version version = version_of(inode, 10, 1);
        rejected_files_remember(&rejected, &version);
    }
    struct file_version first = version_of(0, 10, 1), newest = version_of(REJECTED_FILES_MAX + 2, 10, 1);
    cr_expect(!rejected_files_contains(&rejected, &first));
    cr_expect(rejected_files_contains(&rejected, &newest));
}
