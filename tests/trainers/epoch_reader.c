/* epoch_reader.c - the C trainer most people write: it keeps its own epoch
 * counter and, in its checkpoint, how many records of the epoch it had
 * trained on.
 *
 *   epoch_reader --data PATH --epochs E --batch B --checkpoint PATH
 *                [--checkpoint-every STEPS=4] [--sleep-us US=0] [--own-seek]
 *                [--io read|stdio|pread|preadv (read)]
 *
 * Every epoch: open(PATH), read() of the 16-byte ADSD header (its count is
 * not used: the loop reads to the end), then read() of B records at a time
 * until a read returns 0, close().  With --own-seek the epoch a checkpoint
 * was taken in is resumed the way a careful author does without any
 * library: after the header, lseek(fd, 16 + done * record, SEEK_SET) to the
 * first record it had not trained on.  --io stdio does the same with
 * fopen, fread, fseek and fclose; --io pread with pread() at its own
 * offsets (the header at 0, then B records at a time from 16 + done *
 * record with --own-seek, else from 16) until a pread returns 0; --io
 * preadv likewise with preadv().  An atexit handler prints "exit handlers
 * ran": a stop that ends the process through exit(3) runs it.
 *
 * Prints "epoch E record ID" per record once its step is done, "epoch E
 * records N" per epoch.  Checkpoint (epoch in progress, records done in
 * it, step) to PATH.tmp then rename() onto PATH every STEPS steps and after
 * each epoch, "checkpoint step S" printed just before the rename.  On start
 * a checkpoint at PATH is loaded ("resumed at step S epoch E") and the loop
 * continues with its epoch; otherwise "starting fresh".
 * Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "adsd_records.h"
#include "trainer_common.h"

struct options {
    const char *data, *checkpoint;
    uint64_t epochs, batch, every, sleep_us;
    bool own_seek;
    const struct reader_kind *io;
};

/* How an epoch reads the file: three ways people write it. */
struct reader {
    int fd;
    FILE *stream;
    uint64_t offset;             /* pread: where the next read starts */
    const char *path;
};

struct reader_kind {
    const char *name;
    void (*open)(struct reader *reader);
    /* up to size bytes from the reader's position; *at_end when the file ended */
    size_t (*read)(struct reader *reader, void *buffer, size_t size, bool *at_end);
    void (*seek)(struct reader *reader, uint64_t offset);
    void (*close)(struct reader *reader);
};

static void fd_open(struct reader *reader)
{
    reader->fd = open(reader->path, O_RDONLY);
    if (reader->fd < 0)
        trainer_die(1, "cannot open %s: %s", reader->path, strerror(errno));
}

static size_t fd_read(struct reader *reader, void *buffer, size_t size, bool *at_end)
{
    return trainer_read_full(reader->fd, buffer, size, at_end, reader->path);
}

static void fd_seek(struct reader *reader, uint64_t offset)
{
    if (lseek(reader->fd, (off_t)offset, SEEK_SET) < 0)
        trainer_die(1, "lseek %s: %s", reader->path, strerror(errno));
}

static void fd_close(struct reader *reader)
{
    close(reader->fd);
}

static void stdio_open(struct reader *reader)
{
    reader->stream = fopen(reader->path, "rb");
    if (reader->stream == NULL)
        trainer_die(1, "cannot open %s: %s", reader->path, strerror(errno));
}

static size_t stdio_read(struct reader *reader, void *buffer, size_t size, bool *at_end)
{
    size_t got = fread(buffer, 1, size, reader->stream);
    if (got < size) {
        if (ferror(reader->stream))
            trainer_die(1, "fread %s: %s", reader->path, strerror(errno));
        *at_end = true;
    }
    return got;
}

static void stdio_seek(struct reader *reader, uint64_t offset)
{
    if (fseek(reader->stream, (long)offset, SEEK_SET) != 0)
        trainer_die(1, "fseek %s: %s", reader->path, strerror(errno));
}

static void stdio_close(struct reader *reader)
{
    fclose(reader->stream);
}

