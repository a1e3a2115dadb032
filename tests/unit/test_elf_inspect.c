/* test_elf_inspect.c - the ELF preflight of hooks/elf_inspect.c on real
 * files: this build's trainers and tools inspected against this build's
 * libadaptshim.so, static programs, scripts, files that are not programs,
 * and ELF files altered to look built for another machine or stripped of
 * their section headers.
 *
 * The build directory is ADAPTSHIM_BUILD (the Makefile sets it, as for the
 * integration tests), else build/ under the current directory. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_inspect.h"

#define TEMP_TEMPLATE "/tmp/adaptshim-inspect-XXXXXX"
static char temp_directory[sizeof TEMP_TEMPLATE];
static struct inspect_elf_file library;
static struct inspect_elf_file file;
static char error[2048];

static void build_path(char *out, size_t out_size, const char *relative)
{
    const char *build = getenv("ADAPTSHIM_BUILD");
    if (build == NULL || build[0] == '\0')
        build = "build";
    int written = snprintf(out, out_size, "%s/%s", build, relative);
    cr_assert(written > 0 && (size_t)written < out_size, "build path too long");
    cr_assert_eq(access(out, F_OK), 0, "%s is missing: build it with make all first", out);
}

static void temp_path(char *out, size_t out_size, const char *name)
{
    int written = snprintf(out, out_size, "%s/%s", temp_directory, name);
    cr_assert(written > 0 && (size_t)written < out_size, "temp path too long");
}

static void write_file(const char *path, const void *contents, size_t size, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    cr_assert_geq(fd, 0, "cannot create %s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, contents, size), (ssize_t)size, "cannot write %s", path);
    cr_assert_eq(close(fd), 0);
}

/* Copies the first limit bytes (SIZE_MAX: all) of source to destination. */
static void copy_file(const char *source, const char *destination, size_t limit)
{
    struct stat status;
    cr_assert_eq(stat(source, &status), 0, "cannot stat %s", source);
    size_t size = (size_t)status.st_size;
    char *contents = malloc(size);
    cr_assert_not_null(contents);
    FILE *input = fopen(source, "rb");
    cr_assert_not_null(input, "cannot open %s", source);
    cr_assert_eq(fread(contents, 1, size, input), size, "short read of %s", source);
    fclose(input);
    write_file(destination, contents, size < limit ? size : limit, 0755);
    free(contents);
}

static void patch_file(const char *path, off_t offset, const void *bytes, size_t size)
{
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0, "cannot open %s", path);
    cr_assert_eq(pwrite(fd, bytes, size, offset), (ssize_t)size);
    cr_assert_eq(close(fd), 0);
}

static void load_library(void)
{
    char path[PATH_MAX];
    build_path(path, sizeof path, "libadaptshim.so");
    cr_assert_eq(inspect_shim_library_load(&library, path, error, sizeof error), 0,
                 "cannot load the shim: %s", error);
}

/* Loads a file and classifies it against the shim. */
static void load_classified(const char *path)
{
    cr_assert_eq(inspect_elf_file_load(&file, path, error, sizeof error), 0,
                 "cannot load %s: %s", path, error);
    inspect_classify_imports(&file, &library);
}

static void load_build_file(const char *relative)
{
    char path[PATH_MAX];
    build_path(path, sizeof path, relative);
    load_classified(path);
}

static void expect_category(const char *name, enum inspect_category category)
{
    const struct inspect_import *import = inspect_elf_file_find_import(&file, name);
    cr_assert_not_null(import, "%s does not import %s", file.path, name);
    cr_assert_eq(import->category, category, "%s in %s: %s, expected %s", name, file.path,
                 inspect_category_name(import->category), inspect_category_name(category));
    cr_assert_not_null(import->note);
}

/* Runs the whole preflight; returns the verdict, and the report in *text
 * (to free). */
static enum inspect_verdict report(const char *trainer, char **text)
{
    char library_path[PATH_MAX];
    build_path(library_path, sizeof library_path, "libadaptshim.so");
    size_t size = 0;
    *text = NULL;
    FILE *out = open_memstream(text, &size);
    cr_assert_not_null(out);
    memset(error, 0, sizeof error);
    enum inspect_verdict verdict =
        inspect_write_report(out, trainer, library_path, error, sizeof error);
    cr_assert_eq(fclose(out), 0);
    return verdict;
}

