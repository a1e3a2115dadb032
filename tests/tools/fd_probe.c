/* fd_probe.c - descriptor-level probes of a data view (INTERPOSITION-NOTES
 * "Cases a test suite should cover", 4-7), run by
 * tests/integration/test_descriptors.c under the shim and compared there
 * with the view read by cat(1).
 *
 *   fd_probe CASE PATH [OTHER | RECORD,HEADER]
 *
 * CASE and what it does (PATH is a data file unless said otherwise, OTHER a
 * file that is not data, offsets are view offsets):
 *   dup          dup + dup2: reads alternate between the copies, which share
 *                one offset
 *   pread        pread/preadv/preadv2 between reads do not move the offset;
 *                preadv2 at offset -1 reads at the offset and moves it
 *   seekend      fstat, stat, statx (of the path, and of the descriptor with
 *                AT_EMPTY_PATH and no path), lseek(SEEK_END) sizes; the last 10 bytes
 *   reuse OTHER  close a data descriptor; the next open of OTHER gets its
 *                number and must read OTHER
 *   dup2 OTHER   dup2 of OTHER's descriptor onto a data descriptor
 *   close_range OTHER  close_range over a data descriptor and its dup, then
 *                OTHER is opened in their numbers
 *   closefrom OTHER    the same with closefrom(3)
 *   reopen_after_close_range OTHER  close_range(fd, ~0U) of a fresh data
 *                descriptor, OTHER opened eight times, then PATH reopened and
 *                read whole (the shim's own descriptors must survive or be
 *                forgotten, never read another file)
 *   reopen_after_closefrom OTHER    the same with closefrom(fd)
 *   dupfd        fcntl F_DUPFD / F_DUPFD_CLOEXEC share the offset
 *   opath        an O_PATH descriptor: read fails with EBADF, fstat is the file
 *   fork         a child reads the inherited descriptor; then the parent reads
 *   vfork HOW    a vfork child closes descriptors (HOW: close, close_range or
 *                closefrom) and execs /bin/true; then the parent reads
 *   threads RECORD,HEADER  the whole view by pread, then 4 threads pread-ing
 *                disjoint records (the header is chunk 0; each 25 times) while
 *                a fifth reads the view sequentially through a dup'd
 *                descriptor, stopping at its size (no read returning 0)
 *   mixed RECORD,HEADER REFERENCE CHECKPOINT  eight threads at once: two
 *                read the view in order (open, read, close), one preads
 *                random records, one reads through stdio (fread, getc,
 *                fseek), one lseeks and readvs, one preads a descriptor that
 *                a seventh keeps closing and replacing, and the eighth
 *                commits CHECKPOINT (close, fclose, rename); every record
 *                read must be one of REFERENCE's (the same file at a path
 *                the shim leaves alone)
 *   restore_race RECORD,HEADER CHECKPOINT  PATH is an eval file: CHECKPOINT
 *                is committed (write, close), then one thread preads
 *                random records of PATH while the main thread loads
 *                CHECKPOINT (the restore of the snapshot just bound to it
 *                sets every registered file's shuffle seed, which the
 *                reads plan their copies with); prints "restore_race_loaded
 *                1" once the load returned and "restore_race_ok 1" when
 *                every record read was whole
 *   pipe         a pipe created in the number a data descriptor just freed
 *   rdwr         open(O_RDWR) and fopen("r+") of PATH: sizes and bytes seen
 *   dir          PATH is a directory: open, fstat, read, readdir, fopen, fread
 *   fifo         PATH is a FIFO: open + read until end of file
 *   fifo-stdio   PATH is a FIFO: fopen + fread until end of file
 *
 * Output, one fact per line:
 *   read LABEL LENGTH HASH      bytes a read delivered (FNV-1a 64, hex)
 *   LABEL VALUE                 a number (offset, size, flag, errno)
 * Unexpected failures: "error ..." on stderr and exit status 1; usage 2. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe_common.h"

static void die(const char *what)
{
    fprintf(stderr, "error %s: %s\n", what, strerror(errno));
    exit(1);
}

static void report_bytes(const char *label, const void *data, size_t size)
{
    printf("read %s %zu %016" PRIx64 "\n", label, size, probe_fnv1a(data, size));
}

static void report(const char *label, long long value)
{
    printf("%s %lld\n", label, value);
}

/* read(2) until `size` bytes or end of file. */
static size_t read_up_to(int fd, void *buffer, size_t size)
{
    ssize_t got = probe_read_up_to(fd, buffer, size);
    if (got < 0)
        die("read");
    return (size_t)got;
}

static void read_and_report(int fd, size_t size, const char *label)
{
    char *buffer = malloc(size + 1);
    if (buffer == NULL)
        die("malloc");
    size_t got = read_up_to(fd, buffer, size);
    report_bytes(label, buffer, got);
    free(buffer);
}

static int open_or_die(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0)
        die(path);
    return fd;
}

static long long offset_of(int fd)
{
    return (long long)lseek(fd, 0, SEEK_CUR);
}

