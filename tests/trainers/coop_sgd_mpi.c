/* coop_sgd_mpi.c - a cooperative trainer: data-parallel linear regression
 * with MPI, written against adaptshim's cooperative API (adaptdl.h), as an
 * AdaptDL program would be written in Python.
 *
 *   coop_sgd_mpi --data PATH --epochs E --batch-size B --lr LR --checkpoint PATH
 *                [--max-batch-size M] [--checkpoint-every STEPS=10]
 *                [--ids-log PATH] [--sleep-us US]
 *
 * The data is an ADSD file (16-byte header; records of u64 id, float x[dim],
 * float y).  Per epoch (adaptdl_remaining_epochs_until): a training loop over
 * the file (adaptdl_loop_create_for_file, shuffled, global batch B; with
 * --max-batch-size the batch adapts up to M and the loop ends by statistical
 * progress), then an evaluation loop over the file that sums the squared
 * error, the count of predictions within 0.5 and the records into an
 * accumulator, whose synchronized results give "epoch E loss L accuracy A"
 * (printed by rank 0; after a restart the replayed epoch prints the same
 * line from the accumulator's history without communicating).
 *
 * Per step: the local gradient of the batch's mean squared error, an
 * MPI_Allreduce (MPI_SUM, doubles) averaged over the ranks, the gradient
 * statistics reported with adaptdl_report_gradient, and momentum SGD whose
 * learning rate is LR times AdaScale's gain (adaptdl_loop_gain).  The
 * momentum buffer is registered state (adaptdl_register_buffer): only the
 * library saves and restores it.
 *
 * Checkpoints: every STEPS steps, between two batches (the one just handed
 * out not trained on yet: a loop counts a batch as done when the next is
 * asked for, as AdaptDL's does), and after each epoch, every rank calls
 * adaptdl_synchronize_states, then rank 0 writes {"COOP", dim, step, w[]} to
 * PATH.tmp and renames it onto PATH (the commit ADAPTDL_SAVE binds).  On
 * start every rank loads PATH if it exists ("rank R resumed at step S"),
 * which restores the library's state bound to it.
 *
 * --ids-log PATH (%r = rank): per rank, one write per batch of "id I epoch
 * E" per record then "step S"; "ckpt S" after each rename (rank 0) and
 * "epoch_end E", as the other MPI example trainer writes.
 * Exit status: 0 done, 1 I/O or MPI error, 2 usage, 3 bad data. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adaptdl.h"

#define HEADER_SIZE 16
#define MAX_DIM 64
#define MOMENTUM 0.9

struct options {
    const char *data, *checkpoint, *ids_log;
    long epochs, batch, max_batch, every, sleep_us;
    double lr;
};

static int mpi_rank, mpi_size;

static void die(int status, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void die(int status, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    fprintf(stderr, "coop_sgd_mpi[%d]: ", mpi_rank);
    vfprintf(stderr, format, arguments);
    fputc('\n', stderr);
    va_end(arguments);
    exit(status);
}

static long parse_long(const char *flag, const char *value)
{
    char *end;
    errno = 0;
    long number = strtol(value, &end, 10);
    if (errno != 0 || *end != '\0' || end == value || number < 0)
        die(2, "%s wants a non-negative integer, not '%s'", flag, value);
    return number;
}

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 10, .epochs = -1, .lr = -1};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (strcmp(flag, "--data") == 0) o->data = value;
        else if (strcmp(flag, "--checkpoint") == 0) o->checkpoint = value;
        else if (strcmp(flag, "--ids-log") == 0) o->ids_log = value;
        else if (strcmp(flag, "--epochs") == 0) o->epochs = parse_long(flag, value);
        else if (strcmp(flag, "--batch-size") == 0) o->batch = parse_long(flag, value);
        else if (strcmp(flag, "--max-batch-size") == 0) o->max_batch = parse_long(flag, value);
        else if (strcmp(flag, "--checkpoint-every") == 0) o->every = parse_long(flag, value);
        else if (strcmp(flag, "--sleep-us") == 0) o->sleep_us = parse_long(flag, value);
        else if (strcmp(flag, "--lr") == 0) o->lr = atof(value);
        else die(2, "unknown option %s", flag);
    }
    if (!o->data || !o->checkpoint || o->epochs < 0 || o->batch < 1 || o->lr <= 0 ||
        o->every < 1)
        die(2, "usage: coop_sgd_mpi --data PATH --epochs E --batch-size B --lr LR "
               "--checkpoint PATH [--max-batch-size M] [--checkpoint-every STEPS] "
               "[--ids-log PATH] [--sleep-us US]");
}

/* The dimension from the file's header: "ADSD", u32 dim, u64 count. */
static unsigned read_dimension(const char *path)
{
    unsigned char header[HEADER_SIZE];
    FILE *file = fopen(path, "rb");
    if (file == NULL || fread(header, 1, sizeof header, file) != sizeof header)
        die(3, "%s: cannot read its header", path);
    fclose(file);
    uint32_t dim;
    memcpy(&dim, header + 4, sizeof dim);
    if (memcmp(header, "ADSD", 4) != 0 || dim == 0 || dim > MAX_DIM)
        die(3, "%s: not an ADSD file of at most %d features", path, MAX_DIM);
    return dim;
}

