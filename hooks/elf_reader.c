/* elf_reader.c - reading a trainer as the dynamic loader would see it (see
 * elf_inspect.h): an ELF file's kind, needed libraries, imports with their
 * versions, and exports.  A file that starts with #! is script_reader.c's.
 *
 * Its program headers say whether a loader runs a file at all
 * (PT_INTERP), and its dynamic symbol table says what it imports.
 * libadaptshim.so is read with the same code: its exports are what
 * symbol_rules.c classifies imports against.
 *
 * Files are read with plain open/pread and libelf: this runs in the
 * launcher, not under the preload. */
#include "error_message.h"
#include "elf_inspect.h"
#include "inspect_internal.h"

#include <ar.h>
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

/* ------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------------
 * ELF files
 * ------------------------------------------------------------------------ */

/* Copies the NUL-terminated path stored in a PT_INTERP segment. */
static int inspect_read_interpreter(struct inspect_elf_file *file, Elf *elf,
                                    const GElf_Phdr *segment, char *error, size_t error_size)
{
    if (segment->p_filesz == 0)
        return error_message(error, error_size, "%s: empty PT_INTERP segment", file->path);
    Elf_Data *data = elf_getdata_rawchunk(elf, (int64_t)segment->p_offset,
                                          (size_t)segment->p_filesz, ELF_T_BYTE);
    if (data == NULL || data->d_buf == NULL)
        return error_message(error, error_size, "%s: damaged PT_INTERP segment: %s", file->path,
                            elf_errmsg(-1));
    size_t length = strnlen(data->d_buf, data->d_size);
    free(file->interpreter);
    file->interpreter = strndup(data->d_buf, length);
    if (file->interpreter == NULL)
        return error_message(error, error_size, "%s: out of memory", file->path);
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
            return error_message(error, error_size, "%s: damaged section header: %s",
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
        return error_message(error, error_size, "%s: damaged PT_DYNAMIC segment: %s",
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
        return error_message(error, error_size, "%s: out of memory", file->path);
    for (size_t i = 0; i < entry_count; i++) {
        if (gelf_getdyn(data, (int)i, &entry) == NULL || entry.d_tag != DT_NEEDED)
            continue;
        const char *name = elf_strptr(elf, dynamic_strings, (size_t)entry.d_un.d_val);
        if (name == NULL)
            return error_message(error, error_size, "%s: damaged DT_NEEDED entry: %s",
                                file->path, elf_errmsg(-1));
        file->needed[file->needed_count] = strdup(name);
        if (file->needed[file->needed_count] == NULL)
            return error_message(error, error_size, "%s: out of memory", file->path);
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
        return error_message(error, error_size, "%s: damaged .gnu.version_r: %s", file->path,
                            elf_errmsg(-1));
    Elf_Data *data = elf_getdata(section, NULL);
    if (data == NULL)
        return error_message(error, error_size, "%s: damaged .gnu.version_r: %s", file->path,
                            elf_errmsg(-1));
    *largest_index = 0;
    size_t offset = 0;
    /* sh_info is the number of entries: it bounds the walk even if the
     * next-entry offsets of a damaged file loop. */
    for (size_t entry = 0; entry < header.sh_info; entry++) {
        GElf_Verneed needed;
        if (gelf_getverneed(data, (int)offset, &needed) == NULL)
            return error_message(error, error_size, "%s: damaged .gnu.version_r entry",
                                file->path);
        size_t auxiliary_offset = offset + needed.vn_aux;
        for (unsigned i = 0; i < needed.vn_cnt; i++) {
            GElf_Vernaux auxiliary;
            if (gelf_getvernaux(data, (int)auxiliary_offset, &auxiliary) == NULL)
                return error_message(error, error_size, "%s: damaged .gnu.version_r entry",
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
        return error_message(error, error_size, "%s: out of memory", file->path);
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
        return error_message(error, error_size, "%s: damaged .dynsym: %s", file->path,
                            elf_errmsg(-1));
    Elf_Data *symbols = elf_getdata(sections->dynamic_symbols, NULL);
    if (symbols == NULL)
        return error_message(error, error_size, "%s: damaged .dynsym: %s", file->path,
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
        error_message(error, error_size, "%s: out of memory", file->path);
        goto done;
    }
    /* Entry 0 is the reserved null symbol. */
    for (size_t i = 1; i < symbol_count; i++) {
        GElf_Sym symbol;
        if (gelf_getsym(symbols, (int)i, &symbol) == NULL) {
            error_message(error, error_size, "%s: damaged .dynsym entry %zu", file->path, i);
            goto done;
        }
        const char *name = elf_strptr(elf, header.sh_link, symbol.st_name);
        if (name == NULL) {
            error_message(error, error_size, "%s: damaged .dynsym name: %s", file->path,
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
                error_message(error, error_size, "%s: out of memory", file->path);
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
                        error_message(error, error_size, "%s: out of memory", file->path);
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
                error_message(error, error_size, "%s: out of memory", file->path);
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
        return error_message(error, error_size, "%s: an archive, not a program", file->path);
    GElf_Ehdr header;
    if (gelf_getehdr(elf, &header) == NULL)
        return error_message(error, error_size, "%s: damaged ELF header: %s", file->path,
                            elf_errmsg(-1));
    file->elf_class = gelf_getclass(elf);
    file->machine = header.e_machine;
    switch (header.e_type) {
    case ET_EXEC:
    case ET_DYN:
        break;
    case ET_REL:
        return error_message(error, error_size,
                            "%s: an object file (.o), not a program: link it first",
                            file->path);
    case ET_CORE:
        return error_message(error, error_size, "%s: a core dump, not a program", file->path);
    default:
        return error_message(error, error_size, "%s: an ELF file of unknown type %u, not a program",
                            file->path, (unsigned)header.e_type);
    }

    size_t segment_count;
    if (elf_getphdrnum(elf, &segment_count) != 0)
        return error_message(error, error_size, "%s: damaged program headers: %s", file->path,
                            elf_errmsg(-1));
    bool has_interpreter = false;
    bool has_dynamic_segment = false;
    GElf_Phdr dynamic_segment;
    memset(&dynamic_segment, 0, sizeof dynamic_segment);
    for (size_t i = 0; i < segment_count; i++) {
        GElf_Phdr segment;
        if (gelf_getphdr(elf, (int)i, &segment) == NULL)
            return error_message(error, error_size, "%s: damaged program header %zu: %s",
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
        return error_message(error, error_size, "%s: libelf does not support this ELF version: %s",
                            file->path, elf_errmsg(-1));
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    if (elf == NULL)
        return error_message(error, error_size, "%s: damaged ELF file: %s", file->path,
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
        return error_message(error, error_size, "%s: cannot stat: %s", file->path,
                            strerror(errno));
    if (S_ISDIR(status.st_mode))
        return error_message(error, error_size, "%s: a directory, not a program", file->path);
    if (!S_ISREG(status.st_mode))
        return error_message(error, error_size, "%s: not a regular file, not a program",
                            file->path);

    char head[INSPECT_HEAD_SIZE];
    ssize_t length = inspect_read_head(fd, head, sizeof head);
    if (length < 0)
        return error_message(error, error_size, "%s: cannot read: %s", file->path,
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
    return error_message(error, error_size,
                        "%s: %s (accepted: a dynamically linked program, or a #! script)",
                        file->path, what);
}

int inspect_elf_file_load(struct inspect_elf_file *file, const char *path, char *error,
                          size_t error_size)
{
    memset(file, 0, sizeof *file);
    file->path = strdup(path);
    if (file->path == NULL)
        return error_message(error, error_size, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error_message(error, error_size, "%s: cannot open: %s", path, strerror(errno));
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
    error_message(error, error_size, "%s: %s", path, problem);
    inspect_elf_file_free(library);
    return -1;
}
