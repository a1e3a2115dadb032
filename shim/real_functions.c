/* real_functions.c - resolution of the wrapped libc functions (see
 * real_functions.h).
 *
 * dlsym may allocate, and an allocator may open files.  Resolution runs with
 * the shim's recursion guard set, and a nested call to the resolver on the
 * same thread returns at once instead of recursing: a wrapper reached from
 * inside dlsym then sees only the entries resolved so far.  The table is
 * resolved before main (from the start-up wrapper) and on the first call of
 * any wrapper, whichever comes first. */
#include "real_functions.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include "shim.h"

struct shim_real_functions shim_real;

#define SHIM_REAL_NAME_ENTRY(name, return_type, arguments) \
    {#name, offsetof(struct shim_real_functions, name)},
static const struct {
    const char *name;
    size_t offset;
} shim_real_function_names[] = {SHIM_REAL_FUNCTION_LIST(SHIM_REAL_NAME_ENTRY)};
#undef SHIM_REAL_NAME_ENTRY

void shim_resolve_real_functions(void)
{
    static int resolved;
    static __thread int resolving;
    if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) || resolving)
        return;
    resolving = 1;
    shim_guard_enter();
    size_t count = sizeof shim_real_function_names / sizeof shim_real_function_names[0];
    for (size_t i = 0; i < count; i++) {
        void **slot = (void **)((char *)&shim_real + shim_real_function_names[i].offset);
        if (*slot == NULL)
            *slot = dlsym(RTLD_NEXT, shim_real_function_names[i].name);
    }
    shim_guard_leave();
    resolving = 0;
    __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}
