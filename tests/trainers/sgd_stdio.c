/* sgd_stdio.c - linear-regression SGD over an ADSD dataset through stdio,
 * continue-style resume.
 *
 *   sgd_stdio --data PATH --epochs E --batch B --lr LR --checkpoint PATH
 *             [--checkpoint-every STEPS=10] [--resume] [--ids-log PATH] [--final PATH]
 *
 * A plain user program.  Data I/O: fopen(PATH, "rb") once; per epoch rewind()
 * (even epochs) or fseek(f, 0, SEEK_SET) (odd epochs), fread() of the 16-byte
 * header, fstat(fileno(f)) to check that header count * record size + 16
 * equals the file size (exit 3 if not), then fread() of mini-batches of B
 * records until fread comes up short at end of file.
 * Checkpoints: fopen(PATH, "wb") + fwrite + fclose in place (no rename),
 * every STEPS steps and at the end of every epoch, holding the weights, the
 * step, the epoch and whether that epoch was finished.  --resume restores all
 * of them and continues the epoch loop where it stopped (the next epoch if
 * the saved one was finished); an empty or cut-short checkpoint (a kill
 * during the in-place write) is reported and training starts fresh.  A
 * final short batch never takes a periodic checkpoint: the end-of-epoch one
 * ("finished") follows at once.  --ids-log appends (open O_APPEND + write,
 * unbuffered) "id <ID> epoch <E>" per consumed record, "ckpt <STEP>" after
 * each checkpoint and "epoch_end <E>".  Prints "final weights w0 w1 ..."; with
 * --final writes the raw float weights (fopen/fwrite/fclose).
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

#define CKPT_MAGIC "SGDS"
#define CKPT_VERSION 1u

/* Checkpoint file: this header followed by float w[dim]. */
struct ckpt_header {
    char magic[4];
    uint32_t version, dim, completed_epoch;
    uint64_t step, epoch;
};

struct trainer {
    uint32_t dim;
    size_t record_size;
    float *w, *grad;
    uint64_t step, epoch;
};

/* Rewinds (two ways, alternating), reads and checks the header; returns dim. */
static uint32_t begin_epoch(FILE *f, uint64_t epoch, const char *path, size_t *record_size)
{
    if (epoch % 2 == 0)
        rewind(f);
    else if (fseek(f, 0, SEEK_SET) != 0)
        trainer_die(1, "fseek on %s: %s", path, strerror(errno));
    unsigned char header[16];
    if (fread(header, 1, sizeof header, f) != sizeof header)
        trainer_die(ferror(f) ? 1 : 3, "%s: cannot read the 16-byte header", path);
    struct adsd_dataset layout = {.fd = -1}; /* dim 0: any dimension, checked against the checkpoint's */
    adsd_accept_header(&layout, header, "bad dimension", path);
    *record_size = layout.record_size;
    adsd_check_header_against_file_size(&layout, fileno(f), path);
    return layout.dim;
}

static void save_checkpoint(const char *path, const struct trainer *t, bool completed, int log_fd)
{
    struct ckpt_header header = {.version = CKPT_VERSION, .dim = t->dim,
                                 .completed_epoch = completed, .step = t->step, .epoch = t->epoch};
    memcpy(header.magic, CKPT_MAGIC, 4);
    FILE *file = fopen(path, "wb");
    if (file == NULL)
        trainer_die(1, "cannot create checkpoint %s: %s", path, strerror(errno));
    if (fwrite(&header, sizeof header, 1, file) != 1 ||
        fwrite(t->w, sizeof *t->w, t->dim, file) != t->dim || fclose(file) != 0)
        trainer_die(1, "writing checkpoint %s: %s", path, strerror(errno));
    trainer_log_line(log_fd, "ckpt %" PRIu64 "\n", t->step);
}

/* Fills t (dim, w, step, epoch to continue at) and returns true; returns
 * false, saying why, when there is nothing to resume from: no file, or a file
 * cut short because a kill hit the in-place write (fopen "wb" truncates). */
