/* state_files.c - the state directory and its files: preparing
 * ADAPTDL_CHECKPOINT_PATH, atomic writes (temp file, fsync, rename, fsync of
 * the directory), bounded reads that never block on a FIFO, and removing
 * what killed writers left behind (see state_files.h and state_store.h). */
#include "state_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock_time.h"
#include "error_message.h"
#include "fault_injection.h"
#include "sysio.h"

/* Joins directory and name; ENAMETOOLONG when it does not fit. */
int state_file_join_path(char *path, size_t path_size, const char *directory, const char *name)
{
    int length = snprintf(path, path_size, "%s/%s", directory, name);
    if (length < 0 || (size_t)length >= path_size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

bool state_file_is_snapshot_name(const char *name, size_t length)
{
    size_t prefix = sizeof(SNAPSHOT_FILE_PREFIX) - 1, suffix = sizeof(SNAPSHOT_FILE_SUFFIX) - 1;
    return length > prefix + suffix && memcmp(name, SNAPSHOT_FILE_PREFIX, prefix) == 0 &&
           memcmp(name + length - suffix, SNAPSHOT_FILE_SUFFIX, suffix) == 0;
}

/* ------------------------------------------------------------------------- */
/* Files                                                                       */
/* ------------------------------------------------------------------------- */

/* Distinguishes temp files of concurrent writers in one process. */
static unsigned long state_file_counter;

static unsigned long next_state_file_counter(void)
{
    return __atomic_add_fetch(&state_file_counter, 1, __ATOMIC_RELAXED);
}

/* Proves the directory writable by creating and removing a file: unlike
 * access(W_OK) this also sees read-only mounts and ACLs as the writes will. */
static int probe_directory_writable(const char *directory, char *error, size_t error_size)
{
    char probe_name[64], probe_path[PATH_MAX];
    snprintf(probe_name, sizeof probe_name, ".adaptshim-probe.%ld.%lu", (long)getpid(),
             next_state_file_counter());
    if (state_file_join_path(probe_path, sizeof probe_path, directory, probe_name) != 0) {
        error_message(error, error_size, "state directory '%s': %s", directory, strerror(errno));
        return -1;
    }
    int fd = runtime_sysio.open(probe_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int saved_errno = errno;
        error_message(error, error_size, "state directory '%s' is not writable: %s", directory,
                  strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    runtime_sysio.close(fd);
    runtime_sysio.unlink(probe_path);
    return 0;
}

int state_directory_prepare(const char *directory, char *error, size_t error_size)
{
    if (directory == NULL || directory[0] == '\0') {
        error_message(error, error_size, "state directory path is empty");
        errno = EINVAL;
        return -1;
    }
    struct stat status;
    if (runtime_sysio.stat(directory, &status) != 0) {
        if (errno != ENOENT) {
            int saved_errno = errno;
            error_message(error, error_size, "cannot examine state directory '%s': %s", directory,
                      strerror(saved_errno));
            errno = saved_errno;
            return -1;
        }
        /* Only one level: a missing parent usually means a mistyped path,
         * which deserves an error rather than a tree of new directories. */
        if (runtime_sysio.mkdir(directory, 0755) != 0 && errno != EEXIST) {
            int saved_errno = errno;
            if (saved_errno == ENOENT)
                error_message(error, error_size,
                          "cannot create state directory '%s': its parent directory does not exist",
                          directory);
            else
                error_message(error, error_size, "cannot create state directory '%s': %s", directory,
                          strerror(saved_errno));
            errno = saved_errno;
            return -1;
        }
        /* EEXIST: another replica won the race; look again. */
        if (runtime_sysio.stat(directory, &status) != 0) {
            int saved_errno = errno;
            error_message(error, error_size, "cannot examine state directory '%s': %s", directory,
                      strerror(saved_errno));
            errno = saved_errno;
            return -1;
        }
    }
    if (!S_ISDIR(status.st_mode)) {
        error_message(error, error_size, "state directory '%s' exists but is not a directory",
                  directory);
        errno = ENOTDIR;
        return -1;
    }
    if (probe_directory_writable(directory, error, error_size) != 0)
        return -1;
    /* Best effort: a leftover costs only disk space. */
    state_directory_remove_leftovers(directory, clock_unix_seconds(), NULL, 0);
    return 0;
}

/* fsync of a directory makes a rename inside it durable. */
static int fsync_directory(const char *directory)
{
    int fd = runtime_sysio.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int status = runtime_sysio.fsync(fd);
    int saved_errno = errno;
    runtime_sysio.close(fd);
    errno = saved_errno;
    return status;
}

/* Writes, syncs and closes the temp file.  Returns the name of the failed
 * step, or NULL on success (the descriptor is closed either way). */
static const char *write_temp_file(const char *temp_path, const void *data, size_t size)
{
    int fd = runtime_sysio.open(temp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return "creating temp file";
    const char *failed_step = NULL;
    if (sysio_write_all(fd, data, size) != 0)
        failed_step = "writing temp file";
    else if (runtime_sysio.fsync(fd) != 0)
        failed_step = "fsync of temp file";
    int saved_errno = errno;
    if (runtime_sysio.close(fd) != 0 && failed_step == NULL) {
        /* close can report a deferred write error (NFS): the data is not safe. */
        failed_step = "closing temp file";
        saved_errno = errno;
    }
    errno = saved_errno;
    return failed_step;
}

int state_file_write_atomic(const char *directory, const char *name, const void *data,
                            size_t size, char *error, size_t error_size)
{
    char final_path[PATH_MAX], temp_name[NAME_MAX + 1], temp_path[PATH_MAX];
    int name_length = snprintf(temp_name, sizeof temp_name, ".%s.tmp.%ld.%lu", name,
                               (long)getpid(), next_state_file_counter());
    if (name_length < 0 || (size_t)name_length >= sizeof temp_name ||
        state_file_join_path(final_path, sizeof final_path, directory, name) != 0 ||
        state_file_join_path(temp_path, sizeof temp_path, directory, temp_name) != 0) {
        error_message(error, error_size, "cannot write '%s/%s': %s", directory, name,
                  strerror(ENAMETOOLONG));
        errno = ENAMETOOLONG;
        return -1;
    }

    const char *failed_step = write_temp_file(temp_path, data, size);
#ifdef ADAPTSHIM_FAULT_INJECTION
    if (failed_step == NULL && strncmp(name, "snapshot-", 9) == 0)
        fault_injection_reach(FAULT_SNAPSHOT_TEMP);
#endif
    if (failed_step == NULL && runtime_sysio.rename(temp_path, final_path) != 0)
        failed_step = "renaming temp file onto it";
    if (failed_step != NULL) {
        int saved_errno = errno;
        runtime_sysio.unlink(temp_path); /* harmless ENOENT if never created */
        error_message(error, error_size, "cannot write '%s': %s '%s' failed: %s", final_path,
                  failed_step, temp_path, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    /* The new content is in place; without this it might not survive a crash. */
    if (fsync_directory(directory) != 0) {
        int saved_errno = errno;
        error_message(error, error_size, "wrote '%s' but fsync of directory '%s' failed: %s",
                  final_path, directory, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    return 0;
}

int state_file_read(const char *directory, const char *name, void **data, size_t *size,
                    char *error, size_t error_size)
{
    *data = NULL;
    *size = 0;
    char path[PATH_MAX];
    if (state_file_join_path(path, sizeof path, directory, name) != 0) {
        error_message(error, error_size, "cannot read '%s/%s': %s", directory, name,
                  strerror(ENAMETOOLONG));
        errno = ENAMETOOLONG;
        return -1;
    }
    /* O_NONBLOCK: a FIFO planted under a state file's name must be refused
     * (below, as not a regular file), not waited on: the job record is read
     * before the trainer's main, so a blocking open would hang every process
     * of the job.  On a regular file the flag changes nothing. */
    int fd = runtime_sysio.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int saved_errno = errno;
        error_message(error, error_size, "cannot open '%s': %s", path, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    struct stat status;
    const char *problem = NULL;
    int problem_errno = 0;
    void *buffer = NULL;
    ssize_t got = 0;
    if (runtime_sysio.fstat(fd, &status) != 0) {
        problem = "fstat failed";
        problem_errno = errno;
    } else if (!S_ISREG(status.st_mode)) {
        problem = "not a regular file";
        problem_errno = EINVAL;
    } else if ((uint64_t)status.st_size > STATE_FILE_MAX_SIZE) {
        problem = "too large for a state file";
        problem_errno = EFBIG;
    } else if ((buffer = malloc(status.st_size > 0 ? (size_t)status.st_size : 1)) == NULL) {
        problem = "out of memory";
        problem_errno = ENOMEM;
    } else if ((got = sysio_pread_full(fd, buffer, (size_t)status.st_size, 0)) < 0) {
        problem = "read failed";
        problem_errno = errno;
    } else if (got != status.st_size) {
        problem = "file shrank while being read";
        problem_errno = EIO;
    }
    runtime_sysio.close(fd);
    if (problem != NULL) {
        free(buffer);
        error_message(error, error_size, "cannot read '%s': %s: %s", path, problem,
                  strerror(problem_errno));
        errno = problem_errno;
        return -1;
    }
    *data = buffer;
    *size = (size_t)got;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Leftovers of killed writers                                                 */
/* ------------------------------------------------------------------------- */


/* Length of a trailing ".DIGITS.DIGITS" (the writer's pid and counter), or 0. */
static size_t writer_suffix_length(const char *name, size_t length)
{
    size_t end = length;
    for (int part = 0; part < 2; part++) {
        size_t digits = 0;
        while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') {
            end--;
            digits++;
        }
        if (digits == 0 || end == 0 || name[end - 1] != '.')
            return 0;
        end--;
    }
    return length - end;
}

/* True for the names only this file's writers create: a temp file of
 * state_file_write_atomic (".NAME.tmp.PID.N" of a job record or snapshot)
 * or a writability probe (".adaptshim-probe.PID.N").  The pattern is strict
 * because the state directory may be shared with the trainer's own files. */
static bool is_writer_leftover_name(const char *name)
{
    static const char probe_prefix[] = ".adaptshim-probe";
    static const char temp_marker[] = ".tmp";
    size_t length = strlen(name);
    size_t suffix = writer_suffix_length(name, length);
    if (suffix == 0 || name[0] != '.')
        return false;
    size_t stem = length - suffix; /* ".adaptshim-probe" or ".NAME.tmp" */
    if (stem == sizeof probe_prefix - 1 && memcmp(name, probe_prefix, stem) == 0)
        return true;
    size_t marker = sizeof temp_marker - 1;
    if (stem < 1 + marker || memcmp(name + stem - marker, temp_marker, marker) != 0)
        return false;
    const char *inner = name + 1;
    size_t inner_length = stem - 1 - marker;
    return (inner_length == sizeof JOB_RECORD_FILE_NAME - 1 &&
            memcmp(inner, JOB_RECORD_FILE_NAME, inner_length) == 0) ||
           state_file_is_snapshot_name(inner, inner_length);
}

int state_directory_remove_leftovers(const char *directory, double now, char *error,
                                     size_t error_size)
{
    DIR *listing = runtime_sysio.opendir(directory);
    if (listing == NULL) {
        int saved_errno = errno;
        error_message(error, error_size, "cannot list state directory '%s': %s", directory,
                  strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    int removed = 0;
    struct dirent *entry;
    while ((entry = runtime_sysio.readdir(listing)) != NULL) {
        if (!is_writer_leftover_name(entry->d_name))
            continue;
        char path[PATH_MAX];
        struct stat status;
        if (state_file_join_path(path, sizeof path, directory, entry->d_name) != 0 ||
            runtime_sysio.stat(path, &status) != 0)
            continue; /* gone already: another replica removed it */
        double modified = (double)status.st_mtim.tv_sec + (double)status.st_mtim.tv_nsec * 1e-9;
        /* A young one may be a write in flight, on this host or another
         * sharing the directory: removing it would fail that commit. */
        if (modified > now - STATE_LEFTOVER_GRACE_SECONDS)
            continue;
        if (runtime_sysio.unlink(path) == 0)
            removed++;
    }
    runtime_sysio.closedir(listing);
    return removed;
}
