/* count_rewind_mpi.c - an MPI data-parallel trainer whose loader reads its
 * text file the way llm_parallelisms.c's train_dp.c does: it counts the
 * lines with fgets, rewinds, and reads them again into a buffer sized by
 * the count; then it trains from memory.
 *
 *   count_rewind_mpi --data PATH --steps S
 *   count_rewind_mpi --data PATH --epochs E --batch B --checkpoint PATH
 *                    [--checkpoint-every STEPS=4] [--sleep-us US=0]
 *
 * The loader, on rank R: fopen(PATH, "r"), fgets (256-byte buffer) until
 * NULL counting lines, rewind(), then fgets again into an array of that
 * many lines; a line more than counted is the overflow the real one would
 * write past its buffer (exit 3, "more lines than counted"), one fewer is
 * exit 3 too, and so is a line other than the first reading's at its place
 * (its lengths would not be the ones it sized for); fclose.  Each line is
 * "<id>\t<text>".  A step is six MPI_Allreduce(MPI_IN_PLACE, float,
 * MPI_SUM) on a communicator of its own (MPI_Comm_create), in train_dp's
 * order and sizes: its loss (1 float), then the gradients of its embedding
 * (432), fc_1 (16384 weights, 64 biases) and fc_2 (1728 weights, 27
 * biases).
 *
 * With --steps (train_dp as it is): after MPI_Init the loader runs once; it
 * prints "rank R line ID" per line of its second reading, then S steps over
 * those lines, and "rank R done".
 *
 * With --epochs (train_dp with epochs and a checkpoint, as a user adds
 * them): after MPI_Init every rank loads the checkpoint at PATH, if there
 * is one ("resumed at step S epoch E", else "starting fresh"), then runs
 * epochs until E.  Each epoch runs the loader again (the data of an epoch
 * is the file as it reads then) and trains on every line it got, B lines
 * a step (the last step may be shorter), printing "epoch E record ID" per
 * line once its step is done, and "epoch E lines N" at the epoch's end.
 * The checkpoint (epoch in progress, lines done in it, step) is written
 * every STEPS steps and after each epoch by rank 0 alone, to PATH.tmp then
 * rename() onto PATH; every rank prints "checkpoint step S" at that point,
 * so that each rank's output shows which of its lines a checkpoint covers.
 * The ranks run in lock step: every rank must get as many lines.
 *
 * Exit status: 0 ok, 1 I/O or MPI error, 2 usage, 3 bad data or checkpoint
 * (through MPI_Abort once MPI is up, so that no rank is left waiting). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer_common.h"
#include "trainer_mpi.h"

#define LINE_BUFFER 256
#define CHECKPOINT_MAGIC "CRMP"

struct options {
    const char *data, *checkpoint;
    uint64_t steps, epochs, batch, every, sleep_us;
};

/* What a checkpoint holds. */
struct trainer_state {
    char magic[4];
    uint64_t epoch, done, step;
};

/* The communicator the trainer reduces its gradients on, and its rank. */
struct data_parallel {
    MPI_Comm comm;
    MPI_Group world_group;
    int rank;
};

static const char usage[] =
    "usage: count_rewind_mpi --data PATH --steps S\n"
    "       count_rewind_mpi --data PATH --epochs E --batch B --checkpoint PATH "
    "[--checkpoint-every STEPS] [--sleep-us US]";

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 4};
    bool have_epochs = false;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *value = trainer_next_option_value(argc, argv, &i);
        if (strcmp(flag, "--data") == 0)
            o->data = value;
        else if (strcmp(flag, "--steps") == 0)
            o->steps = trainer_parse_count(flag, value, 1, 1000000);
        else if (strcmp(flag, "--epochs") == 0) {
            o->epochs = trainer_parse_count(flag, value, 0, 1000000);
            have_epochs = true;
        } else if (strcmp(flag, "--batch") == 0)
            o->batch = trainer_parse_count(flag, value, 1, 1000000);
        else if (strcmp(flag, "--checkpoint") == 0)
            o->checkpoint = value;
        else if (strcmp(flag, "--checkpoint-every") == 0)
            o->every = trainer_parse_count(flag, value, 1, UINT64_MAX);
        else if (strcmp(flag, "--sleep-us") == 0)
            o->sleep_us = trainer_parse_count(flag, value, 0, UINT64_MAX);
        else
            trainer_die(2, "unknown option: %s\n%s", flag, usage);
    }
    bool fixed_steps = o->data != NULL && o->steps > 0 && !have_epochs;
    bool with_epochs = o->data != NULL && o->steps == 0 && have_epochs && o->batch > 0 &&
                       o->checkpoint != NULL;
    if (!fixed_steps && !with_epochs)
        trainer_die(2, "%s", usage);
}

