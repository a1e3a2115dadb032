/* coop_sgd_mpi.c - a cooperative trainer: data-parallel linear regression
 * with MPI, written against adaptshim's cooperative API (adaptdl.h), as an
 * AdaptDL program would be written in Python.
 *
 *   coop_sgd_mpi --data PATH --epochs E --batch-size B --lr LR --checkpoint PATH
 *                [--max-batch-size M [--local-bounds MIN:MAX]] [--momentum MU=0.9]
 *                [--checkpoint-every STEPS=10] [--ids-log PATH] [--sleep-us US]
 *                [--cost-per-record-ns NS] [--no-eval]
 *                [--valid PATH [--valid-every RECORDS=8192] [--target LOSS]]
 *
 * Every value option also accepts the --name=VALUE form.  The data is an
 * ADSD file (16-byte header; records of u64 id, float x[dim], float y).  Per
 * epoch (adaptdl_remaining_epochs_until): a training loop over the file
 * (adaptdl_loop_create_for_file, shuffled, global batch B; with
 * --max-batch-size the batch adapts up to M and the loop ends by statistical
 * progress; --local-bounds MIN:MAX are the loop's local batch bounds, 0 for
 * none, given to adaptdl_loop_autoscale: with MIN = MAX the local batch is
 * pinned while AdaScale's gain stays relative to B; AdaptDL accepts a MIN of
 * at most B), then, unless --no-eval, an evaluation loop over the file that
 * sums the squared error, the count of predictions within 0.5 and the
 * records into an accumulator, whose synchronized results give "epoch E loss
 * L accuracy A" (printed by rank 0; after a restart the replayed epoch
 * prints the same line from the accumulator's history without
 * communicating).  --no-eval leaves out that loop and its line (over the
 * whole train file it would dominate a measurement of training time).
 *
 * Per step: the local gradient of the batch's mean squared error (a weight
 * per feature and a bias), --cost-per-record-ns NS slept per local record
 * (the part of a real model's step that grows with the batch), an
 * MPI_Allreduce (MPI_SUM, doubles) averaged over the ranks, the gradient
 * statistics reported with adaptdl_report_gradient, and SGD with momentum MU
 * (0: plain SGD) whose learning rate is LR times AdaScale's gain
 * (adaptdl_loop_gain), then --sleep-us US (the fixed part of a step).  The
 * momentum buffer is registered state (adaptdl_register_buffer): only the
 * library saves and restores it.  Sleeps, not busy loops, as sgd_mpi's.
 *
 * Validation (--valid PATH, an ADSD file of the same dimension), as sgd_mpi
 * does it: every --valid-every RECORDS train records, counted over all ranks
 * (local records of a step times the number of ranks, kept in the
 * checkpoint), every rank reads the whole file and sums the squared error of
 * the current model; the sums and counts are all-reduced (2 doubles,
 * MPI_SUM), so the loss is the whole file's mean, the same on every rank.
 * Rank 0 prints "valid records R loss L seconds T unix U" (T: seconds since
 * this process started, U: the unix time, which measures across restarts).
 * --target LOSS: once a validation loss is at or below LOSS (agreed with a
 * 1-int MPI_MAX all-reduce), rank 0 prints "target reached records R loss L
 * seconds T unix U", the ranks leave the loop and the epoch loop, checkpoint
 * and end as after the last epoch (exit 0).
 *
 * Checkpoints: every STEPS steps, between two batches (the one just handed
 * out not trained on yet: a loop counts a batch as done when the next is
 * asked for, as AdaptDL's does), and after each epoch, every rank calls
 * adaptdl_synchronize_states, then rank 0 writes {"COOP", u32 dim, u64 step,
 * u64 records, double w[dim + 1]} to PATH.tmp and renames it onto PATH (the
 * commit ADAPTDL_SAVE binds).  On start every rank loads PATH if it exists
 * ("rank R resumed at step S"), which restores the library's state bound
 * to it.
 *
 * --ids-log PATH (%r = rank): per rank, one write per batch of "id I epoch
 * E" per record then "step S"; "ckpt S" after each rename (rank 0) and
 * "epoch_end E", as the other MPI example trainer writes.
 * With --max-batch-size, rank 0 prints "batch global G local L gain X records
 * R seconds T unix U" at the first step and whenever the global batch
 * changes (X: AdaScale's gain the step's learning rate is multiplied by).
 * At the end rank 0 prints "final weights ..." and every rank "rank R steps
 * S batch G" (G: the training loop's last global batch).
 * Exit status: 0 done, 1 I/O or MPI error, 2 usage, 3 bad data. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adaptdl.h"
#include "trainer_common.h"

#define HEADER_SIZE 16
#define MAX_DIM 64
#define VALID_CHUNK 4096 /* validation records read at once */