/* The error contract: INSPECT_ERROR, no report, one line naming the file. */
static void expect_error(const char *trainer, const char *fragment)
{
    char *text;
    enum inspect_verdict verdict = report(trainer, &text);
    cr_assert_eq(verdict, INSPECT_ERROR, "%s: verdict %s, expected ERROR", trainer,
                 inspect_verdict_name(verdict));
    cr_assert_str_eq(text, "", "a report was written despite the error");
    free(text);
    cr_assert_not_null(strstr(error, trainer), "message does not name %s: %s", trainer, error);
    cr_assert_not_null(strstr(error, fragment), "message lacks \"%s\": %s", fragment, error);
    cr_assert_null(strchr(error, '\n'), "message is not one line: %s", error);
}

/* The library first: a failed assertion in here skips tear_down, and must
 * not leave a directory behind. */
static void set_up(void)
{
    load_library();
    memcpy(temp_directory, TEMP_TEMPLATE, sizeof TEMP_TEMPLATE);
    cr_assert_not_null(mkdtemp(temp_directory), "mkdtemp: %s", strerror(errno));
}

static void tear_down(void)
{
    inspect_elf_file_free(&file);
    inspect_elf_file_free(&library);
    char command[PATH_MAX + 16];
    snprintf(command, sizeof command, "rm -rf '%s'", temp_directory);
    cr_assert_eq(system(command), 0);
}

TestSuite(elf_inspect, .init = set_up, .fini = tear_down);

/* ---- the shim library ---------------------------------------------------- */

Test(elf_inspect, shim_exports_are_read_from_the_library)
{
    cr_assert_eq(library.kind, INSPECT_KIND_SHARED_LIBRARY);
    cr_assert(inspect_symbol_set_contains(&library.exports, "read"));
    cr_assert(inspect_symbol_set_contains(&library.exports, "open"));
    cr_assert(inspect_symbol_set_contains(&library.exports, "fopen64"));
    cr_assert(inspect_symbol_set_contains(&library.exports, "__libc_start_main"));
    cr_assert(inspect_symbol_set_contains(&library.exports, "MPI_Allreduce"));
    /* the PMPI_ names too: Fortran's bindings call them */
    cr_assert(inspect_symbol_set_contains(&library.exports, "PMPI_Allreduce"));
    cr_assert(inspect_symbol_set_contains(&library.exports, "PMPI_Waitany"));
    /* Not exported: stdio readers work through the streams it opens. */
    cr_assert_not(inspect_symbol_set_contains(&library.exports, "fread"));
    /* Internal functions are hidden by the version script. */
    cr_assert_not(inspect_symbol_set_contains(&library.exports, "fd_table_lookup"));
    for (size_t i = 1; i < library.exports.count; i++)
        cr_assert_lt(strcmp(library.exports.names[i - 1], library.exports.names[i]), 0,
                     "exports not sorted and unique");
}

Test(elf_inspect, a_program_is_not_accepted_as_the_shim_library)
{
    cr_assert_eq(inspect_shim_library_load(&file, "/bin/cat", error, sizeof error), -1);
    cr_assert_not_null(strstr(error, "/bin/cat"), "%s", error);
    cr_assert_not_null(strstr(error, "exports no functions"), "%s", error);
    cr_assert_null(file.path, "failed load left the file filled");
}

Test(elf_inspect, a_missing_library_is_an_error_naming_it)
{
    char *text;
    char missing[PATH_MAX];
    temp_path(missing, sizeof missing, "libadaptshim.so");
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    cr_assert_not_null(out);
    enum inspect_verdict verdict = inspect_write_report(out, "/bin/cat", missing, error,
                                                        sizeof error);
    fclose(out);
    cr_assert_eq(verdict, INSPECT_ERROR);
    cr_assert_str_eq(text, "");
    free(text);
    cr_assert_not_null(strstr(error, missing), "%s", error);
    cr_assert_not_null(strstr(error, "No such file"), "%s", error);
}

