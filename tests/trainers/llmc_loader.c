/* llmc_loader.c - a token-file trainer whose data loader reads the way
 * llm.c's dataloader.h does.
 *
 *   llmc_loader --data PATH --epochs E --batch B --seq T --checkpoint PATH
 *               [--checkpoint-every STEPS=4] [--seed S=1337] [--sleep-us US=0]
 *
 * Data I/O, every epoch: fopen the token file, fread its 1024-byte header
 * (int32 magic 20240520, version 1, token count), fseek(END) + ftell +
 * fseek(0) to check that the file size is header + count * 2, then visit the
 * epoch's batches in this program's own shuffled order (a xorshift generator
 * seeded from S and the epoch): per batch fseek(header + idx * B*T*2) and
 * fread of B*T+1 tokens (the inputs and, shifted by one, the targets), then
 * fclose at the end of the epoch.
 *
 * llm.c counts (ntok - 1) / (B*T) batches so that the extra token of the
 * last one stays inside the file; this loader counts ntok / (B*T) and lets
 * the final batch of the file read B*T tokens, its last target being
 * <|endoftext|>.  A file of whole batches is then read completely, which is
 * what a sharded view (whole records only) gives it.
 *
 * The "model" is a bigram count table over the tokens folded into 64
 * classes; each step prints "epoch E record ID" (ID from the batch's first
 * two tokens, see gen_tokens) and each epoch "epoch E loss L".
 * Checkpoint: the model, the epoch in progress, the step counter and the
 * batches done in that epoch, written to PATH.tmp with fopen/fwrite/fclose
 * and renamed onto PATH every STEPS steps and at the end of each epoch; the
 * line "checkpoint step S" comes just before the rename.  On start a
 * checkpoint at PATH is loaded ("resumed at step S epoch E") and training
 * continues with its epoch, whose loader is rebuilt from the file as at the
 * start of any epoch; otherwise "starting fresh".
 * Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * (long)sizeof(int))
#define TOKEN_MAGIC 20240520
#define END_OF_TEXT 50256
#define CLASSES 64
#define CKPT_MAGIC "LLMC"

struct options {
    const char *data, *checkpoint;
    long epochs, batch, seq, every, seed, sleep_us;
};

/* What a checkpoint holds. */
struct trainer_state {
    char magic[4];
    uint32_t version;
    uint64_t epoch, step, epoch_batches;
    uint32_t bigram[CLASSES][CLASSES];
};

static void die(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("llmc_loader: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(status);
}

static long parse_long(const char *flag, const char *text, long min)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value < min)
        die(2, "%s expects an integer >= %ld, got '%s'", flag, min, text);
    return value;
}

static void parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.every = 4, .seed = 1337, .epochs = -1};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (strcmp(flag, "--data") == 0) o->data = value;
        else if (strcmp(flag, "--checkpoint") == 0) o->checkpoint = value;
        else if (strcmp(flag, "--epochs") == 0) o->epochs = parse_long(flag, value, 0);
        else if (strcmp(flag, "--batch") == 0) o->batch = parse_long(flag, value, 1);
        else if (strcmp(flag, "--seq") == 0) o->seq = parse_long(flag, value, 2);
        else if (strcmp(flag, "--checkpoint-every") == 0) o->every = parse_long(flag, value, 1);
        else if (strcmp(flag, "--seed") == 0) o->seed = parse_long(flag, value, 0);
        else if (strcmp(flag, "--sleep-us") == 0) o->sleep_us = parse_long(flag, value, 0);
        else die(2, "unknown option: %s", flag);
    }
    if (!o->data || !o->checkpoint || o->epochs < 0 || o->batch < 1 || o->seq < 2)
        die(2, "usage: llmc_loader --data PATH --epochs E --batch B --seq T --checkpoint PATH "
               "[--checkpoint-every STEPS] [--seed S] [--sleep-us US]");
}

static void load_checkpoint(const char *path, struct trainer_state *state)
{
    memset(state, 0, sizeof *state);
    memcpy(state->magic, CKPT_MAGIC, 4);
    state->version = 1;
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        printf("starting fresh\n");
        return;
    }
    struct trainer_state loaded;
    if (fread(&loaded, sizeof loaded, 1, file) != 1 || memcmp(loaded.magic, CKPT_MAGIC, 4) != 0 ||
        loaded.version != 1)
        die(3, "%s: not a checkpoint of this trainer", path);
    fclose(file);
    *state = loaded;
    printf("resumed at step %" PRIu64 " epoch %" PRIu64 "\n", state->step, state->epoch);
}

static void save_checkpoint(const char *path, const struct trainer_state *state)
{
    char temp[4096];
    snprintf(temp, sizeof temp, "%s.tmp", path);
    FILE *file = fopen(temp, "wb");
    if (file == NULL)
        die(1, "cannot create %s: %s", temp, strerror(errno));
    if (fwrite(state, sizeof *state, 1, file) != 1 || fclose(file) != 0)
        die(1, "writing %s: %s", temp, strerror(errno));
    printf("checkpoint step %" PRIu64 "\n", state->step);
    if (rename(temp, path) != 0)
        die(1, "renaming %s: %s", temp, strerror(errno));
}

