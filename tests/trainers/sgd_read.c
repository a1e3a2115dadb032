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

#include "adsd_records.h"
#include "trainer_common.h"

#define CKPT_MAGIC "SGDR"
#define CKPT_VERSION 1u

/* Checkpoint file: this header followed by float w[dim]. */
struct ckpt_header {
    char magic[4];
    uint32_t version, dim, reserved;
    uint64_t step, epoch;
};

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
static void begin_epoch(struct adsd_dataset *data, const char *path, bool by_offset)
{
    if (!by_offset) {
        adsd_rewind_and_check_header_with_read(data, path);
        return;
    }
    if ((data->fd = open(path, O_RDONLY)) < 0)
        trainer_die(1, "cannot open %s: %s", path, strerror(errno));
    unsigned char header[ADSD_HEADER_SIZE];
    if (pread_full(data->fd, header, sizeof header, 0, path) != sizeof header)
        trainer_die(3, "%s: file shorter than its 16-byte header", path);
    adsd_accept_header(data, header, "bad or changed dimension", path);
    adsd_check_header_against_file_size(data, data->fd, path);
}

/* --pread: reads the batch of up to `batch` records that starts at record
 * `first`, at its own offset; 0 once the header's count is consumed. */
static size_t pread_batch(struct adsd_dataset *data, unsigned char *buffer, uint64_t batch,
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

static void save_checkpoint(const char *path, const float *w, uint32_t dim, uint64_t step,
                            uint64_t epoch, int log_fd)
{
    struct ckpt_header header = {.version = CKPT_VERSION, .dim = dim, .step = step, .epoch = epoch};
    memcpy(header.magic, CKPT_MAGIC, 4);
    trainer_replace_file_by_rename(path, &header, sizeof header, w, dim * sizeof *w);
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
    float *w = trainer_read_checkpoint_weights(fd, header.dim, path);
    *dim = header.dim;
    *step = header.step;
    return w;
}

/* Allocates the weights (unless loaded), gradient and batch buffers once the
 * first header has told the dimension. */
static void prepare_buffers(const struct adsd_dataset *data, const struct trainer_sgd_options *o,
                            float **w, uint32_t saved_dim, float **grad, unsigned char **batch)
{
    *w = adsd_weights_for_dimension(*w, saved_dim, data->dim);
    *grad = trainer_allocate_zeroed(data->dim * sizeof **grad);
    *batch = trainer_allocate_zeroed(o->batch * data->record_size);
}

int main(int argc, char **argv)
{
    trainer_set_program_name("sgd_read");
    struct trainer_sgd_options o;
    trainer_parse_sgd_options(argc, argv, "sgd_read", true, &o);
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
    int log_fd = trainer_open_ids_log(o.ids_log);
    struct adsd_dataset data = {.fd = o.pread ? -1 : open(o.data, O_RDONLY)};
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
                               : adsd_read_batch_with_read(&data, batch, o.batch, &at_end, o.data);
            if (n == 0)
                break;
            loss += adsd_linear_regression_sgd_step(w, grad, data.dim, batch, n, data.record_size,
                                                    o.lr);
            step++;
            seen += n;
            adsd_log_batch_ids(log_fd, batch, n, data.record_size, epoch, step);
            trainer_pause_between_steps(o.sleep_us);
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
    trainer_report_final_weights(w, dim, o.final);
    free(w);
    free(grad);
    free(batch);
    if (fflush(stdout) != 0)
        trainer_die(1, "writing stdout: %s", strerror(errno));
    return 0;
}
