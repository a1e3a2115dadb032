/* delivery_trace.c - the writer of ADAPTDL_TRACE_FILE (see delivery_trace.h).
 *
 * Every line is built in a stack buffer and handed to one write(2) through
 * runtime_sysio (inside the preload, write() is the shim's own wrapper), on
 * a descriptor opened with O_APPEND: the trainer's threads and its forked
 * DataLoader workers, which inherit the descriptor, append whole lines that
 * never interleave.  errno is kept across every write, since lines are
 * written from inside intercepted calls whose errno the trainer reads.
 *
 * A failed write is logged once; the trace is then incomplete, which the
 * error line says (adaptdl-verify looks for it in the shim's log). */
#include "delivery_trace.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "content_hash.h"
#include "dataset_view.h"
#include "error_message.h"
#include "log.h"
#include "state_store.h"
#include "sysio.h"

/* One line: 4096 is PIPE_BUF, so even a FIFO takes it in one piece. */
#define TRACE_LINE_CAPACITY 4096
/* Room a D line keeps for one more record: a space, 20 digits, `*`. */
#define TRACE_RECORD_ROOM 24
/* An escaped basename (NAME_MAX bytes, 3 each) or path prefix fits here. */
#define TRACE_NAME_CAPACITY (3 * 256 + 1)
#define TRACE_PATH_CAPACITY (3 * 1024 + 1)

bool delivery_trace_active;

static int delivery_trace_fd = -1;
static uint64_t delivery_trace_stop_after;
static bool delivery_trace_stopped;        /* this process stopped itself once */
static bool delivery_trace_write_failed;   /* logged once */

/* The commits of every process of the job that shares this page: made
 * before main, so DataLoader workers see their parent's commits. */
struct delivery_trace_shared {
    uint64_t commits;
};
static struct delivery_trace_shared *delivery_trace_shared;
static struct delivery_trace_shared delivery_trace_private;

struct trace_line {
    char text[TRACE_LINE_CAPACITY];
    size_t length;
};

size_t delivery_trace_escape(const char *text, size_t length, char *out)
{
    static const char hex_digits[] = "0123456789ABCDEF";
    size_t used = 0;
    for (size_t i = 0; i < length; i++) {
        unsigned char byte = (unsigned char)text[i];
        if (byte < '!' || byte > '~' || byte == '%') {
            out[used++] = '%';
            out[used++] = hex_digits[byte >> 4];
            out[used++] = hex_digits[byte & 0xf];
        } else {
            out[used++] = (char)byte;
        }
    }
    out[used] = '\0';
    return used;
}

/* Escapes at most (capacity - 1) / 3 bytes of text: every escaped byte
 * fits.  Names and paths longer than that are cut (never in practice: a
 * basename has at most 255 bytes). */
static const char *trace_escape_into(const char *text, char *out, size_t capacity)
{
    size_t length = strlen(text);
    if (length > (capacity - 1) / 3)
        length = (capacity - 1) / 3;
    delivery_trace_escape(text, length, out);
    return out;
}