static void probe_dup(const char *path)
{
    int fd = open_or_die(path, O_RDONLY);
    int copy = dup(fd);
    if (copy < 0)
        die("dup");
    read_and_report(fd, 100, "a");
    read_and_report(copy, 50, "b");
    if (dup2(fd, 30) != 30)
        die("dup2");
    read_and_report(30, 20, "c");
    report("offset_fd", offset_of(fd));
    report("offset_dup", offset_of(copy));
    report("offset_dup2", offset_of(30));
    close(copy);
    read_and_report(30, 10, "d");  /* the copies outlive each other */
    report("offset_after_close", offset_of(fd));
}

static void probe_pread(const char *path)
{
    int fd = open_or_die(path, O_RDONLY);
    read_and_report(fd, 30, "a");
    char buffer[256];
    ssize_t n = pread(fd, buffer, 40, 200);
    if (n < 0)
        die("pread");
    report_bytes("b", buffer, (size_t)n);
    report("offset_after_pread", offset_of(fd));
    read_and_report(fd, 20, "c");
    struct iovec parts[] = {{buffer, 10}, {buffer + 10, 15}};
    n = preadv(fd, parts, 2, 300);
    if (n < 0)
        die("preadv");
    report_bytes("d", buffer, (size_t)n);
    report("offset_after_preadv", offset_of(fd));
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat");
    n = pread(fd, buffer, 100, status.st_size - 10);  /* across the end */
    if (n < 0)
        die("pread at the end");
    report_bytes("e", buffer, (size_t)n);
    n = pread(fd, buffer, 100, status.st_size + 5);   /* past the end */
    report("pread_past_end", (long long)n);
    read_and_report(fd, 5, "f");
    n = preadv2(fd, parts, 2, 400, 0);
    if (n < 0)
        die("preadv2");
    report_bytes("g", buffer, (size_t)n);
    report("offset_after_preadv2", offset_of(fd));
    n = preadv2(fd, parts, 2, -1, 0);   /* -1: at the current offset, which moves */
    if (n < 0)
        die("preadv2 at the current offset");
    report_bytes("h", buffer, (size_t)n);
    report("offset_after_preadv2_current", offset_of(fd));
}

static void probe_seekend(const char *path)
{
    int fd = open_or_die(path, O_RDONLY);
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat");
    report("fstat_size", (long long)status.st_size);
    struct stat by_path;
    if (stat(path, &by_path) != 0)
        die("stat");
    report("stat_size", (long long)by_path.st_size);
    struct statx extended;
    if (statx(AT_FDCWD, path, 0, STATX_SIZE | STATX_TYPE, &extended) != 0)
        die("statx");
    report("statx_size", (long long)extended.stx_size);
    /* the descriptor itself, named by no path at all (AT_EMPTY_PATH with NULL) */
    struct statx of_descriptor;
    const char *volatile no_path = NULL;  /* glibc declares it nonnull, and takes NULL */
    if (statx(fd, no_path, AT_EMPTY_PATH, STATX_SIZE | STATX_TYPE, &of_descriptor) != 0)
        die("statx of the descriptor");
    report("statx_fd_size", (long long)of_descriptor.stx_size);
    report("statx_fd_blksize", (long long)of_descriptor.stx_blksize);
    report("fstat_blksize", (long long)status.st_blksize);
    report("seek_end", (long long)lseek(fd, 0, SEEK_END));
    report("seek_end_minus_10", (long long)lseek(fd, -10, SEEK_END));
    read_and_report(fd, 100, "tail");
    char byte;
    report("read_at_end", (long long)read(fd, &byte, 1));
    report("offset_at_end", offset_of(fd));
}

static void read_other(int fd, const char *label)
{
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat of the other file");
    report("other_size", (long long)status.st_size);
    read_and_report(fd, 1 << 20, label);
}

static void probe_reuse(const char *path, const char *other)
{
    int fd = open_or_die(path, O_RDONLY);
    read_and_report(fd, 10, "a");
    if (close(fd) != 0)
        die("close");
    int reused = open_or_die(other, O_RDONLY);
    report("same_fd", reused == fd);
    read_other(reused, "other");
}

static void probe_dup2(const char *path, const char *other)
{
    int fd = open_or_die(path, O_RDONLY);
    int other_fd = open_or_die(other, O_RDONLY);
    if (dup2(fd, 77) != 77)
        die("dup2 of the data descriptor");
    read_and_report(77, 64, "a");
    read_and_report(fd, 16, "b");
    if (dup2(other_fd, fd) != fd)
        die("dup2 onto the data descriptor");
    read_other(fd, "other");
    read_and_report(77, 16, "c");  /* 77 still holds the view */
    close(other_fd);
    char byte;
    report("read_replaced_at_end", (long long)read(fd, &byte, 1));  /* shares other_fd's end */
}

/* Closes a data descriptor and its dup with close_range or closefrom, then
 * opens OTHER until both numbers are taken again (the shim may hold
 * descriptors of its own in between): those two must read OTHER. */
