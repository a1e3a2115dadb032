/* sgd_read.c - linear-regression SGD over an ADSD dataset, replay-style resume.
 *
 *   sgd_read --data PATH --epochs E --batch B --lr LR --checkpoint PATH
 *            [--checkpoint-every STEPS=10] [--resume] [--ids-log PATH] [--final PATH]
 *            [--pread]
 *
 * A plain user program.  Data I/O: open(O_RDONLY) once; per epoch
 * lseek(fd, 0, SEEK_SET), read() of the 16-byte header, fstat() to check that
 * header count * record size + 16 equals the file size (exit 3 if not), then
 * read() of mini-batches of B records until a read returns 0.  With --pread
 * it reads as a map-style loader does instead: per epoch open(O_RDONLY),
 * pread() of the header at offset 0, the same fstat() check, pread() of
 * each mini-batch at its own offset for the header's count of records (a
 * short pread is exit 3), then close().
 * Checkpoints: open/write/fsync/close of PATH.tmp, then rename() onto PATH,
 * every STEPS steps and at the end of every epoch.  --resume loads the
 * weights and step counter (open/read) but re-runs the epoch loop from 0.
 * --ids-log appends (open O_APPEND + write, unbuffered) "id <ID> epoch <E>"
 * per consumed record, "ckpt <STEP>" after each checkpoint rename and
 * "epoch_end <E>".  Prints "final weights w0 w1 ..." and with --final writes
 * the raw float weights (fopen/fwrite/fclose).
 * Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer_common.h"

#define CKPT_MAGIC "SGDR"
#define CKPT_VERSION 1u

struct options {
    const char *data, *checkpoint, *ids_log, *final;
    uint64_t epochs, batch, every, sleep_us;
    float lr;
    bool resume, pread;
};

struct dataset {
    int fd;
    uint32_t dim;
    uint64_t count;
    size_t record_size;
};

/* Checkpoint file: this header followed by float w[dim]. */
struct ckpt_header {
    char magic[4];
    uint32_t version, dim, reserved;
    uint64_t step, epoch;
};

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 10, .lr = -1};
    bool have_epochs = false, have_batch = false;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--resume") == 0) {
            o->resume = true;
            continue;
        }
        if (strcmp(flag, "--pread") == 0) {
            o->pread = true;
            continue;
        }
        const char *value = trainer_next_option_value(argc, argv, &i);
        if (strcmp(flag, "--data") == 0) o->data = value;
        else if (strcmp(flag, "--checkpoint") == 0) o->checkpoint = value;
        else if (strcmp(flag, "--ids-log") == 0) o->ids_log = value;
        else if (strcmp(flag, "--final") == 0) o->final = value;
        else if (strcmp(flag, "--epochs") == 0) o->epochs = trainer_parse_count(flag, value, 0, 1000000), have_epochs = true;
        else if (strcmp(flag, "--batch") == 0) o->batch = trainer_parse_count(flag, value, 1, 1 << 20), have_batch = true;
        else if (strcmp(flag, "--sleep-us") == 0) o->sleep_us = trainer_parse_count(flag, value, 0, 10000000);
        else if (strcmp(flag, "--checkpoint-every") == 0) o->every = trainer_parse_count(flag, value, 1, UINT32_MAX);
        else if (strcmp(flag, "--lr") == 0) {
            char *end;
            o->lr = strtof(value, &end);
            if (end == value || *end || !(o->lr > 0))
                trainer_die(2, "--lr expects a positive number, got '%s'", value);
        } else
            trainer_die(2, "unknown option: %s", flag);
    }
    if (!o->data || !o->checkpoint || !have_epochs || !have_batch || o->lr < 0)
        trainer_die(2, "usage: sgd_read --data PATH --epochs E --batch B --lr LR --checkpoint PATH "
                       "[--checkpoint-every STEPS] [--sleep-us US] [--resume] [--ids-log PATH] "
                       "[--final PATH] [--pread]");
}

