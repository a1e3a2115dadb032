/* test_shared_stop_flag.c - a stop pending in the start process, seen by its
 * forked children (runtime/shared_stop_flag.h).
 *
 * The flag starts lowered; only the process that mapped it can raise it (a
 * child's own stop must not look like its parent's); a child forked before
 * the raise sees it, which is the case of a DataLoader worker whose parent
 * is told to stop while the worker runs. */
#include <criterion/criterion.h>

#include <sys/wait.h>
#include <unistd.h>

#include "shared_stop_flag.h"

Test(shared_stop_flag, starts_lowered_and_is_raised_by_its_owner)
{
    struct shared_stop_flag *flag = shared_stop_flag_create();
    cr_assert_not_null(flag);
    cr_expect_eq(shared_stop_flag_raiser(flag), 0);
    shared_stop_flag_raise(flag, getpid());
    cr_expect_eq(shared_stop_flag_raiser(flag), getpid());
    shared_stop_flag_destroy(flag);
}

Test(shared_stop_flag, another_process_cannot_raise_it)
{
    struct shared_stop_flag *flag = shared_stop_flag_create();
    cr_assert_not_null(flag);
    shared_stop_flag_raise(flag, getpid() + 1);
    cr_expect_eq(shared_stop_flag_raiser(flag), 0);
    shared_stop_flag_destroy(flag);
}

Test(shared_stop_flag, a_null_flag_is_never_raised)
{
    shared_stop_flag_raise(NULL, getpid());
    cr_expect_eq(shared_stop_flag_raiser(NULL), 0);
    shared_stop_flag_destroy(NULL);
}

/* The child waits on a pipe until the parent has raised the flag, then
 * reports through its exit status whether it saw the raise. */
Test(shared_stop_flag, a_child_forked_before_the_raise_sees_it)
{
    struct shared_stop_flag *flag = shared_stop_flag_create();
    cr_assert_not_null(flag);
    pid_t parent = getpid();
    int go[2];
    cr_assert_eq(pipe(go), 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        char byte;
        close(go[1]);
        if (read(go[0], &byte, 1) != 1)
            _exit(3);
        /* the child's own raise changes nothing */
        shared_stop_flag_raise(flag, getpid());
        _exit(shared_stop_flag_raiser(flag) == parent ? 0 : 1);
    }
    close(go[0]);
    shared_stop_flag_raise(flag, parent);
    cr_assert_eq(write(go[1], "x", 1), 1);
    close(go[1]);
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's view: status %d",
              status);
    shared_stop_flag_destroy(flag);
}
