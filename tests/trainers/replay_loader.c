/* replay_loader.c - a replay-style trainer (it loads its checkpoint, then runs
 * every epoch from the first again) with the data loaders third-party C
 * trainers write for fixed-size records whose first 8 bytes are the record's
 * id (u64le), in a file without a header.
 *
 *   replay_loader --style STYLE --data PATH --record BYTES --epochs E
 *                 --checkpoint PATH [--checkpoint-every RECORDS=50]
 *                 [--kill-after RECORDS] [--ahead RECORDS=16] [--continue]
 *
 * Every STYLE but the last three opens the file in each epoch and closes it
 * at its end:
 *   stdio-size-rewind   fopen, fseek(SEEK_END) + ftell for the size, rewind,
 *                       fread one record at a time until it returns 0
 *   stdio-own-order     fopen, fseek(SEEK_END) + ftell, then for each record
 *                       of its own shuffle (seeded by the epoch) fseek to it
 *                       and fread it
 *   pread-own-order     open, fstat, pread of each record of its own shuffle
 *   read-ahead          open, read() of single records kept --ahead records
 *                       in front of the one consumed (a prefetching loader),
 *                       until read returns 0 and the queue is drained
 *   stat-lazy-open      stat of the path for the size, then (a map-style
 *                       Dataset) the file opened only when the first record
 *                       is read, lseek + read of each record in order
 *   open-then-stat      open, then a stat of the path for the size, lseek +
 *                       read of each record in order
 *   pread-sized-once    open and fstat once at start-up, before the
 *                       checkpoint is loaded; every epoch a pread of each
 *                       record of its own shuffle of that count
 *   pread-open-once     open once at start-up, before the checkpoint is
 *                       loaded; every epoch an fstat of that descriptor for
 *                       the size, then a pread of each record of its own
 *                       shuffle
 *   stdio-open-once     fopen once at start-up, before the checkpoint is
 *                       loaded; every epoch fseek(SEEK_END) + ftell of that
 *                       stream for the size, then for each record of its
 *                       own shuffle an fseek to it and an fread
 * The number of records of an epoch comes from the size each style asks for;
 * an epoch of size 0 (a pass replay skips) consumes nothing.  --continue
 * (the last three only): the first epoch run is the one the checkpoint's
 * step falls in, by the count taken at start-up, and it runs whole (what
 * ADAPTDL_RESUME=continue expects).
 *
 * Checkpoints: after every --checkpoint-every consumed records, the number of
 * records consumed so far (its model) is written to PATH.tmp and renamed onto
 * PATH.  At start-up an existing checkpoint is loaded (fopen, fread, fclose).
 * --kill-after: raise(SIGKILL) once that many records were consumed in this
 * run.  Stdout, line-buffered: "starting fresh" or "resumed at step S", then
 * "epoch E record ID" per consumed record, "checkpoint step S" just before
 * each rename, "epoch_end E records R".
 * Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer_common.h"

#define MAX_RECORD 4096
#define MAX_AHEAD 4096

struct loader_options {
    const char *style, *data, *checkpoint;
    uint64_t record, epochs, every, kill_after, ahead;
    bool continues;
};

struct trainer {
    const struct loader_options *options;
    uint64_t step;            /* records consumed, checkpoints included */
    uint64_t consumed_in_run; /* for --kill-after */
    int kept_fd;              /* the descriptor or stream kept open from start-up */
    FILE *kept_stream;
    uint64_t sized_records;   /* the count taken at start-up */
};

static void parse_options(int argc, char **argv, struct loader_options *o)
{
    *o = (struct loader_options){.every = 50, .ahead = 16};
    for (int i = 1; i < argc; i++) {
        char name[TRAINER_OPTION_NAME_SIZE];
        const char *value = trainer_split_option(argc, argv, &i, name);
        if (strcmp(name, "--style") == 0)
            o->style = value;
        else if (strcmp(name, "--data") == 0)
            o->data = value;
        else if (strcmp(name, "--checkpoint") == 0)
            o->checkpoint = value;
        else if (strcmp(name, "--record") == 0)
            o->record = trainer_parse_count(name, value, 8, MAX_RECORD);
        else if (strcmp(name, "--epochs") == 0)
            o->epochs = trainer_parse_count(name, value, 1, 1000);
        else if (strcmp(name, "--checkpoint-every") == 0)
            o->every = trainer_parse_count(name, value, 1, UINT32_MAX);
        else if (strcmp(name, "--kill-after") == 0)
            o->kill_after = trainer_parse_count(name, value, 1, UINT64_MAX);
        else if (strcmp(name, "--ahead") == 0)
            o->ahead = trainer_parse_count(name, value, 1, MAX_AHEAD);
        else if (strcmp(name, "--continue") == 0)
            o->continues = true;
        else
            trainer_die(2, "unknown option %s", name);
    }
    if (o->style == NULL || o->data == NULL || o->checkpoint == NULL || o->record == 0 ||
        o->epochs == 0)
        trainer_die(2, "usage: replay_loader --style STYLE --data PATH --record BYTES "
                       "--epochs E --checkpoint PATH [--checkpoint-every N] "
                       "[--kill-after N] [--ahead N] [--continue]");
}

