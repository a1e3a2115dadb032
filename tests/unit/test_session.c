/* test_session.c - the commit decision for a checkpoint descriptor's close
 * (session_close_commits, SPEC §5): only a descriptor that still refers to
 * the file it was opened on commits. */
#include <criterion/criterion.h>

#include "session.h"

Test(session, a_close_on_the_file_opened_commits)
{
    struct file_identity opened = {.device = 2049, .inode = 77};
    struct file_identity now = opened;
    cr_expect(session_close_commits(&opened, &now));
}

Test(session, a_number_reused_for_another_file_never_commits)
{
    struct file_identity opened = {.device = 2049, .inode = 77};
    struct file_identity pipe = {.device = 13, .inode = 77};
    struct file_identity other = {.device = 2049, .inode = 78};
    cr_expect_not(session_close_commits(&opened, &pipe));
    cr_expect_not(session_close_commits(&opened, &other));
}

Test(session, an_unknown_file_never_commits)
{
    struct file_identity opened = {.device = 2049, .inode = 77};
    cr_expect_not(session_close_commits(&opened, NULL), "fstat failed: not a commit");
    cr_expect_not(session_close_commits(NULL, &opened));
}
