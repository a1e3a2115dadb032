/* trainer_common.h - the helpers the C example trainers share: error
 * messages under the program's name, allocation, integer options and the
 * `--name VALUE` / `--name=VALUE` split, little-endian record fields,
 * complete reads and writes, the ids log, per-rank paths, sleeping and
 * clocks.  Nothing here opens or reads a data file: each trainer keeps its
 * own way of reading (read, pread, stdio) and its own buffer sizes.
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

/* pattern with every "%r" replaced by rank, newly allocated. */
char *trainer_rank_path(const char *pattern, int rank);

/* Sleeps for a number of nanoseconds, resuming after signals. */
void trainer_sleep_nanoseconds(uint64_t nanoseconds);

/* Seconds on a clock: CLOCK_MONOTONIC for durations, CLOCK_REALTIME for the
 * unix time. */
double trainer_clock_seconds(clockid_t clock);

#endif
