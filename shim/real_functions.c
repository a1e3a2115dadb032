/* real_functions.c - resolution of the wrapped libc functions, and the
 * stand-ins of those the C library does not have (see real_functions.h).
 *
 * dlsym may allocate, and an allocator may open files.  Resolution runs with
 * the shim's recursion guard set, and a nested call to the resolver on the
 * same thread returns at once instead of recursing: a wrapper reached from
 * inside dlsym then looks up its own entry alone (shim_real_function).  The
 * table is resolved before main (from the start-up wrapper) and on the first
 * call of any wrapper, whichever comes first. */
#include "real_functions.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

struct shim_real_functions shim_real;

#define SHIM_REAL_REQUIRED_required true
#define SHIM_REAL_REQUIRED_optional false

#define SHIM_REAL_NAME_ENTRY(name, policy, return_type, arguments, failure) \
    {#name, offsetof(struct shim_real_functions, name), SHIM_REAL_REQUIRED_##policy},
static const struct {
    const char *name;
    size_t offset;
    bool required;
} shim_real_function_names[] = {SHIM_REAL_FUNCTION_LIST(SHIM_REAL_NAME_ENTRY)};
#undef SHIM_REAL_NAME_ENTRY

/* Optional stand-ins report once per function. */
static char shim_real_reported[SHIM_REAL_COUNT];

/* One line on stderr through the system call itself: write() may be the
 * very function that is missing. */
static void shim_real_write_line(const char *line, size_t length)
{
    while (length > 0) {
        long written = syscall(SYS_write, STDERR_FILENO, line, length);
        if (written < 0 && errno == EINTR)
            continue;
        if (written <= 0)
            return;
        line += written;
        length -= (size_t)written;
    }
}

/* What every stand-in does before returning its failure value. */
static void shim_real_missing(enum shim_real_index index)
{
    const char *name = shim_real_function_names[index].name;
    char line[320];
    int length;
    if (shim_real_function_names[index].required) {
        length = snprintf(line, sizeof line,
                          "adaptshim: cannot run without the C library's %s, which nothing "
                          "after libadaptshim.so defines (the library must be preloaded, "
                          "ahead of libc): aborting\n", name);
        if (length > 0)
            shim_real_write_line(line, (size_t)length < sizeof line ? (size_t)length
                                                                    : sizeof line - 1);
        abort();
    }
    if (!__atomic_exchange_n(&shim_real_reported[index], 1, __ATOMIC_ACQ_REL)) {
        int saved = errno;
        length = snprintf(line, sizeof line,
                          "adaptshim: %s is not in this C library (nothing after "
                          "libadaptshim.so defines it): the call fails with ENOSYS\n", name);
        if (length > 0)
            shim_real_write_line(line, (size_t)length < sizeof line ? (size_t)length
                                                                    : sizeof line - 1);
        errno = saved;
    }
    errno = ENOSYS;
}

/* The stand-ins, one per entry, with the entry's own type. */
#define SHIM_REAL_STAND_IN(name, policy, return_type, arguments, failure) \
    static return_type shim_stand_in_##name arguments                      \
    {                                                                      \
        shim_real_missing(SHIM_REAL_INDEX_##name);                         \
        return failure;                                                    \
    }
SHIM_REAL_FUNCTION_LIST(SHIM_REAL_STAND_IN)
#undef SHIM_REAL_STAND_IN

#define SHIM_REAL_STAND_IN_ENTRY(name, policy, return_type, arguments, failure) \
    (void *)shim_stand_in_##name,
static void *const shim_real_stand_ins[] = {SHIM_REAL_FUNCTION_LIST(SHIM_REAL_STAND_IN_ENTRY)};
#undef SHIM_REAL_STAND_IN_ENTRY

static void **shim_real_slot(size_t index)
{
    return (void **)((char *)&shim_real + shim_real_function_names[index].offset);
}

/* dlsym of one entry, or its stand-in. */
static void *shim_real_lookup(size_t index)
{
    void *function = dlsym(RTLD_NEXT, shim_real_function_names[index].name);
    return function != NULL ? function : shim_real_stand_ins[index];
}

static int shim_real_resolved;
static __thread int shim_real_resolving;

void shim_resolve_real_functions(void)
{
    if (__atomic_load_n(&shim_real_resolved, __ATOMIC_ACQUIRE) || shim_real_resolving)
        return;
    shim_real_resolving = 1;
    shim_guard_enter();
    for (size_t i = 0; i < SHIM_REAL_COUNT; i++) {
        void **slot = shim_real_slot(i);
        if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == NULL)
            __atomic_store_n(slot, shim_real_lookup(i), __ATOMIC_RELEASE);
    }
    shim_guard_leave();
    shim_real_resolving = 0;
    __atomic_store_n(&shim_real_resolved, 1, __ATOMIC_RELEASE);
}

void *shim_real_function(enum shim_real_index index)
{
    void **slot = shim_real_slot(index);
    void *function = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (function != NULL)
        return function;
    shim_resolve_real_functions();
    function = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (function != NULL)
        return function;
    /* Inside the resolution on this thread: this entry alone.  A lookup that
     * comes back here once more (dlsym failing, allocating, reaching this
     * wrapper again) gets the stand-in rather than recursing for ever. */
    static __thread int looking_up;
    if (looking_up)
        return shim_real_stand_ins[index];
    looking_up = 1;
    shim_guard_enter();
    function = shim_real_lookup(index);
    shim_guard_leave();
    looking_up = 0;
    __atomic_store_n(slot, function, __ATOMIC_RELEASE);
    return function;
}