/* ---- dynamic programs ---------------------------------------------------- */

Test(elf_inspect, posix_reads_of_sgd_read_are_intercepted)
{
    load_build_file("trainers/sgd_read");
    cr_assert_eq(file.kind, INSPECT_KIND_DYNAMIC_PROGRAM);
    cr_assert_not_null(file.interpreter);
    cr_assert(file.has_dynamic_symbols);
    expect_category("read", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("open", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("lseek", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("fstat", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("__libc_start_main", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("printf", INSPECT_CATEGORY_OTHER);
    const struct inspect_import *read_import = inspect_elf_file_find_import(&file, "read");
    cr_assert_not_null(read_import->version);
    cr_assert_eq(strncmp(read_import->version, "GLIBC_", 6), 0, "%s", read_import->version);
    const struct inspect_import *stat_import = inspect_elf_file_find_import(&file, "fstat");
    cr_assert_str_eq(stat_import->version, "GLIBC_2.33");
    bool needs_libc = false;
    for (size_t i = 0; i < file.needed_count; i++)
        needs_libc |= strcmp(file.needed[i], "libc.so.6") == 0;
    cr_assert(needs_libc, "DT_NEEDED lacks libc.so.6");
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_OK);
}

Test(elf_inspect, mpi_calls_of_sgd_mpi_are_reported)
{
    load_build_file("trainers/sgd_mpi");
    expect_category("MPI_Allreduce", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("MPI_Iallreduce", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("MPI_Wait", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("MPI_Init", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("MPI_Comm_rank", INSPECT_CATEGORY_PASSED_THROUGH);
    expect_category("MPI_Abort", INSPECT_CATEGORY_PASSED_THROUGH);
    expect_category("sigaction", INSPECT_CATEGORY_INTERCEPTED);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_OK);
}

Test(elf_inspect, stdio_readers_go_through_streams)
{
    load_build_file("trainers/sgd_stdio");
    expect_category("fopen", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("fseek", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("rewind", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("fread", INSPECT_CATEGORY_THROUGH_STREAM);
    expect_category("fgetc", INSPECT_CATEGORY_THROUGH_STREAM);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_OK);
}

Test(elf_inspect, mmap_is_intercepted)
{
    load_build_file("trainers/plain_reader");
    expect_category("mmap", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("munmap", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("__uflow", INSPECT_CATEGORY_THROUGH_STREAM);
    expect_category("__isoc99_fscanf", INSPECT_CATEGORY_THROUGH_STREAM);
    expect_category("__getdelim", INSPECT_CATEGORY_THROUGH_STREAM);
    expect_category("pread", INSPECT_CATEGORY_INTERCEPTED);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_OK);
}

Test(elf_inspect, fortified_entry_points_are_classified)
{
    load_build_file("tools/plain_reader_fortify");
    expect_category("__read_chk", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("__pread_chk", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("__fread_chk", INSPECT_CATEGORY_THROUGH_STREAM);
    expect_category("__fgets_chk", INSPECT_CATEGORY_THROUGH_STREAM);
}

Test(elf_inspect, cat_reads_through_intercepted_calls)
{
    load_classified("/bin/cat");
    expect_category("read", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("copy_file_range", INSPECT_CATEGORY_INTERCEPTED);
    expect_category("posix_fadvise", INSPECT_CATEGORY_PASSED_THROUGH);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_OK);
}

Test(elf_inspect, a_raw_syscall_gives_warnings)
{
    load_build_file("tools/syscall_probe");
    expect_category("syscall", INSPECT_CATEGORY_NOT_INTERCEPTED);
    expect_category("open", INSPECT_CATEGORY_INTERCEPTED);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_WARNINGS);

    char path[PATH_MAX];
    build_path(path, sizeof path, "tools/syscall_probe");
    char *text;
    cr_assert_eq(report(path, &text), INSPECT_WARNINGS);
    char *section = strstr(text, "Not intercepted (warnings):");
    cr_assert_not_null(section, "%s", text);
    cr_assert_not_null(strstr(section, "syscall@GLIBC_"), "%s", text);
    cr_assert_not_null(strstr(text, "verdict: WARNINGS"), "%s", text);
    free(text);
}

Test(elf_inspect, report_lists_each_category_in_order)
{
    char path[PATH_MAX];
    build_path(path, sizeof path, "trainers/sgd_mpi");
    char *text;
    cr_assert_eq(report(path, &text), INSPECT_OK);
    const char *intercepted = strstr(text, "\nIntercepted by the shim:\n");
    const char *streams = strstr(text, "\nRead through streams");
    const char *passed = strstr(text, "\nPassed through, not needed by the shim:\n");
    const char *limited = strstr(text, "\nIntercepted, but not virtualized (warnings):\n");
    const char *not_intercepted = strstr(text, "\nNot intercepted (warnings):\n");
    const char *verdict = strstr(text, "\nverdict: OK");
    cr_assert(intercepted && streams && passed && limited && not_intercepted && verdict,
              "a section is missing:\n%s", text);
    cr_assert(intercepted < streams && streams < passed && passed < limited &&
                  limited < not_intercepted && not_intercepted < verdict,
              "sections out of order:\n%s", text);
    /* Each symbol on its own line, with its note, in its section. */
    const char *allreduce = strstr(text, "\n  MPI_Allreduce ");
    cr_assert(allreduce != NULL && allreduce > intercepted && allreduce < streams, "%s", text);
    cr_assert_not_null(strstr(allreduce, "gradient all-reduce"));
    const char *rank = strstr(text, "\n  MPI_Comm_rank ");
    cr_assert(rank != NULL && rank > passed && rank < limited, "%s", text);
    cr_assert_not_null(strstr(text, "MPI:      10 C functions imported, 5 of them intercepted"),
                       "%s", text);
    free(text);
}

/* ---- programs LD_PRELOAD cannot reach ----------------------------------- */

Test(elf_inspect, a_static_program_is_refused)
{
    load_build_file("tools/static_probe");
    cr_assert_eq(file.kind, INSPECT_KIND_STATIC_PROGRAM);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_REFUSED);

    char path[PATH_MAX];
    build_path(path, sizeof path, "tools/static_probe");
    char *text;
    cr_assert_eq(report(path, &text), INSPECT_REFUSED);
    cr_assert_not_null(
        strstr(text, "statically linked: LD_PRELOAD cannot reach it; link it dynamically"), "%s",
        text);
    free(text);
}

Test(elf_inspect, a_static_pie_is_refused)
{
    load_build_file("tools/static_pie_probe");
    cr_assert_eq(file.kind, INSPECT_KIND_STATIC_PIE);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_REFUSED);
}

Test(elf_inspect, a_program_for_another_machine_is_refused)
{
    char source[PATH_MAX], copy[PATH_MAX];
    build_path(source, sizeof source, "trainers/sgd_read");
    temp_path(copy, sizeof copy, "sgd_read_aarch64");
    copy_file(source, copy, SIZE_MAX);
    const uint16_t aarch64 = 183;  /* EM_AARCH64; e_machine is at offset 18 */
    patch_file(copy, 18, &aarch64, sizeof aarch64);
    char *text;
    cr_assert_eq(report(copy, &text), INSPECT_REFUSED);
    cr_assert_not_null(strstr(text, "built for ELF64 AArch64, the shim for ELF64 x86-64"), "%s",
                       text);
    free(text);
}

Test(elf_inspect, a_program_without_section_headers_gives_warnings)
{
    char source[PATH_MAX], copy[PATH_MAX];
    build_path(source, sizeof source, "trainers/sgd_read");
    temp_path(copy, sizeof copy, "sgd_read_sstripped");
    copy_file(source, copy, SIZE_MAX);
    /* e_shoff (offset 40), e_shnum (60) and e_shstrndx (62) of an ELF64 header */
    const uint64_t no_offset = 0;
    const uint16_t no_sections = 0;
    patch_file(copy, 40, &no_offset, sizeof no_offset);
    patch_file(copy, 60, &no_sections, sizeof no_sections);
    patch_file(copy, 62, &no_sections, sizeof no_sections);
    load_classified(copy);
    cr_assert_eq(file.kind, INSPECT_KIND_DYNAMIC_PROGRAM, "kind comes from program headers");
    cr_assert_not(file.has_dynamic_symbols);
    cr_assert_eq(inspect_verdict_of(&file, &library), INSPECT_WARNINGS);
}

/* ---- scripts -------------------------------------------------------------- */

Test(elf_inspect, a_script_reports_its_interpreter)
{
    char path[PATH_MAX];
    temp_path(path, sizeof path, "train.sh");
    static const char script[] = "#!/bin/sh -e\necho hello\n";
    write_file(path, script, sizeof script - 1, 0755);
    load_classified(path);
    cr_assert_eq(file.kind, INSPECT_KIND_SCRIPT);
    cr_assert_str_eq(file.interpreter, "/bin/sh");
    cr_assert_str_eq(file.interpreter_argument, "-e");
    cr_assert_str_eq(file.script_program, "/bin/sh");

    char *text;
    enum inspect_verdict verdict = report(path, &text);
    cr_assert_neq(verdict, INSPECT_ERROR, "%s", error);
    cr_assert_not_null(strstr(text, "a script run by /bin/sh -e: inspect the interpreter"), "%s",
                       text);
    cr_assert_not_null(strstr(text, "ELF preflight of /bin/sh"), "%s", text);
    free(text);
}

Test(elf_inspect, env_scripts_resolve_the_command_through_path)
{
    char path[PATH_MAX];
    temp_path(path, sizeof path, "train_env.sh");
    static const char script[] = "#!/usr/bin/env -S cat -u\n";
    write_file(path, script, sizeof script - 1, 0755);
    load_classified(path);
    cr_assert_eq(file.kind, INSPECT_KIND_SCRIPT);
    cr_assert_str_eq(file.interpreter, "/usr/bin/env");
    cr_assert_not_null(file.script_program, "cat not resolved through PATH");
    const char *slash = strrchr(file.script_program, '/');
    cr_assert(slash != NULL && strcmp(slash, "/cat") == 0, "%s", file.script_program);
}

Test(elf_inspect, an_env_script_for_a_missing_command_is_an_error)
{
    char path[PATH_MAX];
    temp_path(path, sizeof path, "train_missing.sh");
    static const char script[] = "#!/usr/bin/env no-such-interpreter-here\n";
    write_file(path, script, sizeof script - 1, 0755);
    expect_error(path, "no-such-interpreter-here");
}

Test(elf_inspect, a_script_without_interpreter_is_an_error)
{
    char path[PATH_MAX];
    temp_path(path, sizeof path, "empty_shebang.sh");
    static const char script[] = "#!   \necho\n";
    write_file(path, script, sizeof script - 1, 0755);
    expect_error(path, "without an interpreter");
}

/* ---- files that are not programs ---------------------------------------- */

Test(elf_inspect, a_missing_file_is_an_error_naming_it)
{
    char path[PATH_MAX];
    temp_path(path, sizeof path, "no-such-trainer");
    expect_error(path, "No such file");
    cr_assert_eq(inspect_elf_file_load(&file, path, error, sizeof error), -1);
    cr_assert_null(file.path, "failed load left the file filled");
}

Test(elf_inspect, a_text_file_is_an_error_saying_what_is_accepted)
{
    char path[PATH_MAX];
    temp_path(path, sizeof path, "notes.txt");
    static const char text[] = "not a program\n";
    write_file(path, text, sizeof text - 1, 0644);
    expect_error(path, "neither an ELF program nor a #! script");
    expect_error(path, "accepted");
}

Test(elf_inspect, an_empty_file_and_a_directory_are_errors)
{
    char path[PATH_MAX];
    temp_path(path, sizeof path, "empty");
    write_file(path, "", 0, 0755);
    expect_error(path, "empty file");
    expect_error(temp_directory, "directory");
}

Test(elf_inspect, a_truncated_elf_file_is_an_error)
{
    char source[PATH_MAX], copy[PATH_MAX];
    build_path(source, sizeof source, "trainers/sgd_read");
    temp_path(copy, sizeof copy, "truncated");
    copy_file(source, copy, 200);
    expect_error(copy, "damaged");
}

/* ---- classification tables ---------------------------------------------- */

static enum inspect_category classify(const char *name, const struct inspect_symbol_set *exports)
{
    const char *note = NULL;
    bool missing = false;
    enum inspect_category category = inspect_classify_symbol(name, exports, &note, &missing);
    cr_assert_not_null(note, "%s has no note", name);
    return category;
}

Test(elf_inspect, calls_that_bypass_the_preload_are_not_intercepted)
{
    const struct inspect_symbol_set *exports = &library.exports;
    cr_assert_eq(classify("syscall", exports), INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert_eq(classify("io_uring_submit", exports), INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert_eq(classify("io_uring_queue_init", exports),
                 INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert_eq(classify("aio_read", exports), INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert_eq(classify("aio_read64", exports), INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert_eq(classify("lio_listio", exports), INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert_eq(classify("readahead", exports), INSPECT_CATEGORY_PASSED_THROUGH);
    cr_assert_eq(classify("posix_fadvise64", exports), INSPECT_CATEGORY_PASSED_THROUGH);
    cr_assert_eq(classify("mmap64", exports), INSPECT_CATEGORY_INTERCEPTED);
    cr_assert_eq(classify("freopen", exports), INSPECT_CATEGORY_LIMITED);
    cr_assert_eq(classify("memcpy", exports), INSPECT_CATEGORY_OTHER);
}

/* Fortran's bindings call the PMPI_ functions, which the shim wraps too. */
Test(elf_inspect, fortran_mpi_goes_through_the_wrapped_pmpi_names)
{
    const struct inspect_symbol_set *exports = &library.exports;
    const char *fortran[] = {"mpi_allreduce_", "mpi_allreduce__", "MPI_ALLREDUCE",
                             "pmpi_allreduce_", "mpi_init_", "mpi_iallreduce_f08_",
                             "mpi_waitany_", "MPI_REQUEST_FREE"};
    for (size_t i = 0; i < sizeof fortran / sizeof fortran[0]; i++)
        cr_assert_eq(classify(fortran[i], exports), INSPECT_CATEGORY_INTERCEPTED,
                     "%s", fortran[i]);
    cr_assert_eq(classify("mpi_comm_rank_", exports), INSPECT_CATEGORY_PASSED_THROUGH);
    cr_assert_eq(classify("mpi_fortran_in_place_", exports), INSPECT_CATEGORY_OTHER);
    /* a library without the PMPI_ names does not see Fortran's gradients */
    char *names[] = {(char *)"MPI_Allreduce"};
    struct inspect_symbol_set c_only = {.names = names, .count = 1};
    const char *note = NULL;
    bool missing = false;
    cr_assert_eq(inspect_classify_symbol("mpi_allreduce_", &c_only, &note, &missing),
                 INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert_not_null(strstr(note, "gradient all-reduces"), "%s", note);
    cr_assert_eq(inspect_classify_symbol("mpi_init_", &c_only, &note, &missing),
                 INSPECT_CATEGORY_PASSED_THROUGH);
}

Test(elf_inspect, other_mpi_c_is_not_needed)
{
    const struct inspect_symbol_set *exports = &library.exports;
    cr_assert_eq(classify("MPI_Reduce", exports), INSPECT_CATEGORY_PASSED_THROUGH);
    cr_assert_eq(classify("MPI_Allgather", exports), INSPECT_CATEGORY_PASSED_THROUGH);
    cr_assert_eq(classify("MPI_Ireduce", exports), INSPECT_CATEGORY_PASSED_THROUGH);
    cr_assert_eq(classify("MPI_Allreduce", exports), INSPECT_CATEGORY_INTERCEPTED);
    cr_assert_eq(classify("PMPI_Allreduce", exports), INSPECT_CATEGORY_INTERCEPTED);
    cr_assert_eq(classify("PMPI_Comm_rank", exports), INSPECT_CATEGORY_PASSED_THROUGH);
}

/* Every call that completes or frees a request is wrapped; a library that
 * lacks one is reported as not intercepting it. */
Test(elf_inspect, request_completions_are_intercepted)
{
    const char *calls[] = {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome",
                           "MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome",
                           "MPI_Request_free", "PMPI_Testany"};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        cr_assert_eq(classify(calls[i], &library.exports), INSPECT_CATEGORY_INTERCEPTED,
                     "%s", calls[i]);
    char *names[] = {(char *)"MPI_Wait"};
    struct inspect_symbol_set wait_only = {.names = names, .count = 1};
    const char *note = NULL;
    bool missing = false;
    cr_assert_eq(inspect_classify_symbol("MPI_Waitany", &wait_only, &note, &missing),
                 INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert(missing);
}

Test(elf_inspect, the_library_not_the_tables_decides_what_is_intercepted)
{
    /* A library exporting open only: read, which the tables expect the shim
     * to export, is reported as not intercepted. */
    char *names[] = {(char *)"open"};
    struct inspect_symbol_set open_only = {.names = names, .count = 1};
    const char *note = NULL;
    bool missing = false;
    cr_assert_eq(inspect_classify_symbol("read", &open_only, &note, &missing),
                 INSPECT_CATEGORY_NOT_INTERCEPTED);
    cr_assert(missing);
    cr_assert_eq(inspect_classify_symbol("open", &open_only, &note, &missing),
                 INSPECT_CATEGORY_INTERCEPTED);
    cr_assert_not(missing);
    /* And a name it exports is intercepted even if the tables say otherwise. */
    char *syscall_names[] = {(char *)"syscall"};
    struct inspect_symbol_set with_syscall = {.names = syscall_names, .count = 1};
    cr_assert_eq(inspect_classify_symbol("syscall", &with_syscall, &note, &missing),
                 INSPECT_CATEGORY_INTERCEPTED);
}

/* ---- PATH ---------------------------------------------------------------- */

Test(elf_inspect, commands_resolve_through_path_like_execvp)
{
    char resolved[PATH_MAX];
    cr_assert_eq(inspect_resolve_command("cat", resolved, sizeof resolved), 0);
    const char *slash = strrchr(resolved, '/');
    cr_assert(slash != NULL && strcmp(slash, "/cat") == 0, "%s", resolved);
    cr_assert_eq(access(resolved, X_OK), 0);
    cr_assert_eq(inspect_resolve_command("./relative/thing", resolved, sizeof resolved), 0);
    cr_assert_str_eq(resolved, "./relative/thing", "a name with a slash is taken as it is");
    cr_assert_eq(inspect_resolve_command("no-such-command-anywhere", resolved, sizeof resolved),
                 -1);
}

/* ---- names ---------------------------------------------------------------- */

Test(elf_inspect_names, every_verdict_and_category_has_its_report_name)
{
    cr_assert_str_eq(inspect_verdict_name(INSPECT_OK), "OK");
    cr_assert_str_eq(inspect_verdict_name(INSPECT_WARNINGS), "WARNINGS");
    cr_assert_str_eq(inspect_verdict_name(INSPECT_REFUSED), "REFUSED");
    cr_assert_str_eq(inspect_verdict_name(INSPECT_ERROR), "ERROR");
    cr_assert_str_eq(inspect_verdict_name((enum inspect_verdict)99), "ERROR");
    cr_assert_str_eq(inspect_category_name(INSPECT_CATEGORY_INTERCEPTED), "intercepted");
    cr_assert_str_eq(inspect_category_name(INSPECT_CATEGORY_THROUGH_STREAM), "through streams");
    cr_assert_str_eq(inspect_category_name(INSPECT_CATEGORY_PASSED_THROUGH), "passed through");
    cr_assert_str_eq(inspect_category_name(INSPECT_CATEGORY_LIMITED), "limited");
    cr_assert_str_eq(inspect_category_name(INSPECT_CATEGORY_NOT_INTERCEPTED), "not intercepted");
    cr_assert_str_eq(inspect_category_name(INSPECT_CATEGORY_OTHER), "other");
    cr_assert_str_eq(inspect_category_name(INSPECT_CATEGORY_COUNT), "other");
}
