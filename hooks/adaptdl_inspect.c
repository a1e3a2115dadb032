/* adaptdl_inspect.c - `adaptdl-inspect [--lib PATH] TRAINER`, the ELF
 * preflight behind `adaptdl-wrap --inspect` (adaptdl-wrap(1)).
 *
 * It finds the preload library, resolves TRAINER through PATH as execvp
 * would, prints the report of elf_inspect.c on standard output and turns
 * its verdict into the exit status:
 *
 *   0  everything the trainer reads through will be intercepted
 *   1  warnings: the report lists what will not be
 *   2  usage error, or a trainer or library that is missing, unreadable or
 *      not ELF (one line on standard error)
 *   3  refused: a static binary, which LD_PRELOAD cannot reach */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf_inspect.h"

enum {
    EXIT_INSPECT_OK = 0,
    EXIT_INSPECT_WARNINGS = 1,
    EXIT_INSPECT_USAGE_OR_ERROR = 2,
    EXIT_INSPECT_REFUSED = 3,
};

static const char usage_line[] = "usage: adaptdl-inspect [--lib PATH] TRAINER";

static void print_help(void)
{
    printf("%s\n\n"
           "Inspects TRAINER (a dynamically linked program, or a #! script whose\n"
           "interpreter is inspected instead) before it is run under libadaptshim.so:\n"
           "which file-input and MPI functions it imports, and which of them the shim\n"
           "intercepts, reads through its streams, or does not see.\n\n"
           "  --lib PATH   the preload library whose exports decide what is intercepted\n"
           "               (default: ADAPTDL_LIB, else libadaptshim.so beside this program,\n"
           "               else ../lib/libadaptshim.so relative to it)\n"
           "  -h, --help   this text\n\n"
           "TRAINER without a slash is looked up in PATH, as execvp does.\n\n"
           "Exit status: 0 everything it reads through is intercepted; 1 warnings (the\n"
           "report lists what is not); 2 usage error or a missing, unreadable or non-ELF\n"
           "file; 3 refused (statically linked: LD_PRELOAD cannot reach it).\n",
           usage_line);
}

/* Prints one line on standard error and returns the usage/error status. */
__attribute__((format(printf, 1, 2)))
static int fail(const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    fprintf(stderr, "adaptdl-inspect: ");
    vfprintf(stderr, format, arguments);
    fprintf(stderr, "\n");
    va_end(arguments);
    return EXIT_INSPECT_USAGE_OR_ERROR;
}

static bool copy_path(char *out, size_t out_size, const char *path)
{
    int written = snprintf(out, out_size, "%s", path);
    return written >= 0 && (size_t)written < out_size;
}

/* The default library: ADAPTDL_LIB, else beside this executable (the build
 * directory), else ../lib beside it (the installed layout, bin/ and lib/
 * under one prefix).  Returns 0, or the exit status after an error line
 * naming what was tried. */
static int find_default_library(char *out, size_t out_size)
{
    const char *from_environment = getenv("ADAPTDL_LIB");
    if (from_environment != NULL && from_environment[0] != '\0') {
        if (!copy_path(out, out_size, from_environment))
            return fail("ADAPTDL_LIB is longer than a path may be");
        if (access(out, F_OK) != 0)
            return fail("cannot find libadaptshim.so: ADAPTDL_LIB=%s: %s; fix it or pass --lib PATH",
                        from_environment, strerror(errno));
        return 0;
    }

    char self[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length < 0)
        return fail("cannot find libadaptshim.so: ADAPTDL_LIB is unset and /proc/self/exe "
                    "cannot be read (%s); pass --lib PATH",
                    strerror(errno));
    self[length] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return fail("cannot find libadaptshim.so: /proc/self/exe is %s; pass --lib PATH", self);
    *slash = '\0';  /* self is now this program's directory */

    char beside[PATH_MAX + 32];
    char installed[PATH_MAX + 32];
    snprintf(beside, sizeof beside, "%s/libadaptshim.so", self);
    char *parent_slash = strrchr(self, '/');
    if (parent_slash != NULL && parent_slash != self) {
        *parent_slash = '\0';
        snprintf(installed, sizeof installed, "%s/lib/libadaptshim.so", self);
    } else {
        snprintf(installed, sizeof installed, "/lib/libadaptshim.so");
    }

    const char *const candidates[] = {beside, installed};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (access(candidates[i], F_OK) == 0) {
            if (!copy_path(out, out_size, candidates[i]))
                return fail("%s: path too long", candidates[i]);
            return 0;
        }
    }
    return fail("cannot find libadaptshim.so: ADAPTDL_LIB is unset, tried %s and %s; "
                "pass --lib PATH",
                beside, installed);
}

int main(int argc, char **argv)
{
    const char *library_option = NULL;
    const char *trainer = NULL;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *argument = argv[i];
        if (!options_done && strcmp(argument, "--") == 0) {
            options_done = true;
        } else if (!options_done && (strcmp(argument, "-h") == 0 ||
                                     strcmp(argument, "--help") == 0)) {
            print_help();
            return EXIT_INSPECT_OK;
        } else if (!options_done && strcmp(argument, "--lib") == 0) {
            if (i + 1 >= argc)
                return fail("--lib needs a path; %s", usage_line);
            library_option = argv[++i];
        } else if (!options_done && strncmp(argument, "--lib=", 6) == 0) {
            library_option = argument + 6;
        } else if (!options_done && argument[0] == '-' && argument[1] != '\0') {
            return fail("unknown option \"%s\"; %s", argument, usage_line);
        } else if (trainer == NULL) {
            trainer = argument;
        } else {
            return fail("one TRAINER only (got \"%s\" and \"%s\"); %s", trainer, argument,
                        usage_line);
        }
    }
    if (trainer == NULL || trainer[0] == '\0')
        return fail("no TRAINER given; %s", usage_line);
    if (library_option != NULL && library_option[0] == '\0')
        return fail("--lib needs a path; %s", usage_line);

    char library_path[PATH_MAX];
    if (library_option != NULL) {
        if (!copy_path(library_path, sizeof library_path, library_option))
            return fail("--lib: path too long");
    } else {
        int status = find_default_library(library_path, sizeof library_path);
        if (status != 0)
            return status;
    }

    char trainer_path[PATH_MAX];
    if (inspect_resolve_command(trainer, trainer_path, sizeof trainer_path) < 0)
        return fail("%s: not found in PATH (a program in PATH, or a path such as ./%s)",
                    trainer, trainer);

    char error[2048];
    enum inspect_verdict verdict =
        inspect_write_report(stdout, trainer_path, library_path, error, sizeof error);
    if (verdict == INSPECT_ERROR)
        return fail("%s", error);
    if (fflush(stdout) != 0 || ferror(stdout))
        return fail("cannot write the report: %s", strerror(errno));

    switch (verdict) {
    case INSPECT_OK:
        return EXIT_INSPECT_OK;
    case INSPECT_WARNINGS:
        return EXIT_INSPECT_WARNINGS;
    case INSPECT_REFUSED:
        return EXIT_INSPECT_REFUSED;
    case INSPECT_ERROR:
        break;
    }
    return EXIT_INSPECT_USAGE_OR_ERROR;
}
