/* trainer_common.c - the helpers the C example trainers share (see
 * trainer_common.h). */
#define _GNU_SOURCE
#include "trainer_common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char message_prefix[128] = "trainer: ";
static size_t message_prefix_length = 9;
static void (*before_exit_hook)(int status);

/* "NAME: " or "NAME[RANK]: ", built by hand: the helpers a trainer does not
 * call (snprintf here) must not become imports of the trainer. */
static void set_message_prefix(const char *program_name, bool with_rank, int rank)
{
    size_t length = 0;
    for (const char *c = program_name; *c && length < sizeof message_prefix - 24; c++)
        message_prefix[length++] = *c;
    if (with_rank) {
        char digits[12];
        size_t digit_count = 0;
        unsigned magnitude = rank < 0 ? 0u - (unsigned)rank : (unsigned)rank;
        do
            digits[digit_count++] = (char)('0' + magnitude % 10);
        while ((magnitude /= 10) > 0);
        message_prefix[length++] = '[';
        if (rank < 0)
            message_prefix[length++] = '-';
        while (digit_count > 0)
            message_prefix[length++] = digits[--digit_count];
        message_prefix[length++] = ']';
    }
    message_prefix[length++] = ':';
    message_prefix[length++] = ' ';
    message_prefix[length] = '\0';
    message_prefix_length = length;
}

void trainer_set_program_name(const char *program_name)
{
    set_message_prefix(program_name, false, 0);
}

void trainer_set_program_name_and_rank(const char *program_name, int rank)
{
    set_message_prefix(program_name, true, rank);
}

void trainer_set_before_exit(void (*before_exit)(int status))
{
    before_exit_hook = before_exit;
}

void trainer_die(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fwrite(message_prefix, 1, message_prefix_length, stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    if (before_exit_hook != NULL)
        before_exit_hook(status);
    exit(status);
}

void *trainer_allocate_zeroed(size_t size)
{
    void *memory = calloc(1, size);
    if (memory == NULL)
        trainer_die(1, "out of memory");
    return memory;
}

uint64_t trainer_parse_count(const char *flag, const char *text, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || value < min || value > max)
        trainer_die(2, "%s expects an integer in %" PRIu64 "..%" PRIu64 ", got '%s'", flag, min,
                    max, text);
    return value;
}

const char *trainer_next_option_value(int argc, char **argv, int *index)
{
    if (*index + 1 >= argc)
        trainer_die(2, "unknown option or missing value: %s", argv[*index]);
    return argv[++*index];
}

const char *trainer_split_option(int argc, char **argv, int *index,
                                 char name[TRAINER_OPTION_NAME_SIZE])
{
    const char *arg = argv[*index];
    const char *equals = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    if (equals != NULL) {
        if ((size_t)(equals - arg) >= TRAINER_OPTION_NAME_SIZE)
            trainer_die(2, "unknown option: %s", arg);
        memcpy(name, arg, (size_t)(equals - arg));
        name[equals - arg] = '\0';
        return equals + 1;
    }
    if (strlen(arg) >= TRAINER_OPTION_NAME_SIZE || *index + 1 >= argc)
        trainer_die(2, "unknown option or missing value: %s", arg);
    strcpy(name, arg);
    return argv[++*index];
}

void trainer_parse_sgd_options(int argc, char **argv, const char *program_name, bool accept_pread,
                               struct trainer_sgd_options *o)
{
    *o = (struct trainer_sgd_options){.every = 10, .lr = -1};
    bool have_epochs = false, have_batch = false;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--resume") == 0) {
            o->resume = true;
            continue;
        }
        if (accept_pread && strcmp(flag, "--pread") == 0) {
            o->pread = true;
            continue;
        }
        const char *value = trainer_next_option_value(argc, argv, &i);
        if (!trainer_parse_sgd_value_option(o, "--batch", flag, value, &have_epochs, &have_batch))
            trainer_die(2, "unknown option: %s", flag);
    }
    if (!o->data || !o->checkpoint || !have_epochs || !have_batch || o->lr < 0)
        trainer_die(2, "usage: %s --data PATH --epochs E --batch B --lr LR --checkpoint PATH "
                       "[--checkpoint-every STEPS] [--sleep-us US] [--resume] [--ids-log PATH] "
                       "[--final PATH]%s", program_name, accept_pread ? " [--pread]" : "");
}

bool trainer_parse_sgd_value_option(struct trainer_sgd_options *o, const char *batch_flag,
                                    const char *flag, const char *value, bool *have_epochs,
                                    bool *have_batch)
{
    if (strcmp(flag, "--data") == 0) o->data = value;
    else if (strcmp(flag, "--checkpoint") == 0) o->checkpoint = value;
    else if (strcmp(flag, "--ids-log") == 0) o->ids_log = value;
    else if (strcmp(flag, "--final") == 0) o->final = value;
    else if (strcmp(flag, "--epochs") == 0) o->epochs = trainer_parse_count(flag, value, 0, 1000000), *have_epochs = true;
    else if (strcmp(flag, batch_flag) == 0) o->batch = trainer_parse_count(flag, value, 1, 1 << 20), *have_batch = true;
    else if (strcmp(flag, "--sleep-us") == 0) o->sleep_us = trainer_parse_count(flag, value, 0, 10000000);
    else if (strcmp(flag, "--checkpoint-every") == 0) o->every = trainer_parse_count(flag, value, 1, UINT32_MAX);
    else if (strcmp(flag, "--lr") == 0) o->lr = trainer_parse_learning_rate(value);
    else
        return false;
    return true;
}

