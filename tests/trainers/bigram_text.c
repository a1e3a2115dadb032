/* bigram_text.c - a character-bigram "model" over a text dataset, replay-style resume.
 *
 *   bigram_text --data PATH --epochs E --checkpoint PATH
 *               [--checkpoint-every LINES=50] [--sleep-us US] [--resume]
 *               [--ids-log PATH]
 *
 * A plain user program.  The data file holds one record per line,
 * "<id>\t<text>\n", text made of lowercase letters and spaces.  Each epoch
 * fopen()s the file, reads every line with fgets() into a 256-byte buffer
 * until it returns NULL, and fclose()s it.  Per line it counts the bigrams of
 * the text (27 symbols: a-z and space) in uint64 counts[27][27].
 * Checkpoints (counts + lines consumed) go to PATH.tmp through
 * fopen/fwrite/fflush/fsync/fclose, then rename() onto PATH, every LINES lines
 * and at the end of every epoch.  --resume loads counts and the line counter
 * (fopen/fread) and re-runs the epoch loop from 0 (replay style).
 * --ids-log appends (open O_APPEND + write, unbuffered) "id <ID> epoch <E>"
 * and "step <LINES>" per consumed line, "ckpt <LINES>" after each checkpoint rename and
 * "epoch_end <E>".  Prints "final checksum <X>" (FNV-1a of the counts, hex).
 * Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer_common.h"

#define SYMBOLS 27
#define CKPT_MAGIC "BGRM"
#define CKPT_VERSION 1u

struct options {
    const char *data, *checkpoint, *ids_log;
    uint64_t epochs, every, sleep_us;
    bool resume;
};

/* The model and the checkpoint file's layout. */
struct model {
    char magic[4];
    uint32_t version;
    uint64_t lines;  /* lines consumed since the first run */
    uint64_t epoch;  /* informational: the epoch of the last checkpoint */
    uint64_t counts[SYMBOLS][SYMBOLS];
};

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 50};
    bool have_epochs = false;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--resume") == 0) {
            o->resume = true;
            continue;
        }
        const char *value = trainer_next_option_value(argc, argv, &i);
        if (strcmp(flag, "--data") == 0)
            o->data = value;
        else if (strcmp(flag, "--checkpoint") == 0)
            o->checkpoint = value;
        else if (strcmp(flag, "--ids-log") == 0)
            o->ids_log = value;
        else if (strcmp(flag, "--epochs") == 0) {
            o->epochs = trainer_parse_count(flag, value, 0, 1000000);
            have_epochs = true;
        } else if (strcmp(flag, "--sleep-us") == 0) {
            o->sleep_us = trainer_parse_count(flag, value, 0, 10000000);
        } else if (strcmp(flag, "--checkpoint-every") == 0)
            o->every = trainer_parse_count(flag, value, 1, UINT32_MAX);
        else
            trainer_die(2, "unknown option: %s", flag);
    }
    if (!o->data || !o->checkpoint || !have_epochs)
        trainer_die(2, "usage: bigram_text --data PATH --epochs E --checkpoint PATH "
                       "[--checkpoint-every LINES] [--resume] [--ids-log PATH]");
}

/* 0..25 for letters, 26 for space, -1 for anything else. */
static int symbol_of(char c)
{
    if (c >= 'a' && c <= 'z')
        return c - 'a';
    return c == ' ' ? 26 : -1;
}

/* Parses "<id>\t<text>" and counts the text's bigrams; returns the id. */
static uint64_t consume_line(struct model *model, const char *line, const char *path,
                             uint64_t line_number)
{
    char *end;
    errno = 0;
    unsigned long long id = strtoull(line, &end, 10);
    if (errno || end == line || *end != '\t')
        trainer_die(3, "%s:%" PRIu64 ": expected '<id>\\t<text>', got '%.40s'", path, line_number, line);
    int previous = -1;
    for (const char *c = end + 1; *c && *c != '\n'; c++) {
        int current = symbol_of(*c);
        if (previous >= 0 && current >= 0)
            model->counts[previous][current]++;
        previous = current;
    }
    return id;
}