struct model {
    unsigned dim;
    double w[MAX_DIM + 1];         /* weights, then the bias */
    double velocity[MAX_DIM + 1];  /* registered with the library */
    uint64_t step;
};

static void save_checkpoint(const char *path, const struct model *model, int ids_fd)
{
    if (adaptdl_synchronize_states() != 0)
        die(1, "adaptdl_synchronize_states: %s", adaptdl_last_error());
    if (mpi_rank != 0)
        return;
    char temp[4096];
    snprintf(temp, sizeof temp, "%s.tmp", path);
    FILE *file = fopen(temp, "wb");
    if (file == NULL)
        die(1, "cannot write %s: %s", temp, strerror(errno));
    uint32_t dim = model->dim;
    if (fwrite("COOP", 1, 4, file) != 4 || fwrite(&dim, sizeof dim, 1, file) != 1 ||
        fwrite(&model->step, sizeof model->step, 1, file) != 1 ||
        fwrite(model->w, sizeof model->w[0], dim + 1, file) != dim + 1 || fclose(file) != 0)
        die(1, "cannot write %s", temp);
    printf("checkpoint step %" PRIu64 "\n", model->step);
    fflush(stdout);
    if (rename(temp, path) != 0)
        die(1, "rename %s: %s", path, strerror(errno));
    if (ids_fd >= 0)
        dprintf(ids_fd, "ckpt %" PRIu64 "\n", model->step);
}

static void load_checkpoint(const char *path, struct model *model)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        printf("rank %d starting fresh\n", mpi_rank);
        return;
    }
    char magic[4];
    uint32_t dim;
    if (fread(magic, 1, 4, file) != 4 || memcmp(magic, "COOP", 4) != 0 ||
        fread(&dim, sizeof dim, 1, file) != 1 || dim != model->dim ||
        fread(&model->step, sizeof model->step, 1, file) != 1 ||
        fread(model->w, sizeof model->w[0], dim + 1, file) != dim + 1)
        die(3, "%s: not a checkpoint of this trainer for %u features", path, model->dim);
    fclose(file);
    printf("rank %d resumed at step %" PRIu64 "\n", mpi_rank, model->step);
}

static double predict(const struct model *model, const float *x)
{
    double value = model->w[model->dim];
    for (unsigned j = 0; j < model->dim; j++)
        value += model->w[j] * x[j];
    return value;
}

