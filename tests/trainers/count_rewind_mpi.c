/* count_rewind_mpi.c - an MPI data-parallel trainer whose loader reads its
 * text file the way llm_parallelisms.c's train_dp.c does: it counts the
 * lines with fgets, rewinds, and reads them again into a buffer sized by
 * the count; then it trains from memory.
 *
 *   count_rewind_mpi --data PATH --steps S
 *
 * After MPI_Init, rank R: fopen(PATH, "r"), fgets (256-byte buffer) until
 * NULL counting lines, rewind(), then fgets again into an array of that
 * many lines; a line more than counted is the overflow the real one would
 * write past its buffer (exit 3, "more lines than counted"), one fewer is
 * exit 3 too, and so is a line other than the first reading's at its place
 * (its lengths would not be the ones it sized for); fclose.  Each line is "<id>\t<text>".  It prints "rank R
 * line ID" per line of its second reading, then S steps of six
 * MPI_Allreduce(MPI_IN_PLACE, float, MPI_SUM) on a communicator of its
 * own (MPI_Comm_create), of 432, 64, 27, 2048, 2048 and 2048 floats, as
 * train_dp's gradients and loss are, and "rank R done".
 * Exit status: 0 ok, 1 I/O or MPI error, 2 usage, 3 bad data. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer_common.h"

#define LINE_BUFFER 256

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
        trainer_die(1, "cannot open %s", path);
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
    if (read != count)
        trainer_die(3, "%s: %zu lines read again, %zu counted", path, read, count);
    fclose(file);
    free(counted);
    *count_out = count;
    return ids;
}

int main(int argc, char **argv)
{
    trainer_set_program_name("count_rewind_mpi");
    const char *data = NULL;
    uint64_t steps = 0;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        const char *value = trainer_next_option_value(argc, argv, &i);
        if (strcmp(flag, "--data") == 0)
            data = value;
        else if (strcmp(flag, "--steps") == 0)
            steps = trainer_parse_count(flag, value, 1, 1000000);
        else
            trainer_die(2, "unknown option: %s", flag);
    }
    if (data == NULL || steps == 0)
        trainer_die(2, "usage: count_rewind_mpi --data PATH --steps S");
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        trainer_die(1, "MPI_Init failed");
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Group world_group;
    MPI_Comm data_parallel;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Comm_create(MPI_COMM_WORLD, world_group, &data_parallel);

    size_t count = 0;
    uint64_t *ids = read_lines_twice(data, &count);
    for (size_t i = 0; i < count; i++)
        printf("rank %d line %llu\n", rank, (unsigned long long)ids[i]);

    static const int piece_sizes[] = {432, 64, 27, 2048, 2048, 2048};
    float *gradient = trainer_allocate_zeroed(2048 * sizeof *gradient);
    for (uint64_t step = 0; step < steps; step++) {
        for (size_t piece = 0; piece < sizeof piece_sizes / sizeof piece_sizes[0]; piece++) {
            for (int i = 0; i < piece_sizes[piece]; i++)
                gradient[i] = (float)((ids[(step + (uint64_t)i) % (count ? count : 1)] % 7) + 1);
            if (MPI_Allreduce(MPI_IN_PLACE, gradient, piece_sizes[piece], MPI_FLOAT, MPI_SUM,
                              data_parallel) != MPI_SUCCESS)
                trainer_die(1, "MPI_Allreduce failed");
        }
    }
    printf("rank %d done\n", rank);
    free(gradient);
    free(ids);
    MPI_Comm_free(&data_parallel);
    MPI_Group_free(&world_group);
    MPI_Finalize();
    return 0;
}
