/* shared_stop_flag.c - a stop pending in the start process, shared across
 * fork (see shared_stop_flag.h). */
#include "shared_stop_flag.h"

#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sysio.h"

struct shared_stop_flag {
    pid_t owner;                    /* written once, before any fork */
    volatile sig_atomic_t raised;
};

struct shared_stop_flag *shared_stop_flag_create(void)
{
    void *memory = runtime_sysio.mmap(NULL, sizeof(struct shared_stop_flag),
                                      PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return NULL;
    struct shared_stop_flag *flag = memory;
    flag->owner = getpid();
    flag->raised = 0;
    return flag;
}

void shared_stop_flag_destroy(struct shared_stop_flag *flag)
{
    if (flag != NULL)
        runtime_sysio.munmap(flag, sizeof *flag);
}

void shared_stop_flag_raise(struct shared_stop_flag *flag, pid_t caller)
{
    if (flag != NULL && caller == flag->owner)
        flag->raised = 1;
}

pid_t shared_stop_flag_raiser(const struct shared_stop_flag *flag)
{
    if (flag == NULL || !flag->raised)
        return 0;
    return flag->owner;
}