static uint64_t line_id(const char *line, const char *path)
{
    char *end;
    uint64_t id = strtoull(line, &end, 10);
    if (end == line || *end != '\t')
        trainer_die(3, "%s: a line without its id: %.40s", path, line);
    return id;
}

/* Counts the lines, rewinds, reads them again: the second reading into an
 * array of the first one's size.  Returns the ids; *count_out their number. */
static uint64_t *read_lines_twice(const char *path, size_t *count_out)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        trainer_die(1, "cannot open %s: %s", path, strerror(errno));
    char buffer[LINE_BUFFER];
    size_t count = 0, capacity = 0;
    uint64_t *counted = NULL;
    while (fgets(buffer, sizeof buffer, file) != NULL) {
        if (count == capacity) {
            capacity = capacity ? 2 * capacity : 64;
            counted = realloc(counted, capacity * sizeof *counted);
            if (counted == NULL)
                trainer_die(1, "out of memory");
        }
        counted[count++] = line_id(buffer, path);
    }
    if (ferror(file))
        trainer_die(1, "reading %s: %s", path, strerror(errno));
    rewind(file);
    uint64_t *ids = trainer_allocate_zeroed((count + 1) * sizeof *ids);
    size_t read = 0;
    while (fgets(buffer, sizeof buffer, file) != NULL) {
        if (read == count)
            trainer_die(3, "%s: more lines than counted (%zu): the buffer would overflow", path,
                        count);
        ids[read] = line_id(buffer, path);
        if (ids[read] != counted[read])
            trainer_die(3, "%s: line %zu is %llu in the second reading, %llu in the first", path,
                        read, (unsigned long long)ids[read], (unsigned long long)counted[read]);
        read++;
    }
    if (ferror(file))
        trainer_die(1, "reading %s again: %s", path, strerror(errno));
    if (read != count)
        trainer_die(3, "%s: %zu lines read again, %zu counted", path, read, count);
    fclose(file);
    free(counted);
    *count_out = count;
    return ids;
}

/* One step: the six all-reduces of train_dp (its loss and the gradients of
 * its five parameter tensors), each filled from the lines, starting at
 * lines[offset] and wrapping around. */
static void reduce_one_step(const struct data_parallel *group, float *gradient,
                            const uint64_t *lines, size_t count, uint64_t offset)
{
    static const int piece_sizes[] = {1, 432, 16384, 64, 1728, 27};
    for (size_t piece = 0; piece < sizeof piece_sizes / sizeof piece_sizes[0]; piece++) {
        for (int i = 0; i < piece_sizes[piece]; i++)
            gradient[i] = (float)((lines[(offset + (uint64_t)i) % (count ? count : 1)] % 7) + 1);
        if (MPI_Allreduce(MPI_IN_PLACE, gradient, piece_sizes[piece], MPI_FLOAT, MPI_SUM,
                          group->comm) != MPI_SUCCESS)
            trainer_die(1, "MPI_Allreduce failed");
    }
}

/* train_dp as it is: one reading, then `steps` steps over the lines. */
static void train_fixed_steps(const struct options *o, const struct data_parallel *group,
                              float *gradient)
{
    size_t count = 0;
    uint64_t *ids = read_lines_twice(o->data, &count);
    for (size_t i = 0; i < count; i++)
        printf("rank %d line %llu\n", group->rank, (unsigned long long)ids[i]);
    for (uint64_t step = 0; step < o->steps; step++)
        reduce_one_step(group, gradient, ids, count, step);
    printf("rank %d done\n", group->rank);
    free(ids);
}

