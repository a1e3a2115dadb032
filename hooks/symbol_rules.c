/* symbol_rules.c - what an imported symbol means under the shim (see
 * elf_inspect.h): the rule tables, and the classification of one symbol and
 * of a file's imports.
 *
 * Every import is classified against the dynamic symbol table of
 * libadaptshim.so (read by elf_reader.c): a name the library exports is
 * intercepted, whatever the tables below say.  The tables only explain the
 * rest: stdio readers that work on the streams the shim's fopen returns,
 * hints the shim does not need, and calls that bypass any preload. */
#include "elf_inspect.h"
#include "inspect_internal.h"

#include <ctype.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * What imported symbols mean
 * ------------------------------------------------------------------------ */

/* Known symbols that mean the same under the shim.  category is what they
 * are when libadaptshim.so does NOT export them, except for two values that
 * describe an expected export: INTERCEPTED (the shim exports them in this
 * source tree) and LIMITED (exported, but a data file used through them is
 * not virtualized).  An expected export that the library lacks is reported
 * as not intercepted. */
struct inspect_symbol_rule {
    enum inspect_category category;
    const char *note;
    const char *const *names; /* NULL-terminated */
};

/* A rule's names: a NULL-terminated array of static storage. */
#define SYMBOLS(...) ((const char *const[]){__VA_ARGS__, NULL})

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
    "a read-only mapping of a data file shows the view (memory filled with its "
    "bytes, or the file itself when the view is the file); a writable one fails "
    "with EACCES";
static const char note_munmap[] =
    "unmaps; the shim forgets its own memory holding a view";
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
    "non-blocking gradient all-reduce: measured when a call completes its request "
    "(MPI_Wait, MPI_Waitany, MPI_Testsome...), counted unmeasured when it is freed";
static const char note_mpi_complete[] =
    "completes requests: a pending gradient all-reduce is measured here";
static const char note_mpi_collective[] =
    "a collective that may end a step";
static const char note_mpi_free[] =
    "frees a request: a pending gradient all-reduce counts here, unmeasured";
static const char note_pmpi_wrapped[] =
    "profiling entry point called directly (as Fortran's bindings do): wrapped as "
    "its MPI_ twin is";

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
static const char note_fortran_wrapped[] =
    "Fortran MPI binding: it calls the PMPI_ function, which the shim wraps";
static const char note_fortran[] =
    "Fortran MPI binding of a function the shim does not need";
static const char note_fortran_gradient[] =
    "Fortran MPI binding: it calls PMPI_ directly, and this library does not wrap "
    "that PMPI_ function, so its gradient all-reduces are not seen";
static const char note_exported[] =
    "exported by the shim";
static const char note_mpi_exported[] =
    "MPI function wrapped by the shim";

