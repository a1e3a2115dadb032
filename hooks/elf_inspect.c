/* elf_inspect.c - the ELF preflight of a trainer (see elf_inspect.h).
 *
 * A trainer is inspected as the dynamic loader would see it: its program
 * headers say whether a loader runs it at all (PT_INTERP), and its dynamic
 * symbol table says what it imports.  Every import is then classified
 * against the dynamic symbol table of libadaptshim.so, read with the same
 * code: a name the library exports is intercepted, whatever the tables
 * below say.  The tables only explain the rest: stdio readers that work on
 * the streams the shim's fopen returns, hints the shim does not need, and
 * calls that bypass any preload.
 *
 * Files are read with plain open/pread and libelf: this runs in the
 * launcher, not under the preload. */
#include "elf_inspect.h"

#include <ar.h>
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Linux reads this much of a file to find a #! line (BINPRM_BUF_SIZE). */
#define INSPECT_HEAD_SIZE 256
/* Linux follows at most this many nested #! interpreters. */
#define INSPECT_SCRIPT_DEPTH 4
/* Report columns wider than this push the note further right. */
#define INSPECT_NAME_COLUMN_MAX 36

/* ------------------------------------------------------------------------
 * What imported symbols mean
 * ------------------------------------------------------------------------ */

/* One known symbol.  category is what the symbol is when libadaptshim.so
 * does NOT export it, except for two values that describe an expected
 * export: INTERCEPTED (the shim exports it in this source tree) and LIMITED
 * (exported, but a data file used through it is not virtualized).  An
 * expected export that the library lacks is reported as not intercepted. */
struct inspect_symbol_rule {
    const char *name;
    enum inspect_category category;
    const char *note;
    /* If not NULL, the symbol matters only when the program imports this
     * one too; otherwise it is merely passed through. */
    const char *matters_with;
};

/* Names starting with a prefix, tried after the exact names. */
struct inspect_prefix_rule {
    const char *prefix;
    enum inspect_category category;
    const char *note;
};

static const char note_start[] =
    "start-up: the shim reads its configuration before main";
static const char note_open[] =
    "opens by path: a data file opened read-only gets this replica's view";
static const char note_create[] =
    "opens for writing: a checkpoint written through it is tracked";
static const char note_read[] =
    "reads at the descriptor's position: served from the view";
static const char note_pread[] =
    "reads at an offset: served from the view";
static const char note_seek[] =
    "moves in the view (SEEK_END is the view's size)";
static const char note_stat[] =
    "reports the view's size for a data file";
static const char note_close[] =
    "closes a descriptor (a checkpoint written through it is committed)";
static const char note_close_many[] =
    "closes descriptors: the shim's descriptor table follows";
static const char note_dup[] =
    "duplicates a descriptor: the copies share the view's offset";
static const char note_mmap[] =
    "a mapping of a data file is not virtualized: it shows the whole physical "
    "file, not this replica's view (the shim logs a warning once)";
static const char note_copy[] =
    "kernel-side copy: emulated through the view when the source is a data file";
static const char note_rename[] =
    "a rename onto a checkpoint name commits the checkpoint";
static const char note_fopen[] =
    "a data file opened read-only becomes a stream over the view";
static const char note_fdopen[] =
    "a stream on a data file's descriptor reads the view";
static const char note_freopen[] =
    "a data file reopened with it is not virtualized: the stream reads the "
    "physical file (the shim logs a warning)";
static const char note_fclose[] =
    "closes a stream (a checkpoint written through it is committed)";
static const char note_fileno[] =
    "gives the tracked descriptor behind a view stream";
static const char note_fseek[] =
    "repositions a stream: pass rules apply to the trainer's own target";
static const char note_signal[] =
    "stop signals (SIGTERM, SIGINT, SIGUSR1): the trainer's handler runs after the shim's";
static const char note_mpi_init[] =
    "MPI start: the shim sets up its own communicator";
static const char note_mpi_finalize[] =
    "MPI end";
static const char note_allreduce[] =
    "gradient all-reduce (float or double sum): measured for the gradient noise "
    "scale and the step time";
static const char note_iallreduce[] =
    "non-blocking gradient all-reduce: measured when MPI_Wait, MPI_Waitall or "
    "MPI_Test completes it";
static const char note_mpi_complete[] =
    "completes requests: a pending gradient all-reduce is measured here";
static const char note_mpi_collective[] =
    "a collective that may end a step";
static const char note_mpi_complete_unseen[] =
    "completes requests without the shim: a gradient MPI_Iallreduce completed "
    "by it is not measured";
static const char note_pmpi_gradient[] =
    "profiling entry point called directly: the shim wraps only the MPI_ name, "
    "so these gradient all-reduces are not seen";

static const char note_stream_read[] =
    "reads a stream";
static const char note_stream_line[] =
    "reads a line from a stream";
static const char note_stream_char[] =
    "reads a character from a stream";
static const char note_stream_refill[] =
    "refills a stream's buffer (behind inlined getc/getc_unlocked)";
static const char note_stream_scan[] =
    "formatted input from a stream";
static const char note_stream_unget[] =
    "pushes a character back onto a stream";
static const char note_stream_position[] =
    "a stream's position";
static const char note_stream_state[] =
    "a stream's state (end of file, error, reading or writing)";
static const char note_stream_buffer[] =
    "a stream's buffering";
static const char note_stream_lock[] =
    "locks a stream";
static const char note_stream_wide[] =
    "wide-character input from a stream";
static const char note_cxx_stream[] =
    "C++ file stream: libstdc++ opens the file with fopen and reads its "
    "descriptor, both intercepted (C++ streams are not covered by this "
    "project's tests)";

static const char note_hint[] =
    "a page-cache hint: reads nothing";
static const char note_dlopen[] =
    "libraries it loads are reached by the preload too, except those opened "
    "with RTLD_DEEPBIND (GOT patching is not written)";

static const char note_syscall[] =
    "raw system call: bypasses any preload (a read or open made through it "
    "sees the physical file)";
static const char note_io_uring[] =
    "io_uring (liburing): the kernel performs the reads, the shim never sees them";
static const char note_posix_aio[] =
    "POSIX asynchronous I/O: glibc's helper threads read with internal calls "
    "no preload can reach";
static const char note_linux_aio[] =
    "Linux native asynchronous I/O (libaio): the kernel performs the reads";
static const char note_open_by_handle[] =
    "opens by file handle, not by path: never matched against the data files";
static const char note_dlmopen[] =
    "objects loaded into a new link-map namespace do not see LD_PRELOAD";

static const char note_mpi_not_needed[] =
    "MPI C function the shim does not need";
static const char note_pmpi_other[] =
    "profiling entry point called directly: the shim does not need it";
static const char note_fortran[] =
    "Fortran MPI binding: it calls the PMPI_ functions directly, the shim "
    "does not see it";
static const char note_fortran_gradient[] =
    "Fortran MPI binding: it calls PMPI_ directly, so its gradient all-reduces "
    "are not seen";
static const char note_exported[] =
    "exported by the shim";
static const char note_mpi_exported[] =
    "MPI function wrapped by the shim";

