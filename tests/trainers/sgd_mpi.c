/* sgd_mpi.c - data-parallel linear-regression SGD over an ADSD dataset with
 * MPI, replay-style resume.  The MPI sibling of sgd_read.c.
 *
 *   sgd_mpi --data PATH --epochs E --batch-size B --lr LR --checkpoint PATH
 *           [--checkpoint-every STEPS=10] [--resume] [--ids-log PATH] [--final PATH]
 *           [--sleep-us US] [--cost-per-record-ns NS] [--pad N=1024] [--per-layer]
 *           [--iallreduce] [--loss-allreduce] [--divide-before] [--own-sigterm-handler]
 *           [--valid PATH [--valid-every RECORDS=8192] [--target LOSS]]
 *
 * A plain user program: it knows nothing about any preloaded library.  Every
 * value option also accepts the --name=VALUE form; without --batch-size the
 * batch size comes from the environment variable BATCH_SIZE.
 *
 * MPI: MPI_Init, rank and size from MPI_COMM_WORLD.  The ranks do NOT shard
 * the data themselves: every rank open()s the data file and, per epoch,
 * lseek(fd, 0, SEEK_SET), read()s the 16-byte header, checks header count *
 * record size + 16 against fstat() (exit 3 if not) and read()s mini-batches of
 * B records until a read returns 0 (as sgd_read does).  Without a sharding
 * layer underneath, every rank thus trains on the whole file; with one that
 * gives every rank the same number of records per pass, all ranks take the
 * same number of steps.
 *
 * Per step: local gradient of the batch's mean squared error, then an
 * all-reduce (MPI_SUM over MPI_COMM_WORLD) of a float vector made of the dim
 * real gradient entries followed by --pad zero floats: the padding stands in
 * for a model with more parameters (a linear model's gradient alone is
 * smaller than what gradient-statistics tools count as a gradient).  The sum
 * is divided by the number of ranks, after the all-reduce (default) or, with
 * --divide-before, on the local gradient before it; every rank applies the
 * same update.  Variants:
 *   default           MPI_Allreduce(grad, global, dim + pad, MPI_FLOAT, MPI_SUM)
 *   --iallreduce      the same through MPI_Iallreduce + MPI_Wait
 *   --per-layer       three "layers", each all-reduced with MPI_IN_PLACE, in
 *                     this order: [real gradient dim | pad zeros] (dim + pad
 *                     floats), a second layer of pad zero floats, and a small
 *                     "bias" layer of PER_LAYER_BIAS zero floats (smaller than
 *                     a gradient: it is the one non-gradient-sized piece,
 *                     and comes last).  With --iallreduce all three are
 *                     posted as MPI_Iallreduce and then MPI_Wait-ed in order.
 *   --loss-allreduce  after the gradient, MPI_Allreduce of the batch's summed
 *                     squared error (1 double, MPI_SUM): the epoch line then
 *                     shows the global loss.
 * The zero padding does not change the gradient's squared norm, so all
 * variants carry the same gradient; without a sharding layer (every rank has
 * the same batch) the result is bit-identical to sgd_read's.
 *
 * Simulated compute: --cost-per-record-ns NS sleeps NS nanoseconds per local
 * record of the batch before the gradient all-reduce (the part of a real
 * model's step that grows with the batch), --sleep-us US sleeps US
 * microseconds after every step (the fixed part).  Sleeps, not busy loops:
 * the replicas share the machine's cores with each other and with whatever
 * else runs, and a sleep costs the same however loaded the machine is.
 *
 * Validation (--valid PATH, an ADSD file of the same dimension, e.g. made by
 * gen_dataset with another seed: the true weights depend on the dimension
 * only): every --valid-every RECORDS train records, counted over all ranks
 * (local records of a step times the number of ranks), every rank opens
 * PATH, reads it whole and sums the squared error of the current weights;
 * the sum and the record count are all-reduced (2 doubles, MPI_SUM), so the
 * mean is the whole file's whether every rank read all of it or a sharding
 * layer gave each its share.  Rank 0 prints
 *   "valid records R loss L seconds T unix U"
 * with R the train records so far (kept in the checkpoint, so it goes on
 * across resumes), T the seconds since this process started and U the unix
 * time (a restarted job is a new process: U measures across restarts).
 * --target LOSS: once a validation loss is at or below LOSS (agreed with a
 * 1-int MPI_MAX all-reduce), rank 0 prints "target reached records R loss L
 * seconds T unix U", rank 0 checkpoints, and the run ends as after its last
 * epoch (final weights, exit 0).
 *
 * Checkpoints (rank 0 only): {"SGDM", version 2, dim, reserved, step, epoch,
 * records, float w[dim]} (version 1, without records, is still read) written with open/write/fsync/close to PATH.tmp and rename()d
 * onto PATH, every STEPS steps and at the end of every epoch.  --resume: every
 * rank loads PATH if it exists (weights and step counter), prints "rank R
 * resumed at step S" and re-runs the epoch loop from 0 (replay style).
 * --ids-log PATH (a %r in it is replaced by the rank): per rank, an O_APPEND
 * file with one write() per batch of "id <ID> epoch <E>" per record then
 * "step <S>"; "ckpt <STEP>" after each checkpoint rename (rank 0) and
 * "epoch_end <E>" (every rank), as in sgd_read.
 * --own-sigterm-handler: a sigaction() SIGTERM handler sets a flag; after
 * each step the ranks agree on it with a 1-int MPI_MAX all-reduce (so all
 * stop after the same step), then rank 0 writes a checkpoint, every rank
 * prints "rank R caught SIGTERM" and "rank R steps S", MPI_Finalize, exit 0.
 * At the end rank 0 prints "final weights w0 w1 ..." and with --final writes
 * the raw float weights; every rank prints "rank R steps S".
 * Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint (through
 * MPI_Abort once MPI is up, so that no rank is left waiting). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adsd_records.h"
#include "trainer_common.h"
#include "trainer_mpi.h"

#define CKPT_MAGIC "SGDM"
#define CKPT_VERSION 2u
#define VALID_CHUNK 4096 /* validation records read at once */
#define PER_LAYER_BIAS 16 /* floats in the small last layer of --per-layer */

