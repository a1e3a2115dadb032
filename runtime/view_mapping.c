/* view_mapping.c - the mmap policy for data files and the table of the
 * shim's anonymous mappings (see view_mapping.h). */
#include "view_mapping.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "sysio.h"
#include "view_cursor.h"

bool view_mapping_view_is_file(const struct dataset_file *file)
{
    bool records_in_file_order = !file->entry->shuffle || file->record_count <= 1;
    bool every_record_once = file->replicas == 1 && file->view_start_index == 0 &&
                             file->view_length == file->record_count;
    bool same_size = file->view_size == file->file_size;
    bool same_header = file->header_size == 0 ||
                       memcmp(file->header, file->map, file->header_size) == 0;
    return records_in_file_order && every_record_once && same_size && same_header;
}

int view_mapping_anonymous_flags(int flags)
{
    int kept = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_NORESERVE | MAP_LOCKED |
                        MAP_32BIT);
    return MAP_PRIVATE | MAP_ANONYMOUS | kept;
}

static void view_mapping_refuse(struct view_mapping_plan *plan, int error, const char *reason)
{
    plan->kind = VIEW_MAPPING_REFUSED;
    plan->error = error;
    plan->reason = reason;
}

static uint64_t view_mapping_round_up(uint64_t bytes, uint64_t page_size)
{
    return (bytes + page_size - 1) / page_size * page_size;
}

/* The arguments the kernel itself would reject with EINVAL. */
static const char *view_mapping_invalid_arguments(const struct view_mapping_request *request,
                                                  uint64_t page_size)
{
    if (request->length == 0)
        return "length 0";
    if (request->offset < 0 || (uint64_t)request->offset % page_size != 0)
        return "offset not a multiple of the page size";
    if (request->length > UINT64_MAX - page_size ||
        (uint64_t)request->offset > UINT64_MAX - request->length)
        return "offset plus length overflows";
    return NULL;
}

void view_mapping_plan_request(const struct view_mapping_request *request, bool view_is_file,
                               uint64_t view_size, uint64_t page_size,
                               struct view_mapping_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    const char *invalid = view_mapping_invalid_arguments(request, page_size);
    if (invalid != NULL) {
        view_mapping_refuse(plan, EINVAL, invalid);
        return;
    }
    if (request->protection & PROT_WRITE) {
        view_mapping_refuse(plan, EACCES, (request->flags & MAP_TYPE) == MAP_PRIVATE
                                              ? "writable (PROT_WRITE) private mapping"
                                              : "writable (PROT_WRITE) shared mapping");
        return;
    }
    plan->mapped_length = view_mapping_round_up(request->length, page_size);
    if (view_is_file) {
        plan->kind = VIEW_MAPPING_PHYSICAL;
        return;
    }
    uint64_t offset = (uint64_t)request->offset;
    uint64_t left_in_view = offset < view_size ? view_size - offset : 0;
    plan->kind = VIEW_MAPPING_FROM_VIEW;
    plan->filled_length = request->length < left_in_view ? request->length : left_in_view;
    plan->resident_bytes = view_mapping_round_up(plan->filled_length, page_size);
    plan->anonymous_flags = view_mapping_anonymous_flags(request->flags);
}

void view_mapping_plan_for_file(struct dataset_file *file,
                                const struct view_mapping_request *request,
                                uint64_t page_size, struct view_mapping_plan *plan)
{
    dataset_file_lock(file);
    bool view_is_file = view_mapping_view_is_file(file);
    uint64_t view_size = file->view_size;
    dataset_file_unlock(file);
    view_mapping_plan_request(request, view_is_file, view_size, page_size, plan);
}

/* view_mapping_note_mapped with file->lock held. */
/* See VIEW_MAPPING_WINDOW_SIGN.  Lock held. */
static void view_mapping_check_windows_locked(struct dataset_file *file)
{
    file->shared->mappings++;
    if (file->shared->window_mappings_warned || view_mapping_view_is_file(file) ||
        file->shared->mappings < VIEW_MAPPING_WINDOW_SIGN)
        return;
    file->shared->window_mappings_warned = true;
    log_warn("%s: mapped %llu times, each time anew: if this is a loader that samples random "
             "windows of a memmap (nanoGPT's get_batch), its windows are not records, the shim "
             "cannot shard or shuffle them, and every mapping copies the whole view; add "
             "shard=0:shuffle=0 to the file's ADAPTDL_DATA entry (the file itself is mapped) "
             "and let each replica seed its own windows",
             file->path, (unsigned long long)file->shared->mappings);
}

static void view_mapping_note_mapped_locked(struct dataset_file *file)
{
    view_mapping_check_windows_locked(file);
    bool started = dataset_view_started(file);
    dataset_view_note_mapped(file);
    if (started)
        return;
    if (view_cursor_pass_observer != NULL)
        view_cursor_pass_observer(file, true, file->view_pass, 0, "mapped");
    log_debug("pass begin: %s pass %llu mapped, indices from %llu, %llu records on replica "
              "%u of %u",
              file->path, (unsigned long long)file->view_pass,
              (unsigned long long)file->view_start_index,
              (unsigned long long)file->view_length, file->rank, file->replicas);
}

void view_mapping_note_mapped(struct dataset_file *file)
{
    dataset_file_lock(file);
    view_mapping_note_mapped_locked(file);
    dataset_file_unlock(file);
}