static void trace_line_format(struct trace_line *line, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void trace_line_format(struct trace_line *line, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    size_t room = sizeof line->text - line->length;
    int written = vsnprintf(line->text + line->length, room, format, arguments);
    va_end(arguments);
    if (written < 0)
        return;
    line->length += (size_t)written < room ? (size_t)written : room - 1;
}

static void trace_line_write(struct trace_line *line)
{
    if (line->length == 0 || delivery_trace_fd < 0)
        return;
    /* a line cut short by the buffer still ends where a reader expects */
    if (line->length >= sizeof line->text - 1)
        line->length = sizeof line->text - 2;
    line->text[line->length++] = '\n';
    int saved_errno = errno;
    if (sysio_write_all(delivery_trace_fd, line->text, line->length) != 0 &&
        !__atomic_exchange_n(&delivery_trace_write_failed, true, __ATOMIC_RELAXED))
        log_error("ADAPTDL_TRACE_FILE: a write failed (%s): the delivery trace is incomplete",
                  strerror(errno));
    errno = saved_errno;
    line->length = 0;
}

int delivery_trace_open(const char *pattern, uint32_t rank, uint32_t replicas,
                        uint64_t stop_after_commits, char *error, size_t error_size)
{
    int saved_errno = errno;
    delivery_trace_close();
    int fd = log_open_pattern_file("ADAPTDL_TRACE_FILE", pattern, rank, error, error_size);
    if (fd < 0) {
        errno = saved_errno;
        return -1;
    }
    delivery_trace_shared = &delivery_trace_private;
    delivery_trace_private.commits = 0;
    if (stop_after_commits > 0) {
        void *page = runtime_sysio.mmap(NULL, sizeof *delivery_trace_shared,
                                        PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) {
            error_message(error, error_size,
                          "ADAPTDL_TRACE_STOP_AFTER: cannot map the commit counter shared "
                          "with forked workers (%s)", strerror(errno));
            runtime_sysio.close(fd);
            errno = saved_errno;
            return -1;
        }
        delivery_trace_shared = page;
    }
    delivery_trace_fd = fd;
    delivery_trace_stop_after = stop_after_commits;
    delivery_trace_stopped = false;
    delivery_trace_write_failed = false;
    struct trace_line line = {.length = 0};
    trace_line_format(&line, DELIVERY_TRACE_MAGIC " %d pid %ld rank %" PRIu32 " replicas %" PRIu32,
                      DELIVERY_TRACE_VERSION, (long)getpid(), rank, replicas);
    trace_line_write(&line);
    __atomic_store_n(&delivery_trace_active, true, __ATOMIC_RELEASE);
    errno = saved_errno;
    return 0;
}

void delivery_trace_start(const struct adaptdl_config *config)
{
    if (config->trace_file == NULL) {
        if (config->trace_stop_after > 0)
            log_warn("ADAPTDL_TRACE_STOP_AFTER is set but ADAPTDL_TRACE_FILE is not: the "
                     "process never stops itself");
        return;
    }
    char error[512];
    if (delivery_trace_open(config->trace_file, config->replica_rank, config->num_replicas,
                            config->trace_stop_after, error, sizeof error) != 0)
        log_warn("%s; no delivery trace is written", error);
}

void delivery_trace_close(void)
{
    __atomic_store_n(&delivery_trace_active, false, __ATOMIC_RELEASE);
    if (delivery_trace_fd >= 0)
        runtime_sysio.close(delivery_trace_fd);
    delivery_trace_fd = -1;
    if (delivery_trace_shared != NULL && delivery_trace_shared != &delivery_trace_private)
        runtime_sysio.munmap(delivery_trace_shared, sizeof *delivery_trace_shared);
    delivery_trace_shared = NULL;
    delivery_trace_stop_after = 0;
}

/* ADAPTDL_TRACE_STOP_AFTER: at its first delivery once the job committed
 * that many checkpoints, the process says so and stops, before the records
 * reach the trainer; adaptdl-verify, which polls for the line, kills it
 * there.  So the kill comes right after the commit (the trainer's rename
 * or close is done) and before anything of the next records is trained. */
static void delivery_trace_stop_if_asked(void)
{
    if (delivery_trace_stop_after == 0 || delivery_trace_stopped)
        return;
    uint64_t commits = __atomic_load_n(&delivery_trace_shared->commits, __ATOMIC_ACQUIRE);
    if (commits < delivery_trace_stop_after)
        return;
    delivery_trace_stopped = true;
    struct trace_line line = {.length = 0};
    trace_line_format(&line, "P %ld %" PRIu64, (long)getpid(), commits);
    trace_line_write(&line);
    int saved_errno = errno;
    raise(SIGSTOP);
    errno = saved_errno;
}

void delivery_trace_write_deliveries(struct dataset_file *file, uint64_t first, uint64_t last)
{
    if (delivery_trace_fd < 0)
        return;
    /* A stream hands over the consumed part of its last fetch from the
     * fetch's start each time (stream_fetch.h), and a reader may read a
     * record again: only a record's first delivery in the pass is traced,
     * as only it counts for the pass's progress. */
    const struct delivery_record *delivery = &file->shared->delivery;
    while (first < last && delivery_record_any_delivered(delivery, first, first + 1))
        first++;
    if (first == last)
        return;
    delivery_trace_stop_if_asked();
    char name[TRACE_NAME_CAPACITY];
    trace_escape_into(file->basename, name, sizeof name);
    /* Positions from rank + p * K >= M - s on (or past the records a
     * resumed pass selected) are AdaptDL's padding (view_logical_index):
     * they repeat records the pass already holds. */
    uint64_t replicas = file->replicas == 0 ? 1 : file->replicas;
    uint64_t remaining = file->view_selected > 0 ? file->view_selected
                         : file->view_pass_length > file->view_start_index
                             ? file->view_pass_length - file->view_start_index
                             : 0;
    struct trace_line line = {.length = 0};
    for (uint64_t position = first; position < last; position++) {
        if (delivery_record_any_delivered(delivery, position, position + 1))
            continue;
        if (line.length == 0)
            trace_line_format(&line, "D %s %" PRIu64, name, file->view_pass);
        uint64_t physical = dataset_view_logical_to_physical(file, position);
        bool padding = file->rank + position * replicas >= remaining;
        trace_line_format(&line, padding ? " %" PRIu64 "*" : " %" PRIu64, physical);
        if (line.length + TRACE_RECORD_ROOM >= sizeof line.text)
            trace_line_write(&line);
    }
    trace_line_write(&line);
}

void delivery_trace_binding(const struct content_identity *binding,
                            const struct dataset_file *file,
                            const struct snapshot_file_position *position, uint64_t in_flight)
{
    if (!__atomic_load_n(&delivery_trace_active, __ATOMIC_ACQUIRE))
        return;
    char name[TRACE_NAME_CAPACITY];
    struct trace_line line = {.length = 0};
    trace_line_format(&line, "B %" PRIu64 " %016" PRIx64 " %s %s %" PRIu64 " %" PRIu64 " %" PRIu64
                      " %" PRIu64, binding->size, binding->hash,
                      trace_escape_into(file->basename, name, sizeof name),
                      position->role == DATA_ROLE_TRAIN ? "train" : "eval", position->pass,
                      position->current_index, position->pass_length, in_flight);
    trace_line_write(&line);
}

/* The line of a checkpoint event: `kind` C (a commit) or L (a load), the
 * content's size and hash, the path. */
static void delivery_trace_checkpoint_line(char kind, const char *checkpoint_path,
                                           const struct content_identity *identity)
{
    char path[TRACE_PATH_CAPACITY];
    struct trace_line line = {.length = 0};
    trace_line_format(&line, "%c %" PRIu64 " %016" PRIx64 " %s", kind, identity->size,
                      identity->hash, trace_escape_into(checkpoint_path, path, sizeof path));
    trace_line_write(&line);
}

void delivery_trace_commit(const char *checkpoint_path, const struct content_identity *identity)
{
    if (!__atomic_load_n(&delivery_trace_active, __ATOMIC_ACQUIRE))
        return;
    delivery_trace_checkpoint_line('C', checkpoint_path, identity);
    /* after the line: whoever waits for a stop finds the commit first */
    __atomic_add_fetch(&delivery_trace_shared->commits, 1, __ATOMIC_RELEASE);
}

void delivery_trace_load(const char *checkpoint_path, const struct content_identity *identity)
{
    if (!__atomic_load_n(&delivery_trace_active, __ATOMIC_ACQUIRE))
        return;
    delivery_trace_checkpoint_line('L', checkpoint_path, identity);
}
