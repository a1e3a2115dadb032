/* test_real_functions.c - a function the shim wraps but cannot find after
 * itself is never called through a NULL pointer (shim/real_functions.h):
 * an optional one fails with ENOSYS after one line naming it, a required one
 * aborts after one line.  The situation is made real by preloading libc
 * ahead of the shim, so that the shim's dlsym(RTLD_NEXT) finds nothing;
 * tests/tools/real_probe reaches the shim's own definitions. */
#include <criterion/criterion.h>
#include <signal.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* LD_PRELOAD with this process's libc first, then the shim. */
static char *preload_behind_libc(void)
{
    Dl_info info;
    cr_assert(dladdr((void *)printf, &info) != 0 && info.dli_fname != NULL);
    char *setting = NULL;
    if (asprintf(&setting, "LD_PRELOAD=%s %s", info.dli_fname,
                 harness_build_path("libadaptshim.so")) < 0)
        abort();
    return setting;
}

static void run_probe(struct run_result *result, const char *policy)
{
    char *setting = preload_behind_libc();
    char *environment[] = {setting, NULL};
    char *probe = strdup(harness_build_path("tools/real_probe"));
    char *library = strdup(harness_build_path("libadaptshim.so"));
    char *argv[] = {probe, (char *)policy, library, NULL};
    harness_run(result, argv, environment, false, 20);
    free(probe);
    free(library);
    free(setting);
}

static void expect_one_line(const char *text)
{
    const char *newline = strchr(text, '\n');
    cr_expect(newline != NULL && newline[1] == '\0', "exactly one line on stderr: [%s]", text);
}

/* Regression: the wrapper called the missing function through its NULL
 * pointer (status 139). */
Test(real_functions, a_missing_optional_function_fails_with_enosys_after_one_line)
{
    struct run_result result;
    run_probe(&result, "optional");
    cr_expect_eq(result.status, 0, "status %d, stderr %s", result.status, result.err);
    cr_expect_str_eq(result.out, "statx -1 38\nstatx -1 38\n");  /* ENOSYS, both calls */
    cr_expect(strstr(result.err, "adaptshim: statx is not in this C library") != NULL, "%s",
              result.err);
    cr_expect(strstr(result.err, "ENOSYS") != NULL, "%s", result.err);
    expect_one_line(result.err);   /* once per function, not per call */
    run_result_free(&result);
}

Test(real_functions, a_missing_required_function_aborts_after_one_line)
{
    struct run_result result;
    run_probe(&result, "required");
    cr_expect_eq(result.status, HARNESS_KILLED_BY(SIGABRT), "SIGABRT expected, status %d, stderr %s",
                 result.status, result.err);
    cr_expect_str_eq(result.out, "");
    cr_expect(strstr(result.err, "adaptshim: cannot run without the C library's close") != NULL,
              "%s", result.err);
    expect_one_line(result.err);
    run_result_free(&result);
}

/* MPI's functions are looked up the same way, at the first MPI call: a
 * process without any MPI library that reaches the shim's MPI_Barrier (here
 * through dlsym) stops with one line naming the function.  Regression: it
 * jumped to address 0. */
Test(real_functions, an_mpi_call_without_an_mpi_library_aborts_after_one_line)
{
    char *environment[] = {"ADAPTDL_LOG=info", NULL};
    char *probe = strdup(harness_build_path("tools/real_probe"));
    char *argv[] = {probe, "mpi", NULL};
    struct run_result result;
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, HARNESS_KILLED_BY(SIGABRT), "SIGABRT expected, status %d, stderr %s",
                 result.status, result.err);
    cr_expect_str_eq(result.out, "");
    cr_expect(strstr(result.err, "adaptshim: MPI_Barrier was called, but no MPI library") !=
                  NULL, "%s", result.err);
    expect_one_line(result.err);
    run_result_free(&result);
    free(probe);
}
