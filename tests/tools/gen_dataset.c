/* gen_dataset.c - writes the synthetic datasets the example trainers read.
 *
 *   gen_dataset --out PATH --records N [--dim D=8] [--seed S=1]
 *               [--noise SIGMA=0.1] [--text] [--print-weights]
 *
 * Binary ("ADSD") format: a 16-byte header (magic "ADSD", u32le dim,
 * u64le record count) followed by N records of u64le id, float32le x[dim],
 * float32le y.  Ids are 0..N-1 in order, x_j ~ uniform[-1,1] and
 * y = w_true . x + SIGMA * gaussian, with w_true_j = ((j % 5) - 2) * 0.5 + 0.1 * j.
 *
 * Text format (--text): one record per line, "<id>\t<text>\n", where text is
 * 5..80 random lowercase letters and spaces.  No header.
 *
 * --print-weights prints w_true (one value per line) for --dim; --out is then
 * optional.  Everything is derived from a splitmix64 generator seeded with
 * --seed, so the same arguments always give the same bytes.  The file is
 * written to PATH.tmp.PID, fsync'ed and renamed onto PATH.
 *
 * I/O: fopen/fwrite/fflush/fsync/fclose, rename. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_common.h"

struct options {
    const char *out;
    uint64_t records;
    bool have_records;
    uint32_t dim;
    uint64_t seed;
    double noise;
    bool text;
    bool print_weights;
};

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s --out PATH --records N [--dim D=8] [--seed S=1] [--noise SIGMA=0.1]\n"
            "       [--text] [--print-weights]\n",
            program);
    exit(2);
}

static double parse_double(const char *flag, const char *text)
{
    char *end;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(value >= 0)) {
        fprintf(stderr, "gen_dataset: %s expects a non-negative number, got '%s'\n", flag, text);
        exit(2);
    }
    return value;
}

static void parse_options(int argc, char **argv, struct options *options)
{
    *options = (struct options){.dim = 8, .seed = 1, .noise = 0.1};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(flag, "--text") == 0) {
            options->text = true;
        } else if (strcmp(flag, "--print-weights") == 0) {
            options->print_weights = true;
        } else if (!has_value) {
            fprintf(stderr, "gen_dataset: unknown option or missing value: %s\n", flag);
            usage(argv[0]);
        } else if (strcmp(flag, "--out") == 0) {
            options->out = argv[++i];
        } else if (strcmp(flag, "--records") == 0) {
            options->records = probe_parse_u64("gen_dataset", flag, argv[++i]);
            options->have_records = true;
        } else if (strcmp(flag, "--dim") == 0) {
            uint64_t dim = probe_parse_u64("gen_dataset", flag, argv[++i]);
            if (dim == 0 || dim > 65536) {
                fprintf(stderr, "gen_dataset: --dim must be in 1..65536\n");
                exit(2);
            }
            options->dim = (uint32_t)dim;
        } else if (strcmp(flag, "--seed") == 0) {
            options->seed = probe_parse_u64("gen_dataset", flag, argv[++i]);
        } else if (strcmp(flag, "--noise") == 0) {
            options->noise = parse_double(flag, argv[++i]);
        } else {
            fprintf(stderr, "gen_dataset: unknown option: %s\n", flag);
            usage(argv[0]);
        }
    }
    if (options->out == NULL && !options->print_weights) {
        fprintf(stderr, "gen_dataset: --out is required\n");
        usage(argv[0]);
    }
    if (options->out != NULL && !options->have_records) {
        fprintf(stderr, "gen_dataset: --records is required\n");
        usage(argv[0]);
    }
}

/* Uniform in [0, 1) with 53 bits. */
static double random_unit(uint64_t *state)
{
    return (double)(probe_splitmix64(state) >> 11) * 0x1.0p-53;
}