/* pread() until size bytes at offset or end of file; returns the bytes read. */
static size_t pread_full(int fd, void *buffer, size_t size, uint64_t offset, const char *what)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, (char *)buffer + got, size - got, (off_t)(offset + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            trainer_die(1, "reading %s: %s", what, strerror(errno));
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return got;
}

/* Rewinds to the start (--pread: opens the file), reads and checks the
 * header against fstat(). */
static void begin_epoch(struct dataset *data, const char *path, bool by_offset)
{
    unsigned char header[16];
    bool at_end;
    if (by_offset) {
        if ((data->fd = open(path, O_RDONLY)) < 0)
            trainer_die(1, "cannot open %s: %s", path, strerror(errno));
        if (pread_full(data->fd, header, sizeof header, 0, path) != sizeof header)
            trainer_die(3, "%s: file shorter than its 16-byte header", path);
    } else {
        if (lseek(data->fd, 0, SEEK_SET) != 0)
            trainer_die(1, "lseek on %s: %s", path, strerror(errno));
        if (trainer_read_full(data->fd, header, sizeof header, &at_end, path) != sizeof header)
            trainer_die(3, "%s: file shorter than its 16-byte header", path);
    }
    if (memcmp(header, "ADSD", 4) != 0)
        trainer_die(3, "%s: bad magic (not an ADSD dataset)", path);
    uint32_t dim = trainer_get_u32_little_endian(header + 4);
    if (dim == 0 || dim > 65536 || (data->dim != 0 && dim != data->dim))
        trainer_die(3, "%s: bad or changed dimension %" PRIu32, path, dim);
    data->dim = dim;
    data->count = trainer_get_u64_little_endian(header + 8);
    data->record_size = 8 + 4 * (size_t)dim + 4;
    struct stat st;
    if (fstat(data->fd, &st) != 0)
        trainer_die(1, "fstat on %s: %s", path, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    if (size < 16 || (size - 16) % data->record_size != 0 ||
        (size - 16) / data->record_size != data->count)
        trainer_die(3, "%s: header says %" PRIu64 " records of %zu bytes (+16 header) but the file has "
                       "%lld bytes", path, data->count, data->record_size, (long long)st.st_size);
}

/* Reads up to batch records; *at_end is set when a read returned 0. */
static size_t read_batch(struct dataset *data, unsigned char *buffer, uint64_t batch,
                         bool *at_end, const char *path)
{
    size_t got = trainer_read_full(data->fd, buffer, batch * data->record_size, at_end, path);
    if (got % data->record_size != 0)
        trainer_die(3, "%s: truncated record at end of file", path);
    return got / data->record_size;
}

/* --pread: reads the batch of up to `batch` records that starts at record
 * `first`, at its own offset; 0 once the header's count is consumed. */
static size_t pread_batch(struct dataset *data, unsigned char *buffer, uint64_t batch,
                          uint64_t first, const char *path)
{
    uint64_t left = first < data->count ? data->count - first : 0;
    size_t n = (size_t)(left < batch ? left : batch);
    size_t size = n * data->record_size;
    if (pread_full(data->fd, buffer, size, 16 + first * data->record_size, path) != size)
        trainer_die(3, "%s: short pread of records %" PRIu64 "..%" PRIu64 " of %" PRIu64, path, first,
                    first + n, data->count);
    return n;
}

/* One SGD step on the mean squared error of n records; returns the summed
 * squared error before the update.  Fixed order, float only: reproducible. */
static float sgd_step(float *w, float *grad, uint32_t dim, const unsigned char *records,
                      size_t n, size_t record_size, float lr)
{
    float loss = 0.0f;
    memset(grad, 0, dim * sizeof *grad);
    for (size_t r = 0; r < n; r++) {
        const unsigned char *x = records + r * record_size + 8;
        float prediction = 0.0f;
        for (uint32_t j = 0; j < dim; j++)
            prediction += w[j] * trainer_get_f32_little_endian(x + 4 * (size_t)j);
        float error = prediction - trainer_get_f32_little_endian(x + 4 * (size_t)dim);
        loss += error * error;
        for (uint32_t j = 0; j < dim; j++)
            grad[j] += error * trainer_get_f32_little_endian(x + 4 * (size_t)j);
    }
    float scale = 2.0f / (float)n;
    for (uint32_t j = 0; j < dim; j++)
        w[j] -= lr * (grad[j] * scale);
    return loss;
}

/* --sleep-us: stands in for the compute time of a real model's step. */
static void pause_between_steps(uint64_t microseconds)
{
    if (microseconds > 0)
        usleep((useconds_t)microseconds);
}

static void log_batch_ids(int log_fd, const unsigned char *records, size_t n,
                          size_t record_size, uint64_t epoch, uint64_t step)
{
    if (log_fd < 0)
        return;
    char *text = trainer_allocate_zeroed(n * 64 + 32);
    size_t length = 0;
    for (size_t r = 0; r < n; r++)
        length += (size_t)sprintf(text + length, "id %" PRIu64 " epoch %" PRIu64 "\n",
                                  trainer_get_u64_little_endian(records + r * record_size), epoch);
    length += (size_t)sprintf(text + length, "step %" PRIu64 "\n", step);
    trainer_write_all(log_fd, text, length, "ids log");
    free(text);
}

static void save_checkpoint(const char *path, const float *w, uint32_t dim, uint64_t step,
                            uint64_t epoch, int log_fd)
{
    struct ckpt_header header = {.version = CKPT_VERSION, .dim = dim, .step = step, .epoch = epoch};
    memcpy(header.magic, CKPT_MAGIC, 4);
    char temp[4096];
    if ((size_t)snprintf(temp, sizeof temp, "%s.tmp", path) >= sizeof temp)
        trainer_die(2, "checkpoint path too long: %s", path);
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        trainer_die(1, "cannot create %s: %s", temp, strerror(errno));
    trainer_write_all(fd, &header, sizeof header, temp);
    trainer_write_all(fd, w, dim * sizeof *w, temp);
    if (fsync(fd) != 0 || close(fd) != 0)
        trainer_die(1, "flushing %s: %s", temp, strerror(errno));
    if (rename(temp, path) != 0)
        trainer_die(1, "renaming %s to %s: %s", temp, path, strerror(errno));
    trainer_log_line(log_fd, "ckpt %" PRIu64 "\n", step);
}

/* Returns the saved weights (and *dim, *step), or NULL when path does not exist. */
static float *load_checkpoint(const char *path, uint32_t *dim, uint64_t *step)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 && errno == ENOENT)
        return NULL;
    if (fd < 0)
        trainer_die(1, "cannot open checkpoint %s: %s", path, strerror(errno));
    struct ckpt_header header;
    bool at_end;
    if (trainer_read_full(fd, &header, sizeof header, &at_end, path) != sizeof header ||
        memcmp(header.magic, CKPT_MAGIC, 4) != 0 || header.version != CKPT_VERSION ||
        header.dim == 0 || header.dim > 65536)
        trainer_die(3, "%s: not a valid sgd_read checkpoint", path);
    float *w = trainer_allocate_zeroed(header.dim * sizeof *w);
    char extra;
    if (trainer_read_full(fd, w, header.dim * sizeof *w, &at_end, path) != header.dim * sizeof *w ||
        trainer_read_full(fd, &extra, 1, &at_end, path) != 0)
        trainer_die(3, "%s: checkpoint has the wrong size for dimension %" PRIu32, path, header.dim);
    close(fd);
    *dim = header.dim;
    *step = header.step;
    return w;
}