static void load_checkpoint(struct trainer *trainer)
{
    FILE *file = fopen(trainer->options->checkpoint, "rb");
    if (file == NULL) {
        if (errno != ENOENT)
            trainer_die(1, "cannot open %s: %s", trainer->options->checkpoint, strerror(errno));
        printf("starting fresh\n");
        return;
    }
    unsigned char bytes[8];
    if (fread(bytes, 1, sizeof bytes, file) != sizeof bytes)
        trainer_die(3, "%s: checkpoint is cut short", trainer->options->checkpoint);
    fclose(file);
    trainer->step = trainer_get_u64_little_endian(bytes);
    printf("resumed at step %" PRIu64 "\n", trainer->step);
}

static void save_checkpoint(const struct trainer *trainer)
{
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)(trainer->step >> (8 * i));
    char temporary[4096];
    if (snprintf(temporary, sizeof temporary, "%s.tmp", trainer->options->checkpoint) >=
        (int)sizeof temporary)
        trainer_die(2, "checkpoint path too long");
    FILE *file = fopen(temporary, "wb");
    if (file == NULL || fwrite(bytes, 1, sizeof bytes, file) != sizeof bytes ||
        fclose(file) != 0)
        trainer_die(1, "writing %s: %s", temporary, strerror(errno));
    printf("checkpoint step %" PRIu64 "\n", trainer->step);
    if (rename(temporary, trainer->options->checkpoint) != 0)
        trainer_die(1, "renaming %s: %s", temporary, strerror(errno));
}

/* One record handed to the model. */
static void consume(struct trainer *trainer, uint64_t epoch, const unsigned char *record)
{
    printf("epoch %" PRIu64 " record %" PRIu64 "\n", epoch,
           trainer_get_u64_little_endian(record));
    trainer->step++;
    trainer->consumed_in_run++;
    if (trainer->step % trainer->options->every == 0)
        save_checkpoint(trainer);
    if (trainer->options->kill_after != 0 &&
        trainer->consumed_in_run == trainer->options->kill_after) {
        fflush(stdout);
        raise(SIGKILL);
    }
}

/* The loader's own shuffle: Fisher-Yates with a per-epoch splitmix64. */
static uint64_t *own_order(uint64_t count, uint64_t epoch)
{
    uint64_t *order = trainer_allocate_zeroed((count + 1) * sizeof *order);
    for (uint64_t i = 0; i < count; i++)
        order[i] = i;
    uint64_t state = 0x5eed0000u + epoch;
    for (uint64_t i = count; i > 1; i--) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        uint64_t j = z % i, swap = order[i - 1];
        order[i - 1] = order[j];
        order[j] = swap;
    }
    return order;
}

static uint64_t stream_records(const struct trainer *trainer, FILE *file)
{
    if (fseek(file, 0, SEEK_END) != 0)
        trainer_die(1, "fseek %s: %s", trainer->options->data, strerror(errno));
    long end = ftell(file);
    if (end < 0)
        trainer_die(1, "ftell %s: %s", trainer->options->data, strerror(errno));
    return (uint64_t)end / trainer->options->record;
}

/* fopen, and the records the stream's size holds. */
static FILE *open_stream_and_count(const struct trainer *trainer, uint64_t *records)
{
    FILE *file = fopen(trainer->options->data, "rb");
    if (file == NULL)
        trainer_die(1, "cannot open %s: %s", trainer->options->data, strerror(errno));
    *records = stream_records(trainer, file);
    return file;
}

static uint64_t epoch_stdio_size_rewind(struct trainer *trainer, uint64_t epoch)
{
    const struct loader_options *o = trainer->options;
    uint64_t records;
    FILE *file = open_stream_and_count(trainer, &records);
    rewind(file);
    unsigned char record[MAX_RECORD];
    uint64_t count = 0;
    while (fread(record, o->record, 1, file) == 1) {
        consume(trainer, epoch, record);
        count++;
    }
    if (ferror(file))
        trainer_die(1, "reading %s", o->data);
    fclose(file);
    return count;
}

