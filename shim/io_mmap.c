/* io_mmap.c - mmap of a data view is not virtualized in this version: a
 * warning once per process, then the real mapping of the physical file. */
#include <sys/mman.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"

void shim_warn_mmap_once(struct fd_slot *slot)
{
    static int warned;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_ACQ_REL) == 0)
        log_warn("mmap of data file %s is not virtualized: the mapping shows the whole "
                 "physical file, not this replica's view", slot->cursor.file->path);
}

SHIM_EXPORT void *mmap(void *address, size_t length, int protection, int flags, int fd,
                       off_t offset)
{
    struct fd_slot *slot = fd_table_lookup(fd);
    if (SHIM_UNLIKELY(slot != NULL) && slot->kind == FD_SLOT_VIEW && !shim_guarded())
        shim_warn_mmap_once(slot);
    return REAL(mmap)(address, length, protection, flags, fd, offset);
}

SHIM_EXPORT void *mmap64(void *address, size_t length, int protection, int flags, int fd,
                         off64_t offset)
{
    struct fd_slot *slot = fd_table_lookup(fd);
    if (SHIM_UNLIKELY(slot != NULL) && slot->kind == FD_SLOT_VIEW && !shim_guarded())
        shim_warn_mmap_once(slot);
    return REAL(mmap64)(address, length, protection, flags, fd, offset);
}