static void write_final(const char *path, const float *w, uint32_t dim)
{
    FILE *file = fopen(path, "wb");
    if (file == NULL)
        trainer_die(1, "cannot create %s: %s", path, strerror(errno));
    if (fwrite(w, sizeof *w, dim, file) != dim || fclose(file) != 0)
        trainer_die(1, "writing %s: %s", path, strerror(errno));
}

/* Allocates the weights (unless loaded), gradient and batch buffers once the
 * first header has told the dimension. */
static void prepare_buffers(const struct dataset *data, const struct options *o, float **w,
                            uint32_t saved_dim, float **grad, unsigned char **batch)
{
    if (*w != NULL && saved_dim != data->dim)
        trainer_die(3, "checkpoint dimension %" PRIu32 " does not match data dimension %" PRIu32,
                    saved_dim, data->dim);
    if (*w == NULL)
        *w = trainer_allocate_zeroed(data->dim * sizeof **w);
    *grad = trainer_allocate_zeroed(data->dim * sizeof **grad);
    *batch = trainer_allocate_zeroed(o->batch * data->record_size);
}

int main(int argc, char **argv)
{
    trainer_set_program_name("sgd_read");
    struct options o;
    parse_options(argc, argv, &o);
    uint64_t step = 0;
    uint32_t saved_dim = 0;
    float *w = NULL;
    if (o.resume) {
        w = load_checkpoint(o.checkpoint, &saved_dim, &step);
        if (w)
            printf("resumed at step %" PRIu64 "\n", step);
        else
            printf("no checkpoint at %s, starting fresh\n", o.checkpoint);
        fflush(stdout);  /* a supervisor reads this even if the run is killed */
    }
    int log_fd = -1;
    if (o.ids_log && (log_fd = open(o.ids_log, O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0)
        trainer_die(1, "cannot open ids log %s: %s", o.ids_log, strerror(errno));
    struct dataset data = {.fd = o.pread ? -1 : open(o.data, O_RDONLY)};
    if (!o.pread && data.fd < 0)
        trainer_die(1, "cannot open %s: %s", o.data, strerror(errno));

    unsigned char *batch = NULL;
    float *grad = NULL;
    for (uint64_t epoch = 0; epoch < o.epochs; epoch++) {
        begin_epoch(&data, o.data, o.pread);
        if (batch == NULL)
            prepare_buffers(&data, &o, &w, saved_dim, &grad, &batch);
        uint64_t seen = 0;
        float loss = 0.0f;
        bool at_end = false;
        while (!at_end) {
            size_t n = o.pread ? pread_batch(&data, batch, o.batch, seen, o.data)
                               : read_batch(&data, batch, o.batch, &at_end, o.data);
            if (n == 0)
                break;
            loss += sgd_step(w, grad, data.dim, batch, n, data.record_size, o.lr);
            step++;
            seen += n;
            log_batch_ids(log_fd, batch, n, data.record_size, epoch, step);
            pause_between_steps(o.sleep_us);
            if (step % o.every == 0)
                save_checkpoint(o.checkpoint, w, data.dim, step, epoch, log_fd);
        }
        if (o.pread) {
            close(data.fd);  /* the next epoch opens it again */
            data.fd = -1;
        }
        trainer_log_line(log_fd, "epoch_end %" PRIu64 "\n", epoch);
        save_checkpoint(o.checkpoint, w, data.dim, step, epoch, log_fd);
        printf("epoch %" PRIu64 " records %" PRIu64 " step %" PRIu64 " loss %.6g\n", epoch, seen,
               step, seen ? (double)loss / (double)seen : 0.0);
        fflush(stdout);
    }
    if (data.fd >= 0)
        close(data.fd);
    if (w == NULL)
        trainer_die(3, "no epoch was run and no checkpoint was loaded: no weights to report");
    uint32_t dim = data.dim ? data.dim : saved_dim;
    printf("final weights");
    for (uint32_t j = 0; j < dim; j++)
        printf(" %.9g", (double)w[j]);
    printf("\n");
    if (o.final)
        write_final(o.final, w, dim);
    free(w);
    free(grad);
    free(batch);
    if (fflush(stdout) != 0)
        trainer_die(1, "writing stdout: %s", strerror(errno));
    return 0;
}