/* fseek + fread of each of `records` records of the epoch's own shuffle. */
static void fread_own_order(struct trainer *trainer, uint64_t epoch, FILE *file,
                            uint64_t records)
{
    const struct loader_options *o = trainer->options;
    uint64_t *order = own_order(records, epoch);
    unsigned char record[MAX_RECORD];
    for (uint64_t i = 0; i < records; i++) {
        if (fseek(file, (long)(order[i] * o->record), SEEK_SET) != 0 ||
            fread(record, o->record, 1, file) != 1)
            trainer_die(1, "reading record %" PRIu64 " of %s", order[i], o->data);
        consume(trainer, epoch, record);
    }
    free(order);
}

/* pread of each of `records` records of the epoch's own shuffle. */
static void pread_own_order(struct trainer *trainer, uint64_t epoch, int fd, uint64_t records)
{
    const struct loader_options *o = trainer->options;
    uint64_t *order = own_order(records, epoch);
    unsigned char record[MAX_RECORD];
    for (uint64_t i = 0; i < records; i++) {
        if (pread(fd, record, o->record, (off_t)(order[i] * o->record)) != (ssize_t)o->record)
            trainer_die(1, "reading record %" PRIu64 " of %s", order[i], o->data);
        consume(trainer, epoch, record);
    }
    free(order);
}

static uint64_t descriptor_records(const struct trainer *trainer, int fd)
{
    struct stat status;
    if (fstat(fd, &status) != 0)
        trainer_die(1, "cannot fstat %s: %s", trainer->options->data, strerror(errno));
    return (uint64_t)status.st_size / trainer->options->record;
}

static uint64_t epoch_stdio_own_order(struct trainer *trainer, uint64_t epoch)
{
    uint64_t records;
    FILE *file = open_stream_and_count(trainer, &records);
    fread_own_order(trainer, epoch, file, records);
    fclose(file);
    return records;
}

static uint64_t epoch_pread_own_order(struct trainer *trainer, uint64_t epoch)
{
    int fd = open(trainer->options->data, O_RDONLY);
    if (fd < 0)
        trainer_die(1, "cannot open %s: %s", trainer->options->data, strerror(errno));
    uint64_t records = descriptor_records(trainer, fd);
    pread_own_order(trainer, epoch, fd, records);
    close(fd);
    return records;
}

static uint64_t epoch_read_ahead(struct trainer *trainer, uint64_t epoch)
{
    const struct loader_options *o = trainer->options;
    int fd = open(o->data, O_RDONLY);
    if (fd < 0)
        trainer_die(1, "cannot open %s: %s", o->data, strerror(errno));
    unsigned char *queue = trainer_allocate_zeroed((o->ahead + 1) * o->record);
    uint64_t head = 0, tail = 0, count = 0; /* records read, records consumed */
    bool at_end = false;
    for (;;) {
        while (!at_end && head - tail <= o->ahead) {
            unsigned char *slot = queue + (head % (o->ahead + 1)) * o->record;
            if (trainer_read_full(fd, slot, o->record, &at_end, o->data) == o->record)
                head++;
        }
        if (tail == head)
            break;
        consume(trainer, epoch, queue + (tail % (o->ahead + 1)) * o->record);
        tail++;
        count++;
    }
    free(queue);
    close(fd);
    return count;
}

static uint64_t path_size(const char *path)
{
    struct stat status;
    if (stat(path, &status) != 0)
        trainer_die(1, "cannot stat %s: %s", path, strerror(errno));
    return (uint64_t)status.st_size;
}

/* lseek + read of records 0 .. records - 1; a negative fd opens the file at
 * the first of them. */
static void read_records_in_order(struct trainer *trainer, uint64_t epoch, int fd,
                                  uint64_t records)
{
    const struct loader_options *o = trainer->options;
    unsigned char record[MAX_RECORD];
    for (uint64_t i = 0; i < records; i++) {
        if (fd < 0 && (fd = open(o->data, O_RDONLY)) < 0)
            trainer_die(1, "cannot open %s: %s", o->data, strerror(errno));
        bool at_end = false;
        if (lseek(fd, (off_t)(i * o->record), SEEK_SET) < 0 ||
            trainer_read_full(fd, record, o->record, &at_end, o->data) != o->record)
            trainer_die(1, "reading record %" PRIu64 " of %s", i, o->data);
        consume(trainer, epoch, record);
    }
    if (fd >= 0)
        close(fd);
}