static const struct inspect_symbol_rule inspect_symbol_rules[] = {
    /* Exported by the shim in this source tree (shim/exports.map). */
    {"__libc_start_main", INSPECT_CATEGORY_INTERCEPTED, note_start, NULL},
    {"open", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"open64", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"openat", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"openat64", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"__open_2", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"__open64_2", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"__openat_2", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"__openat64_2", INSPECT_CATEGORY_INTERCEPTED, note_open, NULL},
    {"creat", INSPECT_CATEGORY_INTERCEPTED, note_create, NULL},
    {"creat64", INSPECT_CATEGORY_INTERCEPTED, note_create, NULL},
    {"read", INSPECT_CATEGORY_INTERCEPTED, note_read, NULL},
    {"__read_chk", INSPECT_CATEGORY_INTERCEPTED, note_read, NULL},
    {"readv", INSPECT_CATEGORY_INTERCEPTED, note_read, NULL},
    {"pread", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"pread64", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"__pread_chk", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"__pread64_chk", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"preadv", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"preadv64", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"preadv2", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"preadv64v2", INSPECT_CATEGORY_INTERCEPTED, note_pread, NULL},
    {"lseek", INSPECT_CATEGORY_INTERCEPTED, note_seek, NULL},
    {"lseek64", INSPECT_CATEGORY_INTERCEPTED, note_seek, NULL},
    {"stat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"stat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"lstat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"lstat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"fstat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"fstat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"fstatat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"fstatat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"statx", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__xstat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__xstat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__lxstat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__lxstat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__fxstat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__fxstat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__fxstatat", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"__fxstatat64", INSPECT_CATEGORY_INTERCEPTED, note_stat, NULL},
    {"close", INSPECT_CATEGORY_INTERCEPTED, note_close, NULL},
    {"close_range", INSPECT_CATEGORY_INTERCEPTED, note_close_many, NULL},
    {"closefrom", INSPECT_CATEGORY_INTERCEPTED, note_close_many, NULL},
    {"dup", INSPECT_CATEGORY_INTERCEPTED, note_dup, NULL},
    {"dup2", INSPECT_CATEGORY_INTERCEPTED, note_dup, NULL},
    {"dup3", INSPECT_CATEGORY_INTERCEPTED, note_dup, NULL},
    {"fcntl", INSPECT_CATEGORY_INTERCEPTED, note_dup, NULL},
    {"fcntl64", INSPECT_CATEGORY_INTERCEPTED, note_dup, NULL},
    {"mmap", INSPECT_CATEGORY_LIMITED, note_mmap, NULL},
    {"mmap64", INSPECT_CATEGORY_LIMITED, note_mmap, NULL},
    {"copy_file_range", INSPECT_CATEGORY_INTERCEPTED, note_copy, NULL},
    {"sendfile", INSPECT_CATEGORY_INTERCEPTED, note_copy, NULL},
    {"sendfile64", INSPECT_CATEGORY_INTERCEPTED, note_copy, NULL},
    {"splice", INSPECT_CATEGORY_INTERCEPTED, note_copy, NULL},
    {"rename", INSPECT_CATEGORY_INTERCEPTED, note_rename, NULL},
    {"renameat", INSPECT_CATEGORY_INTERCEPTED, note_rename, NULL},
    {"renameat2", INSPECT_CATEGORY_INTERCEPTED, note_rename, NULL},
    {"fopen", INSPECT_CATEGORY_INTERCEPTED, note_fopen, NULL},
    {"fopen64", INSPECT_CATEGORY_INTERCEPTED, note_fopen, NULL},
    {"fdopen", INSPECT_CATEGORY_INTERCEPTED, note_fdopen, NULL},
    {"freopen", INSPECT_CATEGORY_LIMITED, note_freopen, NULL},
    {"freopen64", INSPECT_CATEGORY_LIMITED, note_freopen, NULL},
    {"fclose", INSPECT_CATEGORY_INTERCEPTED, note_fclose, NULL},
    {"fileno", INSPECT_CATEGORY_INTERCEPTED, note_fileno, NULL},
    {"fseek", INSPECT_CATEGORY_INTERCEPTED, note_fseek, NULL},
    {"fseeko", INSPECT_CATEGORY_INTERCEPTED, note_fseek, NULL},
    {"fseeko64", INSPECT_CATEGORY_INTERCEPTED, note_fseek, NULL},
    {"rewind", INSPECT_CATEGORY_INTERCEPTED, note_fseek, NULL},
    {"fsetpos", INSPECT_CATEGORY_INTERCEPTED, note_fseek, NULL},
    {"fsetpos64", INSPECT_CATEGORY_INTERCEPTED, note_fseek, NULL},
    {"sigaction", INSPECT_CATEGORY_INTERCEPTED, note_signal, NULL},
    {"signal", INSPECT_CATEGORY_INTERCEPTED, note_signal, NULL},
    {"MPI_Init", INSPECT_CATEGORY_INTERCEPTED, note_mpi_init, NULL},
    {"MPI_Init_thread", INSPECT_CATEGORY_INTERCEPTED, note_mpi_init, NULL},
    {"MPI_Finalize", INSPECT_CATEGORY_INTERCEPTED, note_mpi_finalize, NULL},
    {"MPI_Allreduce", INSPECT_CATEGORY_INTERCEPTED, note_allreduce, NULL},
    {"MPI_Iallreduce", INSPECT_CATEGORY_INTERCEPTED, note_iallreduce, NULL},
    {"MPI_Wait", INSPECT_CATEGORY_INTERCEPTED, note_mpi_complete, NULL},
    {"MPI_Waitall", INSPECT_CATEGORY_INTERCEPTED, note_mpi_complete, NULL},
    {"MPI_Test", INSPECT_CATEGORY_INTERCEPTED, note_mpi_complete, NULL},
    {"MPI_Barrier", INSPECT_CATEGORY_INTERCEPTED, note_mpi_collective, NULL},
    {"MPI_Bcast", INSPECT_CATEGORY_INTERCEPTED, note_mpi_collective, NULL},

    /* stdio: glibc's stdio never calls the interposed POSIX functions, but
     * a stream the shim's fopen/fopen64/fdopen returned for a data file is a
     * cookie stream over the view, so all of these read the view on it. */
    {"fread", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_read, NULL},
    {"fread_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_read, NULL},
    {"__fread_chk", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_read, NULL},
    {"__fread_unlocked_chk", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_read, NULL},
    {"fgets", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, NULL},
    {"fgets_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, NULL},
    {"__fgets_chk", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, NULL},
    {"__fgets_unlocked_chk", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, NULL},
    {"getline", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, NULL},
    {"getdelim", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, NULL},
    {"__getdelim", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, NULL},
    {"fgetc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_char, NULL},
    {"fgetc_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_char, NULL},
    {"getc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_char, NULL},
    {"getc_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_char, NULL},
    {"_IO_getc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_char, NULL},
    {"getw", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_char, NULL},
    {"__uflow", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_refill, NULL},
    {"__underflow", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_refill, NULL},
    {"fscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_scan, NULL},
    {"vfscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_scan, NULL},
    {"__isoc99_fscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_scan, NULL},
    {"__isoc99_vfscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_scan, NULL},
    {"__isoc23_fscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_scan, NULL},
    {"__isoc23_vfscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_scan, NULL},
    {"ungetc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_unget, NULL},
    {"_IO_ungetc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_unget, NULL},
    {"ftell", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_position, NULL},
    {"ftello", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_position, NULL},
    {"ftello64", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_position, NULL},
    {"fgetpos", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_position, NULL},
    {"fgetpos64", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_position, NULL},
    {"feof", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"feof_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"_IO_feof", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"ferror", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"ferror_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"clearerr", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"clearerr_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"__freading", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, NULL},
    {"setvbuf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_buffer, NULL},
    {"setbuf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_buffer, NULL},
    {"setbuffer", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_buffer, NULL},
    {"__fpurge", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_buffer, NULL},
    {"flockfile", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_lock, NULL},
    {"funlockfile", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_lock, NULL},
    {"ftrylockfile", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_lock, NULL},
    {"__fsetlocking", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_lock, NULL},
    {"fgetwc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"fgetwc_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"getwc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"getwc_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"fgetws", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"fgetws_unlocked", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"__fgetws_chk", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"ungetwc", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"__wuflow", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"__wunderflow", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"fwscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"vfwscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"__isoc99_fwscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},
    {"__isoc99_vfwscanf", INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, NULL},

    /* Harmless without the shim. */
    {"posix_fadvise", INSPECT_CATEGORY_PASSED_THROUGH, note_hint, NULL},
    {"posix_fadvise64", INSPECT_CATEGORY_PASSED_THROUGH, note_hint, NULL},
    {"readahead", INSPECT_CATEGORY_PASSED_THROUGH, note_hint, NULL},
    {"dlopen", INSPECT_CATEGORY_PASSED_THROUGH, note_dlopen, NULL},

    /* MPI C functions that would matter if the shim does not wrap them. */
    {"MPI_Waitany", INSPECT_CATEGORY_NOT_INTERCEPTED, note_mpi_complete_unseen, "MPI_Iallreduce"},
    {"MPI_Waitsome", INSPECT_CATEGORY_NOT_INTERCEPTED, note_mpi_complete_unseen, "MPI_Iallreduce"},
    {"MPI_Testall", INSPECT_CATEGORY_NOT_INTERCEPTED, note_mpi_complete_unseen, "MPI_Iallreduce"},
    {"MPI_Testany", INSPECT_CATEGORY_NOT_INTERCEPTED, note_mpi_complete_unseen, "MPI_Iallreduce"},
    {"MPI_Testsome", INSPECT_CATEGORY_NOT_INTERCEPTED, note_mpi_complete_unseen, "MPI_Iallreduce"},
    {"PMPI_Allreduce", INSPECT_CATEGORY_NOT_INTERCEPTED, note_pmpi_gradient, NULL},
    {"PMPI_Iallreduce", INSPECT_CATEGORY_NOT_INTERCEPTED, note_pmpi_gradient, NULL},

    /* File input that no preload sees. */
    {"syscall", INSPECT_CATEGORY_NOT_INTERCEPTED, note_syscall, NULL},
    {"aio_read", INSPECT_CATEGORY_NOT_INTERCEPTED, note_posix_aio, NULL},
    {"aio_read64", INSPECT_CATEGORY_NOT_INTERCEPTED, note_posix_aio, NULL},
    {"lio_listio", INSPECT_CATEGORY_NOT_INTERCEPTED, note_posix_aio, NULL},
    {"lio_listio64", INSPECT_CATEGORY_NOT_INTERCEPTED, note_posix_aio, NULL},
    {"io_submit", INSPECT_CATEGORY_NOT_INTERCEPTED, note_linux_aio, NULL},
    {"open_by_handle_at", INSPECT_CATEGORY_NOT_INTERCEPTED, note_open_by_handle, NULL},
    {"dlmopen", INSPECT_CATEGORY_NOT_INTERCEPTED, note_dlmopen, NULL},
};

static const struct inspect_prefix_rule inspect_prefix_rules[] = {
    {"io_uring_", INSPECT_CATEGORY_NOT_INTERCEPTED, note_io_uring},
    {"__io_uring_", INSPECT_CATEGORY_NOT_INTERCEPTED, note_io_uring},
    {"_ZNSt14basic_ifstream", INSPECT_CATEGORY_THROUGH_STREAM, note_cxx_stream},
    {"_ZNSt13basic_fstream", INSPECT_CATEGORY_THROUGH_STREAM, note_cxx_stream},
    {"_ZNSt13basic_filebuf", INSPECT_CATEGORY_THROUGH_STREAM, note_cxx_stream},
    /* Fortran MPI's common blocks (MPI_IN_PLACE, MPI_STATUS_IGNORE...): data,
     * not calls; the calls themselves are reported. */
    {"mpi_fortran_", INSPECT_CATEGORY_OTHER, ""},
};

#define INSPECT_ARRAY_LENGTH(array) (sizeof(array) / sizeof((array)[0]))

/* ------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------ */

/* Formats a one-line message into error and returns -1. */
__attribute__((format(printf, 3, 4)))
static int inspect_fail(char *error, size_t error_size, const char *format, ...)
{
    if (error != NULL && error_size > 0) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error, error_size, format, arguments);
        va_end(arguments);
    }
    return -1;
}

static int inspect_compare_strings(const void *left, const void *right)
{
    const char *const *a = left;
    const char *const *b = right;
    return strcmp(*a, *b);
}

/* Imports sort by name, then by version (unversioned first), so that the
 * report's order does not depend on the order of the symbol table. */
static int inspect_compare_imports(const void *left, const void *right)
{
    const struct inspect_import *a = left;
    const struct inspect_import *b = right;
    int by_name = strcmp(a->name, b->name);
    if (by_name != 0)
        return by_name;
    if (a->version == NULL || b->version == NULL)
        return (a->version != NULL) - (b->version != NULL);
    return strcmp(a->version, b->version);
}

static int inspect_compare_name_with_import(const void *key, const void *element)
{
    const struct inspect_import *import = element;
    return strcmp(key, import->name);
}

static int inspect_compare_name_with_string(const void *key, const void *element)
{
    const char *const *name = element;
    return strcmp(key, *name);
}

bool inspect_symbol_set_contains(const struct inspect_symbol_set *set, const char *name)
{
    if (set == NULL || set->count == 0)
        return false;
    return bsearch(name, set->names, set->count, sizeof set->names[0],
                   inspect_compare_name_with_string) != NULL;
}

const struct inspect_import *inspect_elf_file_find_import(const struct inspect_elf_file *file,
                                                          const char *name)
{
    if (file == NULL || file->import_count == 0)
        return NULL;
    /* Any one of several versions of a name will do. */
    return bsearch(name, file->imports, file->import_count, sizeof file->imports[0],
                   inspect_compare_name_with_import);
}

static void inspect_free_strings(char **strings, size_t count)
{
    if (strings == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        free(strings[i]);
    free(strings);
}

void inspect_elf_file_free(struct inspect_elf_file *file)
{
    if (file == NULL)
        return;
    free(file->path);
    free(file->interpreter);
    free(file->interpreter_argument);
    free(file->script_program);
    inspect_free_strings(file->needed, file->needed_count);
    if (file->imports != NULL) {
        for (size_t i = 0; i < file->import_count; i++) {
            free(file->imports[i].name);
            free(file->imports[i].version);
        }
        free(file->imports);
    }
    inspect_free_strings(file->exports.names, file->exports.count);
    memset(file, 0, sizeof *file);
}

/* The last path component (the whole string if it has no slash). */
static const char *inspect_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* ------------------------------------------------------------------------
 * PATH lookup, as execvp does it
 * ------------------------------------------------------------------------ */

static bool inspect_is_executable_file(const char *path)
{
    struct stat status;
    return stat(path, &status) == 0 && S_ISREG(status.st_mode) && access(path, X_OK) == 0;
}

int inspect_resolve_command(const char *name, char *out, size_t out_size)
{
    if (name == NULL || name[0] == '\0' || out == NULL || out_size == 0)
        return -1;
    if (strchr(name, '/') != NULL) {
        int written = snprintf(out, out_size, "%s", name);
        return written >= 0 && (size_t)written < out_size ? 0 : -1;
    }
    /* execvp's default when PATH is unset (glibc). */
    const char *search = getenv("PATH");
    if (search == NULL)
        search = "/bin:/usr/bin";
    const char *entry = search;
    for (;;) {
        const char *end = strchr(entry, ':');
        size_t length = end != NULL ? (size_t)(end - entry) : strlen(entry);
        /* An empty entry means the current directory. */
        int written = length == 0
                          ? snprintf(out, out_size, "./%s", name)
                          : snprintf(out, out_size, "%.*s/%s", (int)length, entry, name);
        if (written >= 0 && (size_t)written < out_size && inspect_is_executable_file(out))
            return 0;
        if (end == NULL)
            break;
        entry = end + 1;
    }
    out[0] = '\0';
    return -1;
}

/* ------------------------------------------------------------------------
 * Scripts
 * ------------------------------------------------------------------------ */

static bool inspect_is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* For "#!/usr/bin/env [OPTIONS] [NAME=VALUE...] COMMAND [ARGS]" the program
 * that runs is COMMAND.  Copies it into command, or returns -1 if the
 * argument names none.  env's -u and -C take a value; -S splits its value
 * into words, which the word loop does anyway. */
static int inspect_env_command(const char *argument, char *command, size_t command_size)
{
    const char *cursor = argument;
    bool skip_next_word = false;
    while (*cursor != '\0') {
        while (inspect_is_blank(*cursor))
            cursor++;
        if (*cursor == '\0')
            break;
        const char *word = cursor;
        while (*cursor != '\0' && !inspect_is_blank(*cursor))
            cursor++;
        size_t length = (size_t)(cursor - word);
        if (skip_next_word) {
            skip_next_word = false;
            continue;
        }
        if (word[0] == '-') {
            skip_next_word = (length == 2 && (word[1] == 'u' || word[1] == 'C'));
            continue;
        }
        if (memchr(word, '=', length) != NULL)
            continue;
        if (length >= command_size)
            return -1;
        memcpy(command, word, length);
        command[length] = '\0';
        return 0;
    }
    return -1;
}

/* Parses a #! line as Linux does: the interpreter path, then everything
 * after it up to the end of the line as one argument, both trimmed of
 * blanks. */
static int inspect_read_script(struct inspect_elf_file *file, const char *head, size_t length,
                               char *error, size_t error_size)
{
    char line[INSPECT_HEAD_SIZE + 1];
    size_t line_length = 0;
    for (size_t i = 2; i < length && head[i] != '\n' && line_length < INSPECT_HEAD_SIZE; i++)
        line[line_length++] = head[i];
    line[line_length] = '\0';

    char *cursor = line;
    while (inspect_is_blank(*cursor))
        cursor++;
    char *interpreter = cursor;
    while (*cursor != '\0' && !inspect_is_blank(*cursor))
        cursor++;
    if (cursor == interpreter)
        return inspect_fail(error, error_size, "%s: a #! line without an interpreter",
                            file->path);
    char *argument = NULL;
    if (*cursor != '\0') {
        *cursor++ = '\0';
        while (inspect_is_blank(*cursor))
            cursor++;
        char *end = cursor + strlen(cursor);
        while (end > cursor && inspect_is_blank(end[-1]))
            *--end = '\0';
        if (*cursor != '\0')
            argument = cursor;
    }

    file->kind = INSPECT_KIND_SCRIPT;
    file->interpreter = strdup(interpreter);
    if (file->interpreter == NULL)
        return inspect_fail(error, error_size, "%s: out of memory", file->path);
    if (argument != NULL) {
        file->interpreter_argument = strdup(argument);
        if (file->interpreter_argument == NULL)
            return inspect_fail(error, error_size, "%s: out of memory", file->path);
    }

    /* The program LD_PRELOAD reaches is the interpreter, or what env runs. */
    if (strcmp(inspect_base_name(interpreter), "env") == 0 && argument != NULL) {
        char command[INSPECT_HEAD_SIZE + 1];
        char resolved[PATH_MAX];
        if (inspect_env_command(argument, command, sizeof command) < 0)
            return 0;  /* env with options only: env itself runs */
        if (inspect_resolve_command(command, resolved, sizeof resolved) < 0)
            return 0;  /* script_program stays NULL: the report says so */
        file->script_program = strdup(resolved);
    } else {
        file->script_program = strdup(interpreter);
    }
    if (file->script_program == NULL)
        return inspect_fail(error, error_size, "%s: out of memory", file->path);
    return 0;
}

/* ------------------------------------------------------------------------
 * ELF files
 * ------------------------------------------------------------------------ */

/* Copies the NUL-terminated path stored in a PT_INTERP segment. */
static int inspect_read_interpreter(struct inspect_elf_file *file, Elf *elf,
                                    const GElf_Phdr *segment, char *error, size_t error_size)
{
    if (segment->p_filesz == 0)
        return inspect_fail(error, error_size, "%s: empty PT_INTERP segment", file->path);
    Elf_Data *data = elf_getdata_rawchunk(elf, (int64_t)segment->p_offset,
                                          (size_t)segment->p_filesz, ELF_T_BYTE);
    if (data == NULL || data->d_buf == NULL)
        return inspect_fail(error, error_size, "%s: damaged PT_INTERP segment: %s", file->path,
                            elf_errmsg(-1));
    size_t length = strnlen(data->d_buf, data->d_size);
    free(file->interpreter);
    file->interpreter = strndup(data->d_buf, length);
    if (file->interpreter == NULL)
        return inspect_fail(error, error_size, "%s: out of memory", file->path);
    return 0;
}

/* The sections the imports are read from.  Any of them may be missing. */
struct inspect_sections {
    Elf_Scn *dynamic_symbols;      /* SHT_DYNSYM */
    Elf_Scn *symbol_versions;      /* SHT_GNU_versym: one entry per dynamic symbol */
    Elf_Scn *needed_versions;      /* SHT_GNU_verneed */
    size_t dynamic_strings;        /* section index of .dynstr, 0 if unknown */
};

static int inspect_find_sections(struct inspect_elf_file *file, Elf *elf,
                                 struct inspect_sections *sections, char *error,
                                 size_t error_size)
{
    memset(sections, 0, sizeof *sections);
    Elf_Scn *section = NULL;
    while ((section = elf_nextscn(elf, section)) != NULL) {
        GElf_Shdr header;
        if (gelf_getshdr(section, &header) == NULL)
            return inspect_fail(error, error_size, "%s: damaged section header: %s",
                                file->path, elf_errmsg(-1));
        switch (header.sh_type) {
        case SHT_DYNSYM:
            sections->dynamic_symbols = section;
            sections->dynamic_strings = header.sh_link;
            break;
        case SHT_DYNAMIC:
            if (sections->dynamic_strings == 0)
                sections->dynamic_strings = header.sh_link;
            break;
        case SHT_GNU_versym:
            sections->symbol_versions = section;
            break;
        case SHT_GNU_verneed:
            sections->needed_versions = section;
            break;
        default:
            break;
        }
    }
    return 0;
}

/* Reads the PT_DYNAMIC segment: whether DT_FLAGS_1 says PIE, and the
 * DT_NEEDED names (when the string table is known).  The segment, not the
 * .dynamic section, is what the loader reads, and it survives sstrip. */
static int inspect_read_dynamic_segment(struct inspect_elf_file *file, Elf *elf,
                                        const GElf_Phdr *segment, size_t dynamic_strings,
                                        bool *pie_flag, char *error, size_t error_size)
{
    *pie_flag = false;
    Elf_Data *data = elf_getdata_rawchunk(elf, (int64_t)segment->p_offset,
                                          (size_t)segment->p_filesz, ELF_T_DYN);
    if (data == NULL)
        return inspect_fail(error, error_size, "%s: damaged PT_DYNAMIC segment: %s",
                            file->path, elf_errmsg(-1));

    /* First count, so the names array is allocated once. */
    size_t entry_count = 0;
    size_t needed_count = 0;
    GElf_Dyn entry;
    while (gelf_getdyn(data, (int)entry_count, &entry) != NULL && entry.d_tag != DT_NULL) {
        if (entry.d_tag == DT_NEEDED)
            needed_count++;
        if (entry.d_tag == DT_FLAGS_1 && (entry.d_un.d_val & DF_1_PIE) != 0)
            *pie_flag = true;
        entry_count++;
    }
    if (needed_count == 0 || dynamic_strings == 0)
        return 0;

    file->needed = calloc(needed_count, sizeof file->needed[0]);
    if (file->needed == NULL)
        return inspect_fail(error, error_size, "%s: out of memory", file->path);
    for (size_t i = 0; i < entry_count; i++) {
        if (gelf_getdyn(data, (int)i, &entry) == NULL || entry.d_tag != DT_NEEDED)
            continue;
        const char *name = elf_strptr(elf, dynamic_strings, (size_t)entry.d_un.d_val);
        if (name == NULL)
            return inspect_fail(error, error_size, "%s: damaged DT_NEEDED entry: %s",
                                file->path, elf_errmsg(-1));
        file->needed[file->needed_count] = strdup(name);
        if (file->needed[file->needed_count] == NULL)
            return inspect_fail(error, error_size, "%s: out of memory", file->path);
        file->needed_count++;
    }
    return 0;
}

/* Walks .gnu.version_r, the versions this file needs from its libraries.
 * Each version has an index (vna_other) that .gnu.version refers to.  With
 * names NULL it only finds the largest index; otherwise it stores each
 * version's name (owned by libelf) at its index. */
static int inspect_walk_needed_versions(struct inspect_elf_file *file, Elf *elf,
                                        Elf_Scn *section, const char **names,
                                        size_t name_capacity, size_t *largest_index,
                                        char *error, size_t error_size)
{
    GElf_Shdr header;
    if (gelf_getshdr(section, &header) == NULL)
        return inspect_fail(error, error_size, "%s: damaged .gnu.version_r: %s", file->path,
                            elf_errmsg(-1));
    Elf_Data *data = elf_getdata(section, NULL);
    if (data == NULL)
        return inspect_fail(error, error_size, "%s: damaged .gnu.version_r: %s", file->path,
                            elf_errmsg(-1));
    *largest_index = 0;
    size_t offset = 0;
    /* sh_info is the number of entries: it bounds the walk even if the
     * next-entry offsets of a damaged file loop. */
    for (size_t entry = 0; entry < header.sh_info; entry++) {
        GElf_Verneed needed;
        if (gelf_getverneed(data, (int)offset, &needed) == NULL)
            return inspect_fail(error, error_size, "%s: damaged .gnu.version_r entry",
                                file->path);
        size_t auxiliary_offset = offset + needed.vn_aux;
        for (unsigned i = 0; i < needed.vn_cnt; i++) {
            GElf_Vernaux auxiliary;
            if (gelf_getvernaux(data, (int)auxiliary_offset, &auxiliary) == NULL)
                return inspect_fail(error, error_size, "%s: damaged .gnu.version_r entry",
                                    file->path);
            size_t index = auxiliary.vna_other & 0x7fff;
            if (index > *largest_index)
                *largest_index = index;
            if (names != NULL && index < name_capacity)
                names[index] = elf_strptr(elf, header.sh_link, auxiliary.vna_name);
            if (auxiliary.vna_next == 0)
                break;
            auxiliary_offset += auxiliary.vna_next;
        }
        if (needed.vn_next == 0)
            break;
        offset += needed.vn_next;
    }
    return 0;
}

/* Version names by .gnu.version index; *names is NULL if the file has no
 * .gnu.version_r.  Free *names (not the strings, which libelf owns). */
static int inspect_read_needed_versions(struct inspect_elf_file *file, Elf *elf,
                                        Elf_Scn *section, const char ***names,
                                        size_t *name_count, char *error, size_t error_size)
{
    *names = NULL;
    *name_count = 0;
    if (section == NULL)
        return 0;
    size_t largest_index = 0;
    if (inspect_walk_needed_versions(file, elf, section, NULL, 0, &largest_index, error,
                                     error_size) < 0)
        return -1;
    const char **table = calloc(largest_index + 1, sizeof table[0]);
    if (table == NULL)
        return inspect_fail(error, error_size, "%s: out of memory", file->path);
    if (inspect_walk_needed_versions(file, elf, section, table, largest_index + 1,
                                     &largest_index, error, error_size) < 0) {
        free(table);
        return -1;
    }
    *names = table;
    *name_count = largest_index + 1;
    return 0;
}

/* Removes adjacent duplicates from a sorted array of strings. */
static void inspect_remove_duplicate_names(struct inspect_symbol_set *set)
{
    if (set->count == 0)
        return;
    size_t kept = 1;
    for (size_t i = 1; i < set->count; i++) {
        if (strcmp(set->names[i], set->names[kept - 1]) == 0) {
            free(set->names[i]);
            continue;
        }
        set->names[kept++] = set->names[i];
    }
    set->count = kept;
}

/* Reads .dynsym: undefined symbols are imports (with their version), and
 * defined global or weak functions are exports. */
static int inspect_read_dynamic_symbols(struct inspect_elf_file *file, Elf *elf,
                                        const struct inspect_sections *sections,
                                        char *error, size_t error_size)
{
    GElf_Shdr header;
    if (gelf_getshdr(sections->dynamic_symbols, &header) == NULL)
        return inspect_fail(error, error_size, "%s: damaged .dynsym: %s", file->path,
                            elf_errmsg(-1));
    Elf_Data *symbols = elf_getdata(sections->dynamic_symbols, NULL);
    if (symbols == NULL)
        return inspect_fail(error, error_size, "%s: damaged .dynsym: %s", file->path,
                            elf_errmsg(-1));
    size_t symbol_count = header.sh_entsize != 0 ? header.sh_size / header.sh_entsize : 0;
    file->has_dynamic_symbols = true;
    if (symbol_count == 0)
        return 0;

    Elf_Data *versions = NULL;
    if (sections->symbol_versions != NULL)
        versions = elf_getdata(sections->symbol_versions, NULL);
    const char **version_names = NULL;
    size_t version_name_count = 0;
    if (inspect_read_needed_versions(file, elf, sections->needed_versions, &version_names,
                                     &version_name_count, error, error_size) < 0)
        return -1;

    int result = -1;
    file->imports = calloc(symbol_count, sizeof file->imports[0]);
    file->exports.names = calloc(symbol_count, sizeof file->exports.names[0]);
    if (file->imports == NULL || file->exports.names == NULL) {
        inspect_fail(error, error_size, "%s: out of memory", file->path);
        goto done;
    }
    /* Entry 0 is the reserved null symbol. */
    for (size_t i = 1; i < symbol_count; i++) {
        GElf_Sym symbol;
        if (gelf_getsym(symbols, (int)i, &symbol) == NULL) {
            inspect_fail(error, error_size, "%s: damaged .dynsym entry %zu", file->path, i);
            goto done;
        }
        const char *name = elf_strptr(elf, header.sh_link, symbol.st_name);
        if (name == NULL) {
            inspect_fail(error, error_size, "%s: damaged .dynsym name: %s", file->path,
                         elf_errmsg(-1));
            goto done;
        }
        unsigned binding = GELF_ST_BIND(symbol.st_info);
        unsigned type = GELF_ST_TYPE(symbol.st_info);
        if (name[0] == '\0' || binding == STB_LOCAL)
            continue;

        if (symbol.st_shndx == SHN_UNDEF) {
            struct inspect_import *import = &file->imports[file->import_count];
            import->name = strdup(name);
            if (import->name == NULL) {
                inspect_fail(error, error_size, "%s: out of memory", file->path);
                goto done;
            }
            /* Counted now, so that the name is freed even if its version
             * cannot be copied. */
            file->import_count++;
            GElf_Versym version_index;
            if (versions != NULL && gelf_getversym(versions, (int)i, &version_index) != NULL) {
                size_t index = version_index & 0x7fff;
                /* 0 is local, 1 is the unversioned global definition. */
                if (index >= 2 && index < version_name_count && version_names[index] != NULL) {
                    import->version = strdup(version_names[index]);
                    if (import->version == NULL) {
                        inspect_fail(error, error_size, "%s: out of memory", file->path);
                        goto done;
                    }
                }
            }
            continue;
        }
        if ((binding == STB_GLOBAL || binding == STB_WEAK) &&
            (type == STT_FUNC || type == STT_GNU_IFUNC)) {
            file->exports.names[file->exports.count] = strdup(name);
            if (file->exports.names[file->exports.count] == NULL) {
                inspect_fail(error, error_size, "%s: out of memory", file->path);
                goto done;
            }
            file->exports.count++;
        }
    }

    qsort(file->imports, file->import_count, sizeof file->imports[0], inspect_compare_imports);
    qsort(file->exports.names, file->exports.count, sizeof file->exports.names[0],
          inspect_compare_strings);
    /* A library exports several versions of some names (memcpy@GLIBC_2.2.5
     * and memcpy@@GLIBC_2.14): one name is enough for a lookup. */
    inspect_remove_duplicate_names(&file->exports);
    result = 0;
done:
    free(version_names);
    return result;
}

/* Reads everything the report needs from an open ELF file. */
static int inspect_read_elf_contents(struct inspect_elf_file *file, Elf *elf, char *error,
                                     size_t error_size)
{
    if (elf_kind(elf) != ELF_K_ELF)
        return inspect_fail(error, error_size, "%s: an archive, not a program", file->path);
    GElf_Ehdr header;
    if (gelf_getehdr(elf, &header) == NULL)
        return inspect_fail(error, error_size, "%s: damaged ELF header: %s", file->path,
                            elf_errmsg(-1));
    file->elf_class = gelf_getclass(elf);
    file->machine = header.e_machine;
    switch (header.e_type) {
    case ET_EXEC:
    case ET_DYN:
        break;
    case ET_REL:
        return inspect_fail(error, error_size,
                            "%s: an object file (.o), not a program: link it first",
                            file->path);
    case ET_CORE:
        return inspect_fail(error, error_size, "%s: a core dump, not a program", file->path);
    default:
        return inspect_fail(error, error_size, "%s: an ELF file of unknown type %u, not a program",
                            file->path, (unsigned)header.e_type);
    }

    size_t segment_count;
    if (elf_getphdrnum(elf, &segment_count) != 0)
        return inspect_fail(error, error_size, "%s: damaged program headers: %s", file->path,
                            elf_errmsg(-1));
    bool has_interpreter = false;
    bool has_dynamic_segment = false;
    GElf_Phdr dynamic_segment;
    memset(&dynamic_segment, 0, sizeof dynamic_segment);
    for (size_t i = 0; i < segment_count; i++) {
        GElf_Phdr segment;
        if (gelf_getphdr(elf, (int)i, &segment) == NULL)
            return inspect_fail(error, error_size, "%s: damaged program header %zu: %s",
                                file->path, i, elf_errmsg(-1));
        if (segment.p_type == PT_INTERP) {
            if (inspect_read_interpreter(file, elf, &segment, error, error_size) < 0)
                return -1;
            has_interpreter = true;
        } else if (segment.p_type == PT_DYNAMIC) {
            has_dynamic_segment = true;
            dynamic_segment = segment;
        }
    }

    struct inspect_sections sections;
    if (inspect_find_sections(file, elf, &sections, error, error_size) < 0)
        return -1;
    bool pie_flag = false;
    if (has_dynamic_segment &&
        inspect_read_dynamic_segment(file, elf, &dynamic_segment, sections.dynamic_strings,
                                     &pie_flag, error, error_size) < 0)
        return -1;

    /* Only a program with PT_INTERP is started by the dynamic loader, and
     * only the loader reads LD_PRELOAD.  Without PT_INTERP an ET_DYN file is
     * a shared library, or a static PIE, which carries PT_DYNAMIC only to
     * relocate itself and says so with DF_1_PIE. */
    file->position_independent = header.e_type == ET_DYN;
    if (has_interpreter)
        file->kind = INSPECT_KIND_DYNAMIC_PROGRAM;
    else if (header.e_type == ET_EXEC || !has_dynamic_segment)
        file->kind = INSPECT_KIND_STATIC_PROGRAM;
    else if (pie_flag)
        file->kind = INSPECT_KIND_STATIC_PIE;
    else
        file->kind = INSPECT_KIND_SHARED_LIBRARY;

    if (file->kind == INSPECT_KIND_STATIC_PROGRAM || file->kind == INSPECT_KIND_STATIC_PIE)
        return 0;
    if (sections.dynamic_symbols == NULL)
        return 0;  /* has_dynamic_symbols stays false: the report says so */
    return inspect_read_dynamic_symbols(file, elf, &sections, error, error_size);
}

static int inspect_read_elf(struct inspect_elf_file *file, int fd, char *error,
                            size_t error_size)
{
    if (elf_version(EV_CURRENT) == EV_NONE)
        return inspect_fail(error, error_size, "%s: libelf does not support this ELF version: %s",
                            file->path, elf_errmsg(-1));
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    if (elf == NULL)
        return inspect_fail(error, error_size, "%s: damaged ELF file: %s", file->path,
                            elf_errmsg(-1));
    int result = inspect_read_elf_contents(file, elf, error, error_size);
    elf_end(elf);
    return result;
}

/* Reads the first bytes of a file; retries reads cut short by signals. */
static ssize_t inspect_read_head(int fd, char *buffer, size_t size)
{
    size_t total = 0;
    while (total < size) {
        ssize_t count = pread(fd, buffer + total, size - total, (off_t)total);
        if (count < 0 && errno == EINTR)
            continue;
        if (count < 0)
            return -1;
        if (count == 0)
            break;
        total += (size_t)count;
    }
    return (ssize_t)total;
}

static int inspect_load_open_file(struct inspect_elf_file *file, int fd, char *error,
                                  size_t error_size)
{
    struct stat status;
    if (fstat(fd, &status) < 0)
        return inspect_fail(error, error_size, "%s: cannot stat: %s", file->path,
                            strerror(errno));
    if (S_ISDIR(status.st_mode))
        return inspect_fail(error, error_size, "%s: a directory, not a program", file->path);
    if (!S_ISREG(status.st_mode))
        return inspect_fail(error, error_size, "%s: not a regular file, not a program",
                            file->path);

    char head[INSPECT_HEAD_SIZE];
    ssize_t length = inspect_read_head(fd, head, sizeof head);
    if (length < 0)
        return inspect_fail(error, error_size, "%s: cannot read: %s", file->path,
                            strerror(errno));
    if (length >= 2 && head[0] == '#' && head[1] == '!')
        return inspect_read_script(file, head, (size_t)length, error, error_size);
    if (length >= SELFMAG && memcmp(head, ELFMAG, SELFMAG) == 0)
        return inspect_read_elf(file, fd, error, error_size);
    const char *what = "neither an ELF program nor a #! script";
    if (length == 0)
        what = "an empty file";
    else if (length >= SARMAG && memcmp(head, ARMAG, SARMAG) == 0)
        what = "an ar archive (a static library), not a program";
    return inspect_fail(error, error_size,
                        "%s: %s (accepted: a dynamically linked program, or a #! script)",
                        file->path, what);
}

int inspect_elf_file_load(struct inspect_elf_file *file, const char *path, char *error,
                          size_t error_size)
{
    memset(file, 0, sizeof *file);
    file->path = strdup(path);
    if (file->path == NULL)
        return inspect_fail(error, error_size, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        inspect_fail(error, error_size, "%s: cannot open: %s", path, strerror(errno));
        inspect_elf_file_free(file);
        return -1;
    }
    int result = inspect_load_open_file(file, fd, error, error_size);
    close(fd);
    if (result < 0)
        inspect_elf_file_free(file);
    return result;
}

int inspect_shim_library_load(struct inspect_elf_file *library, const char *path, char *error,
                              size_t error_size)
{
    if (inspect_elf_file_load(library, path, error, error_size) < 0)
        return -1;
    const char *problem = NULL;
    if (library->kind == INSPECT_KIND_SCRIPT)
        problem = "a script, not a shared library";
    else if (library->kind == INSPECT_KIND_STATIC_PROGRAM ||
             library->kind == INSPECT_KIND_STATIC_PIE)
        problem = "a statically linked program, not a shared library";
    else if (library->exports.count == 0)
        problem = "exports no functions: not the preload library";
    if (problem == NULL)
        return 0;
    inspect_fail(error, error_size, "%s: %s", path, problem);
    inspect_elf_file_free(library);
    return -1;
}

/* ------------------------------------------------------------------------
 * Classification
 * ------------------------------------------------------------------------ */

enum inspect_mpi_binding {
    INSPECT_MPI_NONE,
    INSPECT_MPI_C,            /* MPI_Allreduce */
    INSPECT_MPI_PROFILING_C,  /* PMPI_Allreduce */
    INSPECT_MPI_FORTRAN,      /* mpi_allreduce_, MPI_ALLREDUCE, pmpi_allreduce__ ... */
};

/* Every MPI C function name has a lower-case letter after the prefix
 * (MPI_Allreduce, MPI_T_init_thread); Fortran compilers spell the same
 * binding in lower case with trailing underscores, or all in upper case. */
static enum inspect_mpi_binding inspect_mpi_binding_of(const char *name)
{
    if (strncmp(name, "mpi_", 4) == 0 || strncmp(name, "pmpi_", 5) == 0)
        return INSPECT_MPI_FORTRAN;
    bool profiling = strncmp(name, "PMPI_", 5) == 0;
    if (!profiling && strncmp(name, "MPI_", 4) != 0)
        return INSPECT_MPI_NONE;
    for (const char *c = name; *c != '\0'; c++)
        if (islower((unsigned char)*c))
            return profiling ? INSPECT_MPI_PROFILING_C : INSPECT_MPI_C;
    return INSPECT_MPI_FORTRAN;
}

/* Whether a Fortran binding name is an all-reduce: lower-cased, without the
 * profiling "p", trailing underscores and the _f/_f08 suffixes of the
 * newer bindings, it reads mpi_allreduce or mpi_iallreduce. */
static bool inspect_fortran_is_allreduce(const char *name)
{
    char normal[64];
    size_t length = 0;
    const char *source = (name[0] == 'p' || name[0] == 'P') ? name + 1 : name;
    for (; source[length] != '\0'; length++) {
        if (length + 1 >= sizeof normal)
            return false;
        normal[length] = (char)tolower((unsigned char)source[length]);
    }
    normal[length] = '\0';
    while (length > 0 && normal[length - 1] == '_')
        normal[--length] = '\0';
    static const char *const suffixes[] = {"_f08", "_f"};
    for (size_t i = 0; i < INSPECT_ARRAY_LENGTH(suffixes); i++) {
        size_t suffix_length = strlen(suffixes[i]);
        if (length > suffix_length && strcmp(normal + length - suffix_length, suffixes[i]) == 0) {
            length -= suffix_length;
            normal[length] = '\0';
            break;
        }
    }
    while (length > 0 && normal[length - 1] == '_')
        normal[--length] = '\0';
    return strcmp(normal, "mpi_allreduce") == 0 || strcmp(normal, "mpi_iallreduce") == 0;
}

/* Linear searches: the tables are small and a report runs once. */
static const struct inspect_symbol_rule *inspect_find_exact_rule(const char *name)
{
    for (size_t i = 0; i < INSPECT_ARRAY_LENGTH(inspect_symbol_rules); i++)
        if (strcmp(inspect_symbol_rules[i].name, name) == 0)
            return &inspect_symbol_rules[i];
    return NULL;
}

static const struct inspect_prefix_rule *inspect_find_prefix_rule(const char *name)
{
    for (size_t i = 0; i < INSPECT_ARRAY_LENGTH(inspect_prefix_rules); i++) {
        const char *prefix = inspect_prefix_rules[i].prefix;
        if (strncmp(name, prefix, strlen(prefix)) == 0)
            return &inspect_prefix_rules[i];
    }
    return NULL;
}

enum inspect_category inspect_classify_symbol(const char *name,
                                              const struct inspect_symbol_set *shim_exports,
                                              const struct inspect_elf_file *importer,
                                              const char **note, bool *missing_from_shim)
{
    const struct inspect_symbol_rule *rule = inspect_find_exact_rule(name);
    enum inspect_mpi_binding binding = inspect_mpi_binding_of(name);
    *missing_from_shim = false;

    /* The library decides what is intercepted. */
    if (inspect_symbol_set_contains(shim_exports, name)) {
        if (rule != NULL && rule->category == INSPECT_CATEGORY_LIMITED) {
            *note = rule->note;
            return INSPECT_CATEGORY_LIMITED;
        }
        if (rule != NULL && rule->category == INSPECT_CATEGORY_INTERCEPTED)
            *note = rule->note;
        else
            *note = binding == INSPECT_MPI_C ? note_mpi_exported : note_exported;
        return INSPECT_CATEGORY_INTERCEPTED;
    }

    if (rule != NULL) {
        *note = rule->note;
        if (rule->category == INSPECT_CATEGORY_INTERCEPTED ||
            rule->category == INSPECT_CATEGORY_LIMITED) {
            *missing_from_shim = true;
            return INSPECT_CATEGORY_NOT_INTERCEPTED;
        }
        if (rule->matters_with != NULL &&
            inspect_elf_file_find_import(importer, rule->matters_with) == NULL)
            return INSPECT_CATEGORY_PASSED_THROUGH;
        return rule->category;
    }

    const struct inspect_prefix_rule *prefix_rule = inspect_find_prefix_rule(name);
    if (prefix_rule != NULL) {
        *note = prefix_rule->note;
        return prefix_rule->category;
    }

    switch (binding) {
    case INSPECT_MPI_C:
        *note = note_mpi_not_needed;
        return INSPECT_CATEGORY_PASSED_THROUGH;
    case INSPECT_MPI_PROFILING_C:
        *note = note_pmpi_other;
        return INSPECT_CATEGORY_PASSED_THROUGH;
    case INSPECT_MPI_FORTRAN:
        *note = inspect_fortran_is_allreduce(name) ? note_fortran_gradient : note_fortran;
        return INSPECT_CATEGORY_NOT_INTERCEPTED;
    case INSPECT_MPI_NONE:
        break;
    }
    *note = "";
    return INSPECT_CATEGORY_OTHER;
}

void inspect_classify_imports(struct inspect_elf_file *file,
                              const struct inspect_elf_file *shim_library)
{
    for (size_t i = 0; i < file->import_count; i++) {
        struct inspect_import *import = &file->imports[i];
        import->category = inspect_classify_symbol(import->name, &shim_library->exports, file,
                                                   &import->note, &import->missing_from_shim);
    }
}

/* ------------------------------------------------------------------------
 * Verdict
 * ------------------------------------------------------------------------ */

static const char *inspect_machine_name(int machine)
{
    static const struct {
        int machine;
        const char *name;
    } machines[] = {
        {EM_X86_64, "x86-64"},   {EM_386, "i386"},       {EM_AARCH64, "AArch64"},
        {EM_ARM, "ARM"},         {EM_RISCV, "RISC-V"},   {EM_PPC64, "PowerPC64"},
        {EM_PPC, "PowerPC"},     {EM_S390, "S/390"},     {EM_MIPS, "MIPS"},
        {EM_SPARCV9, "SPARC64"}, {EM_LOONGARCH, "LoongArch"},
    };
    for (size_t i = 0; i < INSPECT_ARRAY_LENGTH(machines); i++)
        if (machines[i].machine == machine)
            return machines[i].name;
    return "an unknown machine";
}

static const char *inspect_class_name(int elf_class)
{
    return elf_class == ELFCLASS32 ? "ELF32" : elf_class == ELFCLASS64 ? "ELF64" : "ELF";
}

static bool inspect_architecture_differs(const struct inspect_elf_file *file,
                                         const struct inspect_elf_file *shim_library)
{
    return shim_library != NULL && (file->elf_class != shim_library->elf_class ||
                                    file->machine != shim_library->machine);
}

enum inspect_verdict inspect_verdict_of(const struct inspect_elf_file *file,
                                        const struct inspect_elf_file *shim_library)
{
    switch (file->kind) {
    case INSPECT_KIND_SCRIPT:
        return INSPECT_ERROR;  /* a script's verdict is its interpreter's */
    case INSPECT_KIND_STATIC_PROGRAM:
    case INSPECT_KIND_STATIC_PIE:
        return INSPECT_REFUSED;
    case INSPECT_KIND_DYNAMIC_PROGRAM:
    case INSPECT_KIND_SHARED_LIBRARY:
        break;
    }
    if (inspect_architecture_differs(file, shim_library))
        return INSPECT_REFUSED;
    if (!file->has_dynamic_symbols)
        return INSPECT_WARNINGS;
    for (size_t i = 0; i < file->import_count; i++)
        if (file->imports[i].category == INSPECT_CATEGORY_LIMITED ||
            file->imports[i].category == INSPECT_CATEGORY_NOT_INTERCEPTED)
            return INSPECT_WARNINGS;
    return INSPECT_OK;
}

const char *inspect_verdict_name(enum inspect_verdict verdict)
{
    switch (verdict) {
    case INSPECT_OK:
        return "OK";
    case INSPECT_WARNINGS:
        return "WARNINGS";
    case INSPECT_REFUSED:
        return "REFUSED";
    case INSPECT_ERROR:
        return "ERROR";
    }
    return "ERROR";
}

const char *inspect_category_name(enum inspect_category category)
{
    switch (category) {
    case INSPECT_CATEGORY_INTERCEPTED:
        return "intercepted";
    case INSPECT_CATEGORY_THROUGH_STREAM:
        return "through streams";
    case INSPECT_CATEGORY_PASSED_THROUGH:
        return "passed through";
    case INSPECT_CATEGORY_LIMITED:
        return "limited";
    case INSPECT_CATEGORY_NOT_INTERCEPTED:
        return "not intercepted";
    case INSPECT_CATEGORY_OTHER:
    case INSPECT_CATEGORY_COUNT:
        break;
    }
    return "other";
}

/* ------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------ */

/* Section titles, by category; OTHER is only counted. */
static const char *const inspect_section_titles[INSPECT_CATEGORY_COUNT] = {
    [INSPECT_CATEGORY_INTERCEPTED] = "Intercepted by the shim:",
    [INSPECT_CATEGORY_THROUGH_STREAM] =
        "Read through streams (on a data file opened with fopen, fopen64 or fdopen the "
        "shim returns a stream over the view):",
    [INSPECT_CATEGORY_PASSED_THROUGH] = "Passed through, not needed by the shim:",
    [INSPECT_CATEGORY_LIMITED] = "Intercepted, but not virtualized (warnings):",
    [INSPECT_CATEGORY_NOT_INTERCEPTED] = "Not intercepted (warnings):",
    [INSPECT_CATEGORY_OTHER] = NULL,
};

static void inspect_format_import(const struct inspect_import *import, char *out,
                                  size_t out_size)
{
    if (import->version != NULL)
        snprintf(out, out_size, "%s@%s", import->name, import->version);
    else
        snprintf(out, out_size, "%s", import->name);
}

static const char *inspect_kind_description(const struct inspect_elf_file *file)
{
    switch (file->kind) {
    case INSPECT_KIND_DYNAMIC_PROGRAM:
        return file->position_independent ? "dynamically linked program (PIE)"
                                          : "dynamically linked program";
    case INSPECT_KIND_SHARED_LIBRARY:
        return "shared library";
    case INSPECT_KIND_STATIC_PROGRAM:
        return "statically linked program";
    case INSPECT_KIND_STATIC_PIE:
        return "statically linked program (static PIE)";
    case INSPECT_KIND_SCRIPT:
        return "script";
    }
    return "unknown";
}

static void inspect_write_file_header(FILE *out, const struct inspect_elf_file *file,
                                      const struct inspect_elf_file *shim_library)
{
    fprintf(out, "ELF preflight of %s\n", file->path);
    fprintf(out, "  file:     %s, %s %s\n", inspect_kind_description(file),
            inspect_class_name(file->elf_class), inspect_machine_name(file->machine));
    if (file->kind == INSPECT_KIND_DYNAMIC_PROGRAM && file->interpreter != NULL)
        fprintf(out, "  loader:   %s\n", file->interpreter);
    if (file->kind == INSPECT_KIND_SHARED_LIBRARY)
        fprintf(out, "  note:     not a program: its imports are the calls it makes inside a "
                     "trainer that loads it\n");
    if (file->needed_count > 0) {
        fprintf(out, "  needs:   ");
        for (size_t i = 0; i < file->needed_count; i++)
            fprintf(out, " %s", file->needed[i]);
        fprintf(out, "\n");
    }
    fprintf(out, "  shim:     %s (%zu exported functions)\n", shim_library->path,
            shim_library->exports.count);
}

static void inspect_write_counts(FILE *out, const struct inspect_elf_file *file)
{
    size_t counts[INSPECT_CATEGORY_COUNT] = {0};
    size_t mpi_c = 0, mpi_c_intercepted = 0, mpi_fortran = 0;
    for (size_t i = 0; i < file->import_count; i++) {
        const struct inspect_import *import = &file->imports[i];
        counts[import->category]++;
        enum inspect_mpi_binding binding = inspect_mpi_binding_of(import->name);
        if (binding == INSPECT_MPI_C || binding == INSPECT_MPI_PROFILING_C) {
            mpi_c++;
            if (import->category == INSPECT_CATEGORY_INTERCEPTED)
                mpi_c_intercepted++;
        } else if (binding == INSPECT_MPI_FORTRAN &&
                   import->category == INSPECT_CATEGORY_NOT_INTERCEPTED) {
            mpi_fortran++;
        }
    }
    fprintf(out,
            "  imports:  %zu: %zu intercepted, %zu through streams, %zu passed through, "
            "%zu not virtualized, %zu not intercepted, %zu other\n",
            file->import_count, counts[INSPECT_CATEGORY_INTERCEPTED],
            counts[INSPECT_CATEGORY_THROUGH_STREAM], counts[INSPECT_CATEGORY_PASSED_THROUGH],
            counts[INSPECT_CATEGORY_LIMITED], counts[INSPECT_CATEGORY_NOT_INTERCEPTED],
            counts[INSPECT_CATEGORY_OTHER]);
    if (mpi_c == 0 && mpi_fortran == 0) {
        fprintf(out, "  MPI:      none imported\n");
        return;
    }
    fprintf(out, "  MPI:      %zu C functions imported, %zu of them intercepted", mpi_c,
            mpi_c_intercepted);
    if (mpi_fortran > 0)
        fprintf(out, "; Fortran binding imports: %zu, not seen", mpi_fortran);
    fprintf(out, "\n");
}

static void inspect_write_sections(FILE *out, const struct inspect_elf_file *file)
{
    char display[512];
    int width = 0;
    for (size_t i = 0; i < file->import_count; i++) {
        if (file->imports[i].category == INSPECT_CATEGORY_OTHER)
            continue;
        inspect_format_import(&file->imports[i], display, sizeof display);
        int length = (int)strlen(display);
        if (length > width)
            width = length;
    }
    if (width > INSPECT_NAME_COLUMN_MAX)
        width = INSPECT_NAME_COLUMN_MAX;

    for (int category = 0; category < INSPECT_CATEGORY_COUNT; category++) {
        if (inspect_section_titles[category] == NULL)
            continue;
        fprintf(out, "\n%s\n", inspect_section_titles[category]);
        size_t listed = 0;
        for (size_t i = 0; i < file->import_count; i++) {
            const struct inspect_import *import = &file->imports[i];
            if ((int)import->category != category)
                continue;
            inspect_format_import(import, display, sizeof display);
            fprintf(out, "  %-*s  %s%s\n", width, display,
                    import->missing_from_shim ? "expected from the shim, not exported by this library: "
                                              : "",
                    import->note);
            listed++;
        }
        if (listed == 0)
            fprintf(out, "  (none)\n");
    }
}

static void inspect_write_verdict(FILE *out, const struct inspect_elf_file *file,
                                  const struct inspect_elf_file *shim_library,
                                  enum inspect_verdict verdict)
{
    switch (verdict) {
    case INSPECT_OK:
        fprintf(out, "\nverdict: OK: every file-input and MPI call it imports reaches the shim\n");
        return;
    case INSPECT_WARNINGS:
        if (!file->has_dynamic_symbols)
            fprintf(out, "\nverdict: WARNINGS: no dynamic symbol table section (section headers "
                         "stripped?): its imports cannot be listed\n");
        else
            fprintf(out, "\nverdict: WARNINGS: some calls it imports will not be intercepted or "
                         "virtualized (listed as warnings above)\n");
        return;
    case INSPECT_REFUSED:
        if (file->kind == INSPECT_KIND_STATIC_PROGRAM)
            fprintf(out, "\nverdict: REFUSED: statically linked: LD_PRELOAD cannot reach it; "
                         "link it dynamically\n");
        else if (file->kind == INSPECT_KIND_STATIC_PIE)
            fprintf(out, "\nverdict: REFUSED: statically linked (static PIE): LD_PRELOAD cannot "
                         "reach it; link it dynamically\n");
        else
            fprintf(out, "\nverdict: REFUSED: built for %s %s, the shim for %s %s: the loader "
                         "cannot preload the shim into it\n",
                    inspect_class_name(file->elf_class), inspect_machine_name(file->machine),
                    inspect_class_name(shim_library->elf_class),
                    inspect_machine_name(shim_library->machine));
        return;
    case INSPECT_ERROR:
        break;
    }
    fprintf(out, "\nverdict: ERROR\n");
}

static void inspect_write_file_report(FILE *out, const struct inspect_elf_file *file,
                                      const struct inspect_elf_file *shim_library,
                                      enum inspect_verdict verdict)
{
    inspect_write_file_header(out, file, shim_library);
    if (verdict != INSPECT_REFUSED && file->has_dynamic_symbols) {
        inspect_write_counts(out, file);
        inspect_write_sections(out, file);
        size_t other = 0;
        for (size_t i = 0; i < file->import_count; i++)
            if (file->imports[i].category == INSPECT_CATEGORY_OTHER)
                other++;
        fprintf(out, "\nOther imports: %zu, unrelated to file input and MPI (not listed)\n",
                other);
    }
    inspect_write_verdict(out, file, shim_library, verdict);
}

/* "a script run by /usr/bin/python3", or with env "a script run by
 * /usr/bin/env python3 (/usr/bin/python3)". */
static void inspect_write_script_line(FILE *out, const struct inspect_elf_file *script)
{
    fprintf(out, "%s: a script run by %s", script->path, script->interpreter);
    if (script->interpreter_argument != NULL)
        fprintf(out, " %s", script->interpreter_argument);
    if (script->script_program != NULL && strcmp(script->script_program, script->interpreter) != 0)
        fprintf(out, " (%s)", script->script_program);
    fprintf(out, ": inspect the interpreter, which is what LD_PRELOAD reaches; its report "
                 "follows\n\n");
}

enum inspect_verdict inspect_write_report(FILE *out, const char *trainer_path,
                                          const char *library_path, char *error,
                                          size_t error_size)
{
    struct inspect_elf_file library;
    char library_error[1024];
    if (inspect_shim_library_load(&library, library_path, library_error,
                                  sizeof library_error) < 0) {
        inspect_fail(error, error_size, "preload library %s", library_error);
        return INSPECT_ERROR;
    }

    /* The trainer, then the interpreter of each script in the chain. */
    struct inspect_elf_file chain[INSPECT_SCRIPT_DEPTH + 1];
    size_t loaded = 0;
    enum inspect_verdict verdict = INSPECT_ERROR;
    memset(chain, 0, sizeof chain);
    if (inspect_elf_file_load(&chain[0], trainer_path, error, error_size) < 0)
        goto done;
    loaded = 1;
    while (chain[loaded - 1].kind == INSPECT_KIND_SCRIPT) {
        const struct inspect_elf_file *script = &chain[loaded - 1];
        if (loaded > INSPECT_SCRIPT_DEPTH) {
            inspect_fail(error, error_size, "%s: scripts run by scripts more than %d deep",
                         trainer_path, INSPECT_SCRIPT_DEPTH);
            goto done;
        }
        if (script->script_program == NULL) {
            inspect_fail(error, error_size,
                         "%s: a script run by %s %s, which names no program found in PATH: "
                         "inspect the interpreter",
                         script->path, script->interpreter,
                         script->interpreter_argument != NULL ? script->interpreter_argument
                                                              : "");
            goto done;
        }
        char interpreter_error[1024];
        if (inspect_elf_file_load(&chain[loaded], script->script_program, interpreter_error,
                                  sizeof interpreter_error) < 0) {
            inspect_fail(error, error_size, "%s: a script run by %s, which cannot be inspected: %s",
                         script->path, script->interpreter, interpreter_error);
            goto done;
        }
        loaded++;
    }

    struct inspect_elf_file *program = &chain[loaded - 1];
    inspect_classify_imports(program, &library);
    verdict = inspect_verdict_of(program, &library);
    for (size_t i = 0; i + 1 < loaded; i++)
        inspect_write_script_line(out, &chain[i]);
    inspect_write_file_report(out, program, &library, verdict);

done:
    for (size_t i = 0; i < loaded; i++)
        inspect_elf_file_free(&chain[i]);
    inspect_elf_file_free(&library);
    return verdict;
}
