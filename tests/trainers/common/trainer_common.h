/* trainer_common.h - the helpers the C example trainers share: error
 * messages under the program's name, allocation, integer options and the
 * `--name VALUE` / `--name=VALUE` split, little-endian record fields,
 * complete reads and writes, the ids log, per-rank paths, sleeping and
 * clocks, the options of the single-process SGD trainers, their checkpoint
 * files and final weights, and the MPI trainers' validation line.  Nothing
 * here opens or reads a data file: each trainer keeps its own way of reading
 * (read, pread, stdio) and its own buffer sizes.
 *
 * Built into each trainer with its own section per function and linked with
 * --gc-sections, so a trainer imports only the libc functions it calls. */
#ifndef TRAINER_COMMON_H
#define TRAINER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Messages start "NAME: " (trainer_set_program_name) or "NAME[RANK]: "
 * (trainer_set_program_name_and_rank, called again once the rank is known). */
void trainer_set_program_name(const char *program_name);
void trainer_set_program_name_and_rank(const char *program_name, int rank);

/* Called by trainer_die after the message, just before exit(status): an MPI
 * trainer aborts the job there. */
void trainer_set_before_exit(void (*before_exit)(int status));

/* Prints "PREFIX" FORMAT "\n" to stderr and exits with status. */
_Noreturn void trainer_die(int status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* calloc(1, size), or dies with status 1, "out of memory". */
void *trainer_allocate_zeroed(size_t size);

/* TEXT as a decimal integer in MIN..MAX, or dies with status 2 naming FLAG. */
uint64_t trainer_parse_count(const char *flag, const char *text, uint64_t min, uint64_t max);

/* The option grammar "--name VALUE": the argument after argv[*index] (and
 * *index moves onto it), or dies with status 2 when there is none. */
const char *trainer_next_option_value(int argc, char **argv, int *index);

/* The option grammar "--name VALUE" or "--name=VALUE": copies the name of
 * argv[*index] into name and returns its value (moving *index onto the next
 * argument for the first form); dies with status 2 on a name too long or a
 * missing value. */
#define TRAINER_OPTION_NAME_SIZE 64
const char *trainer_split_option(int argc, char **argv, int *index,
                                 char name[TRAINER_OPTION_NAME_SIZE]);

/* The options of the single-process SGD trainers (sgd_read, sgd_stdio):
 * --data PATH --epochs E --batch B --lr LR --checkpoint PATH
 * [--checkpoint-every STEPS=10] [--sleep-us US] [--resume] [--ids-log PATH]
 * [--final PATH], and --pread where the trainer accepts it; sgd_mpi's
 * options hold them too (its batch flag is --batch-size). */
struct trainer_sgd_options {
    const char *data, *checkpoint, *ids_log, *final;
    uint64_t epochs, batch, every, sleep_us;
    float lr;
    bool resume, pread;
};

/* Parses argv into o (--pread only when accept_pread); dies with status 2 on
 * an unknown option or a bad value, and with the usage of program_name when
 * a required option is missing. */
void trainer_parse_sgd_options(int argc, char **argv, const char *program_name, bool accept_pread,
                               struct trainer_sgd_options *o);

/* One value option of the SGD trainers (sgd_read, sgd_stdio, sgd_mpi) into
 * o: --data, --checkpoint, --ids-log, --final, --epochs (*have_epochs),
 * batch_flag (--batch or --batch-size, *have_batch), --sleep-us,
 * --checkpoint-every or --lr; false for any other flag.  Dies with status 2
 * on a bad value. */
bool trainer_parse_sgd_value_option(struct trainer_sgd_options *o, const char *batch_flag,
                                    const char *flag, const char *value, bool *have_epochs,
                                    bool *have_batch);

/* --lr VALUE: a positive float, or dies with status 2. */
float trainer_parse_learning_rate(const char *value);

uint32_t trainer_get_u32_little_endian(const unsigned char *p);
uint64_t trainer_get_u64_little_endian(const unsigned char *p);
float trainer_get_f32_little_endian(const unsigned char *p);

/* read() until size bytes or end of file (then *at_end); returns the bytes
 * read; dies with status 1 on an error, "reading WHAT: ...". */
size_t trainer_read_full(int fd, void *buffer, size_t size, bool *at_end, const char *what);

/* write() all of data, retrying after signals; dies with status 1 on an
 * error, "writing WHAT: ...". */
void trainer_write_all(int fd, const void *data, size_t size, const char *what);

/* One formatted line (at most 127 bytes) written to log_fd, the ids log;
 * nothing when log_fd < 0. */
void trainer_log_line(int log_fd, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Opens the ids log for appending (O_APPEND, unbuffered writes); -1 when
 * path is NULL; dies with status 1, "cannot open ids log PATH: ...". */
int trainer_open_ids_log(const char *path);

/* --sleep-us: sleeps between steps (usleep), standing in for the compute
 * time of a real model's step; nothing for 0. */
void trainer_pause_between_steps(uint64_t microseconds);

/* Writes first then second to PATH.tmp (open, two write()s, fsync, close)
 * and renames it onto path, so that a kill leaves the old file or the new
 * one whole; dies with status 2 on a path too long, 1 on an error. */
void trainer_replace_file_by_rename(const char *path, const void *first, size_t first_size,
                                    const void *second, size_t second_size);

/* Reads a checkpoint's dim float weights from fd with read(), checks that
 * nothing follows and closes fd; dies with status 3, "PATH: checkpoint has
 * the wrong size for dimension DIM", otherwise. */
float *trainer_read_checkpoint_weights(int fd, uint32_t dim, const char *path);

/* Prints "final weights w0 w1 ..." and, when final_path is not NULL, writes
 * the raw float weights there (fopen/fwrite/fclose). */
void trainer_report_final_weights(const float *w, uint32_t dim, const char *final_path);

/* An MPI trainer's line for a validation or the target, on rank 0 only:
 * "WHAT records R loss L seconds T unix U", T the seconds since
 * process_start (CLOCK_MONOTONIC), U the unix time; flushed. */
void trainer_print_validation_line(int rank, const char *what, uint64_t records, double loss,
                                   double process_start);

/* pattern with every "%r" replaced by rank, newly allocated. */
char *trainer_rank_path(const char *pattern, int rank);

/* Sleeps for a number of nanoseconds, resuming after signals. */
void trainer_sleep_nanoseconds(uint64_t nanoseconds);

/* Seconds on a clock: CLOCK_MONOTONIC for durations, CLOCK_REALTIME for the
 * unix time. */
double trainer_clock_seconds(clockid_t clock);

#endif