/* Every rank loads the checkpoint rank 0 wrote (a shared file system). */
static void load_checkpoint(const char *path, struct trainer_state *state)
{
    *state = (struct trainer_state){.magic = CHECKPOINT_MAGIC};
    int fd = open(path, O_RDONLY);
    if (fd < 0 && errno == ENOENT) {
        printf("starting fresh\n");
        return;
    }
    if (fd < 0)
        trainer_die(1, "cannot open checkpoint %s: %s", path, strerror(errno));
    struct trainer_state loaded;
    char extra;
    bool at_end;
    if (trainer_read_full(fd, &loaded, sizeof loaded, &at_end, path) != sizeof loaded ||
        trainer_read_full(fd, &extra, 1, &at_end, path) != 0 ||
        memcmp(loaded.magic, CHECKPOINT_MAGIC, 4) != 0)
        trainer_die(3, "%s: not a checkpoint of this trainer", path);
    close(fd);
    *state = loaded;
    printf("resumed at step %" PRIu64 " epoch %" PRIu64 "\n", state->step, state->epoch);
}

/* Rank 0 writes the checkpoint; every rank says where it stands then. */
static void save_checkpoint(const char *path, const struct trainer_state *state, int rank)
{
    printf("checkpoint step %" PRIu64 "\n", state->step);
    if (rank == 0)
        trainer_replace_file_by_rename(path, state, sizeof *state, NULL, 0);
}

/* One epoch: the loader reads the file (count, rewind, read again), then
 * the trainer steps through every line it got. */
static void train_one_epoch(const struct options *o, const struct data_parallel *group,
                            float *gradient, struct trainer_state *state)
{
    size_t count = 0;
    uint64_t *ids = read_lines_twice(o->data, &count);
    for (size_t first = 0; first < count; first += o->batch) {
        size_t lines = count - first < o->batch ? count - first : o->batch;
        reduce_one_step(group, gradient, ids + first, lines, 0);
        trainer_pause_between_steps(o->sleep_us);
        for (size_t i = first; i < first + lines; i++)
            printf("epoch %" PRIu64 " record %" PRIu64 "\n", state->epoch, ids[i]);
        state->done += lines;
        state->step++;
        if (state->step % o->every == 0)
            save_checkpoint(o->checkpoint, state, group->rank);
    }
    printf("epoch %" PRIu64 " lines %zu\n", state->epoch, count);
    free(ids);
}

/* train_dp with epochs and a checkpoint that holds its epoch counter. */
static void train_epochs(const struct options *o, const struct data_parallel *group,
                         float *gradient)
{
    struct trainer_state state;
    load_checkpoint(o->checkpoint, &state);
    while (state.epoch < o->epochs) {
        train_one_epoch(o, group, gradient, &state);
        state.epoch++;
        state.done = 0;
        save_checkpoint(o->checkpoint, &state, group->rank);
    }
    printf("done at step %" PRIu64 "\n", state.step);
}

static void data_parallel_create(struct data_parallel *group)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &group->rank);
    trainer_set_program_name_and_rank("count_rewind_mpi", group->rank);
    if (MPI_Comm_group(MPI_COMM_WORLD, &group->world_group) != MPI_SUCCESS ||
        MPI_Comm_create(MPI_COMM_WORLD, group->world_group, &group->comm) != MPI_SUCCESS)
        trainer_die(1, "cannot create the data-parallel communicator");
}

static void data_parallel_free(struct data_parallel *group)
{
    MPI_Comm_free(&group->comm);
    MPI_Group_free(&group->world_group);
}

int main(int argc, char **argv)
{
    trainer_set_program_name("count_rewind_mpi");
    trainer_set_before_exit(trainer_abort_the_job_if_mpi_runs);
    struct options o;
    parse_options(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        trainer_die(1, "MPI_Init failed");
    struct data_parallel group;
    data_parallel_create(&group);
    float *gradient = trainer_allocate_zeroed(16384 * sizeof *gradient);
    if (o.steps > 0)
        train_fixed_steps(&o, &group, gradient);
    else
        train_epochs(&o, &group, gradient);
    free(gradient);
    data_parallel_free(&group);
    MPI_Finalize();
    return 0;
}