struct options {
    struct trainer_sgd_options sgd; /* data, checkpoint, ids_log, final, epochs, batch, every,
                                     * sleep_us, lr, resume (pread unused) */
    const char *valid;
    uint64_t pad, cost_per_record_ns, valid_every;
    double target;
    bool have_target;
    bool per_layer, iallreduce, loss_allreduce, divide_before, own_sigterm;
};

/* Checkpoint file: this header followed by float w[dim].  Version 1 had no
 * records field (its header ends after epoch). */
struct ckpt_header {
    char magic[4];
    uint32_t version, dim, reserved;
    uint64_t step, epoch;
    uint64_t records; /* train records over all ranks (version 2) */
};
#define CKPT_V1_HEADER offsetof(struct ckpt_header, records)

/* Where training stands: what a checkpoint saves besides the weights. */
struct progress {
    uint64_t step, records;
};

static int mpi_rank, mpi_size = 1;
static volatile sig_atomic_t sigterm_caught;

static const char usage[] =
    "usage: sgd_mpi --data PATH --epochs E --batch-size B --lr LR --checkpoint PATH "
    "[--checkpoint-every STEPS] [--sleep-us US] [--resume] [--ids-log PATH] [--final PATH] "
    "[--cost-per-record-ns NS] [--pad N] [--per-layer] [--iallreduce] [--loss-allreduce] "
    "[--divide-before] [--own-sigterm-handler] [--valid PATH [--valid-every RECORDS] "
    "[--target LOSS]]";

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.sgd = {.every = 10, .lr = -1}, .pad = 1024, .valid_every = 8192};
    bool have_epochs = false, have_batch = false, have_valid_every = false;
    static const struct { const char *name; size_t offset; } switches[] = {
        {"--resume", offsetof(struct options, sgd.resume)},
        {"--per-layer", offsetof(struct options, per_layer)},
        {"--iallreduce", offsetof(struct options, iallreduce)},
        {"--loss-allreduce", offsetof(struct options, loss_allreduce)},
        {"--divide-before", offsetof(struct options, divide_before)},
        {"--own-sigterm-handler", offsetof(struct options, own_sigterm)},
    };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool matched = false;
        for (size_t s = 0; s < sizeof switches / sizeof switches[0]; s++)
            if (strcmp(arg, switches[s].name) == 0) {
                *(bool *)((char *)o + switches[s].offset) = true;
                matched = true;
            }
        if (matched)
            continue;
        /* --name VALUE or --name=VALUE */
        char flag[TRAINER_OPTION_NAME_SIZE];
        const char *value = trainer_split_option(argc, argv, &i, flag);
        if (trainer_parse_sgd_value_option(&o->sgd, "--batch-size", flag, value, &have_epochs,
                                           &have_batch))
            continue;
        if (strcmp(flag, "--pad") == 0) o->pad = trainer_parse_count(flag, value, 0, 1 << 24);
        else if (strcmp(flag, "--cost-per-record-ns") == 0)
            o->cost_per_record_ns = trainer_parse_count(flag, value, 0, 1000000000);
        else if (strcmp(flag, "--valid") == 0) o->valid = value;
        else if (strcmp(flag, "--valid-every") == 0)
            o->valid_every = trainer_parse_count(flag, value, 1, UINT64_MAX / 2), have_valid_every = true;
        else if (strcmp(flag, "--target") == 0) {
            char *end;
            o->target = strtod(value, &end);
            if (end == value || *end || !(o->target >= 0))
                trainer_die(2, "--target expects a loss >= 0, got '%s'", value);
            o->have_target = true;
        }
        else
            trainer_die(2, "unknown option: %s", arg);
    }
    const char *env_batch = getenv("BATCH_SIZE");
    if (!have_batch && env_batch != NULL) {
        o->sgd.batch = trainer_parse_count("BATCH_SIZE", env_batch, 1, 1 << 20);
        have_batch = true;
    }
    if (!o->sgd.data || !o->sgd.checkpoint || !have_epochs || !have_batch || o->sgd.lr < 0)
        trainer_die(2, "%s", usage);
    if (!o->valid && (have_valid_every || o->have_target))
        trainer_die(2, "--valid-every and --target need --valid PATH (the validation set)");
}

