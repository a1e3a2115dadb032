/* test_reader_processes.c - the set of processes that delivered records of
 * a pass (runtime/reader_processes.h): workers that were reaped finish the
 * loop, the caller's own reads do not count, a running worker or a full
 * set keeps it going, and the cached id of the calling process is renewed
 * in a forked child. */
#include <criterion/criterion.h>

#include <sys/wait.h>
#include <unistd.h>

#include "reader_processes.h"

static pid_t reaped_child(void)
{
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0)
        _exit(0);
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    return child;
}

Test(reader_processes, an_empty_set_or_the_caller_alone_is_no_finished_loop)
{
    struct reader_processes readers;
    reader_processes_reset(&readers);
    cr_expect(!reader_processes_others_exited(&readers, getpid()));
    reader_processes_add(&readers, getpid());
    cr_expect(!reader_processes_others_exited(&readers, getpid()), "workers=0");
}

Test(reader_processes, reaped_workers_finish_the_loop_whatever_the_caller_read)
{
    struct reader_processes readers;
    reader_processes_reset(&readers);
    reader_processes_add(&readers, reaped_child());
    reader_processes_add(&readers, reaped_child());
    cr_expect(reader_processes_others_exited(&readers, getpid()));
    reader_processes_add(&readers, getpid());   /* the trainer peeked at dataset[0] */
    reader_processes_add(&readers, getpid());
    cr_expect_eq(readers.count, 3, "each process once");
    cr_expect(reader_processes_others_exited(&readers, getpid()));
}

Test(reader_processes, a_running_worker_keeps_the_loop_going)
{
    struct reader_processes readers;
    reader_processes_reset(&readers);
    reader_processes_add(&readers, reaped_child());
    reader_processes_add(&readers, getppid());   /* a process that surely runs */
    cr_expect(!reader_processes_others_exited(&readers, getpid()));
}

Test(reader_processes, a_full_set_keeps_the_loop_going)
{
    struct reader_processes readers;
    reader_processes_reset(&readers);
    pid_t gone = reaped_child();
    for (int i = 0; i < READER_PROCESSES_MAX; i++)
        reader_processes_add(&readers, gone + 100000 + i);   /* never running */
    cr_expect(!readers.overflowed);
    cr_expect(reader_processes_others_exited(&readers, getpid()));
    reader_processes_add(&readers, gone + 200000);
    cr_expect(readers.overflowed);
    cr_expect(!reader_processes_others_exited(&readers, getpid()),
              "an unnamed reader may be running");
}

Test(reader_processes, the_cached_id_is_renewed_after_fork)
{
    cr_assert_eq(reader_process_self(), getpid());
    int pipe_ends[2];
    cr_assert_eq(pipe(pipe_ends), 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        char same = reader_process_self() == getpid() ? 'y' : 'n';
        _exit(write(pipe_ends[1], &same, 1) == 1 ? 0 : 1);
    }
    char answer = 0;
    cr_assert_eq(read(pipe_ends[0], &answer, 1), 1);
    waitpid(child, NULL, 0);
    cr_expect_eq(answer, 'y');
    cr_expect_eq(reader_process_self(), getpid());
    close(pipe_ends[0]);
    close(pipe_ends[1]);
}

/* reader_processes_only: the caller alone delivered the pass's records, so
 * its closing every descriptor (not workers exiting) is what ends the loop. */
Test(reader_processes, only_the_caller_is_a_set_of_exactly_the_caller)
{
    struct reader_processes readers;
    reader_processes_reset(&readers);
    pid_t self = getpid();
    cr_expect_not(reader_processes_only(&readers, self), "nobody read");
    reader_processes_add(&readers, self);
    cr_expect(reader_processes_only(&readers, self));
    reader_processes_add(&readers, self);
    cr_expect(reader_processes_only(&readers, self), "the caller counted once");
    cr_expect_not(reader_processes_only(&readers, self + 1), "another process asks");
    reader_processes_add(&readers, reaped_child());
    cr_expect_not(reader_processes_only(&readers, self), "a worker read too, even one gone");

    reader_processes_reset(&readers);
    reader_processes_add(&readers, reaped_child());
    cr_expect_not(reader_processes_only(&readers, self), "only a worker read");
}

Test(reader_processes, a_full_set_is_never_only_the_caller)
{
    struct reader_processes readers;
    reader_processes_reset(&readers);
    pid_t self = getpid();
    reader_processes_add(&readers, self);
    for (int i = 1; i <= READER_PROCESSES_MAX; i++)
        reader_processes_add(&readers, self + 100000 + i);
    cr_assert(readers.overflowed);
    cr_expect_not(reader_processes_only(&readers, self), "an unnamed reader may exist");
}