static void probe_close_range(const char *path, const char *other, bool use_closefrom)
{
    int fd = open_or_die(path, O_RDONLY);
    int copy = dup(fd);
    if (copy < 0)
        die("dup");
    read_and_report(fd, 40, "a");
    int low = fd < copy ? fd : copy, high = fd < copy ? copy : fd;
    if (use_closefrom) {
        closefrom(low);
    } else if (close_range((unsigned)low, (unsigned)high, 0) != 0) {
        die("close_range");
    }
    int reopened_fd = -1, reopened_copy = -1;
    for (int i = 0; i <= high - low && (reopened_fd < 0 || reopened_copy < 0); i++) {
        int next = open_or_die(other, O_RDONLY);
        if (next == fd)
            reopened_fd = next;
        else if (next == copy)
            reopened_copy = next;
    }
    report("same_fds", reopened_fd >= 0 && reopened_copy >= 0);
    if (reopened_fd < 0 || reopened_copy < 0)
        return;
    read_other(reopened_fd, "other1");
    read_other(reopened_copy, "other2");
}

/* close_range(fd, ~0U) or closefrom(fd) on a fresh data descriptor (no
 * record read yet, so the pass stays the same), then eight opens of OTHER
 * take the freed numbers; a new open of PATH must still read the view. */
static void probe_reopen_after(const char *path, const char *other, bool use_closefrom)
{
    int fd = open_or_die(path, O_RDONLY);
    if (use_closefrom)
        closefrom(fd);
    else if (close_range((unsigned)fd, ~0U, 0) != 0)
        die("close_range");
    int others[8];
    for (int i = 0; i < 8; i++)
        others[i] = open_or_die(other, O_RDONLY);
    int view = open_or_die(path, O_RDONLY);
    read_and_report(view, 1 << 22, "view");
    read_other(others[0], "other");
}

static void probe_dupfd(const char *path)
{
    int fd = open_or_die(path, O_RDONLY);
    int low = fcntl(fd, F_DUPFD, 50);
    int cloexec = fcntl(fd, F_DUPFD_CLOEXEC, 70);
    if (low < 0 || cloexec < 0)
        die("fcntl F_DUPFD");
    report("dupfd_at_least_50", low >= 50);
    report("dupfd_cloexec_at_least_70", cloexec >= 70);
    report("cloexec_flag", (fcntl(cloexec, F_GETFD) & FD_CLOEXEC) != 0);
    read_and_report(fd, 64, "a");
    read_and_report(low, 64, "b");
    read_and_report(cloexec, 64, "c");
    report("offset_fd", offset_of(fd));
    report("offset_low", offset_of(low));
    report("offset_cloexec", offset_of(cloexec));
}

/* An O_PATH descriptor of a data file is no view: a read fails with EBADF
 * as it does without the library, and fstat reports the file's own size. */
static void probe_opath(const char *path)
{
    int fd = open_or_die(path, O_PATH);
    char byte;
    errno = 0;
    ssize_t got = read(fd, &byte, 1);
    report("opath_read", got);
    report("opath_read_ebadf", got < 0 && errno == EBADF);
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat of the O_PATH descriptor");
    report("opath_fstat_size", (long long)status.st_size);
    close(fd);
}

