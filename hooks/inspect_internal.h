/* inspect_internal.h - what the files of the ELF preflight share with each
 * other and not with their users (who include elf_inspect.h only): the
 * one-line error message of elf_reader.c, the MPI binding of a symbol name
 * from symbol_rules.c (the report counts MPI imports by it), the script
 * reader elf_reader.c hands #! files to, and an array length. */
#ifndef ADAPTSHIM_INSPECT_INTERNAL_H
#define ADAPTSHIM_INSPECT_INTERNAL_H

#include <stddef.h>

#define INSPECT_ARRAY_LENGTH(array) (sizeof(array) / sizeof((array)[0]))

/* Formats a one-line message into error and returns -1. */
__attribute__((format(printf, 3, 4)))
#include "error_message.h"

enum inspect_mpi_binding {
    INSPECT_MPI_NONE,
    INSPECT_MPI_C,            /* MPI_Allreduce */
    INSPECT_MPI_PROFILING_C,  /* PMPI_Allreduce */
    INSPECT_MPI_FORTRAN,      /* mpi_allreduce_, MPI_ALLREDUCE, pmpi_allreduce__ ... */
};

/* Which MPI binding a symbol name belongs to, if any. */
enum inspect_mpi_binding inspect_mpi_binding_of(const char *name);

/* Linux reads this much of a file to find a #! line (BINPRM_BUF_SIZE). */
#define INSPECT_HEAD_SIZE 256

/* Fills `file` from the first `length` bytes of a file that starts with
 * "#!" (script_reader.c): its kind, interpreter, interpreter argument and
 * the program that runs.  -1 with a message when the line names no
 * interpreter or memory runs out. */
struct inspect_elf_file;
int inspect_read_script(struct inspect_elf_file *file, const char *head, size_t length,
                        char *error, size_t error_size);

#endif
