/* io_mmap.c - wrappers of mmap, mmap64, munmap and mremap.  A mapping of a
 * data view gets what runtime/view_mapping.h decides: the file itself for a
 * transparent view, anonymous memory filled with the view's bytes otherwise,
 * EACCES for a writable mapping.  The anonymous mappings are remembered, so
 * that munmap of them is plain munmap and mremap of them is refused. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fork_locks.h"
#include "fork_safety.h"
#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "view_mapping.h"

static struct view_mapping_table shim_view_mappings = VIEW_MAPPING_TABLE_INITIALIZER;

void shim_mappings_freeze(void)
{
    view_mapping_table_freeze(&shim_view_mappings);
}

void shim_mappings_fork_prepare(void)
{
    fork_lock_before(&shim_view_mappings.lock);
}

void shim_mappings_fork_parent(void)
{
    fork_lock_after_in_parent(&shim_view_mappings.lock);
}

void shim_mappings_fork_child(void)
{
    fork_lock_after_in_child(&shim_view_mappings.lock);
}

static uint64_t shim_page_size(void)
{
    static uint64_t page_size;
    if (page_size == 0)
        page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    return page_size;
}

static void *shim_refuse_mapping(const struct dataset_file *file,
                                 const struct view_mapping_plan *plan)
{
    log_error("mmap of data file %s refused (%s): %s; accepted: read-only mappings "
              "(PROT_READ, MAP_PRIVATE or MAP_SHARED) with a page-aligned offset",
              file->path, strerror(plan->error), plan->reason);
    errno = plan->error;
    return MAP_FAILED;
}

/* A view that does not fit in memory is an error, never a silent mapping of
 * the physical file.  /proc/meminfo unreadable: the anonymous mmap decides. */
static bool shim_view_fits_in_memory(const struct dataset_file *file,
                                     const struct view_mapping_plan *plan)
{
    uint64_t available;
    if (view_mapping_available_memory(&available) != 0 || plan->resident_bytes <= available)
        return true;
    log_error("mmap of data file %s: its view needs %" PRIu64 " bytes of memory, only %" PRIu64
              " are available; accepted: views that fit in memory (a transparent view, "
              "shard=0:shuffle=0, maps the file itself)",
              file->path, plan->resident_bytes, available);
    return false;
}

static void *shim_map_from_view(struct dataset_file *file, void *address, int protection,
                                int64_t offset, const struct view_mapping_plan *plan)
{
    if (!shim_view_fits_in_memory(file, plan)) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    void *memory = REAL(mmap)(address, plan->mapped_length, PROT_READ | PROT_WRITE,
                              plan->anonymous_flags, -1, 0);
    if (memory == MAP_FAILED) {
        int saved = errno;
        log_error("mmap of data file %s: no memory for its view (%" PRIu64 " bytes): %s",
                  file->path, plan->mapped_length, strerror(saved));
        errno = saved;
        return MAP_FAILED;
    }
    uint64_t pass;
    uint64_t copied = view_mapping_fill(file, (uint64_t)offset, memory, plan->filled_length,
                                        &pass);
    if (mprotect(memory, plan->mapped_length, protection) != 0) {
        int saved = errno;
        REAL(munmap)(memory, plan->mapped_length);
        errno = saved;
        return MAP_FAILED;
    }
    if (view_mapping_table_add(&shim_view_mappings, memory, plan->mapped_length, file, pass) != 0)
        log_warn("mmap of data file %s: more than %d live mappings; mremap of this one is "
                 "not recognized", file->path, VIEW_MAPPING_TABLE_CAPACITY);
    log_info("mmap of data file %s: pass %" PRIu64 " view bytes %" PRId64 "..%" PRIu64
             " served from %" PRIu64 " bytes of memory",
             file->path, pass, offset, (uint64_t)offset + copied, plan->mapped_length);
    return memory;
}

static void *shim_view_mmap(struct fd_slot *slot, void *address, size_t length, int protection,
                            int flags, int fd, int64_t offset)
{
    struct dataset_file *file = slot->cursor.file;
    struct view_mapping_request request = {
        .offset = offset, .length = length, .protection = protection, .flags = flags};
    struct view_mapping_plan plan;
    void *result;
    shim_guard_enter();
    view_mapping_plan_for_file(file, &request, shim_page_size(), &plan);
    switch (plan.kind) {
    case VIEW_MAPPING_PHYSICAL:
        result = REAL(mmap)(address, length, protection, flags, fd, offset);
        if (result != MAP_FAILED)
            view_mapping_note_mapped(file);
        log_trace("mmap fd %d: transparent view of %s, the file itself", fd, file->path);
        break;
    case VIEW_MAPPING_FROM_VIEW:
        result = shim_map_from_view(file, address, protection, offset, &plan);
        break;
    default:
        result = shim_refuse_mapping(file, &plan);
        break;
    }
    int saved = errno;
    shim_guard_leave();
    fd_slot_release(slot);
    errno = saved;
    return result;
}

SHIM_EXPORT void *mmap(void *address, size_t length, int protection, int flags, int fd,
                       off_t offset)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(mmap)(address, length, protection, flags, fd, offset);
    return shim_view_mmap(slot, address, length, protection, flags, fd, offset);
}

/* On x86-64 off_t is off64_t and glibc's mmap64 is mmap under a second
 * name; so is ours, which keeps the two from drifting apart. */
SHIM_EXPORT void *mmap64(void *address, size_t length, int protection, int flags, int fd,
                         off64_t offset) __attribute__((alias("mmap")));

SHIM_EXPORT int munmap(void *address, size_t length)
{
    if (SHIM_LIKELY(view_mapping_table_empty(&shim_view_mappings)) || shim_guarded())
        return REAL(munmap)(address, length);
    int status = REAL(munmap)(address, length);
    if (status == 0) {
        /* the kernel unmaps whole pages: a length that ends inside a page
         * (the view's size, as numpy and Python's mmap pass it) takes the
         * rest of that page too, and the entry must go with it */
        uint64_t page = shim_page_size();
        uint64_t whole_pages = ((uint64_t)length + page - 1) / page * page;
        uint64_t forgotten = view_mapping_table_forget_range(&shim_view_mappings, address,
                                                             whole_pages);
        if (forgotten != 0)
            log_trace("munmap of %" PRIu64 " bytes of a data view's memory", forgotten);
    }
    return status;
}

/* Growing a view's memory would show zeros, not records, and moving it is
 * not worth supporting: loaders unmap and map again. */
SHIM_EXPORT void *mremap(void *old_address, size_t old_length, size_t new_length, int flags,
                         ...)
{
    void *new_address = NULL;
    if (flags & MREMAP_FIXED) {
        va_list arguments;
        va_start(arguments, flags);
        new_address = va_arg(arguments, void *);
        va_end(arguments);
    }
    struct view_mapping_entry entry;
    if (SHIM_UNLIKELY(!view_mapping_table_empty(&shim_view_mappings)) && !shim_guarded() &&
        view_mapping_table_find_overlap(&shim_view_mappings, old_address, old_length,
                                        &entry)) {
        log_error("mremap of the memory holding a view of data file %s (pass %" PRIu64
                  ") refused; accepted: munmap, then mmap of the file again",
                  entry.file->path, entry.pass);
        errno = EINVAL;
        return MAP_FAILED;
    }
    return REAL(mremap)(old_address, old_length, new_length, flags, new_address);
}
