/* epoch_reader.c - the C trainer most people write: it keeps its own epoch
 * counter and, in its checkpoint, how many records of the epoch it had
 * trained on.
 *
 *   epoch_reader --data PATH --epochs E --batch B --checkpoint PATH
 *                [--checkpoint-every STEPS=4] [--sleep-us US=0] [--own-seek]
 *
 * Every epoch: open(PATH), read() of the 16-byte ADSD header (its count is
 * not used: the loop reads to the end), then read() of B records at a time
 * until a read returns 0, close().  With --own-seek the epoch a checkpoint
 * was taken in is resumed the way a careful author does without any
 * library: after the header, lseek(fd, 16 + done * record, SEEK_SET) to the
 * first record it had not trained on.
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
#include <unistd.h>

#include "adsd_records.h"
#include "trainer_common.h"

struct options {
    const char *data, *checkpoint;
    uint64_t epochs, batch, every, sleep_us;
    bool own_seek;
};

/* What a checkpoint holds. */
struct trainer_state {
    char magic[4];
    uint64_t epoch, done, step;
};

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 4, .epochs = UINT64_MAX};
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
        else trainer_die(2, "unknown option: %s", flag);
    }
    if (!o->data || !o->checkpoint || o->epochs == UINT64_MAX || o->batch == 0)
        trainer_die(2, "usage: epoch_reader --data PATH --epochs E --batch B --checkpoint PATH "
                       "[--checkpoint-every STEPS] [--sleep-us US] [--own-seek]");
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
    int fd = open(o->data, O_RDONLY);
    if (fd < 0)
        trainer_die(1, "cannot open %s: %s", o->data, strerror(errno));
    unsigned char header[ADSD_HEADER_SIZE];
    bool at_end = false;
    if (trainer_read_full(fd, header, sizeof header, &at_end, o->data) != sizeof header)
        trainer_die(3, "%s: shorter than its header", o->data);
    struct adsd_dataset data = {.fd = fd};
    adsd_accept_header(&data, header, "bad dimension", o->data);
    if (data.record_size * o->batch > buffer_size)
        trainer_die(2, "--batch %" PRIu64 " too large", o->batch);
    if (o->own_seek && state->done > 0 &&
        lseek(fd, (off_t)(ADSD_HEADER_SIZE + state->done * data.record_size), SEEK_SET) < 0)
        trainer_die(1, "lseek %s: %s", o->data, strerror(errno));
    uint64_t read_records = 0;
    while (!at_end) {
        size_t got = trainer_read_full(fd, buffer, data.record_size * o->batch, &at_end, o->data);
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
    close(fd);
    return read_records;
}

int main(int argc, char **argv)
{
    trainer_set_program_name("epoch_reader");
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
