/* reader_processes.c - the processes that delivered records of a pass (see
 * reader_processes.h). */
#include "reader_processes.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

void reader_processes_reset(struct reader_processes *readers)
{
    readers->count = 0;
    readers->overflowed = false;
}

void reader_processes_add(struct reader_processes *readers, pid_t pid)
{
    for (unsigned i = 0; i < readers->count; i++)
        if (readers->pids[i] == pid)
            return;
    if (readers->count == READER_PROCESSES_MAX) {
        readers->overflowed = true;
        return;
    }
    readers->pids[readers->count++] = pid;
}

static bool reader_process_exists(pid_t pid)
{
    /* EPERM: it exists but belongs to someone else (a reused pid); count it
     * as alive, the cautious answer */
    return kill(pid, 0) == 0 || errno != ESRCH;
}

bool reader_processes_others_exited(const struct reader_processes *readers, pid_t self)
{
    if (readers->overflowed)
        return false;
    int saved = errno;
    bool others = false, alive = false;
    for (unsigned i = 0; i < readers->count && !alive; i++) {
        if (readers->pids[i] == self)
            continue;
        others = true;
        alive = reader_process_exists(readers->pids[i]);
    }
    errno = saved;
    return others && !alive;
}

bool reader_processes_only(const struct reader_processes *readers, pid_t self)
{
    return readers->count == 1 && !readers->overflowed && readers->pids[0] == self;
}

static pid_t reader_process_cached_id;
static pthread_once_t reader_process_once = PTHREAD_ONCE_INIT;

static void reader_process_forget_id(void)
{
    __atomic_store_n(&reader_process_cached_id, 0, __ATOMIC_RELAXED);
}

static void reader_process_install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, reader_process_forget_id);
}

pid_t reader_process_self(void)
{
    pid_t id = __atomic_load_n(&reader_process_cached_id, __ATOMIC_RELAXED);
    if (id != 0)
        return id;
    pthread_once(&reader_process_once, reader_process_install_fork_handler);
    id = getpid();
    __atomic_store_n(&reader_process_cached_id, id, __ATOMIC_RELAXED);
    return id;
}