static void check_mpi(int status, const char *what)
{
    if (status != MPI_SUCCESS)
        trainer_die(1, "%s failed (MPI error %d)", what, status);
}

/* Sums the padded gradient vector over the ranks.  grad holds the local
 * gradient (length `length`), global receives the sum, except with
 * --per-layer where every layer is reduced in place in grad and then copied.
 * (grad_sqr: with the default the ranks send their local mean gradient and
 * receive the sum; with --divide-before they send gradient / size and the
 * all-reduce result is already the mean over the ranks.) */
static void allreduce_gradient(const struct options *o, float *grad, float *global,
                               size_t length, uint32_t dim)
{
    if (o->per_layer) {
        size_t pieces[3][2] = {
            {0, dim + o->pad},                        /* real gradient + padding */
            {dim + o->pad, o->pad},                   /* a second, all-zero layer */
            {dim + 2 * o->pad, PER_LAYER_BIAS},       /* a small "bias" layer */
        };
        MPI_Request requests[3];
        for (int p = 0; p < 3; p++) {
            float *start = grad + pieces[p][0];
            int count = (int)pieces[p][1];
            if (o->iallreduce)
                check_mpi(MPI_Iallreduce(MPI_IN_PLACE, start, count, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, &requests[p]), "MPI_Iallreduce");
            else
                check_mpi(MPI_Allreduce(MPI_IN_PLACE, start, count, MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD), "MPI_Allreduce");
        }
        if (o->iallreduce)
            for (int p = 0; p < 3; p++)
                check_mpi(MPI_Wait(&requests[p], MPI_STATUS_IGNORE), "MPI_Wait");
        memcpy(global, grad, length * sizeof *global);
    } else if (o->iallreduce) {
        MPI_Request request;
        check_mpi(MPI_Iallreduce(grad, global, (int)length, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                 &request), "MPI_Iallreduce");
        check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    } else
        check_mpi(MPI_Allreduce(grad, global, (int)length, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                  "MPI_Allreduce");
}

/* One data-parallel SGD step on n local records; returns the summed squared
 * error of the local batch (before the update). */
static float sgd_step(const struct options *o, float *w, float *grad, float *global,
                      size_t length, uint32_t dim, const unsigned char *records, size_t n,
                      size_t record_size)
{
    memset(grad, 0, length * sizeof *grad);
    float loss = adsd_mean_squared_error_gradient(w, grad, dim, records, n, record_size);
    /* --cost-per-record-ns: the batch-proportional compute of a real model */
    if (o->cost_per_record_ns > 0)
        trainer_sleep_nanoseconds(o->cost_per_record_ns * n);
    float ranks = (float)mpi_size;
    if (o->divide_before)
        for (uint32_t j = 0; j < dim; j++)
            grad[j] = grad[j] / ranks;
    allreduce_gradient(o, grad, global, length, dim);
    if (!o->divide_before)
        for (uint32_t j = 0; j < dim; j++)
            global[j] = global[j] / ranks;
    for (uint32_t j = 0; j < dim; j++)
        w[j] -= o->sgd.lr * global[j];
    return loss;
}

/* Rank 0 only. */
static void save_checkpoint(const char *path, const float *w, uint32_t dim,
                            const struct progress *progress, uint64_t epoch, int log_fd)
{
    if (mpi_rank != 0)
        return;
    uint64_t step = progress->step;
    struct ckpt_header header = {.version = CKPT_VERSION, .dim = dim, .step = step,
                                 .epoch = epoch, .records = progress->records};
    memcpy(header.magic, CKPT_MAGIC, 4);
    trainer_replace_file_by_rename(path, &header, sizeof header, w, dim * sizeof *w);
    trainer_log_line(log_fd, "ckpt %" PRIu64 "\n", step);
}

/* Returns the saved weights (and *dim, *progress), or NULL when path does
 * not exist. */
static float *load_checkpoint(const char *path, uint32_t *dim, struct progress *progress)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0 && errno == ENOENT)
        return NULL;
    if (fd < 0)
        trainer_die(1, "cannot open checkpoint %s: %s", path, strerror(errno));
    struct ckpt_header header = {0};
    bool at_end;
    if (trainer_read_full(fd, &header, CKPT_V1_HEADER, &at_end, path) != CKPT_V1_HEADER ||
        memcmp(header.magic, CKPT_MAGIC, 4) != 0 || header.version < 1 ||
        header.version > CKPT_VERSION || header.dim == 0 || header.dim > 65536)
        trainer_die(3, "%s: not a valid sgd_mpi checkpoint (version 1 or %u)", path, CKPT_VERSION);
    size_t rest = sizeof header - CKPT_V1_HEADER;
    if (header.version >= 2 &&
        trainer_read_full(fd, (char *)&header + CKPT_V1_HEADER, rest, &at_end, path) != rest)
        trainer_die(3, "%s: checkpoint header cut short", path);
    float *w = trainer_read_checkpoint_weights(fd, header.dim, path);
    *dim = header.dim;
    *progress = (struct progress){.step = header.step, .records = header.records};
    return w;
}