static const struct inspect_symbol_rule inspect_symbol_rules[] = {
    /* Exported by the shim in this source tree (shim/exports.map). */
    {INSPECT_CATEGORY_INTERCEPTED, note_start, SYMBOLS("__libc_start_main")},
    {INSPECT_CATEGORY_INTERCEPTED, note_open, SYMBOLS("open", "open64", "openat", "openat64",
        "__open_2", "__open64_2", "__openat_2", "__openat64_2")},
    {INSPECT_CATEGORY_INTERCEPTED, note_create, SYMBOLS("creat", "creat64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_read, SYMBOLS("read", "__read_chk", "readv")},
    {INSPECT_CATEGORY_INTERCEPTED, note_pread, SYMBOLS("pread", "pread64", "__pread_chk",
        "__pread64_chk", "preadv", "preadv64", "preadv2", "preadv64v2")},
    {INSPECT_CATEGORY_INTERCEPTED, note_seek, SYMBOLS("lseek", "lseek64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_stat, SYMBOLS("stat", "stat64", "lstat", "lstat64", "fstat",
        "fstat64", "fstatat", "fstatat64", "statx", "__xstat", "__xstat64", "__lxstat",
        "__lxstat64", "__fxstat", "__fxstat64", "__fxstatat", "__fxstatat64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_close, SYMBOLS("close")},
    {INSPECT_CATEGORY_INTERCEPTED, note_close_many, SYMBOLS("close_range", "closefrom")},
    {INSPECT_CATEGORY_INTERCEPTED, note_dup, SYMBOLS("dup", "dup2", "dup3", "fcntl", "fcntl64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_mmap, SYMBOLS("mmap", "mmap64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_munmap, SYMBOLS("munmap", "mremap")},
    {INSPECT_CATEGORY_INTERCEPTED, note_copy, SYMBOLS("copy_file_range", "sendfile", "sendfile64",
        "splice")},
    {INSPECT_CATEGORY_INTERCEPTED, note_rename, SYMBOLS("rename", "renameat", "renameat2")},
    {INSPECT_CATEGORY_INTERCEPTED, note_fopen, SYMBOLS("fopen", "fopen64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_fdopen, SYMBOLS("fdopen")},
    {INSPECT_CATEGORY_LIMITED, note_freopen, SYMBOLS("freopen", "freopen64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_fclose, SYMBOLS("fclose")},
    {INSPECT_CATEGORY_INTERCEPTED, note_fileno, SYMBOLS("fileno")},
    {INSPECT_CATEGORY_INTERCEPTED, note_fseek, SYMBOLS("fseek", "fseeko", "fseeko64", "rewind",
        "fsetpos", "fsetpos64")},
    {INSPECT_CATEGORY_INTERCEPTED, note_signal, SYMBOLS("sigaction", "signal")},
    {INSPECT_CATEGORY_INTERCEPTED, note_mpi_init, SYMBOLS("MPI_Init", "MPI_Init_thread")},
    {INSPECT_CATEGORY_INTERCEPTED, note_mpi_finalize, SYMBOLS("MPI_Finalize")},
    {INSPECT_CATEGORY_INTERCEPTED, note_allreduce, SYMBOLS("MPI_Allreduce")},
    {INSPECT_CATEGORY_INTERCEPTED, note_iallreduce, SYMBOLS("MPI_Iallreduce")},
    {INSPECT_CATEGORY_INTERCEPTED, note_mpi_complete, SYMBOLS("MPI_Wait", "MPI_Waitall",
        "MPI_Waitany", "MPI_Waitsome", "MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome")},
    {INSPECT_CATEGORY_INTERCEPTED, note_mpi_free, SYMBOLS("MPI_Request_free")},
    {INSPECT_CATEGORY_INTERCEPTED, note_pmpi_wrapped, SYMBOLS("PMPI_Allreduce", "PMPI_Iallreduce")},
    {INSPECT_CATEGORY_INTERCEPTED, note_mpi_collective, SYMBOLS("MPI_Barrier", "MPI_Bcast")},

    /* stdio: glibc's stdio never calls the interposed POSIX functions, but
     * a stream the shim's fopen/fopen64/fdopen returned for a data file is a
     * cookie stream over the view, so all of these read the view on it. */
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_read, SYMBOLS("fread", "fread_unlocked",
        "__fread_chk", "__fread_unlocked_chk")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_line, SYMBOLS("fgets", "fgets_unlocked",
        "__fgets_chk", "__fgets_unlocked_chk", "getline", "getdelim", "__getdelim")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_char, SYMBOLS("fgetc", "fgetc_unlocked", "getc",
        "getc_unlocked", "_IO_getc", "getw")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_refill, SYMBOLS("__uflow", "__underflow")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_scan, SYMBOLS("fscanf", "vfscanf",
        "__isoc99_fscanf", "__isoc99_vfscanf", "__isoc23_fscanf", "__isoc23_vfscanf")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_unget, SYMBOLS("ungetc", "_IO_ungetc")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_position, SYMBOLS("ftell", "ftello", "ftello64",
        "fgetpos", "fgetpos64")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_state, SYMBOLS("feof", "feof_unlocked",
        "_IO_feof", "ferror", "ferror_unlocked", "clearerr", "clearerr_unlocked", "__freading")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_buffer, SYMBOLS("setvbuf", "setbuf", "setbuffer",
        "__fpurge")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_lock, SYMBOLS("flockfile", "funlockfile",
        "ftrylockfile", "__fsetlocking")},
    {INSPECT_CATEGORY_THROUGH_STREAM, note_stream_wide, SYMBOLS("fgetwc", "fgetwc_unlocked",
        "getwc", "getwc_unlocked", "fgetws", "fgetws_unlocked", "__fgetws_chk", "ungetwc",
        "__wuflow", "__wunderflow", "fwscanf", "vfwscanf", "__isoc99_fwscanf",
        "__isoc99_vfwscanf")},

    /* Harmless without the shim. */
    {INSPECT_CATEGORY_PASSED_THROUGH, note_hint, SYMBOLS("posix_fadvise", "posix_fadvise64",
        "readahead")},
    {INSPECT_CATEGORY_PASSED_THROUGH, note_dlopen, SYMBOLS("dlopen")},

    /* File input that no preload sees. */
    {INSPECT_CATEGORY_NOT_INTERCEPTED, note_syscall, SYMBOLS("syscall")},
    {INSPECT_CATEGORY_NOT_INTERCEPTED, note_posix_aio, SYMBOLS("aio_read", "aio_read64",
        "lio_listio", "lio_listio64")},
    {INSPECT_CATEGORY_NOT_INTERCEPTED, note_linux_aio, SYMBOLS("io_submit")},
    {INSPECT_CATEGORY_NOT_INTERCEPTED, note_open_by_handle, SYMBOLS("open_by_handle_at")},
    {INSPECT_CATEGORY_NOT_INTERCEPTED, note_dlmopen, SYMBOLS("dlmopen")},
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

/* ------------------------------------------------------------------------
 * Classification
 * ------------------------------------------------------------------------ */

/* Every MPI C function name has a lower-case letter after the prefix
 * (MPI_Allreduce, MPI_T_init_thread); Fortran compilers spell the same
 * binding in lower case with trailing underscores, or all in upper case. */
enum inspect_mpi_binding inspect_mpi_binding_of(const char *name)
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

/* The C profiling name a Fortran binding calls: lower-cased, without the
 * profiling "p", trailing underscores and the _f/_f08 suffixes of the
 * newer bindings, mpi_allreduce_ (or MPI_ALLREDUCE, pmpi_allreduce__,
 * mpi_allreduce_f08_) reads mpi_allreduce, which calls PMPI_Allreduce.
 * False when the name does not fit. */
static bool inspect_fortran_profiling_name(const char *name, char *out, size_t out_size)
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
    if (strncmp(normal, "mpi_", 4) != 0 || normal[4] == '\0' ||
        (size_t)snprintf(out, out_size, "PMPI_%s", normal + 4) >= out_size)
        return false;
    out[5] = (char)toupper((unsigned char)out[5]);
    return true;
}

static bool inspect_fortran_is_allreduce(const char *profiling_name)
{
    return strcmp(profiling_name, "PMPI_Allreduce") == 0 ||
           strcmp(profiling_name, "PMPI_Iallreduce") == 0;
}

/* Linear searches: the tables are small and a report runs once. */
static const struct inspect_symbol_rule *inspect_find_exact_rule(const char *name)
{
    for (size_t i = 0; i < INSPECT_ARRAY_LENGTH(inspect_symbol_rules); i++)
        for (const char *const *known = inspect_symbol_rules[i].names; *known != NULL; known++)
            if (strcmp(*known, name) == 0)
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
    case INSPECT_MPI_FORTRAN: {
        /* the binding calls the PMPI_ function: intercepted if the library
         * wraps that one */
        char profiling[80];
        if (!inspect_fortran_profiling_name(name, profiling, sizeof profiling)) {
            *note = note_fortran;
            return INSPECT_CATEGORY_PASSED_THROUGH;
        }
        if (inspect_symbol_set_contains(shim_exports, profiling)) {
            *note = note_fortran_wrapped;
            return INSPECT_CATEGORY_INTERCEPTED;
        }
        if (inspect_fortran_is_allreduce(profiling)) {
            *note = note_fortran_gradient;
            return INSPECT_CATEGORY_NOT_INTERCEPTED;
        }
        *note = note_fortran;
        return INSPECT_CATEGORY_PASSED_THROUGH;
    }
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
        import->category = inspect_classify_symbol(import->name, &shim_library->exports,
                                                   &import->note, &import->missing_from_shim);
    }
}
