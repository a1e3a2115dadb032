/* step_state.c - the step bookkeeping every part of the step code shares
 * (see step_state.h): the monitor and its lock, the job record, the records
 * consumed without a read. */
#include "step_state.h"

#include <pthread.h>
#include <time.h>

#include "shim.h"

bool shim_steps_synchronized;
struct step_monitor shim_monitor;

/* The step code and the deadline's worker never read or change the
 * statistics at the same time.  Recursive: a stop may be taken from inside
 * step code. */
static pthread_mutex_t shim_steps_mutex = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

void shim_steps_lock(void)
{
    pthread_mutex_lock(&shim_steps_mutex);
}

void shim_steps_unlock(void)
{
    pthread_mutex_unlock(&shim_steps_mutex);
}

bool shim_steps_lock_within(int seconds)
{
    struct timespec give_up;
    clock_gettime(CLOCK_REALTIME, &give_up);
    give_up.tv_sec += seconds;
    return pthread_mutex_timedlock(&shim_steps_mutex, &give_up) == 0;
}

void shim_steps_fork_prepare(void)
{
    pthread_mutex_lock(&shim_steps_mutex);
}

void shim_steps_fork_parent(void)
{
    pthread_mutex_unlock(&shim_steps_mutex);
}

/* Made anew, recursive as it was: the child's thread id is not the one
 * that took it, and a recursive mutex refuses an unlock by anyone else. */
void shim_steps_fork_child(void)
{
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&shim_steps_mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
}

/* Loaded at start-up (steps.c), written when the process ends (ending.c). */
static struct adaptdl_job_record shim_job_record;
double shim_overhead_seconds;

struct adaptdl_job_record *shim_steps_job_record(void)
{
    return &shim_job_record;
}

bool shim_steps_something_to_synchronize(void)
{
    const struct adaptdl_config *config = &shim_session.config;
    return config->data_count > 0 || config->save_glob != NULL || shim_steps_synchronized;
}

/* Records consumed without a read the shim sees: batches of the cooperative
 * API's training loops, batch sizes reported with gradients, and the
 * declared batch of steps that read no train record (data in memory). */
static uint64_t shim_records_without_reads;

void shim_steps_note_records_without_reads(uint64_t records)
{
    __atomic_add_fetch(&shim_records_without_reads, records, __ATOMIC_RELAXED);
}

uint64_t shim_steps_train_records_consumed(void)
{
    uint64_t total = __atomic_load_n(&shim_records_without_reads, __ATOMIC_RELAXED);
    pthread_mutex_lock(&shim_session.registry.lock);
    for (struct dataset_file *file = shim_session.registry.files; file; file = file->next)
        if (file->entry->role == DATA_ROLE_TRAIN)
            total += pass_tracker_records_served(&file->shared->tracker);
    pthread_mutex_unlock(&shim_session.registry.lock);
    return total;
}