/* Length of the padded gradient vector that is all-reduced. */
static size_t gradient_length(const struct options *o, uint32_t dim)
{
    return o->per_layer ? dim + 2 * o->pad + PER_LAYER_BIAS : dim + o->pad;
}

/* Allocates the weights (unless loaded), gradient and batch buffers once the
 * first header has told the dimension. */
static void prepare_buffers(const struct adsd_dataset *data, const struct options *o, float **w,
                            uint32_t saved_dim, float **grad, float **global,
                            unsigned char **batch)
{
    *w = adsd_weights_for_dimension(*w, saved_dim, data->dim);
    size_t length = gradient_length(o, data->dim);
    *grad = trainer_allocate_zeroed(length * sizeof **grad);
    *global = trainer_allocate_zeroed(length * sizeof **global);
    *batch = trainer_allocate_zeroed(o->sgd.batch * data->record_size);
}

static double process_start; /* CLOCK_MONOTONIC at the start of main */

/* --valid: the mean squared error of w over the whole validation file.  Every
 * rank opens the file anew (as real trainers reopen their validation set),
 * sums the squared error of what it reads, and the sums and counts of all
 * ranks are all-reduced: the mean is right whether each rank read the whole
 * file or its share of it. */
static double validation_loss(const char *path, const float *w, uint32_t dim)
{
    struct adsd_dataset valid = {.fd = open(path, O_RDONLY)};
    if (valid.fd < 0)
        trainer_die(1, "cannot open validation file %s: %s", path, strerror(errno));
    adsd_rewind_and_check_header_with_read(&valid, path);
    if (valid.dim != dim)
        trainer_die(3, "%s: validation dimension %" PRIu32 " differs from the train data's %" PRIu32,
                    path, valid.dim, dim);
    unsigned char *records = trainer_allocate_zeroed(VALID_CHUNK * valid.record_size);
    double sums[2] = {0.0, 0.0}; /* squared error, records */
    bool at_end = false;
    while (!at_end) {
        size_t n = adsd_read_batch_with_read(&valid, records, VALID_CHUNK, &at_end, path);
        for (size_t r = 0; r < n; r++) {
            const unsigned char *x = records + r * valid.record_size + 8;
            float prediction = 0.0f;
            for (uint32_t j = 0; j < dim; j++)
                prediction += w[j] * trainer_get_f32_little_endian(x + 4 * (size_t)j);
            double error =
                (double)prediction - (double)trainer_get_f32_little_endian(x + 4 * (size_t)dim);
            sums[0] += error * error;
        }
        sums[1] += (double)n;
    }
    free(records);
    close(valid.fd);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (sums[1] == 0)
        trainer_die(3, "%s: the validation file holds no records", path);
    return sums[0] / sums[1];
}

