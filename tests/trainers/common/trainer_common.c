/* trainer_common.c - the helpers the C example trainers share (see
 * trainer_common.h). */
#define _GNU_SOURCE
#include "trainer_common.h"

#include <errno.h>
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