struct options {
    const char *data, *checkpoint, *ids_log, *valid;
    uint64_t epochs, batch, max_batch, every, sleep_us, cost_per_record_ns, valid_every;
    uint64_t min_local, max_local;
    double lr, momentum, target;
    bool have_bounds, have_target, no_eval;
};

static int mpi_rank, mpi_size;

/* --local-bounds MIN:MAX, two local batch sizes, 0 for no bound. */
static void parse_bounds(const char *text, struct options *o)
{
    const char *colon = strchr(text, ':');
    char first[32];
    if (colon == NULL || (size_t)(colon - text) >= sizeof first)
        trainer_die(2, "--local-bounds expects MIN:MAX, two local batch sizes (0: no bound), got '%s'",
                    text);
    memcpy(first, text, (size_t)(colon - text));
    first[colon - text] = '\0';
    o->min_local = trainer_parse_count("--local-bounds MIN", first, 0, 1 << 20);
    o->max_local = trainer_parse_count("--local-bounds MAX", colon + 1, 0, 1 << 20);
    if (o->max_local > 0 && o->min_local > o->max_local)
        trainer_die(2, "--local-bounds expects MIN <= MAX (0: no bound), got '%s'", text);
    o->have_bounds = true;
}

static double parse_real(const char *flag, const char *text, double min, bool min_allowed,
                         double max, const char *accepted)
{
    char *end;
    double value = strtod(text, &end);
    if (end == text || *end || !(min_allowed ? value >= min : value > min) || !(value < max))
        trainer_die(2, "%s expects %s, got '%s'", flag, accepted, text);
    return value;
}

static const char usage[] =
    "usage: coop_sgd_mpi --data PATH --epochs E --batch-size B --lr LR --checkpoint PATH "
    "[--max-batch-size M [--local-bounds MIN:MAX]] [--momentum MU] [--checkpoint-every STEPS] "
    "[--ids-log PATH] [--sleep-us US] [--cost-per-record-ns NS] [--no-eval] "
    "[--valid PATH [--valid-every RECORDS] [--target LOSS]]";

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 10, .lr = -1, .momentum = 0.9, .valid_every = 8192};
    bool have_epochs = false, have_batch = false, have_valid_every = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--no-eval") == 0) {
            o->no_eval = true;
            continue;
        }
        /* --name VALUE or --name=VALUE */
        char flag[TRAINER_OPTION_NAME_SIZE];
        const char *value = trainer_split_option(argc, argv, &i, flag);
        if (strcmp(flag, "--data") == 0) o->data = value;
        else if (strcmp(flag, "--checkpoint") == 0) o->checkpoint = value;
        else if (strcmp(flag, "--ids-log") == 0) o->ids_log = value;
        else if (strcmp(flag, "--epochs") == 0) o->epochs = trainer_parse_count(flag, value, 0, 1000000), have_epochs = true;
        else if (strcmp(flag, "--batch-size") == 0) o->batch = trainer_parse_count(flag, value, 1, 1 << 20), have_batch = true;
        else if (strcmp(flag, "--max-batch-size") == 0) o->max_batch = trainer_parse_count(flag, value, 0, 1 << 20);
        else if (strcmp(flag, "--local-bounds") == 0) parse_bounds(value, o);
        else if (strcmp(flag, "--checkpoint-every") == 0) o->every = trainer_parse_count(flag, value, 1, UINT32_MAX);
        else if (strcmp(flag, "--sleep-us") == 0) o->sleep_us = trainer_parse_count(flag, value, 0, 10000000);
        else if (strcmp(flag, "--cost-per-record-ns") == 0)
            o->cost_per_record_ns = trainer_parse_count(flag, value, 0, 1000000000);
        else if (strcmp(flag, "--valid") == 0) o->valid = value;
        else if (strcmp(flag, "--valid-every") == 0)
            o->valid_every = trainer_parse_count(flag, value, 1, UINT64_MAX / 2), have_valid_every = true;
        else if (strcmp(flag, "--target") == 0)
            o->target = parse_real(flag, value, 0, true, INFINITY, "a loss >= 0"), o->have_target = true;
        else if (strcmp(flag, "--lr") == 0)
            o->lr = parse_real(flag, value, 0, false, INFINITY, "a positive number");
        else if (strcmp(flag, "--momentum") == 0)
            o->momentum = parse_real(flag, value, 0, true, 1, "a number in [0, 1) (0: plain SGD)");
        else
            trainer_die(2, "unknown option: %s", arg);
    }
    if (!o->data || !o->checkpoint || !have_epochs || !have_batch || o->lr < 0)
        trainer_die(2, "%s", usage);
    if (!o->valid && (have_valid_every || o->have_target))
        trainer_die(2, "--valid-every and --target need --valid PATH (the validation set)");
    if (o->max_batch > 0 && o->max_batch < o->batch)
        trainer_die(2, "--max-batch-size expects at least the batch size %" PRIu64 ", got %" PRIu64,
                    o->batch, o->max_batch);
    if (o->have_bounds && o->max_batch == 0)
        trainer_die(2, "--local-bounds needs --max-batch-size (the bounds of an adaptive batch)");
    if (o->min_local > o->batch)
        trainer_die(2, "--local-bounds expects a MIN of at most the batch size %" PRIu64
                       " (AdaptDL's rule), got %" PRIu64, o->batch, o->min_local);
}