/* xorshift64*: this loader's own generator, as llm.c keeps its own mt19937. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545f4914f6cdd1dULL;
}

static void shuffle_batches(long *order, long count, long seed, uint64_t epoch)
{
    uint64_t state = (uint64_t)seed * 0x9e3779b97f4a7c15ULL + epoch * 0xd1b54a32d192ed03ULL + 1;
    for (long i = 0; i < count; i++)
        order[i] = i;
    for (long i = count - 1; i > 0; i--) {
        long j = (long)(next_random(&state) % (uint64_t)(i + 1));
        long swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
}

/* Opens the token file and checks its header against its size (llm.c's
 * dataloader_load_shard_); returns the token count. */
static long open_tokens(const char *path, FILE **file_out)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        die(1, "cannot open %s: %s", path, strerror(errno));
    int header[HEADER_INTS];
    if (fread(header, sizeof(int), HEADER_INTS, file) != HEADER_INTS)
        die(3, "%s: shorter than its header", path);
    if (header[0] != TOKEN_MAGIC || header[1] != 1)
        die(3, "%s: bad magic or version", path);
    long ntok = header[2];
    if (ntok <= 0)
        die(3, "%s: no tokens in the file", path);
    if (fseek(file, 0, SEEK_END) != 0)
        die(1, "fseek %s: %s", path, strerror(errno));
    long size = ftell(file);
    if (fseek(file, 0, SEEK_SET) != 0)
        die(1, "fseek %s: %s", path, strerror(errno));
    if (size != HEADER_BYTES + ntok * 2)
        die(3, "%s: size %ld does not match the header's %ld tokens", path, size, ntok);
    *file_out = file;
    return ntok;
}

/* One bigram step; returns the summed negative log-likelihood. */
static double train_batch(struct trainer_state *state, const uint16_t *tokens, long count)
{
    double loss = 0;
    for (long i = 0; i < count; i++) {
        unsigned from = tokens[i] % CLASSES, to = tokens[i + 1] % CLASSES;
        uint64_t row = 0;
        for (unsigned c = 0; c < CLASSES; c++)
            row += state->bigram[from][c];
        loss -= log((state->bigram[from][to] + 1.0) / ((double)row + CLASSES));
        state->bigram[from][to]++;
    }
    return loss;
}

int main(int argc, char **argv)
{
    struct options o;
    parse_options(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct trainer_state state;
    load_checkpoint(o.checkpoint, &state);
    const long batch_tokens = o.batch * o.seq;
    uint16_t *tokens = malloc(((size_t)batch_tokens + 1) * sizeof *tokens);
    if (tokens == NULL)
        die(1, "out of memory");
    for (; state.epoch < (uint64_t)o.epochs; state.epoch++, state.epoch_batches = 0) {
        FILE *file;
        long ntok = open_tokens(o.data, &file);
        long batches = ntok / batch_tokens;
        long *order = malloc((size_t)(batches > 0 ? batches : 1) * sizeof *order);
        if (order == NULL)
            die(1, "out of memory");
        shuffle_batches(order, batches, o.seed, state.epoch);
        double loss = 0;
        for (long k = 0; k < batches; k++) {
            long offset = HEADER_BYTES + order[k] * batch_tokens * 2;
            if (fseek(file, offset, SEEK_SET) != 0)
                die(1, "fseek %s: %s", o.data, strerror(errno));
            size_t got = fread(tokens, sizeof *tokens, (size_t)batch_tokens + 1, file);
            if (got < (size_t)batch_tokens)
                die(3, "%s: short batch at %ld (%zu tokens)", o.data, offset, got);
            if (got == (size_t)batch_tokens)
                tokens[batch_tokens] = END_OF_TEXT;
            loss += train_batch(&state, tokens, batch_tokens);
            if (o.sleep_us > 0)
                usleep((useconds_t)o.sleep_us);
            printf("epoch %" PRIu64 " record %u\n", state.epoch,
                   (unsigned)tokens[0] | (unsigned)tokens[1] << 16);
            state.step++;
            state.epoch_batches++;
            if (state.step % (uint64_t)o.every == 0 && k + 1 < batches)
                save_checkpoint(o.checkpoint, &state);
        }
        fclose(file);
        free(order);
        printf("epoch %" PRIu64 " loss %.6f\n", state.epoch,
               batches > 0 ? loss / (double)(batches * batch_tokens) : 0.0);
        struct trainer_state finished = state;
        finished.epoch++;
        finished.epoch_batches = 0;
        save_checkpoint(o.checkpoint, &finished);
    }
    free(tokens);
    printf("done at step %" PRIu64 "\n", state.step);
    return 0;
}