/* Standard normal by Box-Muller (one value per call, the pair's second is dropped). */
static double random_gaussian(uint64_t *state)
{
    double u1 = 1.0 - random_unit(state); /* (0, 1]: log() stays finite */
    double u2 = random_unit(state);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double true_weight(uint32_t j)
{
    return (double)((int)(j % 5) - 2) * 0.5 + 0.1 * (double)j;
}

static void put_u32le(unsigned char *out, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        out[i] = (unsigned char)(value >> (8 * i));
}

static void put_u64le(unsigned char *out, uint64_t value)
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(value >> (8 * i));
}

static void put_f32le(unsigned char *out, float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    put_u32le(out, bits);
}

static void write_or_die(FILE *file, const void *data, size_t size, const char *path)
{
    if (fwrite(data, 1, size, file) != size) {
        fprintf(stderr, "gen_dataset: writing %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void write_binary(FILE *file, const char *path, const struct options *options)
{
    unsigned char header[16];
    memcpy(header, "ADSD", 4);
    put_u32le(header + 4, options->dim);
    put_u64le(header + 8, options->records);
    write_or_die(file, header, sizeof header, path);

    size_t record_size = 8 + 4 * (size_t)options->dim + 4;
    unsigned char *record = malloc(record_size);
    if (record == NULL) {
        fprintf(stderr, "gen_dataset: out of memory\n");
        exit(1);
    }
    uint64_t state = options->seed;
    for (uint64_t id = 0; id < options->records; id++) {
        put_u64le(record, id);
        double y = 0.0;
        for (uint32_t j = 0; j < options->dim; j++) {
            float x = (float)(2.0 * random_unit(&state) - 1.0);
            put_f32le(record + 8 + 4 * (size_t)j, x);
            y += true_weight(j) * (double)x;
        }
        y += options->noise * random_gaussian(&state);
        put_f32le(record + 8 + 4 * (size_t)options->dim, (float)y);
        write_or_die(file, record, record_size, path);
    }
    free(record);
}

static void write_text(FILE *file, const char *path, const struct options *options)
{
    uint64_t state = options->seed;
    char line[128];
    for (uint64_t id = 0; id < options->records; id++) {
        int length = snprintf(line, sizeof line, "%" PRIu64 "\t", id);
        int text_length = 5 + (int)(probe_splitmix64(&state) % 76); /* 5..80 */
        for (int i = 0; i < text_length; i++) {
            uint64_t draw = probe_splitmix64(&state) % 32;
            line[length++] = draw < 26 ? (char)('a' + draw) : ' ';
        }
        line[length++] = '\n';
        write_or_die(file, line, (size_t)length, path);
    }
}

static void generate(const struct options *options)
{
    size_t temp_size = strlen(options->out) + 32;
    char *temp_path = malloc(temp_size);
    if (temp_path == NULL) {
        fprintf(stderr, "gen_dataset: out of memory\n");
        exit(1);
    }
    snprintf(temp_path, temp_size, "%s.tmp.%ld", options->out, (long)getpid());
    FILE *file = fopen(temp_path, "wb");
    if (file == NULL) {
        fprintf(stderr, "gen_dataset: cannot create %s: %s\n", temp_path, strerror(errno));
        exit(1);
    }
    if (options->text)
        write_text(file, temp_path, options);
    else
        write_binary(file, temp_path, options);
    if (fflush(file) != 0 || fsync(fileno(file)) != 0) {
        fprintf(stderr, "gen_dataset: flushing %s: %s\n", temp_path, strerror(errno));
        unlink(temp_path);
        exit(1);
    }
    if (fclose(file) != 0) {
        fprintf(stderr, "gen_dataset: closing %s: %s\n", temp_path, strerror(errno));
        unlink(temp_path);
        exit(1);
    }
    if (rename(temp_path, options->out) != 0) {
        fprintf(stderr, "gen_dataset: renaming %s to %s: %s\n", temp_path, options->out,
                strerror(errno));
        unlink(temp_path);
        exit(1);
    }
    free(temp_path);
}

int main(int argc, char **argv)
{
    struct options options;
    parse_options(argc, argv, &options);
    if (options.print_weights)
        for (uint32_t j = 0; j < options.dim; j++)
            printf("%.9g\n", true_weight(j));
    if (options.out != NULL)
        generate(&options);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "gen_dataset: writing stdout: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