/* One record: u64 id, float x[dim], float y. */
static void record_fields(const unsigned char *record, unsigned dim, uint64_t *id, float *x,
                          float *y)
{
    memcpy(id, record, sizeof *id);
    memcpy(x, record + 8, dim * sizeof *x);
    memcpy(y, record + 8 + dim * sizeof *x, sizeof *y);
}

static double squared_norm(const double *vector, unsigned length)
{
    double sum = 0;
    for (unsigned j = 0; j < length; j++)
        sum += vector[j] * vector[j];
    return sum;
}

static void train_step(struct model *model, const unsigned char *records, long count,
                       size_t record_size, double lr, int ids_fd, int64_t epoch)
{
    unsigned n = model->dim + 1;
    double local[MAX_DIM + 1] = {0}, mean[MAX_DIM + 1];
    char text[65536];
    size_t length = 0;
    for (long i = 0; i < count; i++) {
        uint64_t id;
        float x[MAX_DIM], y;
        record_fields(records + (size_t)i * record_size, model->dim, &id, x, &y);
        double error = predict(model, x) - y;
        for (unsigned j = 0; j < model->dim; j++)
            local[j] += 2 * error * x[j] / (double)count;
        local[model->dim] += 2 * error / (double)count;
        if (length + 64 < sizeof text)
            length += (size_t)sprintf(text + length, "id %" PRIu64 " epoch %" PRId64 "\n", id,
                                      epoch);
    }
    if (MPI_Allreduce(local, mean, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        die(1, "MPI_Allreduce failed");
    for (unsigned j = 0; j < n; j++)
        mean[j] /= mpi_size;
    if (adaptdl_report_gradient(squared_norm(local, n), squared_norm(mean, n),
                                (uint64_t)count) != 0)
        die(1, "adaptdl_report_gradient: %s", adaptdl_last_error());
    for (unsigned j = 0; j < n; j++) {
        model->velocity[j] = MOMENTUM * model->velocity[j] + mean[j];
        model->w[j] -= lr * model->velocity[j];
    }
    model->step++;
    if (ids_fd >= 0) {
        length += (size_t)sprintf(text + length, "step %" PRIu64 "\n", model->step);
        if (write(ids_fd, text, length) != (ssize_t)length)
            die(1, "ids log: %s", strerror(errno));
    }
}

static void evaluate(const struct model *model, adaptdl_loop *loop, adaptdl_accumulator *sums,
                     unsigned char *buffer, size_t capacity, size_t record_size, int64_t epoch)
{
    if (adaptdl_loop_begin(loop) < 0)
        die(1, "evaluation loop: %s", adaptdl_last_error());
    long count;
    while ((count = adaptdl_loop_next_records(loop, buffer, capacity)) > 0) {
        for (long i = 0; i < count; i++) {
            uint64_t id;
            float x[MAX_DIM], y;
            record_fields(buffer + (size_t)i * record_size, model->dim, &id, x, &y);
            double error = predict(model, x) - y;
            adaptdl_accumulator_add(sums, "loss_sum", error * error);
            adaptdl_accumulator_add(sums, "correct", fabs(error) < 0.5 ? 1 : 0);
            adaptdl_accumulator_add(sums, "total", 1);
        }
    }
    if (count < 0)
        die(1, "evaluation loop: %s", adaptdl_last_error());
    if (adaptdl_accumulator_synchronize(sums) != 0)
        die(1, "accumulator: %s", adaptdl_last_error());
    double loss = 0, correct = 0, total = 0;
    adaptdl_accumulator_get(sums, "loss_sum", &loss);
    adaptdl_accumulator_get(sums, "correct", &correct);
    adaptdl_accumulator_get(sums, "total", &total);
    if (mpi_rank == 0)
        printf("epoch %" PRId64 " loss %.6f accuracy %.4f evaluated %.0f\n", epoch,
               total > 0 ? loss / total : 0.0, total > 0 ? correct / total : 0.0, total);
    adaptdl_accumulator_clear(sums);
    adaptdl_accumulator_desynchronize(sums);
}

static char *rank_path(const char *pattern)
{
    char *path = malloc(strlen(pattern) + 16);
    char *out = path;
    for (const char *p = pattern; *p; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            out += sprintf(out, "%d", mpi_rank);
            p++;
        } else {
            *out++ = *p;
        }
    }
    *out = '\0';
    return path;
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        die(1, "MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct options o;
    parse_options(argc, argv, &o);
    static struct model model;
    model.dim = read_dimension(o.data);
    size_t record_size = 8 + 4 * model.dim + 4;
    if (adaptdl_register_buffer("sgd-momentum", model.velocity, sizeof model.velocity) != 0)
        die(1, "register: %s", adaptdl_last_error());
    adaptdl_accumulator *sums = adaptdl_accumulator_create();
    adaptdl_loop *train = adaptdl_loop_create_for_file(o.data, record_size, HEADER_SIZE,
                                                       (uint64_t)o.batch, true);
    adaptdl_loop *eval = adaptdl_loop_create_for_file(o.data, record_size, HEADER_SIZE,
                                                      (uint64_t)o.batch, false);
    if (sums == NULL || train == NULL || eval == NULL)
        die(1, "setting up: %s", adaptdl_last_error());
    if (o.max_batch > 0 ? adaptdl_loop_autoscale(train, (uint64_t)o.max_batch, 0, 0)
                        : adaptdl_loop_train(train))
        die(2, "training loop: %s", adaptdl_last_error());
    load_checkpoint(o.checkpoint, &model);
    int ids_fd = -1;
    if (o.ids_log) {
        char *path = rank_path(o.ids_log);
        ids_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (ids_fd < 0)
            die(1, "ids log %s: %s", path, strerror(errno));
        free(path);
    }
    size_t capacity = record_size * (size_t)(o.max_batch > o.batch ? o.max_batch : o.batch);
    unsigned char *buffer = malloc(capacity);
    if (buffer == NULL)
        die(1, "out of memory");
    uint64_t last_checkpoint = model.step;
    for (int64_t epoch = adaptdl_remaining_epochs_until(o.epochs); epoch >= 0;
         epoch = adaptdl_next_epoch()) {
        if (adaptdl_loop_begin(train) < 0)
            die(1, "training loop: %s", adaptdl_last_error());
        long count;
        while ((count = adaptdl_loop_next_records(train, buffer, capacity)) > 0) {
            /* between batches, as AdaptDL checkpoints: the batch just handed
             * out is not trained on yet, and the loop does not count it */
            if (model.step % (uint64_t)o.every == 0 && model.step != last_checkpoint) {
                save_checkpoint(o.checkpoint, &model, ids_fd);
                last_checkpoint = model.step;
            }
            train_step(&model, buffer, count, record_size, o.lr * adaptdl_loop_gain(train),
                       ids_fd, epoch);
            if (o.sleep_us > 0)
                usleep((useconds_t)o.sleep_us);
        }
        if (count < 0)
            die(1, "training loop: %s", adaptdl_last_error());
        evaluate(&model, eval, sums, buffer, capacity, record_size, epoch);
        if (ids_fd >= 0)
            dprintf(ids_fd, "epoch_end %" PRId64 "\n", epoch);
        save_checkpoint(o.checkpoint, &model, ids_fd);
        last_checkpoint = model.step;
    }
    if (mpi_rank == 0) {
        printf("final weights");
        for (unsigned j = 0; j <= model.dim; j++)
            printf(" %.9g", model.w[j]);
        printf("\n");
    }
    printf("rank %d steps %" PRIu64 " batch %" PRIu64 "\n", mpi_rank, model.step,
           adaptdl_loop_global_batch_size(train));
    adaptdl_loop_destroy(train);
    adaptdl_loop_destroy(eval);
    adaptdl_accumulator_destroy(sums);
    free(buffer);
    MPI_Finalize();
    return 0;
}
