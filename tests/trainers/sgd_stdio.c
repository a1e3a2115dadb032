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

#include "trainer_common.h"

#define CKPT_MAGIC "SGDS"
#define CKPT_VERSION 1u

struct options {
    const char *data, *checkpoint, *ids_log, *final;
    uint64_t epochs, batch, every, sleep_us;
    float lr;
    bool resume;
};

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
        trainer_die(2, "usage: sgd_stdio --data PATH --epochs E --batch B --lr LR --checkpoint PATH "
                       "[--checkpoint-every STEPS] [--sleep-us US] [--resume] [--ids-log PATH] "
                       "[--final PATH]");
}

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
    if (memcmp(header, "ADSD", 4) != 0)
        trainer_die(3, "%s: bad magic (not an ADSD dataset)", path);
    uint32_t dim = trainer_get_u32_little_endian(header + 4);
    uint64_t count = trainer_get_u64_little_endian(header + 8);
    if (dim == 0 || dim > 65536)
        trainer_die(3, "%s: bad dimension %" PRIu32, path, dim);
    *record_size = 8 + 4 * (size_t)dim + 4;
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        trainer_die(1, "fstat on %s: %s", path, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    if (size < 16 || (size - 16) % *record_size != 0 || (size - 16) / *record_size != count)
        trainer_die(3, "%s: header says %" PRIu64 " records of %zu bytes (+16 header) but the file has "
                       "%" PRIu64 " bytes", path, count, *record_size, size);
    return dim;
}

/* One SGD step on the mean squared error of n records; returns the summed
 * squared error before the update.  Fixed order, float only: reproducible. */
static float sgd_step(struct trainer *t, const unsigned char *records, size_t n, float lr)
{
    float loss = 0.0f;
    memset(t->grad, 0, t->dim * sizeof *t->grad);
    for (size_t r = 0; r < n; r++) {
        const unsigned char *x = records + r * t->record_size + 8;
        float prediction = 0.0f;
        for (uint32_t j = 0; j < t->dim; j++)
            prediction += t->w[j] * trainer_get_f32_little_endian(x + 4 * (size_t)j);
        float error = prediction - trainer_get_f32_little_endian(x + 4 * (size_t)t->dim);
        loss += error * error;
        for (uint32_t j = 0; j < t->dim; j++)
            t->grad[j] += error * trainer_get_f32_little_endian(x + 4 * (size_t)j);
    }
    float scale = 2.0f / (float)n;
    for (uint32_t j = 0; j < t->dim; j++)
        t->w[j] -= lr * (t->grad[j] * scale);
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

static void write_final(const char *path, const float *w, uint32_t dim)
{
    FILE *file = fopen(path, "wb");
    if (file == NULL)
        trainer_die(1, "cannot create %s: %s", path, strerror(errno));
    if (fwrite(w, sizeof *w, dim, file) != dim || fclose(file) != 0)
        trainer_die(1, "writing %s: %s", path, strerror(errno));
}

/* Runs one epoch (t->epoch) from the current header on; returns records seen. */
static uint64_t run_epoch(FILE *f, struct trainer *t, unsigned char *batch,
                          const struct options *o, int log_fd, float *loss)
{
    uint64_t seen = 0;
    *loss = 0.0f;
    for (;;) {
        size_t n = fread(batch, t->record_size, o->batch, f);
        if (n < o->batch && ferror(f))
            trainer_die(1, "reading %s: %s", o->data, strerror(errno));
        if (n > 0) {
            *loss += sgd_step(t, batch, n, o->lr);
            t->step++;
            seen += n;
            log_batch_ids(log_fd, batch, n, t->record_size, t->epoch, t->step);
            pause_between_steps(o->sleep_us);
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
    struct options o;
    parse_options(argc, argv, &o);
    struct trainer t = {0};
    bool resumed = o.resume && load_checkpoint(o.checkpoint, &t);
    if (resumed)
        printf("resumed at step %" PRIu64 " epoch %" PRIu64 "\n", t.step, t.epoch);
    fflush(stdout);  /* a supervisor reads this even if the run is killed */
    int log_fd = -1;
    if (o.ids_log && (log_fd = open(o.ids_log, O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0)
        trainer_die(1, "cannot open ids log %s: %s", o.ids_log, strerror(errno));
    FILE *f = fopen(o.data, "rb");
    if (f == NULL)
        trainer_die(1, "cannot open %s: %s", o.data, strerror(errno));

    unsigned char *batch = NULL;
    for (; t.epoch < o.epochs; t.epoch++) {
        uint32_t dim = begin_epoch(f, t.epoch, o.data, &t.record_size);
        if (t.w != NULL && dim != t.dim)
            trainer_die(3, "checkpoint dimension %" PRIu32 " does not match data dimension %" PRIu32,
                        t.dim, dim);
        t.dim = dim;
        if (t.w == NULL)
            t.w = trainer_allocate_zeroed(dim * sizeof *t.w);
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
    printf("final weights");
    for (uint32_t j = 0; j < t.dim; j++)
        printf(" %.9g", (double)t.w[j]);
    printf("\n");
    if (o.final)
        write_final(o.final, t.w, t.dim);
    free(t.w);
    free(t.grad);
    free(batch);
    if (fflush(stdout) != 0)
        trainer_die(1, "writing stdout: %s", strerror(errno));
    return 0;
}