uint64_t view_mapping_fill(struct dataset_file *file, uint64_t offset, void *destination,
                           uint64_t capacity, uint64_t *pass)
{
    dataset_file_lock(file);
    uint64_t copied = 0;
    unsigned char *out = destination;
    /* dataset_view_copy takes a size_t; copy in bounded pieces so that no
     * length is ever truncated */
    while (copied < capacity && offset + copied < file->view_size) {
        uint64_t piece = capacity - copied;
        if (piece > ((uint64_t)1 << 30))
            piece = (uint64_t)1 << 30;
        size_t got = dataset_view_copy(file, offset + copied, out + copied, (size_t)piece);
        if (got == 0)
            break;
        copied += got;
    }
    view_mapping_note_mapped_locked(file);
    *pass = file->view_pass;
    dataset_file_unlock(file);
    return copied;
}

/* --- memory ----------------------------------------------------------------- */

int view_mapping_parse_meminfo(const char *text, uint64_t *available_bytes)
{
    static const char key[] = "MemAvailable:";
    for (const char *line = text; line != NULL && *line != '\0';) {
        if (strncmp(line, key, sizeof key - 1) == 0) {
            char *end;
            unsigned long long kibibytes = strtoull(line + sizeof key - 1, &end, 10);
            if (end == line + sizeof key - 1)
                return -1;
            *available_bytes = (uint64_t)kibibytes * 1024;
            return 0;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return -1;
}

int view_mapping_available_memory(uint64_t *available_bytes)
{
    int fd = runtime_sysio.open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text[8192];
    size_t used = 0;
    for (;;) {
        ssize_t got = runtime_sysio.read(fd, text + used, sizeof text - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        used += (size_t)got;
        if (used == sizeof text - 1)
            break;
    }
    runtime_sysio.close(fd);
    text[used] = '\0';
    return view_mapping_parse_meminfo(text, available_bytes);
}

/* --- the shim's anonymous mappings ------------------------------------------ */

void view_mapping_table_freeze(struct view_mapping_table *table)
{
    pthread_mutex_lock(&table->lock);
    table->frozen = true;
    __atomic_store_n(&table->count, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&table->lock);
}

int view_mapping_table_add(struct view_mapping_table *table, const void *start,
                           uint64_t length, const struct dataset_file *file, uint64_t pass)
{
    pthread_mutex_lock(&table->lock);
    int status = -1;
    if (table->frozen) {
        status = 0;
    } else if (table->count < VIEW_MAPPING_TABLE_CAPACITY) {
        table->entries[table->count] = (struct view_mapping_entry){
            .start = (uintptr_t)start, .length = length, .file = file, .pass = pass};
        __atomic_store_n(&table->count, table->count + 1, __ATOMIC_RELEASE);
        status = 0;
    }
    pthread_mutex_unlock(&table->lock);
    return status;
}

static bool view_mapping_ranges_overlap(uintptr_t a_start, uint64_t a_length,
                                        uintptr_t b_start, uint64_t b_length)
{
    return a_start < b_start + b_length && b_start < a_start + a_length;
}

bool view_mapping_table_find_overlap(struct view_mapping_table *table, const void *start,
                                     uint64_t length, struct view_mapping_entry *found)
{
    pthread_mutex_lock(&table->lock);
    bool any = false;
    for (unsigned i = 0; i < table->count && !any; i++) {
        const struct view_mapping_entry *entry = &table->entries[i];
        if (view_mapping_ranges_overlap(entry->start, entry->length, (uintptr_t)start,
                                        length)) {
            *found = *entry;
            any = true;
        }
    }
    pthread_mutex_unlock(&table->lock);
    return any;
}

/* Cuts [start, end) out of one entry.  Returns the bytes cut; sets *gone
 * when nothing of the entry remains. */
static uint64_t view_mapping_entry_cut(struct view_mapping_entry *entry, uintptr_t start,
                                       uintptr_t end, bool *gone)
{
    uintptr_t entry_end = entry->start + entry->length;
    uintptr_t cut_start = start > entry->start ? start : entry->start;
    uintptr_t cut_end = end < entry_end ? end : entry_end;
    *gone = false;
    if (cut_start >= cut_end)
        return 0;
    if (cut_start == entry->start && cut_end == entry_end) {
        *gone = true;
    } else if (cut_start == entry->start) {
        entry->start = cut_end;
        entry->length = entry_end - cut_end;
    } else if (cut_end == entry_end) {
        entry->length = cut_start - entry->start;
    }
    return cut_end - cut_start;
}

uint64_t view_mapping_table_forget_range(struct view_mapping_table *table, const void *start,
                                         uint64_t length)
{
    uintptr_t begin = (uintptr_t)start;
    uintptr_t end = begin + length < begin ? UINTPTR_MAX : begin + length;
    uint64_t forgotten = 0;
    pthread_mutex_lock(&table->lock);
    for (unsigned i = 0; i < table->count;) {
        bool gone;
        forgotten += view_mapping_entry_cut(&table->entries[i], begin, end, &gone);
        if (!gone) {
            i++;
            continue;
        }
        table->entries[i] = table->entries[table->count - 1];
        __atomic_store_n(&table->count, table->count - 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&table->lock);
    return forgotten;
}