static uint64_t epoch_stat_lazy_open(struct trainer *trainer, uint64_t epoch)
{
    uint64_t records = path_size(trainer->options->data) / trainer->options->record;
    read_records_in_order(trainer, epoch, -1, records);
    return records;
}

static uint64_t epoch_open_then_stat(struct trainer *trainer, uint64_t epoch)
{
    int fd = open(trainer->options->data, O_RDONLY);
    if (fd < 0)
        trainer_die(1, "cannot open %s: %s", trainer->options->data, strerror(errno));
    uint64_t records = path_size(trainer->options->data) / trainer->options->record;
    read_records_in_order(trainer, epoch, fd, records);
    return records;
}

/* The descriptor and count the pread styles take before the checkpoint. */
static void prepare_descriptor(struct trainer *trainer)
{
    trainer->kept_fd = open(trainer->options->data, O_RDONLY);
    if (trainer->kept_fd < 0)
        trainer_die(1, "cannot open %s: %s", trainer->options->data, strerror(errno));
    trainer->sized_records = descriptor_records(trainer, trainer->kept_fd);
}

/* The stream and count stdio-open-once takes before the checkpoint. */
static void prepare_stream(struct trainer *trainer)
{
    trainer->kept_stream = open_stream_and_count(trainer, &trainer->sized_records);
}

static uint64_t epoch_pread_sized_once(struct trainer *trainer, uint64_t epoch)
{
    pread_own_order(trainer, epoch, trainer->kept_fd, trainer->sized_records);
    return trainer->sized_records;
}

static uint64_t epoch_pread_open_once(struct trainer *trainer, uint64_t epoch)
{
    uint64_t records = descriptor_records(trainer, trainer->kept_fd);
    pread_own_order(trainer, epoch, trainer->kept_fd, records);
    return records;
}

static uint64_t epoch_stdio_open_once(struct trainer *trainer, uint64_t epoch)
{
    uint64_t records = stream_records(trainer, trainer->kept_stream);
    fread_own_order(trainer, epoch, trainer->kept_stream, records);
    return records;
}

struct loader_style {
    const char *name;
    uint64_t (*run_epoch)(struct trainer *trainer, uint64_t epoch);
    void (*prepare)(struct trainer *trainer); /* before the checkpoint is loaded, or NULL */
};

static const struct loader_style loader_styles[] = {
    {"stdio-size-rewind", epoch_stdio_size_rewind, NULL},
    {"stdio-own-order", epoch_stdio_own_order, NULL},
    {"pread-own-order", epoch_pread_own_order, NULL},
    {"read-ahead", epoch_read_ahead, NULL},
    {"stat-lazy-open", epoch_stat_lazy_open, NULL},
    {"open-then-stat", epoch_open_then_stat, NULL},
    {"pread-sized-once", epoch_pread_sized_once, prepare_descriptor},
    {"pread-open-once", epoch_pread_open_once, prepare_descriptor},
    {"stdio-open-once", epoch_stdio_open_once, prepare_stream},
};

int main(int argc, char **argv)
{
    trainer_set_program_name("replay_loader");
    struct loader_options options;
    parse_options(argc, argv, &options);
    const struct loader_style *style = NULL;
    for (size_t i = 0; i < sizeof loader_styles / sizeof loader_styles[0]; i++)
        if (strcmp(loader_styles[i].name, options.style) == 0)
            style = &loader_styles[i];
    if (style == NULL)
        trainer_die(2, "unknown --style %s: expected stdio-size-rewind, stdio-own-order, "
                       "pread-own-order, read-ahead, stat-lazy-open, open-then-stat, "
                       "pread-sized-once, pread-open-once or stdio-open-once",
                    options.style);
    if (options.continues && style->prepare == NULL)
        trainer_die(2, "--continue needs --style pread-sized-once, pread-open-once or "
                       "stdio-open-once (a count taken at start-up)");
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct trainer trainer = {.options = &options, .kept_fd = -1};
    if (style->prepare != NULL)
        style->prepare(&trainer);
    load_checkpoint(&trainer);
    uint64_t first_epoch = 0;
    if (options.continues && trainer.sized_records > 0)
        first_epoch = trainer.step / trainer.sized_records;
    for (uint64_t epoch = first_epoch; epoch < options.epochs; epoch++) {
        uint64_t count = style->run_epoch(&trainer, epoch);
        printf("epoch_end %" PRIu64 " records %" PRIu64 "\n", epoch, count);
    }
    if (trainer.kept_fd >= 0)
        close(trainer.kept_fd);
    if (trainer.kept_stream != NULL)
        fclose(trainer.kept_stream);
    return 0;
}
