/* elf_inspect.h - the ELF preflight of a trainer (adaptdl-inspect(1), adaptdl-wrap(1)): can
 * LD_PRELOAD reach the program at all, what does it import, and which of
 * those imports libadaptshim.so intercepts.
 *
 * It runs in the launcher, never under the preload, and reads files with
 * plain descriptors and libelf.  What the shim intercepts is not written
 * down here: it is read from the dynamic symbol table of the library file
 * itself, so the report cannot drift from shim/exports.map.  The tables in
 * symbol_rules.c only add what a symbol means (streams, hints, calls that
 * bypass any preload) and a note per symbol.
 *
 * Errors come back as one line naming the file and what is wrong, for the
 * caller to print.
 *
 * The files: elf_reader.c reads a file or script and resolves commands
 * through PATH, symbol_rules.c classifies imports, elf_inspect.c gives the
 * verdict and writes the report; inspect_internal.h is what they share. */
#ifndef ADAPTSHIM_ELF_INSPECT_H
#define ADAPTSHIM_ELF_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The outcome of a preflight; adaptdl-inspect turns it into its exit status. */
enum inspect_verdict {
    INSPECT_OK,        /* every file-input and MPI call it imports reaches the shim */
    INSPECT_WARNINGS,  /* some imported call will not be intercepted (listed) */
    INSPECT_REFUSED,   /* LD_PRELOAD cannot reach it: static, or for another machine */
    INSPECT_ERROR,     /* missing, unreadable, not ELF nor a script */
};

enum inspect_file_kind {
    INSPECT_KIND_DYNAMIC_PROGRAM,  /* has PT_INTERP: the dynamic loader runs it */
    INSPECT_KIND_SHARED_LIBRARY,   /* dynamic, no PT_INTERP, not a PIE */
    INSPECT_KIND_STATIC_PROGRAM,   /* no PT_INTERP, no PT_DYNAMIC */
    INSPECT_KIND_STATIC_PIE,       /* PT_DYNAMIC for its own relocation only */
    INSPECT_KIND_SCRIPT,           /* starts with #! */
};

/* How one imported symbol fares under the shim (inspect_categories.def). */
enum inspect_category {
#define INSPECT_CATEGORY(suffix, name, title) INSPECT_CATEGORY_##suffix,
#include "inspect_categories.def"
#undef INSPECT_CATEGORY
    INSPECT_CATEGORY_COUNT
};

/* A sorted set of symbol names, searched with bsearch. */
struct inspect_symbol_set {
    char **names;
    size_t count;
};

struct inspect_import {
    char *name;
    char *version;       /* "GLIBC_2.2.5" from .gnu.version_r, or NULL if unversioned */
    enum inspect_category category;  /* set by inspect_classify_imports */
    const char *note;    /* static text, set by inspect_classify_imports */
    /* The shim is expected to export it (it does in this source tree) but
     * the library inspected against does not: an old or foreign library. */
    bool missing_from_shim;
};

struct inspect_elf_file {
    char *path;
    enum inspect_file_kind kind;
    /* A program: its PT_INTERP (the dynamic loader).  A script: the path on
     * its #! line, with the optional argument after it. */
    char *interpreter;
    char *interpreter_argument;
    /* A script: the program the kernel ends up running, which is what
     * LD_PRELOAD reaches: the interpreter itself, or for "#!/usr/bin/env
     * NAME" NAME resolved through PATH.  NULL when NAME is not in PATH. */
    char *script_program;
    int elf_class;               /* ELFCLASS32 or ELFCLASS64; 0 for a script */
    int machine;                 /* e_machine; 0 for a script */
    bool position_independent;   /* ET_DYN program */
    /* false for a dynamic file without section headers (sstrip): its
     * imports cannot be listed. */
    bool has_dynamic_symbols;
    char **needed;               /* DT_NEEDED, in file order */
    size_t needed_count;
    struct inspect_import *imports;  /* undefined dynamic symbols, sorted by name */
    size_t import_count;
    struct inspect_symbol_set exports;  /* defined global function symbols */
};

/* Loads path: a script's #! line, or an ELF file's kind, needed libraries,
 * imports and exports.  Returns 0, or -1 with a one-line message naming the
 * file in error.  The file is left zeroed on error; free it either way. */
int inspect_elf_file_load(struct inspect_elf_file *file, const char *path, char *error,
                          size_t error_size);
void inspect_elf_file_free(struct inspect_elf_file *file);

/* Loads the preload library and checks it is a shared library that exports
 * functions.  Returns 0 or -1 with a one-line message. */
int inspect_shim_library_load(struct inspect_elf_file *library, const char *path, char *error,
                              size_t error_size);

const struct inspect_import *inspect_elf_file_find_import(const struct inspect_elf_file *file,
                                                          const char *name);
bool inspect_symbol_set_contains(const struct inspect_symbol_set *set, const char *name);

/* The category of one imported name, and a note saying why (static text).
 * A Fortran MPI binding is intercepted when the library wraps the PMPI_
 * function it calls. */
enum inspect_category inspect_classify_symbol(const char *name,
                                              const struct inspect_symbol_set *shim_exports,
                                              const char **note, bool *missing_from_shim);
/* Classifies every import of file against the library's exports. */
void inspect_classify_imports(struct inspect_elf_file *file,
                              const struct inspect_elf_file *shim_library);

/* The verdict for a loaded and classified ELF file (not a script). */
enum inspect_verdict inspect_verdict_of(const struct inspect_elf_file *file,
                                        const struct inspect_elf_file *shim_library);

/* Resolves a command name through PATH the way execvp does: a name with a
 * slash is taken as it is; otherwise the first PATH entry holding a regular
 * executable file of that name wins (PATH unset: /bin:/usr/bin; an empty
 * entry is the current directory).  Returns 0 with the path in out, or -1. */
int inspect_resolve_command(const char *name, char *out, size_t out_size);

/* The whole preflight: loads the library and the trainer (following a
 * script to its interpreter), writes the report to out and returns the
 * verdict.  On INSPECT_ERROR nothing is written and error holds one line
 * naming the file and what is wrong. */
enum inspect_verdict inspect_write_report(FILE *out, const char *trainer_path,
                                          const char *library_path, char *error,
                                          size_t error_size);

const char *inspect_verdict_name(enum inspect_verdict verdict);
const char *inspect_category_name(enum inspect_category category);

#endif
