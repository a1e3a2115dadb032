/* init.c - process start-up of the shim: configuration, logging, the state
 * directory, and the `__libc_start_main` wrapper that stops a misconfigured
 * run with status 2 before the trainer's main.
 *
 * Initialization is lazy (the first wrapper call, or the start-up wrapper,
 * whichever comes first), because constructors of the trainer's own
 * libraries may open files before ours runs.  A process with no ADAPTDL_*
 * variable, a disabled shim or a program that ADAPTDL_TARGET does not name
 * stays INACTIVE: every wrapper is then a pass-through (MPI_Init only notes
 * MPI's world size and rank, for the cooperative API: mpi_collective.c).
 * Settings that name paths are checked against the file system here, once
 * parsed (config_paths.h). */
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_paths.h"
#include "ending.h"
#include "fork_safety.h"
#include "glob_pattern.h"
#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "stdio_streams.h"
#include "signals.h"
#include "pass_planning.h"
#include "steps.h"
#include "stop_deadline.h"
#include "sysio.h"

__thread int shim_guard_depth;
int shim_state;
struct runtime_session shim_session;

static pthread_once_t shim_initialization_once = PTHREAD_ONCE_INIT;
static pid_t shim_process_id;
static pid_t shim_start_process_id;  /* the process that initialized; never renewed */
static bool shim_is_configured;

bool shim_configured(void)
{
    return shim_is_configured;
}


void shim_note_process_after_fork(void)
{
    if (shim_process_id != 0)
        shim_process_id = getpid();
}

bool shim_in_vfork_child(void)
{
    return shim_process_id != 0 && getpid() != shim_process_id;
}

bool shim_in_forked_child(void)
{
    return shim_start_process_id != 0 && getpid() != shim_start_process_id;
}

static char shim_configuration_message[1024];
static bool shim_configuration_failed;

extern char **environ;

const char *shim_configuration_error(void)
{
    return shim_configuration_failed ? shim_configuration_message : NULL;
}

/* The runtime's own I/O must never come back into the wrappers. */
static void shim_install_runtime_sysio(void)
{
    runtime_sysio.open = REAL(open);
    runtime_sysio.close = REAL(close);
    runtime_sysio.read = REAL(read);
    runtime_sysio.write = REAL(write);
    runtime_sysio.pread = REAL(pread);
    runtime_sysio.fstat = REAL(fstat);
    runtime_sysio.stat = REAL(stat);
    runtime_sysio.fsync = REAL(fsync);
    runtime_sysio.rename = REAL(rename);
    runtime_sysio.unlink = REAL(unlink);
    runtime_sysio.mkdir = REAL(mkdir);
    runtime_sysio.opendir = REAL(opendir);
    runtime_sysio.readdir = REAL(readdir);
    runtime_sysio.closedir = REAL(closedir);
    runtime_sysio.mmap = REAL(mmap);
    runtime_sysio.munmap = REAL(munmap);
}

static bool shim_target_matches(const char *target)
{
    if (target == NULL)
        return true;
    return fnmatch(target, program_invocation_short_name, 0) == 0;
}

static void shim_fail_configuration(const char *message)
{
    snprintf(shim_configuration_message, sizeof shim_configuration_message, "%s", message);
    shim_configuration_failed = true;
}