static void probe_fork(const char *path)
{
    int fd = open_or_die(path, O_RDONLY);
    read_and_report(fd, 100, "a");
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        read_and_report(fd, 200, "child");
        report("child_offset", offset_of(fd));
        fflush(stdout);
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        die("waitpid");
    report("child_status", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    read_and_report(fd, 200, "parent");
    report("parent_offset", offset_of(fd));
}

/* vfork, then in the child what CPython's subprocess does before exec:
 * close the inherited descriptors (close, close_range or closefrom) and
 * exec.  The child shares the parent's memory until the exec; the parent
 * must still read its view afterwards. */
static void probe_vfork(const char *path, const char *how)
{
    int fd = open_or_die(path, O_RDONLY);
    read_and_report(fd, 100, "a");
    fflush(stdout);
    pid_t child = vfork();
    if (child < 0)
        die("vfork");
    if (child == 0) {
        if (strcmp(how, "close") == 0)
            close(fd);
        else if (strcmp(how, "close_range") == 0)
            close_range(3, ~0U, 0);
        else
            closefrom(3);
        char *argv[] = {"/bin/true", NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        die("waitpid");
    report("child_status", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    read_and_report(fd, 200, "parent");
    report("parent_offset", offset_of(fd));
    struct stat st;
    if (fstat(fd, &st) != 0)
        die("fstat");
    report("parent_size", (long long)st.st_size);
}

struct thread_job {
    int fd;
    size_t record, header;
    size_t size;
    unsigned index;          /* 0..3: pread chunks index, index+4, ...; 4: sequential */
    unsigned char *out;      /* where the bytes go */
    bool failed;
};

/* Chunk k of the view: the header for k = 0, record k - 1 after it. */
static void chunk_bounds(const struct thread_job *job, size_t k, size_t *start, size_t *length)
{
    *start = k == 0 ? 0 : job->header + (k - 1) * job->record;
    size_t end = k == 0 ? job->header : *start + job->record;
    if (end > job->size)
        end = job->size;
    *length = end > *start ? end - *start : 0;
}

static void *pread_thread(void *argument)
{
    struct thread_job *job = argument;
    for (int round = 0; round < 25; round++) {
        for (size_t k = job->index;; k += 4) {
            size_t start, length;
            chunk_bounds(job, k, &start, &length);
            if (start >= job->size)
                break;
            unsigned char buffer[4096];
            ssize_t n = pread(job->fd, buffer, length, (off_t)start);
            if (n != (ssize_t)length) {
                job->failed = true;
                return NULL;
            }
            if (round > 0 && memcmp(job->out + start, buffer, length) != 0)
                job->failed = true;  /* two reads of the same bytes disagree */
            memcpy(job->out + start, buffer, length);
        }
    }
    return NULL;
}

static void *sequential_thread(void *argument)
{
    struct thread_job *job = argument;
    static const size_t chunks[] = {1, 7, 13, 100, 3, 61, 4093};
    size_t done = 0;
    for (size_t i = 0; done < job->size; i++) {
        size_t want = chunks[i % (sizeof chunks / sizeof chunks[0])];
        if (want > job->size - done)
            want = job->size - done;  /* never the read that returns 0 */
        ssize_t n = read(job->fd, job->out + done, want);
        if (n <= 0) {
            job->failed = true;
            return NULL;
        }
        done += (size_t)n;
    }
    return NULL;
}

static void probe_threads(const char *path, size_t record, size_t header)
{
    int fd = open_or_die(path, O_RDONLY);
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat");
    size_t size = (size_t)status.st_size;
    unsigned char *whole = malloc(size), *by_pread = calloc(1, size),
                  *sequential = calloc(1, size);
    if (whole == NULL || by_pread == NULL || sequential == NULL)
        die("malloc");
    /* pread never ends a pass: the reference stays the current view */
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, whole + got, size - got, (off_t)got);
        if (n <= 0)
            die("pread of the whole view");
        got += (size_t)n;
    }
    report_bytes("whole", whole, size);
    int copy = dup(fd);
    if (copy < 0)
        die("dup");
    struct thread_job jobs[5];
    pthread_t threads[5];
    for (unsigned i = 0; i < 5; i++) {
        jobs[i] = (struct thread_job){.fd = i < 4 ? fd : copy, .record = record,
                                      .header = header, .size = size,
                                      .index = i, .out = i < 4 ? by_pread : sequential};
        if (pthread_create(&threads[i], NULL, i < 4 ? pread_thread : sequential_thread,
                           &jobs[i]) != 0)
            die("pthread_create");
    }
    bool failed = false;
    for (unsigned i = 0; i < 5; i++) {
        pthread_join(threads[i], NULL);
        failed |= jobs[i].failed;
    }
    report("thread_failures", failed);
    report_bytes("threads_pread", by_pread, size);
    report_bytes("threads_sequential", sequential, size);
    report("pread_matches_whole", memcmp(by_pread, whole, size) == 0);
    report("sequential_matches_whole", memcmp(sequential, whole, size) == 0);
    report("offset_after_threads", offset_of(fd));
    char byte;
    report("read_at_end", (long long)read(fd, &byte, 1));
}

/* --- mixed: eight threads that open, read, close and checkpoint at once ---
 *
 * Nothing here waits for anything but its own work: every thread runs a
 * fixed number of rounds.  Bytes are checked where their place in the view
 * is known: every whole record handed out must be one record of REFERENCE
 * (the physical file, at a path the shim does not virtualize), found by the
 * id in its first 8 bytes, and the header must be REFERENCE's header.  Which
 * records a view holds depends on which pass the reader caught, so only
 * their integrity is checked, not their order. */
struct mixed_setup {
    const char *path;
    const char *checkpoint;
    size_t record, header;
    const unsigned char *reference;
    size_t reference_size;
    uint64_t record_count;
};

static struct mixed_setup mixed;
static int mixed_shared_fd = -1;      /* read by one thread, replaced by another */
static int mixed_closer_done;
static int mixed_failures;
static long mixed_records_checked;

static void mixed_fail(const char *what, unsigned long long where)
{
    fprintf(stderr, "mixed: %s at %llu\n", what, where);
    __atomic_add_fetch(&mixed_failures, 1, __ATOMIC_RELAXED);
}

static uint64_t mixed_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Checks view bytes [offset, offset + count): header bytes against the
 * reference's header, whole records against the reference's records. */
static void mixed_check(const unsigned char *bytes, size_t count, uint64_t offset)
{
    uint64_t end = offset + count;
    for (uint64_t at = offset; at < end && at < mixed.header; at++)
        if (bytes[at - offset] != mixed.reference[at]) {
            mixed_fail("header byte differs", at);
            return;
        }
    uint64_t first = offset < mixed.header ? mixed.header : offset;
    uint64_t within = (first - mixed.header) % mixed.record;
    if (within != 0)
        first += mixed.record - within;
    for (uint64_t at = first; at + mixed.record <= end; at += mixed.record) {
        uint64_t id;
        memcpy(&id, bytes + (at - offset), sizeof id);
        if (id >= mixed.record_count ||
            memcmp(bytes + (at - offset), mixed.reference + mixed.header + id * mixed.record,
                   mixed.record) != 0) {
            mixed_fail("record is not one of the file's", at);
            return;
        }
        __atomic_add_fetch(&mixed_records_checked, 1, __ATOMIC_RELAXED);
    }
}

/* open, read in order in uneven pieces (to the end, or stopping early),
 * close; each view read is checked whole. */
static void *mixed_in_order_reader(void *argument)
{
    uint64_t state = 0x9e3779b97f4a7c15ULL + (uintptr_t)argument;
    static const size_t pieces[] = {1, 7, 13, 100, 3, 61, 4093, 28, 56};
    unsigned char *view = malloc(mixed.reference_size + 4096);
    if (view == NULL)
        die("malloc");
    for (int round = 0; round < 12; round++) {
        int fd = open_or_die(mixed.path, O_RDONLY);
        bool stop_early = mixed_random(&state) % 3 == 0;
        size_t got = 0;
        for (size_t i = 0; got < mixed.reference_size; i++) {
            size_t want = pieces[(i + round) % (sizeof pieces / sizeof pieces[0])];
            ssize_t n = read(fd, view + got, want);
            if (n < 0)
                die("read");
            if (n == 0 || (stop_early && got > mixed.reference_size / 3))
                break;
            got += (size_t)n;
        }
        mixed_check(view, got, 0);
        close(fd);
    }
    free(view);
    return NULL;
}

/* pread of random records through its own descriptor. */
static void *mixed_random_reader(void *argument)
{
    uint64_t state = 0x2545f4914f6cdd1dULL + (uintptr_t)argument;
    unsigned char buffer[4096];
    for (int round = 0; round < 6; round++) {
        int fd = open_or_die(mixed.path, O_RDONLY);
        struct stat status;
        if (fstat(fd, &status) != 0)
            die("fstat");
        uint64_t records = status.st_size > (off_t)mixed.header
                               ? ((uint64_t)status.st_size - mixed.header) / mixed.record
                               : 0;
        for (int i = 0; i < 200 && records > 0; i++) {
            uint64_t count = 1 + mixed_random(&state) % 4;
            uint64_t at = mixed.header + (mixed_random(&state) % records) * mixed.record;
            ssize_t n = pread(fd, buffer, count * mixed.record, (off_t)at);
            if (n < 0)
                die("pread");
            mixed_check(buffer, (size_t)n, at);
        }
        close(fd);
    }
    return NULL;
}

/* stdio: fread of uneven pieces, getc, fseek to random records, fclose. */
static void *mixed_stdio_reader(void *argument)
{
    uint64_t state = 0xbf58476d1ce4e5b9ULL + (uintptr_t)argument;
    unsigned char buffer[8192];
    for (int round = 0; round < 10; round++) {
        FILE *stream = fopen(mixed.path, "r");
        if (stream == NULL)
            die("fopen");
        uint64_t offset = 0;
        for (int i = 0; i < 60; i++) {
            uint64_t choice = mixed_random(&state) % 8;
            if (choice == 0) {
                uint64_t record = mixed_random(&state) % (mixed.record_count / 2 + 1);
                offset = mixed.header + record * mixed.record;
                if (fseek(stream, (long)offset, SEEK_SET) != 0)
                    die("fseek");
                continue;
            }
            if (choice == 1) {
                int c = getc(stream);
                if (c == EOF)
                    break;
                buffer[0] = (unsigned char)c;
                mixed_check(buffer, 1, offset);
                offset++;
                continue;
            }
            size_t want = 1 + mixed_random(&state) % sizeof buffer;
            size_t n = fread(buffer, 1, want, stream);
            mixed_check(buffer, n, offset);
            offset += n;
            if (n < want)
                break;
        }
        fclose(stream);
    }
    return NULL;
}

/* lseek to a random record, then readv of three records. */
static void *mixed_readv_reader(void *argument)
{
    uint64_t state = 0x94d049bb133111ebULL + (uintptr_t)argument;
    unsigned char buffer[3 * 4096];
    for (int round = 0; round < 6; round++) {
        int fd = open_or_die(mixed.path, O_RDONLY);
        for (int i = 0; i < 100; i++) {
            uint64_t record = mixed_random(&state) % (mixed.record_count / 2 + 1);
            uint64_t at = mixed.header + record * mixed.record;
            if (lseek(fd, (off_t)at, SEEK_SET) != (off_t)at)
                die("lseek");
            struct iovec parts[] = {{buffer, mixed.record},
                                    {buffer + mixed.record, mixed.record},
                                    {buffer + 2 * mixed.record, mixed.record}};
            ssize_t n = readv(fd, parts, 3);
            if (n < 0)
                die("readv");
            mixed_check(buffer, (size_t)n, at);
        }
        close(fd);
    }
    return NULL;
}

/* Reads whatever descriptor mixed_shared_fd holds while the closer closes
 * and replaces it, so a call may find it open, closing or closed; nothing
 * about the result is checked. */
static void *mixed_shared_reader(void *argument)
{
    (void)argument;
    unsigned char buffer[512];
    while (!__atomic_load_n(&mixed_closer_done, __ATOMIC_ACQUIRE)) {
        int fd = __atomic_load_n(&mixed_shared_fd, __ATOMIC_ACQUIRE);
        (void)!pread(fd, buffer, sizeof buffer, (off_t)mixed.header);
        (void)!read(fd, buffer, 64);
        struct stat status;
        (void)!fstat(fd, &status);
    }
    return NULL;
}

/* Opens the data file in a number never used before (so that no other
 * thread's open can take a number the reader may still be reading: that
 * would be a race of the program itself), publishes it, and closes the one
 * the reader had with close_range(2), which ThreadSanitizer does not
 * intercept: a close(2) racing with a read of the same number is reported
 * as a race on the descriptor, whatever the shim does.  What is left is the
 * shim's own bookkeeping of that close while the read is inside it. */
#define MIXED_CLOSER_ROUNDS 150
#define MIXED_CLOSER_FIRST_FD 600
static void *mixed_closer(void *argument)
{
    (void)argument;
    for (int round = 0; round < MIXED_CLOSER_ROUNDS; round++) {
        int opened = open_or_die(mixed.path, O_RDONLY);
        int fd = fcntl(opened, F_DUPFD, MIXED_CLOSER_FIRST_FD + round);
        if (fd < 0)
            die("fcntl F_DUPFD");
        close(opened);
        int old = __atomic_exchange_n(&mixed_shared_fd, fd, __ATOMIC_ACQ_REL);
        if (close_range((unsigned)old, (unsigned)old, 0) != 0)
            die("close_range");
    }
    __atomic_store_n(&mixed_closer_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Commits the checkpoint three ways: write + close, fopen + fclose, and a
 * rename onto its name. */
static void *mixed_checkpointer(void *argument)
{
    (void)argument;
    char temporary[4096];
    snprintf(temporary, sizeof temporary, "%s.tmp", mixed.checkpoint);
    for (int round = 0; round < 12; round++) {
        char text[64];
        int length = snprintf(text, sizeof text, "checkpoint %d\n", round);
        if (round % 3 == 0) {
            int fd = open(mixed.checkpoint, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || write(fd, text, (size_t)length) != length)
                die("checkpoint write");
            close(fd);
        } else if (round % 3 == 1) {
            FILE *stream = fopen(mixed.checkpoint, "w");
            if (stream == NULL || fputs(text, stream) < 0)
                die("checkpoint fopen");
            fclose(stream);
        } else {
            int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || write(fd, text, (size_t)length) != length)
                die("checkpoint temporary");
            close(fd);
            if (rename(temporary, mixed.checkpoint) != 0)
                die("checkpoint rename");
        }
    }
    return NULL;
}

static void probe_mixed(const char *path, size_t record, size_t header, const char *reference,
                        const char *checkpoint)
{
    int fd = open_or_die(reference, O_RDONLY);
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat of the reference");
    unsigned char *bytes = malloc((size_t)status.st_size + 1);
    if (bytes == NULL || read_up_to(fd, bytes, (size_t)status.st_size) != (size_t)status.st_size)
        die("read of the reference");
    close(fd);
    mixed = (struct mixed_setup){.path = path, .checkpoint = checkpoint, .record = record,
                                 .header = header, .reference = bytes,
                                 .reference_size = (size_t)status.st_size,
                                 .record_count = ((size_t)status.st_size - header) / record};
    int first = open_or_die(path, O_RDONLY);
    mixed_shared_fd = fcntl(first, F_DUPFD, MIXED_CLOSER_FIRST_FD - 1);
    if (mixed_shared_fd < 0)
        die("fcntl F_DUPFD");
    close(first);
    void *(*const jobs[])(void *) = {mixed_in_order_reader, mixed_in_order_reader,
                                     mixed_random_reader,   mixed_stdio_reader,
                                     mixed_readv_reader,    mixed_shared_reader,
                                     mixed_closer,          mixed_checkpointer};
    enum { JOBS = sizeof jobs / sizeof jobs[0] };
    pthread_t threads[JOBS];
    for (uintptr_t i = 0; i < JOBS; i++)
        if (pthread_create(&threads[i], NULL, jobs[i], (void *)i) != 0)
            die("pthread_create");
    for (unsigned i = 0; i < JOBS; i++)
        pthread_join(threads[i], NULL);
    close_range((unsigned)mixed_shared_fd, (unsigned)mixed_shared_fd, 0);
    report("mixed_records_checked", mixed_records_checked);
    report("mixed_failures", mixed_failures);
    report("mixed_ok", mixed_failures == 0 && mixed_records_checked > 0);
    free(bytes);
}

/* --- restore_race ------------------------------------------------------ */

static int restore_race_stop;
static long restore_race_reads;
static int restore_race_failures;

static long restore_race_reads_now(void)
{
    return __atomic_load_n(&restore_race_reads, __ATOMIC_ACQUIRE);
}

/* Waits, yielding, until the reader has read `reads` more times. */
static void restore_race_wait_for_reads(long reads)
{
    long target = restore_race_reads_now() + reads;
    while (restore_race_reads_now() < target)
        sched_yield();
}

/* pread of one random whole record at a time until told to stop; every
 * record must begin with an id below the record count. */
static void *restore_race_reader(void *argument)
{
    const struct mixed_setup *setup = argument;
    uint64_t state = 0x853c49e6748fea9bULL;
    unsigned char buffer[4096];
    int fd = open_or_die(setup->path, O_RDONLY);
    while (!__atomic_load_n(&restore_race_stop, __ATOMIC_ACQUIRE)) {
        uint64_t at = setup->header + (mixed_random(&state) % setup->record_count) * setup->record;
        ssize_t n = pread(fd, buffer, setup->record, (off_t)at);
        uint64_t id = 0;
        if (n == (ssize_t)setup->record)
            memcpy(&id, buffer, sizeof id);
        if (n != (ssize_t)setup->record || id >= setup->record_count)
            __atomic_add_fetch(&restore_race_failures, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&restore_race_reads, 1, __ATOMIC_RELEASE);
    }
    close(fd);
    return NULL;
}

static void probe_restore_race(const char *path, size_t record, size_t header,
                               const char *checkpoint)
{
    int fd = open_or_die(path, O_RDONLY);
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat");
    close(fd);
    struct mixed_setup setup = {.path = path, .record = record, .header = header,
                                .record_count = ((uint64_t)status.st_size - header) / record};
    if (setup.record_count == 0)
        die("an empty view");
    fd = open(checkpoint, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "weights\n", 8) != 8 || close(fd) != 0)
        die("checkpoint commit");
    pthread_t reader;
    if (pthread_create(&reader, NULL, restore_race_reader, &setup) != 0)
        die("pthread_create");
    restore_race_wait_for_reads(200);
    fd = open_or_die(checkpoint, O_RDONLY);
    char loaded[16];
    read_up_to(fd, loaded, sizeof loaded);
    close(fd);
    report("restore_race_loaded", 1);
    restore_race_wait_for_reads(200);
    __atomic_store_n(&restore_race_stop, 1, __ATOMIC_RELEASE);
    pthread_join(reader, NULL);
    report("restore_race_ok", restore_race_failures == 0);
}

static void probe_pipe(const char *path)
{
    int fd = open_or_die(path, O_RDONLY);
    read_and_report(fd, 10, "a");
    close(fd);
    int ends[2];
    if (pipe(ends) != 0)
        die("pipe");
    report("same_fd", ends[0] == fd);
    static const char payload[] = "pipe-payload\n";
    if (write(ends[1], payload, sizeof payload - 1) != (ssize_t)(sizeof payload - 1))
        die("write to the pipe");
    close(ends[1]);
    struct stat status;
    if (fstat(ends[0], &status) != 0)
        die("fstat of the pipe");
    report("is_fifo", S_ISFIFO(status.st_mode));
    read_and_report(ends[0], 4096, "pipe");
}

static void probe_rdwr(const char *path)
{
    int fd = open_or_die(path, O_RDWR);
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat");
    report("fstat_size", (long long)status.st_size);
    report("seek_end", (long long)lseek(fd, 0, SEEK_END));
    lseek(fd, 0, SEEK_SET);
    read_and_report(fd, 1 << 22, "whole");
    close(fd);
    FILE *stream = fopen(path, "r+");
    if (stream == NULL)
        die("fopen r+");
    char *buffer = malloc(1 << 22);
    size_t got = fread(buffer, 1, 1 << 22, stream);
    report_bytes("stdio", buffer, got);
    free(buffer);
    fclose(stream);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void probe_dir(const char *path)
{
    int fd = open(path, O_RDONLY);
    report("open_ok", fd >= 0);
    if (fd < 0)
        die("open of the directory");
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat");
    report("is_dir", S_ISDIR(status.st_mode));
    char byte;
    errno = 0;
    report("read_result", (long long)read(fd, &byte, 1));
    report("read_errno", errno);
    DIR *directory = fdopendir(fd);
    if (directory == NULL)
        die("fdopendir");
    char *names[64];
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL && count < 64)
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, ".."))
            names[count++] = strdup(entry->d_name);
    closedir(directory);
    qsort(names, count, sizeof names[0], compare_names);
    report("entries", (long long)count);
    for (size_t i = 0; i < count; i++)
        printf("entry %s\n", names[i]);
    FILE *stream = fopen(path, "r");
    report("fopen_ok", stream != NULL);
    if (stream != NULL) {
        errno = 0;
        report("fread_result", (long long)fread(&byte, 1, 1, stream));
        report("fread_errno", errno);
        report("ferror", ferror(stream) != 0);
        fclose(stream);
    }
}

