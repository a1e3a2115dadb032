/* test_state_files.c - what the state store's files share
 * (runtime/state_files.h): joining the state directory and a file name
 * into a path that must never be cut silently (a cut path would write or
 * remove another file), the wall clock snapshots record their creation
 * with (pruning compares it with its grace period), and which names are
 * snapshot files (pruning and the removal of leftovers go by it).  The
 * directory's files themselves are tested in test_state_store.c. */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include "state_files.h"

Test(state_files, a_path_is_the_directory_a_slash_and_the_name)
{
    char path[64];
    cr_assert_eq(state_file_join_path(path, sizeof path, "/run/state", "job.msgpack"), 0);
    cr_expect_str_eq(path, "/run/state/job.msgpack");
    cr_assert_eq(state_file_join_path(path, sizeof path, "", "snapshot-1.msgpack"), 0);
    cr_expect_str_eq(path, "/snapshot-1.msgpack", "an empty directory is the root");
}

Test(state_files, a_path_that_does_not_fit_is_enametoolong_never_cut)
{
    char path[16];
    memset(path, 0, sizeof path);
    /* "/d/" + 12 = 15 characters and the NUL: just fits */
    cr_assert_eq(state_file_join_path(path, sizeof path, "/d", "abcdefghijkl"), 0);
    cr_expect_str_eq(path, "/d/abcdefghijkl");
    errno = 0;
    cr_expect_eq(state_file_join_path(path, sizeof path, "/d", "abcdefghijklm"), -1,
                 "one byte more");
    cr_expect_eq(errno, ENAMETOOLONG, "errno %d", errno);
    errno = 0;
    cr_expect_eq(state_file_join_path(path, 1, "/d", "x"), -1);
    cr_expect_eq(errno, ENAMETOOLONG);
}

static bool is_snapshot_name(const char *name)
{
    return state_file_is_snapshot_name(name, strlen(name));
}

Test(state_files, snapshot_names_are_snapshot_star_msgpack)
{
    cr_expect(is_snapshot_name("snapshot-00000000000000000005-1f2e3d4c5b6a7988.msgpack"));
    cr_expect(is_snapshot_name("snapshot-x.msgpack"));
    cr_expect_not(is_snapshot_name("snapshot-.msgpack"), "nothing between the affixes");
    cr_expect_not(is_snapshot_name("snapshot.msgpack"));
    cr_expect_not(is_snapshot_name("job.msgpack"));
    cr_expect_not(is_snapshot_name("snapshot-1.msgpack.tmp"), "a temp file");
    cr_expect_not(is_snapshot_name(".snapshot-1.msgpack.tmp"));
    cr_expect_not(is_snapshot_name("Snapshot-1.msgpack"), "case matters");
    cr_expect_not(is_snapshot_name("snapshot-1.msgpac"));
    cr_expect_not(is_snapshot_name(""));
    cr_expect_not(is_snapshot_name("snap"), "shorter than the affixes");
}

Test(state_files, a_snapshot_name_is_judged_on_its_length_not_its_nul)
{
    /* the leftover check passes the inner part of ".NAME.tmp" */
    static const char temp[] = ".snapshot-7.msgpack.tmp";
    cr_expect(state_file_is_snapshot_name(temp + 1, strlen("snapshot-7.msgpack")));
    cr_expect_not(state_file_is_snapshot_name(temp + 1, strlen(temp + 1)));
    cr_expect_not(state_file_is_snapshot_name("snapshot-7.msgpack", 17), "one byte short");
    cr_expect_not(state_file_is_snapshot_name("snapshot-7.msgpack", 0));
}
