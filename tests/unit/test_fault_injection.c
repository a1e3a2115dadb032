/* test_fault_injection.c - the kill points of the chaos tests' build
 * (runtime/fault_injection.h).
 *
 * The product library compiles fault_injection_reach to nothing (the chaos
 * integration test checks that it never reads ADAPTSHIM_FAULT), so this file
 * compiles the test build's version itself, with the macro that build uses.
 * Each case runs in a forked child, since the setting is read once per
 * process: ADAPTSHIM_FAULT=commit:N:POINT kills with SIGKILL at the N-th
 * arrival at POINT, after one line on stderr, and at no other point or
 * arrival; no setting arms nothing; a malformed one stops the process with
 * status 2 and a message naming it, rather than running on unarmed. */
#define ADAPTSHIM_FAULT_INJECTION 1
#include "../../runtime/fault_injection.c"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct fault_run {
    int status;           /* from waitpid */
    char stderr_text[512];
    unsigned reached;     /* arrivals the child survived */
};

/* Forks a child that sets ADAPTSHIM_FAULT (NULL: unset) and reaches the
 * points in order, telling the parent after each one it survives. */
static void run_points(const char *setting, const enum fault_point *points, size_t count,
                       struct fault_run *run)
{
    int errors[2], progress[2];
    cr_assert_eq(pipe(errors), 0);
    cr_assert_eq(pipe(progress), 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        close(errors[0]);
        close(progress[0]);
        dup2(errors[1], STDERR_FILENO);
        if (setting == NULL)
            unsetenv("ADAPTSHIM_FAULT");
        else
            setenv("ADAPTSHIM_FAULT", setting, 1);
        for (size_t i = 0; i < count; i++) {
            fault_injection_reach(points[i]);
            (void)!write(progress[1], "+", 1);
        }
        _exit(0);
    }
    close(errors[1]);
    close(progress[1]);
    memset(run, 0, sizeof *run);
    char mark;
    while (read(progress[0], &mark, 1) == 1)
        run->reached++;
    size_t used = 0;
    ssize_t got;
    while (used + 1 < sizeof run->stderr_text &&
           (got = read(errors[0], run->stderr_text + used,
                       sizeof run->stderr_text - 1 - used)) > 0)
        used += (size_t)got;
    run->stderr_text[used] = '\0';
    close(errors[0]);
    close(progress[0]);
    cr_assert_eq(waitpid(child, &run->status, 0), child);
}

static bool killed(const struct fault_run *run)
{
    return WIFSIGNALED(run->status) && WTERMSIG(run->status) == SIGKILL;
}

static bool exited_with(const struct fault_run *run, int code)
{
    return WIFEXITED(run->status) && WEXITSTATUS(run->status) == code;
}

Test(fault_injection, the_n_th_arrival_at_the_point_kills)
{
    static const enum fault_point points[] = {
        FAULT_BEFORE_SNAPSHOT, FAULT_SNAPSHOT_TEMP, FAULT_AFTER_SNAPSHOT, FAULT_AFTER_RENAME,
        FAULT_BEFORE_SNAPSHOT, FAULT_SNAPSHOT_TEMP, FAULT_AFTER_SNAPSHOT, FAULT_AFTER_RENAME,
    };
    struct fault_run run;
    run_points("commit:2:after-snapshot", points, 8, &run);
    cr_expect(killed(&run), "status %#x", run.status);
    cr_expect_eq(run.reached, 6, "other points and the first arrival pass");
    cr_expect_str_eq(run.stderr_text, "adaptshim: fault injected: commit 2 after-snapshot\n");

    run_points("commit:1:before-snapshot", points, 8, &run);
    cr_expect(killed(&run));
    cr_expect_eq(run.reached, 0, "the very first arrival");
    cr_expect_str_eq(run.stderr_text, "adaptshim: fault injected: commit 1 before-snapshot\n");

    run_points("commit:3:after-rename", points, 8, &run);
    cr_expect(exited_with(&run, 0), "two arrivals only: status %#x", run.status);
    cr_expect_eq(run.reached, 8);
    cr_expect_str_empty(run.stderr_text);
}

Test(fault_injection, every_point_has_its_name)
{
    static const struct {
        const char *setting;
        enum fault_point point;
        const char *name;
    } cases[] = {
        {"commit:1:before-snapshot", FAULT_BEFORE_SNAPSHOT, "before-snapshot"},
        {"commit:1:snapshot-temp", FAULT_SNAPSHOT_TEMP, "snapshot-temp"},
        {"commit:1:after-snapshot", FAULT_AFTER_SNAPSHOT, "after-snapshot"},
        {"commit:1:after-rename", FAULT_AFTER_RENAME, "after-rename"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fault_run run;
        run_points(cases[i].setting, &cases[i].point, 1, &run);
        cr_expect(killed(&run), "%s", cases[i].setting);
        cr_expect_not_null(strstr(run.stderr_text, cases[i].name), "%s: %s", cases[i].setting,
                           run.stderr_text);
    }
}

Test(fault_injection, no_setting_arms_nothing)
{
    static const enum fault_point points[] = {FAULT_BEFORE_SNAPSHOT, FAULT_SNAPSHOT_TEMP,
                                              FAULT_AFTER_SNAPSHOT, FAULT_AFTER_RENAME};
    const char *settings[] = {NULL, ""};
    for (size_t i = 0; i < 2; i++) {
        struct fault_run run;
        run_points(settings[i], points, 4, &run);
        cr_expect(exited_with(&run, 0), "setting %zu: status %#x", i, run.status);
        cr_expect_eq(run.reached, 4);
        cr_expect_str_empty(run.stderr_text);
    }
}

Test(fault_injection, a_malformed_setting_stops_the_process)
{
    static const char *const malformed[] = {
        "commit:0:after-rename", "commit:-1:after-rename", "commit:x:after-rename",
        "commit::after-rename",  "commit:1",              "commit:1:nowhere",
        "commit:1:after-rename ", "rename:1:after-rename", "1:after-rename",
        "commit:1after-rename",
    };
    static const enum fault_point point = FAULT_AFTER_RENAME;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        struct fault_run run;
        run_points(malformed[i], &point, 1, &run);
        cr_expect(exited_with(&run, 2), "\"%s\": status %#x", malformed[i], run.status);
        cr_expect_eq(run.reached, 0, "\"%s\"", malformed[i]);
        cr_expect_not_null(strstr(run.stderr_text, malformed[i]), "names \"%s\": %s",
                           malformed[i], run.stderr_text);
        cr_expect_not_null(strstr(run.stderr_text, "is not commit:N:POINT"), "%s",
                           run.stderr_text);
    }
}