static void probe_fifo(const char *path, bool stdio)
{
    char buffer[4096];
    size_t got = 0;
    if (stdio) {
        FILE *stream = fopen(path, "r");
        if (stream == NULL)
            die("fopen of the fifo");
        got = fread(buffer, 1, sizeof buffer, stream);
        fclose(stream);
    } else {
        int fd = open_or_die(path, O_RDONLY);
        struct stat status;
        if (fstat(fd, &status) != 0)
            die("fstat");
        report("is_fifo", S_ISFIFO(status.st_mode));
        got = read_up_to(fd, buffer, sizeof buffer);
        close(fd);
    }
    report_bytes("fifo", buffer, got);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: fd_probe CASE PATH [OTHER | RECORD]\n");
        return 2;
    }
    const char *name = argv[1], *path = argv[2], *other = argc > 3 ? argv[3] : NULL;
    /* Descriptors inherited from the test runner would break the numbering
     * the reuse cases rely on (the next open gets the lowest free number).
     * `mixed` keeps them: it relies on no numbering, and the shim's own
     * descriptors (its metrics file) must stay open for it. */
    if (strcmp(name, "mixed") != 0 && strcmp(name, "restore_race") != 0)
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    bool needs_other = strcmp(name, "reuse") == 0 || strcmp(name, "dup2") == 0 ||
                       strcmp(name, "close_range") == 0 || strcmp(name, "closefrom") == 0 ||
                       strcmp(name, "threads") == 0 || strcmp(name, "vfork") == 0 ||
                       strcmp(name, "mixed") == 0 || strcmp(name, "restore_race") == 0 ||
                       strncmp(name, "reopen_after_", 13) == 0;
    if (needs_other && other == NULL) {
        fprintf(stderr, "fd_probe: %s needs a third argument\n", name);
        return 2;
    }
    if (strcmp(name, "dup") == 0) probe_dup(path);
    else if (strcmp(name, "pread") == 0) probe_pread(path);
    else if (strcmp(name, "seekend") == 0) probe_seekend(path);
    else if (strcmp(name, "reuse") == 0) probe_reuse(path, other);
    else if (strcmp(name, "dup2") == 0) probe_dup2(path, other);
    else if (strcmp(name, "close_range") == 0) probe_close_range(path, other, false);
    else if (strcmp(name, "closefrom") == 0) probe_close_range(path, other, true);
    else if (strcmp(name, "reopen_after_close_range") == 0) probe_reopen_after(path, other, false);
    else if (strcmp(name, "reopen_after_closefrom") == 0) probe_reopen_after(path, other, true);
    else if (strcmp(name, "dupfd") == 0) probe_dupfd(path);
    else if (strcmp(name, "opath") == 0) probe_opath(path);
    else if (strcmp(name, "fork") == 0) probe_fork(path);
    else if (strcmp(name, "vfork") == 0) probe_vfork(path, other);
    else if (strcmp(name, "threads") == 0) {
        char *comma;
        size_t record = strtoul(other, &comma, 10);
        size_t header = *comma == ',' ? strtoul(comma + 1, NULL, 10) : 0;
        if (record == 0 || record > 4096 || header > 4096) {
            fprintf(stderr, "fd_probe: threads expects RECORD,HEADER (at most 4096 each)\n");
            return 2;
        }
        probe_threads(path, record, header);
    }
    else if (strcmp(name, "mixed") == 0) {
        char *comma;
        size_t record = strtoul(other, &comma, 10);
        size_t header = *comma == ',' ? strtoul(comma + 1, NULL, 10) : 0;
        if (argc < 6 || record < 8 || record > 4096 || header > 4096) {
            fprintf(stderr, "fd_probe: mixed expects RECORD,HEADER (RECORD 8..4096, HEADER at "
                            "most 4096), REFERENCE and CHECKPOINT\n");
            return 2;
        }
        probe_mixed(path, record, header, argv[4], argv[5]);
    }
    else if (strcmp(name, "restore_race") == 0) {
        char *comma;
        size_t record = strtoul(other, &comma, 10);
        size_t header = *comma == ',' ? strtoul(comma + 1, NULL, 10) : 0;
        if (argc < 5 || record < 8 || record > 4096 || header > 4096) {
            fprintf(stderr, "fd_probe: restore_race expects RECORD,HEADER (RECORD 8..4096, "
                            "HEADER at most 4096) and CHECKPOINT\n");
            return 2;
        }
        probe_restore_race(path, record, header, argv[4]);
    }
    else if (strcmp(name, "pipe") == 0) probe_pipe(path);
    else if (strcmp(name, "rdwr") == 0) probe_rdwr(path);
    else if (strcmp(name, "dir") == 0) probe_dir(path);
    else if (strcmp(name, "fifo") == 0) probe_fifo(path, false);
    else if (strcmp(name, "fifo-stdio") == 0) probe_fifo(path, true);
    else {
        fprintf(stderr, "fd_probe: unknown case '%s'\n", name);
        return 2;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