/* The dimension from the file's header: "ADSD", u32 dim, u64 count. */
static unsigned read_dimension(const char *path)
{
    unsigned char header[HEADER_SIZE];
    FILE *file = fopen(path, "rb");
    if (file == NULL || fread(header, 1, sizeof header, file) != sizeof header)
        trainer_die(3, "%s: cannot read its header", path);
    fclose(file);
    uint32_t dim;
    memcpy(&dim, header + 4, sizeof dim);
    if (memcmp(header, "ADSD", 4) != 0 || dim == 0 || dim > MAX_DIM)
        trainer_die(3, "%s: not an ADSD file of at most %d features", path, MAX_DIM);
    return dim;
}

struct model {
    unsigned dim;
    double w[MAX_DIM + 1];         /* weights, then the bias */
    double velocity[MAX_DIM + 1];  /* registered with the library */
    uint64_t step;
    uint64_t records;              /* train records over all ranks */
};

static void save_checkpoint(const char *path, const struct model *model, int ids_fd)
{
    if (adaptdl_synchronize_states() != 0)
        trainer_die(1, "adaptdl_synchronize_states: %s", adaptdl_last_error());
    if (mpi_rank != 0)
        return;
    char temp[4096];
    snprintf(temp, sizeof temp, "%s.tmp", path);
    FILE *file = fopen(temp, "wb");
    if (file == NULL)
        trainer_die(1, "cannot write %s: %s", temp, strerror(errno));
    uint32_t dim = model->dim;
    if (fwrite("COOP", 1, 4, file) != 4 || fwrite(&dim, sizeof dim, 1, file) != 1 ||
        fwrite(&model->step, sizeof model->step, 1, file) != 1 ||
        fwrite(&model->records, sizeof model->records, 1, file) != 1 ||
        fwrite(model->w, sizeof model->w[0], dim + 1, file) != dim + 1 || fclose(file) != 0)
        trainer_die(1, "cannot write %s", temp);
    printf("checkpoint step %" PRIu64 "\n", model->step);
    fflush(stdout);
    if (rename(temp, path) != 0)
        trainer_die(1, "rename %s: %s", path, strerror(errno));
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
    char magic[4], extra;
    uint32_t dim;
    if (fread(magic, 1, 4, file) != 4 || memcmp(magic, "COOP", 4) != 0 ||
        fread(&dim, sizeof dim, 1, file) != 1 || dim != model->dim ||
        fread(&model->step, sizeof model->step, 1, file) != 1 ||
        fread(&model->records, sizeof model->records, 1, file) != 1 ||
        fread(model->w, sizeof model->w[0], dim + 1, file) != dim + 1 ||
        fread(&extra, 1, 1, file) != 0)
        trainer_die(3, "%s: not a checkpoint of this trainer for %u features", path, model->dim);
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

static void train_step(struct model *model, const struct options *o,
                       const unsigned char *records, long count, size_t record_size, double lr,
                       int ids_fd, int64_t epoch)
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
    /* --cost-per-record-ns: the batch-proportional compute of a real model */
    if (o->cost_per_record_ns > 0)
        trainer_sleep_nanoseconds(o->cost_per_record_ns * (uint64_t)count);
    if (MPI_Allreduce(local, mean, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        trainer_die(1, "MPI_Allreduce failed");
    for (unsigned j = 0; j < n; j++)
        mean[j] /= mpi_size;
    if (adaptdl_report_gradient(squared_norm(local, n), squared_norm(mean, n),
                                (uint64_t)count) != 0)
        trainer_die(1, "adaptdl_report_gradient: %s", adaptdl_last_error());
    for (unsigned j = 0; j < n; j++) {
        model->velocity[j] = o->momentum * model->velocity[j] + mean[j];
        model->w[j] -= lr * model->velocity[j];
    }
    model->step++;
    model->records += (uint64_t)count * (uint64_t)mpi_size;
    if (ids_fd >= 0) {
        length += (size_t)sprintf(text + length, "step %" PRIu64 "\n", model->step);
        if (write(ids_fd, text, length) != (ssize_t)length)
            trainer_die(1, "ids log: %s", strerror(errno));
    }
}

static void evaluate(const struct model *model, adaptdl_loop *loop, adaptdl_accumulator *sums,
                     unsigned char *buffer, size_t capacity, size_t record_size, int64_t epoch)
{
    if (adaptdl_loop_begin(loop) < 0)
        trainer_die(1, "evaluation loop: %s", adaptdl_last_error());
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
        trainer_die(1, "evaluation loop: %s", adaptdl_last_error());
    if (adaptdl_accumulator_synchronize(sums) != 0)
        trainer_die(1, "accumulator: %s", adaptdl_last_error());
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

static double process_start; /* CLOCK_MONOTONIC at the start of main */

/* --valid: the mean squared error of the model over the whole validation
 * file.  Every rank reads the file whole and the sums and counts of all
 * ranks are all-reduced (as sgd_mpi's): the same loss on every rank. */
static double validation_loss(const char *path, const struct model *model)
{
    FILE *file = fopen(path, "rb");
    unsigned char header[HEADER_SIZE];
    if (file == NULL)
        trainer_die(1, "cannot open validation file %s: %s", path, strerror(errno));
    if (fread(header, 1, sizeof header, file) != sizeof header || memcmp(header, "ADSD", 4) != 0)
        trainer_die(3, "%s: not an ADSD file", path);
    uint32_t dim;
    uint64_t count;
    memcpy(&dim, header + 4, sizeof dim);
    memcpy(&count, header + 8, sizeof count);
    if (dim != model->dim)
        trainer_die(3, "%s: validation dimension %" PRIu32 " differs from the train data's %u", path,
                    dim, model->dim);
    size_t record_size = 8 + 4 * (size_t)dim + 4;
    struct stat status;
    if (fstat(fileno(file), &status) != 0 ||
        (uint64_t)status.st_size != HEADER_SIZE + count * record_size)
        trainer_die(3, "%s: its header says %" PRIu64 " records of %zu bytes, not its size", path,
                    count, record_size);
    unsigned char *records = malloc(VALID_CHUNK * record_size);
    if (records == NULL)
        trainer_die(1, "out of memory");
    double sums[2] = {0.0, 0.0}; /* squared error, records */
    size_t got;
    while ((got = fread(records, record_size, VALID_CHUNK, file)) > 0) {
        for (size_t i = 0; i < got; i++) {
            uint64_t id;
            float x[MAX_DIM], y;
            record_fields(records + i * record_size, dim, &id, x, &y);
            double error = predict(model, x) - y;
            sums[0] += error * error;
        }
        sums[1] += (double)got;
    }
    if (ferror(file))
        trainer_die(1, "reading %s failed", path);
    free(records);
    fclose(file);
    if (MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        trainer_die(1, "MPI_Allreduce failed");
    if (sums[1] == 0)
        trainer_die(3, "%s: the validation file holds no records", path);
    return sums[0] / sums[1];
}

/* --target: true on every rank once the loss is at or below the target on
 * any rank (the same loss everywhere, but the ranks agree explicitly so that
 * none can stop alone). */
static bool target_agreed(double loss, double target)
{
    int local = loss <= target ? 1 : 0, any = 0;
    if (MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        trainer_die(1, "MPI_Allreduce failed");
    return any != 0;
}

int main(int argc, char **argv)
{
    process_start = trainer_clock_seconds(CLOCK_MONOTONIC);
    trainer_set_program_name_and_rank("coop_sgd_mpi", mpi_rank);
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        trainer_die(1, "MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    trainer_set_program_name_and_rank("coop_sgd_mpi", mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct options o;
    parse_options(argc, argv, &o);
    static struct model model;
    model.dim = read_dimension(o.data);
    size_t record_size = 8 + 4 * model.dim + 4;
    if (adaptdl_register_buffer("sgd-momentum", model.velocity, sizeof model.velocity) != 0)
        trainer_die(1, "register: %s", adaptdl_last_error());
    adaptdl_accumulator *sums = NULL;
    adaptdl_loop *eval = NULL;
    if (!o.no_eval && (sums = adaptdl_accumulator_create()) == NULL)
        trainer_die(1, "setting up: %s", adaptdl_last_error());
    adaptdl_loop *train = adaptdl_loop_create_for_file(o.data, record_size, HEADER_SIZE,
                                                       o.batch, true);
    if (train == NULL)
        trainer_die(1, "setting up: %s", adaptdl_last_error());
    if (!o.no_eval && (eval = adaptdl_loop_create_for_file(o.data, record_size, HEADER_SIZE,
                                                           o.batch, false)) == NULL)
        trainer_die(1, "setting up: %s", adaptdl_last_error());
    if (o.max_batch > 0 ? adaptdl_loop_autoscale(train, o.max_batch, o.min_local, o.max_local)
                        : adaptdl_loop_train(train))
        trainer_die(2, "%s: %s", o.have_bounds ? "--max-batch-size/--local-bounds" : "training loop",
                    adaptdl_last_error());
    load_checkpoint(o.checkpoint, &model);
    int ids_fd = -1;
    if (o.ids_log) {
        char *path = trainer_rank_path(o.ids_log, mpi_rank);
        ids_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (ids_fd < 0)
            trainer_die(1, "ids log %s: %s", path, strerror(errno));
        free(path);
    }
    size_t capacity = record_size * (size_t)(o.max_batch > o.batch ? o.max_batch : o.batch);
    unsigned char *buffer = malloc(capacity);
    if (buffer == NULL)
        trainer_die(1, "out of memory");
    uint64_t last_checkpoint = model.step;
    /* the next validation: at the first multiple of --valid-every past the
     * records already trained (a resumed run keeps the schedule) */
    uint64_t next_valid = (model.records / o.valid_every + 1) * o.valid_every;
    bool reached = false;
    uint64_t last_global = 0; /* the global batch of the last step, printed on a change */
    for (int64_t epoch = adaptdl_remaining_epochs_until((int64_t)o.epochs); epoch >= 0;
         epoch = adaptdl_next_epoch()) {
        if (adaptdl_loop_begin(train) < 0)
            trainer_die(1, "training loop: %s", adaptdl_last_error());
        long count;
        while ((count = adaptdl_loop_next_records(train, buffer, capacity)) > 0) {
            /* between batches, as AdaptDL checkpoints: the batch just handed
             * out is not trained on yet, and the loop does not count it */
            if (model.step % o.every == 0 && model.step != last_checkpoint) {
                save_checkpoint(o.checkpoint, &model, ids_fd);
                last_checkpoint = model.step;
            }
            double gain = adaptdl_loop_gain(train);
            uint64_t global = adaptdl_loop_global_batch_size(train);
            if (o.max_batch > 0 && global != last_global && mpi_rank == 0) {
                printf("batch global %" PRIu64 " local %" PRIu64 " gain %.4g records %" PRIu64
                       " seconds %.3f unix %.3f\n", global, adaptdl_loop_local_batch_size(train),
                       gain, model.records, trainer_clock_seconds(CLOCK_MONOTONIC) - process_start,
                       trainer_clock_seconds(CLOCK_REALTIME));
                fflush(stdout);
            }
            last_global = global;
            train_step(&model, &o, buffer, count, record_size, o.lr * gain, ids_fd, epoch);
            if (o.sleep_us > 0)
                usleep((useconds_t)o.sleep_us);
            if (o.valid && model.records >= next_valid) {
                next_valid = (model.records / o.valid_every + 1) * o.valid_every;
                double loss = validation_loss(o.valid, &model);
                trainer_print_validation_line(mpi_rank, "valid", model.records, loss,
                                          process_start);
                if (o.have_target && target_agreed(loss, o.target)) {
                    trainer_print_validation_line(mpi_rank, "target reached", model.records, loss,
                                                  process_start);
                    reached = true;
                    adaptdl_loop_break(train);
                    break;
                }
            }
        }
        if (reached) {
            /* ends as after the last epoch: the epoch loop left, then the
             * checkpoint of the trained model */
            adaptdl_leave_epoch_loop();
            save_checkpoint(o.checkpoint, &model, ids_fd);
            break;
        }
        if (count < 0)
            trainer_die(1, "training loop: %s", adaptdl_last_error());
        if (!o.no_eval)
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