/* --target: true on every rank once the loss is at or below the target on
 * any rank (the same loss everywhere after the all-reduce, but the ranks
 * agree explicitly so that none can stop alone). */
static bool target_agreed(double loss, double target)
{
    int local = loss <= target ? 1 : 0, any = 0;
    check_mpi(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return any != 0;
}

static void on_sigterm(int signal_number)
{
    (void)signal_number;
    sigterm_caught = 1;
}

static void install_sigterm_handler(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_sigterm;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &action, NULL) != 0)
        trainer_die(1, "sigaction(SIGTERM): %s", strerror(errno));
}

/* --own-sigterm-handler: true on every rank once any rank caught SIGTERM.
 * The flag is agreed through a 1-int MPI_MAX all-reduce so that all ranks
 * stop after the same step. */
static bool sigterm_agreed(void)
{
    int local = sigterm_caught ? 1 : 0, any = 0;
    check_mpi(MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    return any != 0;
}

int main(int argc, char **argv)
{
    process_start = trainer_clock_seconds(CLOCK_MONOTONIC);
    trainer_set_program_name_and_rank("sgd_mpi", mpi_rank);
    trainer_set_before_exit(trainer_abort_the_job_if_mpi_runs);
    struct options o;
    parse_options(argc, argv, &o);
    check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    trainer_set_program_name_and_rank("sgd_mpi", mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    if (o.own_sigterm)
        install_sigterm_handler();

    struct progress progress = {0};
    uint32_t saved_dim = 0;
    float *w = NULL;
    if (o.sgd.resume) {
        w = load_checkpoint(o.sgd.checkpoint, &saved_dim, &progress);
        if (w)
            printf("rank %d resumed at step %" PRIu64 "\n", mpi_rank, progress.step);
        else
            printf("rank %d no checkpoint at %s, starting fresh\n", mpi_rank, o.sgd.checkpoint);
        fflush(stdout);  /* a supervisor reads this even if the run is killed */
    }
    int log_fd = -1;
    if (o.sgd.ids_log) {
        char *path = trainer_rank_path(o.sgd.ids_log, mpi_rank);
        log_fd = trainer_open_ids_log(path);
        free(path);
    }
    struct adsd_dataset data = {.fd = open(o.sgd.data, O_RDONLY)};
    if (data.fd < 0)
        trainer_die(1, "cannot open %s: %s", o.sgd.data, strerror(errno));

    unsigned char *batch = NULL;
    float *grad = NULL, *global = NULL;
    bool stopped = false, reached = false;
    /* the next validation: at the first multiple of --valid-every past the
     * records already trained (a resumed run keeps the schedule) */
    uint64_t next_valid = (progress.records / o.valid_every + 1) * o.valid_every;
    for (uint64_t epoch = 0; epoch < o.sgd.epochs && !stopped && !reached; epoch++) {
        adsd_rewind_and_check_header_with_read(&data, o.sgd.data);
        if (batch == NULL)
            prepare_buffers(&data, &o, &w, saved_dim, &grad, &global, &batch);
        size_t length = gradient_length(&o, data.dim);
        uint64_t seen = 0;
        float loss = 0.0f;
        double global_loss = 0.0;
        bool at_end = false;
        while (!at_end) {
            size_t n = adsd_read_batch_with_read(&data, batch, o.sgd.batch, &at_end, o.sgd.data);
            if (n == 0)
                break;
            float batch_loss = sgd_step(&o, w, grad, global, length, data.dim, batch, n,
                                        data.record_size);
            loss += batch_loss;
            if (o.loss_allreduce) {
                double local_sum = (double)batch_loss, sum = 0.0;
                check_mpi(MPI_Allreduce(&local_sum, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                          "MPI_Allreduce");
                global_loss += sum;
            }
            progress.step++;
            progress.records += n * (uint64_t)mpi_size;
            seen += n;
            adsd_log_batch_ids(log_fd, batch, n, data.record_size, epoch, progress.step);
            trainer_pause_between_steps(o.sgd.sleep_us);
            if (progress.step % o.sgd.every == 0)
                save_checkpoint(o.sgd.checkpoint, w, data.dim, &progress, epoch, log_fd);
            if (o.own_sigterm && sigterm_agreed()) {
                save_checkpoint(o.sgd.checkpoint, w, data.dim, &progress, epoch, log_fd);
                printf("rank %d caught SIGTERM\n", mpi_rank);
                stopped = true;
                break;
            }
            if (o.valid && progress.records >= next_valid) {
                next_valid = (progress.records / o.valid_every + 1) * o.valid_every;
                double valid_loss = validation_loss(o.valid, w, data.dim);
                trainer_print_validation_line(mpi_rank, "valid", progress.records, valid_loss,
                                              process_start);
                if (o.have_target && target_agreed(valid_loss, o.target)) {
                    trainer_print_validation_line(mpi_rank, "target reached", progress.records,
                                                  valid_loss, process_start);
                    save_checkpoint(o.sgd.checkpoint, w, data.dim, &progress, epoch, log_fd);
                    reached = true;
                    break;
                }
            }
        }
        if (stopped || reached)
            break;
        trainer_log_line(log_fd, "epoch_end %" PRIu64 "\n", epoch);
        save_checkpoint(o.sgd.checkpoint, w, data.dim, &progress, epoch, log_fd);
        if (mpi_rank == 0) {
            double mean = seen == 0 ? 0.0
                          : o.loss_allreduce ? global_loss / ((double)seen * mpi_size)
                                             : (double)loss / (double)seen;
            printf("epoch %" PRIu64 " records %" PRIu64 " step %" PRIu64 " %s %.6g\n", epoch,
                   seen, progress.step, o.loss_allreduce ? "global_loss" : "loss", mean);
        }
        fflush(stdout);
    }
    close(data.fd);
    if (log_fd >= 0)
        close(log_fd);
    if (w == NULL)
        trainer_die(3, "no epoch was run and no checkpoint was loaded: no weights to report");
    uint32_t dim = data.dim ? data.dim : saved_dim;
    if (mpi_rank == 0 && !stopped) {
        trainer_report_final_weights(w, dim, o.sgd.final);
    }
    printf("rank %d steps %" PRIu64 "\n", mpi_rank, progress.step);
    if (fflush(stdout) != 0)
        trainer_die(1, "writing stdout: %s", strerror(errno));
    free(w);
    free(grad);
    free(global);
    free(batch);
    MPI_Finalize();
    return 0;
}