/* pread, or preadv of one piece: reads at the reader's own offset */
static size_t positioned_read(struct reader *reader, void *buffer, size_t size, bool *at_end,
                              bool vectored)
{
    size_t got = 0;
    while (got < size) {
        struct iovec piece = {(unsigned char *)buffer + got, size - got};
        off_t at = (off_t)(reader->offset + got);
        ssize_t n = vectored ? preadv(reader->fd, &piece, 1, at)
                             : pread(reader->fd, piece.iov_base, piece.iov_len, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            trainer_die(1, "%s %s: %s", vectored ? "preadv" : "pread", reader->path,
                        strerror(errno));
        if (n == 0) {
            *at_end = true;
            break;
        }
        got += (size_t)n;
    }
    reader->offset += got;
    return got;
}

static size_t pread_read(struct reader *reader, void *buffer, size_t size, bool *at_end)
{
    return positioned_read(reader, buffer, size, at_end, false);
}

static size_t preadv_read(struct reader *reader, void *buffer, size_t size, bool *at_end)
{
    return positioned_read(reader, buffer, size, at_end, true);
}

static void pread_seek(struct reader *reader, uint64_t offset)
{
    reader->offset = offset;
}

static const struct reader_kind reader_kinds[] = {
    {"read", fd_open, fd_read, fd_seek, fd_close},
    {"stdio", stdio_open, stdio_read, stdio_seek, stdio_close},
    {"pread", fd_open, pread_read, pread_seek, fd_close},
    {"preadv", fd_open, preadv_read, pread_seek, fd_close},
};

/* What a checkpoint holds. */
struct trainer_state {
    char magic[4];
    uint64_t epoch, done, step;
};

static const struct reader_kind *find_reader_kind(const char *name)
{
    for (size_t i = 0; i < sizeof reader_kinds / sizeof reader_kinds[0]; i++)
        if (strcmp(reader_kinds[i].name, name) == 0)
            return &reader_kinds[i];
    trainer_die(2, "--io %s: expected read, stdio, pread or preadv", name);
}

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 4, .epochs = UINT64_MAX, .io = &reader_kinds[0]};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "--own-seek") == 0) {
            o->own_seek = true;
            continue;
        }
        const char *value = trainer_next_option_value(argc, argv, &i);
        if (strcmp(flag, "--data") == 0) o->data = value;
        else if (strcmp(flag, "--checkpoint") == 0) o->checkpoint = value;
        else if (strcmp(flag, "--epochs") == 0)
            o->epochs = trainer_parse_count(flag, value, 0, 1000000);
        else if (strcmp(flag, "--batch") == 0)
            o->batch = trainer_parse_count(flag, value, 1, 1000000);
        else if (strcmp(flag, "--checkpoint-every") == 0)
            o->every = trainer_parse_count(flag, value, 1, UINT64_MAX);
        else if (strcmp(flag, "--sleep-us") == 0)
            o->sleep_us = trainer_parse_count(flag, value, 0, UINT64_MAX);
        else if (strcmp(flag, "--io") == 0)
            o->io = find_reader_kind(value);
        else trainer_die(2, "unknown option: %s", flag);
    }
    if (!o->data || !o->checkpoint || o->epochs == UINT64_MAX || o->batch == 0)
        trainer_die(2, "usage: epoch_reader --data PATH --epochs E --batch B --checkpoint PATH "
                       "[--checkpoint-every STEPS] [--sleep-us US] [--own-seek] "
                       "[--io read|stdio|pread|preadv]");
}

static void load_checkpoint(const char *path, struct trainer_state *state)
{
    *state = (struct trainer_state){.magic = "EPRD"};
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        printf("starting fresh\n");
        return;
    }
    struct trainer_state loaded;
    bool at_end;
    if (trainer_read_full(fd, &loaded, sizeof loaded, &at_end, path) != sizeof loaded ||
        memcmp(loaded.magic, "EPRD", 4) != 0)
        trainer_die(3, "%s: not a checkpoint of this trainer", path);
    close(fd);
    *state = loaded;
    printf("resumed at step %" PRIu64 " epoch %" PRIu64 "\n", state->step, state->epoch);
}

static void save_checkpoint(const char *path, const struct trainer_state *state)
{
    printf("checkpoint step %" PRIu64 "\n", state->step);
    trainer_replace_file_by_rename(path, state, sizeof *state, NULL, 0);
}

/* One epoch from state->done records on; returns the records it read. */
static uint64_t run_epoch(const struct options *o, struct trainer_state *state,
                          unsigned char *buffer, size_t buffer_size)
{
    struct reader reader = {.fd = -1, .path = o->data};
    o->io->open(&reader);
    unsigned char header[ADSD_HEADER_SIZE];
    bool at_end = false;
    if (o->io->read(&reader, header, sizeof header, &at_end) != sizeof header)
        trainer_die(3, "%s: shorter than its header", o->data);
    struct adsd_dataset data = {.fd = reader.fd};
    adsd_accept_header(&data, header, "bad dimension", o->data);
    if (data.record_size * o->batch > buffer_size)
        trainer_die(2, "--batch %" PRIu64 " too large", o->batch);
    if (o->own_seek && state->done > 0)
        o->io->seek(&reader, ADSD_HEADER_SIZE + state->done * data.record_size);
    uint64_t read_records = 0;
    while (!at_end) {
        size_t got = o->io->read(&reader, buffer, data.record_size * o->batch, &at_end);
        if (got % data.record_size != 0)
            trainer_die(3, "%s: a record cut short", o->data);
        size_t records = got / data.record_size;
        if (records == 0)
            break;
        trainer_pause_between_steps(o->sleep_us);
        for (size_t i = 0; i < records; i++)
            printf("epoch %" PRIu64 " record %" PRIu64 "\n", state->epoch,
                   trainer_get_u64_little_endian(buffer + i * data.record_size));
        read_records += records;
        state->done += records;
        state->step++;
        if (state->step % o->every == 0)
            save_checkpoint(o->checkpoint, state);
    }
    o->io->close(&reader);
    return read_records;
}

static void say_exit_handlers_ran(void)
{
    printf("exit handlers ran\n");
}

int main(int argc, char **argv)
{
    trainer_set_program_name("epoch_reader");
    atexit(say_exit_handlers_ran);
    struct options o;
    parse_options(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct trainer_state state;
    load_checkpoint(o.checkpoint, &state);
    size_t buffer_size = 1 << 20;
    unsigned char *buffer = trainer_allocate_zeroed(buffer_size);
    while (state.epoch < o.epochs) {
        uint64_t records = run_epoch(&o, &state, buffer, buffer_size);
        printf("epoch %" PRIu64 " records %" PRIu64 "\n", state.epoch, records);
        state.epoch++;
        state.done = 0;
        save_checkpoint(o.checkpoint, &state);
    }
    free(buffer);
    printf("done at step %" PRIu64 "\n", state.step);
    return 0;
}
