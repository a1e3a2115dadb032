/* symbol_rules.c - what an imported symbol means under the shim (see
 * elf_inspect.h): the rule tables built from symbol_rules.def, and the
 * classification of one symbol and of a file's imports.
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

/* Known symbols and what they mean (symbol_rules.def): a category, the
 * note the report prints, and the names (exact, or prefixes). */
struct inspect_symbol_rule {
    enum inspect_category category;
    const char *note;
    const char *const *names; /* NULL-terminated */
};

/* A rule's names: a NULL-terminated array of static storage. */
#define INSPECT_NAME_LIST(...) ((const char *const[]){__VA_ARGS__, NULL})
#define INSPECT_RULE_ROW(category, note, ...) \
    {INSPECT_CATEGORY_##category, note, INSPECT_NAME_LIST(__VA_ARGS__)},

static const struct inspect_symbol_rule inspect_symbol_rules[] = {
#define SYMBOL_RULE INSPECT_RULE_ROW
#define PREFIX_RULE(category, note, ...)
#include "symbol_rules.def"
#undef SYMBOL_RULE
#undef PREFIX_RULE
};

/* Tried after the exact names. */
static const struct inspect_symbol_rule inspect_prefix_rules[] = {
#define SYMBOL_RULE(category, note, ...)
#define PREFIX_RULE INSPECT_RULE_ROW
#include "symbol_rules.def"
#undef SYMBOL_RULE
#undef PREFIX_RULE
};

/* Notes of the symbols no table names, chosen by the code below. */
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

static const struct inspect_symbol_rule *inspect_find_prefix_rule(const char *name)
{
    for (size_t i = 0; i < INSPECT_ARRAY_LENGTH(inspect_prefix_rules); i++)
        for (const char *const *prefix = inspect_prefix_rules[i].names; *prefix != NULL; prefix++)
            if (strncmp(name, *prefix, strlen(*prefix)) == 0)
                return &inspect_prefix_rules[i];
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

    const struct inspect_symbol_rule *prefix_rule = inspect_find_prefix_rule(name);
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