static void save_checkpoint(const char *path, struct model *model, uint64_t epoch, int log_fd)
{
    char temp[4096];
    if ((size_t)snprintf(temp, sizeof temp, "%s.tmp", path) >= sizeof temp)
        trainer_die(2, "checkpoint path too long: %s", path);
    memcpy(model->magic, CKPT_MAGIC, 4);
    model->version = CKPT_VERSION;
    model->epoch = epoch;
    FILE *file = fopen(temp, "wb");
    if (file == NULL)
        trainer_die(1, "cannot create %s: %s", temp, strerror(errno));
    if (fwrite(model, sizeof *model, 1, file) != 1 || fflush(file) != 0 ||
        fsync(fileno(file)) != 0 || fclose(file) != 0)
        trainer_die(1, "writing %s: %s", temp, strerror(errno));
    if (rename(temp, path) != 0)
        trainer_die(1, "renaming %s to %s: %s", temp, path, strerror(errno));
    trainer_log_line(log_fd, "ckpt %" PRIu64 "\n", model->lines);
}

/* Loads path into model; false when it does not exist. */
static bool load_checkpoint(const char *path, struct model *model)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL && errno == ENOENT)
        return false;
    if (file == NULL)
        trainer_die(1, "cannot open checkpoint %s: %s", path, strerror(errno));
    if (fread(model, sizeof *model, 1, file) != 1 || fgetc(file) != EOF ||
        memcmp(model->magic, CKPT_MAGIC, 4) != 0 || model->version != CKPT_VERSION)
        trainer_die(3, "%s: not a valid bigram_text checkpoint", path);
    fclose(file);
    return true;
}

/* One pass over the file; returns the number of lines read. */
static uint64_t run_epoch(struct model *model, uint64_t epoch, const struct options *o,
                          int log_fd)
{
    FILE *file = fopen(o->data, "r");
    if (file == NULL)
        trainer_die(1, "cannot open %s: %s", o->data, strerror(errno));
    char line[256];
    uint64_t seen = 0;
    while (fgets(line, sizeof line, file) != NULL) {
        size_t length = strlen(line);
        if (length == sizeof line - 1 && line[length - 1] != '\n')
            trainer_die(3, "%s:%" PRIu64 ": line longer than %zu bytes", o->data, seen + 1,
                        sizeof line - 2);
        uint64_t id = consume_line(model, line, o->data, seen + 1);
        model->lines++;
        seen++;
        trainer_log_line(log_fd, "id %" PRIu64 " epoch %" PRIu64 "\nstep %" PRIu64 "\n", id, epoch,
                         model->lines);
        if (o->sleep_us > 0)
            usleep((useconds_t)o->sleep_us);  /* stands in for real work per line */
        if (model->lines % o->every == 0)
            save_checkpoint(o->checkpoint, model, epoch, log_fd);
    }
    if (ferror(file))
        trainer_die(1, "reading %s: %s", o->data, strerror(errno));
    if (fclose(file) != 0)
        trainer_die(1, "closing %s: %s", o->data, strerror(errno));
    return seen;
}

/* FNV-1a over the counts, each as 8 little-endian bytes. */
static uint64_t checksum(const struct model *model)
{
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (int a = 0; a < SYMBOLS; a++)
        for (int b = 0; b < SYMBOLS; b++)
            for (int i = 0; i < 8; i++) {
                hash ^= (model->counts[a][b] >> (8 * i)) & 0xff;
                hash *= 0x100000001b3ULL;
            }
    return hash;
}

int main(int argc, char **argv)
{
    trainer_set_program_name("bigram_text");
    struct options o;
    parse_options(argc, argv, &o);
    static struct model model;
    if (o.resume) {
        if (load_checkpoint(o.checkpoint, &model))
            printf("resumed at line %" PRIu64 "\n", model.lines);
        else
            printf("no checkpoint at %s, starting fresh\n", o.checkpoint);
        fflush(stdout);  /* a supervisor reads this even if the run is killed */
    }
    int log_fd = trainer_open_ids_log(o.ids_log);
    for (uint64_t epoch = 0; epoch < o.epochs; epoch++) {
        uint64_t seen = run_epoch(&model, epoch, &o, log_fd);
        trainer_log_line(log_fd, "epoch_end %" PRIu64 "\n", epoch);
        save_checkpoint(o.checkpoint, &model, epoch, log_fd);
        printf("epoch %" PRIu64 " lines %" PRIu64 " total %" PRIu64 "\n", epoch, seen,
               model.lines);
        fflush(stdout);
    }
    printf("final checksum %016" PRIx64 "\n", checksum(&model));
    if (fflush(stdout) != 0)
        trainer_die(1, "writing stdout: %s", strerror(errno));
    return 0;
}
