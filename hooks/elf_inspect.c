/* elf_inspect.c - the preflight itself (see elf_inspect.h): loads the
 * preload library and the trainer (following a script to its interpreter),
 * classifies the trainer's imports, gives the verdict and writes the
 * report.  Reading files is elf_reader.c's, what a symbol means is
 * symbol_rules.c's. */
#include "elf_inspect.h"
#include "inspect_internal.h"

#include <elf.h>
#include <stdio.h>
#include <string.h>

/* Linux follows at most this many nested #! interpreters. */
#define INSPECT_SCRIPT_DEPTH 4
/* Report columns wider than this push the note further right. */
#define INSPECT_NAME_COLUMN_MAX 36

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
    static const char *const names[] = {
        [INSPECT_OK] = "OK",
        [INSPECT_WARNINGS] = "WARNINGS",
        [INSPECT_REFUSED] = "REFUSED",
        [INSPECT_ERROR] = "ERROR",
    };
    return (unsigned)verdict < sizeof names / sizeof names[0] ? names[verdict] : "ERROR";
}

const char *inspect_category_name(enum inspect_category category)
{
    static const char *const names[INSPECT_CATEGORY_COUNT] = {
#define INSPECT_CATEGORY(suffix, name, title) [INSPECT_CATEGORY_##suffix] = name,
#include "inspect_categories.def"
#undef INSPECT_CATEGORY
    };
    return (unsigned)category < INSPECT_CATEGORY_COUNT ? names[category] : "other";
}

/* ------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------ */

/* Section titles, by category; OTHER is only counted. */
static const char *const inspect_section_titles[INSPECT_CATEGORY_COUNT] = {
#define INSPECT_CATEGORY(suffix, name, title) [INSPECT_CATEGORY_##suffix] = title,
#include "inspect_categories.def"
#undef INSPECT_CATEGORY
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
    size_t mpi_c = 0, mpi_c_intercepted = 0, mpi_fortran = 0, mpi_fortran_unseen = 0;
    for (size_t i = 0; i < file->import_count; i++) {
        const struct inspect_import *import = &file->imports[i];
        counts[import->category]++;
        enum inspect_mpi_binding binding = inspect_mpi_binding_of(import->name);
        if (binding == INSPECT_MPI_C || binding == INSPECT_MPI_PROFILING_C) {
            mpi_c++;
            if (import->category == INSPECT_CATEGORY_INTERCEPTED)
                mpi_c_intercepted++;
        } else if (binding == INSPECT_MPI_FORTRAN) {
            mpi_fortran++;
            if (import->category == INSPECT_CATEGORY_NOT_INTERCEPTED)
                mpi_fortran_unseen++;
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
        fprintf(out, "; Fortran binding imports: %zu, %zu of them not seen", mpi_fortran,
                mpi_fortran_unseen);
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
        error_message(error, error_size, "preload library %s", library_error);
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
            error_message(error, error_size, "%s: scripts run by scripts more than %d deep",
                         trainer_path, INSPECT_SCRIPT_DEPTH);
            goto done;
        }
        if (script->script_program == NULL) {
            error_message(error, error_size,
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
            error_message(error, error_size, "%s: a script run by %s, which cannot be inspected: %s",
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