static bool load_checkpoint(const char *path, struct trainer *t)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL && errno == ENOENT) {
        printf("no checkpoint at %s, starting fresh\n", path);
        return false;
    }
    if (file == NULL)
        trainer_die(1, "cannot open checkpoint %s: %s", path, strerror(errno));
    struct ckpt_header header;
    float *w = NULL;
    size_t got = fread(&header, 1, sizeof header, file);
    if (got == sizeof header) {
        if (memcmp(header.magic, CKPT_MAGIC, 4) != 0 || header.version != CKPT_VERSION ||
            header.dim == 0 || header.dim > 65536 || header.completed_epoch > 1)
            trainer_die(3, "%s: not a valid sgd_stdio checkpoint", path);
        w = trainer_allocate_zeroed(header.dim * sizeof *w);
        got += sizeof *w * fread(w, sizeof *w, header.dim, file);
    }
    if (ferror(file))
        trainer_die(1, "reading checkpoint %s: %s", path, strerror(errno));
    if (w == NULL || got != sizeof header + header.dim * sizeof *w) {
        fprintf(stderr, "sgd_stdio: warning: checkpoint %s is incomplete (%zu bytes), "
                        "probably an interrupted write\n", path, got);
        printf("incomplete checkpoint at %s, starting fresh\n", path);
        free(w);
        fclose(file);
        return false;
    }
    if (fgetc(file) != EOF)
        trainer_die(3, "%s: checkpoint is longer than dimension %" PRIu32 " needs", path, header.dim);
    fclose(file);
    t->dim = header.dim;
    t->w = w;
    t->step = header.step;
    t->epoch = header.epoch + header.completed_epoch;
    return true;
}

/* Runs one epoch (t->epoch) from the current header on; returns records seen. */
static uint64_t run_epoch(FILE *f, struct trainer *t, unsigned char *batch,
                          const struct trainer_sgd_options *o, int log_fd, float *loss)
{
    uint64_t seen = 0;
    *loss = 0.0f;
    for (;;) {
        size_t n = fread(batch, t->record_size, o->batch, f);
        if (n < o->batch && ferror(f))
            trainer_die(1, "reading %s: %s", o->data, strerror(errno));
        if (n > 0) {
            *loss += adsd_linear_regression_sgd_step(t->w, t->grad, t->dim, batch, n, t->record_size,
                                                     o->lr);
            t->step++;
            seen += n;
            adsd_log_batch_ids(log_fd, batch, n, t->record_size, t->epoch, t->step);
            trainer_pause_between_steps(o->sleep_us);
            /* A short batch hit the end of file: the end-of-epoch checkpoint
             * follows at once and, unlike a mid-epoch one, says "finished". */
            if (t->step % o->every == 0 && n == o->batch)
                save_checkpoint(o->checkpoint, t, false, log_fd);
        }
        if (n < o->batch)
            return seen; /* end of file */
    }
}

int main(int argc, char **argv)
{
    trainer_set_program_name("sgd_stdio");
    struct trainer_sgd_options o;
    trainer_parse_sgd_options(argc, argv, "sgd_stdio", false, &o);
    struct trainer t = {0};
    bool resumed = o.resume && load_checkpoint(o.checkpoint, &t);
    if (resumed)
        printf("resumed at step %" PRIu64 " epoch %" PRIu64 "\n", t.step, t.epoch);
    fflush(stdout);  /* a supervisor reads this even if the run is killed */
    int log_fd = trainer_open_ids_log(o.ids_log);
    FILE *f = fopen(o.data, "rb");
    if (f == NULL)
        trainer_die(1, "cannot open %s: %s", o.data, strerror(errno));

    unsigned char *batch = NULL;
    for (; t.epoch < o.epochs; t.epoch++) {
        uint32_t dim = begin_epoch(f, t.epoch, o.data, &t.record_size);
        t.w = adsd_weights_for_dimension(t.w, t.dim, dim);
        t.dim = dim;
        if (batch == NULL) {
            t.grad = trainer_allocate_zeroed(dim * sizeof *t.grad);
            batch = trainer_allocate_zeroed(o.batch * t.record_size);
        }
        float loss;
        uint64_t seen = run_epoch(f, &t, batch, &o, log_fd, &loss);
        trainer_log_line(log_fd, "epoch_end %" PRIu64 "\n", t.epoch);
        save_checkpoint(o.checkpoint, &t, true, log_fd);
        printf("epoch %" PRIu64 " records %" PRIu64 " step %" PRIu64 " loss %.6g\n", t.epoch,
               seen, t.step, seen ? (double)loss / (double)seen : 0.0);
        fflush(stdout);
    }
    fclose(f);
    if (t.w == NULL)
        trainer_die(3, "no epoch was run and no checkpoint was loaded: no weights to report");
    trainer_report_final_weights(t.w, t.dim, o.final);
    free(t.w);
    free(t.grad);
    free(batch);
    if (fflush(stdout) != 0)
        trainer_die(1, "writing stdout: %s", strerror(errno));
    return 0;
}