static void shim_initialize(void)
{
    shim_guard_enter();
    shim_resolve_real_functions();
    shim_install_runtime_sysio();
    int next_state = SHIM_STATE_INACTIVE;
    char error[1024];
    char *const *envp = environ;

    if (envp == NULL || !config_any_adaptdl_variable(envp))
        goto done;
    const char *disable = config_lookup(envp, "ADAPTDL_DISABLE");
    if (disable != NULL && strcmp(disable, "1") == 0)
        goto done;
    /* A malformed target matches no program as meant: config_parse below
     * refuses it (exit 2) rather than leaving every program untouched. */
    const char *target = config_lookup(envp, "ADAPTDL_TARGET");
    if (target != NULL && *target != '\0' && glob_pattern_check(target, NULL) &&
        !shim_target_matches(target))
        goto done;

    session_init(&shim_session);
    shim_epochs_install();
    if (config_parse(&shim_session.config, envp, error, sizeof error) != 0) {
        shim_fail_configuration(error);
        goto done;
    }
    struct adaptdl_config *config = &shim_session.config;
    if (config->disabled)
        goto done;
    if (log_configure(config->log_level, config->log_file, config->replica_rank, error,
                      sizeof error) != 0)
        log_warn("%s; logging to stderr", error);
    size_t variable_cursor = 0;
    char typo_warning[512];
    while (config_next_unknown_variable(envp, &variable_cursor, typo_warning,
                                        sizeof typo_warning))
        log_warn("%s", typo_warning);
    shim_session.registry.resume = config->resume;
    char cwd_buffer[PATH_MAX];
    const char *cwd = getcwd(cwd_buffer, sizeof cwd_buffer);
    if (cwd == NULL || session_prepare_globs(&shim_session, cwd) != 0)
        log_warn("relative ADAPTDL_DATA and ADAPTDL_SAVE globs match only paths written as "
                 "relative ones (%s)", strerror(errno));
    /* the hints file may live in the state directory: prepared first */
    if (session_prepare_state_directory(&shim_session, error, sizeof error) != 0 ||
        config_check_paths(config, cwd, error, sizeof error) != 0) {
        shim_fail_configuration(error);
        goto done;
    }
    char save_warning[PATH_MAX + 512];
    if (config_describe_missing_save_directory(config, cwd, save_warning, sizeof save_warning))
        log_warn("%s", save_warning);
    if (config->save_glob != NULL && config->checkpoint_path == NULL)
        log_warn("ADAPTDL_SAVE is set but ADAPTDL_CHECKPOINT_PATH is not: checkpoints are "
                 "not bound to data positions, and a restart starts the data fresh");
    shim_is_configured = true;
    shim_start_process_id = getpid();
    shim_steps_initialize();
    delivery_trace_start(config);
    atexit(shim_ending_at_exit);
    /* before main, so before the trainer can fork a DataLoader worker */
    if (config->data_count > 0 &&
        dataset_registry_share_across_fork(&shim_session.registry,
                                           PASS_STATE_ARENA_DEFAULT_BYTES) != 0)
        log_warn("cannot map memory to share pass states across fork (%s): a data file "
                 "first opened in a forked worker keeps its deliveries to that worker",
                 strerror(errno));
    if (config->data_count > 0 || config->save_glob != NULL) {
        next_state = SHIM_STATE_ACTIVE;
        shim_process_id = getpid();
    }
    /* every lock of a configured process (steps, cooperative state, the
     * tables) is taken across a fork; fork_safety.c */
    shim_fork_safety_install();
    log_debug("adaptshim active in %s: %zu data entries, replica %u of %u, resume=%s, "
              "checkpoint path %s, save glob %s, restarts %u",
              program_invocation_short_name, config->data_count, config->replica_rank,
              config->num_replicas, config->resume == RESUME_REPLAY ? "replay" : "continue",
              config->checkpoint_path ? config->checkpoint_path : "(none)",
              config->save_glob ? config->save_glob : "(none)", config->num_restarts);
done:
    {
        /* a freeze meanwhile (a destructor on another thread) stays */
        int uninitialized = SHIM_STATE_UNINITIALIZED;
        __atomic_compare_exchange_n(&shim_state, &uninitialized, next_state, false,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
    shim_guard_leave();
}

void shim_ensure_initialized(void)
{
    pthread_once(&shim_initialization_once, shim_initialize);
}

void shim_exit_with_message(const char *message)
{
    char line[1200];
    int length = snprintf(line, sizeof line, "adaptshim: %s\n", message);
    if (length < 0)
        length = 0;
    if (length > (int)sizeof line - 1) {
        length = (int)sizeof line - 1;
        line[length - 1] = '\n';
    }
    sysio_write_all(STDERR_FILENO, line, (size_t)length);
    _exit(2);
}

typedef int (*main_function)(int, char **, char **);
typedef int (*libc_start_main_function)(main_function, int, char **, void (*)(void),
                                        void (*)(void), void (*)(void), void *);

/* session.serving_begins: the stop deadline's thread, in the process that
 * started the trainer (a forked DataLoader worker never stops on its own). */
static void shim_serving_begins(void)
{
    if (!shim_in_forked_child() && shim_steps_something_to_synchronize())
        shim_deadline_start_worker();
}

SHIM_EXPORT int __libc_start_main(main_function main, int argc, char **argv,
                                  void (*init)(void), void (*fini)(void),
                                  void (*rtld_fini)(void), void *stack_end);

/* The trainer's main, called through shim_main so that the shim knows when
 * it returned: a stop signal after that finds the trainer's work done. */
static main_function shim_trainer_main;

static int shim_main(int argc, char **argv, char **envp)
{
    int status = shim_trainer_main(argc, argv, envp);
    shim_signals_note_main_returned();
    return status;
}

/* Runs before the trainer's main: a malformed configuration stops the process
 * here with status 2 and one line on stderr, before the trainer did anything. */
SHIM_EXPORT int __libc_start_main(main_function main, int argc, char **argv,
                                  void (*init)(void), void (*fini)(void),
                                  void (*rtld_fini)(void), void *stack_end)
{
    libc_start_main_function real_start =
        (libc_start_main_function)dlsym(RTLD_NEXT, "__libc_start_main");
    if (real_start == NULL) {
        /* nothing after the shim starts programs: it cannot run this one */
        static const char line[] = "adaptshim: cannot run without the C library's "
                                   "__libc_start_main, which nothing after libadaptshim.so "
                                   "defines: aborting\n";
        sysio_write_all(STDERR_FILENO, line, sizeof line - 1);
        abort();
    }
    if (environ == NULL)
        environ = &argv[argc + 1];
    shim_ensure_initialized();
    const char *error = shim_configuration_error();
    if (error != NULL)
        shim_exit_with_message(error);
    if (shim_configured()) {
        shim_inject_batch_size(&argc, &argv);
        /* a stop that cannot wait needs a thread to end the process: it is
         * started once the library serves the process (the first path a
         * glob matches, MPI coming up), not before main, so that a process
         * that only runs a helper has no thread of the library (glibc
         * aborts a process that changes its user, as setpriv does, when a
         * thread of it cannot follow) */
        shim_session.serving_begins = shim_serving_begins;
        shim_trainer_main = main;
        main = shim_main;
    }
    return real_start(main, argc, argv, init, fini, rtld_fini, stack_end);
}