float trainer_parse_learning_rate(const char *value)
{
    char *end;
    float lr = strtof(value, &end);
    if (end == value || *end || !(lr > 0))
        trainer_die(2, "--lr expects a positive number, got '%s'", value);
    return lr;
}

uint32_t trainer_get_u32_little_endian(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t trainer_get_u64_little_endian(const unsigned char *p)
{
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--)
        value = value << 8 | p[i];
    return value;
}

float trainer_get_f32_little_endian(const unsigned char *p)
{
    uint32_t bits = trainer_get_u32_little_endian(p);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

size_t trainer_read_full(int fd, void *buffer, size_t size, bool *at_end, const char *what)
{
    size_t got = 0;
    *at_end = false;
    while (got < size) {
        ssize_t n = read(fd, (char *)buffer + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            trainer_die(1, "reading %s: %s", what, strerror(errno));
        if (n == 0) {
            *at_end = true;
            break;
        }
        got += (size_t)n;
    }
    return got;
}

void trainer_write_all(int fd, const void *data, size_t size, const char *what)
{
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            trainer_die(1, "writing %s: %s", what, strerror(errno));
        data = (const char *)data + n;
        size -= (size_t)n;
    }
}

void trainer_log_line(int log_fd, const char *format, ...)
{
    if (log_fd < 0)
        return;
    char line[128];
    va_list args;
    va_start(args, format);
    int length = vsnprintf(line, sizeof line, format, args);
    va_end(args);
    trainer_write_all(log_fd, line, (size_t)length, "ids log");
}

int trainer_open_ids_log(const char *path)
{
    int log_fd = -1;
    if (path && (log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0)
        trainer_die(1, "cannot open ids log %s: %s", path, strerror(errno));
    return log_fd;
}

void trainer_pause_between_steps(uint64_t microseconds)
{
    if (microseconds > 0)
        usleep((useconds_t)microseconds);
}

void trainer_replace_file_by_rename(const char *path, const void *first, size_t first_size,
                                    const void *second, size_t second_size)
{
    char temp[4096];
    if ((size_t)snprintf(temp, sizeof temp, "%s.tmp", path) >= sizeof temp)
        trainer_die(2, "checkpoint path too long: %s", path);
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        trainer_die(1, "cannot create %s: %s", temp, strerror(errno));
    trainer_write_all(fd, first, first_size, temp);
    trainer_write_all(fd, second, second_size, temp);
    if (fsync(fd) != 0 || close(fd) != 0)
        trainer_die(1, "flushing %s: %s", temp, strerror(errno));
    if (rename(temp, path) != 0)
        trainer_die(1, "renaming %s to %s: %s", temp, path, strerror(errno));
}

float *trainer_read_checkpoint_weights(int fd, uint32_t dim, const char *path)
{
    float *w = trainer_allocate_zeroed(dim * sizeof *w);
    char extra;
    bool at_end;
    if (trainer_read_full(fd, w, dim * sizeof *w, &at_end, path) != dim * sizeof *w ||
        trainer_read_full(fd, &extra, 1, &at_end, path) != 0)
        trainer_die(3, "%s: checkpoint has the wrong size for dimension %" PRIu32, path, dim);
    close(fd);
    return w;
}

void trainer_report_final_weights(const float *w, uint32_t dim, const char *final_path)
{
    printf("final weights");
    for (uint32_t j = 0; j < dim; j++)
        printf(" %.9g", (double)w[j]);
    printf("\n");
    if (final_path == NULL)
        return;
    FILE *file = fopen(final_path, "wb");
    if (file == NULL)
        trainer_die(1, "cannot create %s: %s", final_path, strerror(errno));
    if (fwrite(w, sizeof *w, dim, file) != dim || fclose(file) != 0)
        trainer_die(1, "writing %s: %s", final_path, strerror(errno));
}

void trainer_print_validation_line(int rank, const char *what, uint64_t records, double loss,
                                   double process_start)
{
    if (rank != 0)
        return;
    printf("%s records %" PRIu64 " loss %.6g seconds %.3f unix %.3f\n", what, records, loss,
           trainer_clock_seconds(CLOCK_MONOTONIC) - process_start,
           trainer_clock_seconds(CLOCK_REALTIME));
    fflush(stdout); /* a supervisor measures the time to target from these lines */
}

char *trainer_rank_path(const char *pattern, int rank)
{
    char digits[16];
    int digit_count = snprintf(digits, sizeof digits, "%d", rank);
    char *path = trainer_allocate_zeroed(strlen(pattern) * (size_t)digit_count + 1);
    size_t length = 0;
    for (const char *p = pattern; *p; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            memcpy(path + length, digits, (size_t)digit_count);
            length += (size_t)digit_count;
            p++;
        } else
            path[length++] = *p;
    }
    path[length] = '\0';
    return path;
}

void trainer_sleep_nanoseconds(uint64_t nanoseconds)
{
    struct timespec left = {.tv_sec = (time_t)(nanoseconds / 1000000000u),
                            .tv_nsec = (long)(nanoseconds % 1000000000u)};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        continue;
}

double trainer_clock_seconds(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}
