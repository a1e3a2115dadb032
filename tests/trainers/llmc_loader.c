/* llmc_loader.c - a token-file trainer around a data loader that reads,
 * call for call, the way llm.c's llmc/dataloader.h does.
 *
 *   llmc_loader --data PATTERN --epochs E --batch B --seq T --checkpoint PATH
 *               [--checkpoint-every STEPS=4] [--shuffle 0|1 (1)] [--sleep-us US=0]
 *
 * The loader (llm.c's DataLoader with process_rank 0 and num_processes 1:
 * under the shim every replica is a world of one and the view is its shard):
 *   init:   glob(PATTERN); each shard is opened and validated once
 *           (load_shard), then reset() opens the first one again and keeps
 *           it open: two fopen calls of a one-shard dataset before the first
 *           batch; asserts that every shard holds at least B*T+1 tokens.
 *   load_shard: fclose of the stream it had, fopen(.., "rb"), fread of the
 *           256-int header (magic 20240520, version 1, token count, which
 *           must be positive), fseek(END) + ftell + fseek(0) to check that
 *           the size is 1024 + 2 * ntok; the shard holds
 *           (2 * ntok - 2) / (2 * B * T) batches: B*T+1 tokens are read
 *           per batch but the position moves by B*T, so the last batch of
 *           the shard is never read.
 *   reset:  back to the first shard, load_shard (a reopen: the file is not
 *           closed at the end of an epoch, only here), and with shuffling on
 *           a new permutation of the shard's batches from the loader's own
 *           generator (seeded 42 + rank, advancing from epoch to epoch).
 *   next_batch: when the shard's batches are used up, advance (the last
 *           shard: reset); then fseek(1024 + idx * 2*B*T) and fread of
 *           B*T+1 tokens, idx being the next batch of the loader's order.
 *
 * The trainer is what a user writes around that loader when its loader has
 * no resume of its own (llm.c's train_gpt2.c): it counts epochs itself (an
 * epoch ends when the loader has no batch left in it, so the reset that
 * follows opens the next one), checkpoints its model, step and epoch every
 * STEPS steps and at the end (fopen("wb") + fwrite + fclose of PATH.tmp,
 * then rename onto PATH, so that a kill never leaves half a checkpoint);
 * on start it loads a checkpoint at PATH
 * ("resumed at step S epoch E") before it builds its loader, as llm.c
 * builds its model from a checkpoint before its loaders, and rebuilds the
 * loader from the file.  A checkpoint taken when the loader has no batch
 * left in the epoch records the next epoch.
 *
 * The "model" is a bigram count table over the tokens folded into 64
 * classes; each step prints "epoch E record ID" (ID from the batch's first
 * two tokens, see gen_tokens), each epoch "epoch E loss L", each checkpoint
 * "checkpoint step S".
 * Exit status: 0 ok, 1 I/O error, 2 usage, 3 bad data or checkpoint. */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HEADER_INTS 256
#define TOKEN_MAGIC 20240520
#define CLASSES 64
#define CKPT_MAGIC "LLMC"

struct options {
    const char *data, *checkpoint;
    long epochs, batch, seq, every, shuffle, sleep_us;
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
    *o = (struct options){.every = 4, .shuffle = 1, .epochs = -1};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (strcmp(flag, "--data") == 0) o->data = value;
        else if (strcmp(flag, "--checkpoint") == 0) o->checkpoint = value;
        else if (strcmp(flag, "--epochs") == 0) o->epochs = parse_long(flag, value, 0);
        else if (strcmp(flag, "--batch") == 0) o->batch = parse_long(flag, value, 1);
        else if (strcmp(flag, "--seq") == 0) o->seq = parse_long(flag, value, 2);
        else if (strcmp(flag, "--checkpoint-every") == 0) o->every = parse_long(flag, value, 1);
        else if (strcmp(flag, "--shuffle") == 0) o->shuffle = parse_long(flag, value, 0);
        else if (strcmp(flag, "--sleep-us") == 0) o->sleep_us = parse_long(flag, value, 0);
        else die(2, "unknown option: %s", flag);
    }
    if (!o->data || !o->checkpoint || o->epochs < 0 || o->batch < 1 || o->seq < 2 ||
        o->shuffle > 1)
        die(2, "usage: llmc_loader --data PATTERN --epochs E --batch B --seq T "
               "--checkpoint PATH [--checkpoint-every STEPS] [--shuffle 0|1] [--sleep-us US]");
}

/* ---- the loader, as llm.c's dataloader.h reads ----------------------------- */

struct data_loader {
    size_t B, T;
    glob_t shards;
    size_t shard_index, sample_index;
    size_t shard_samples;         /* batches of the current shard */
    FILE *tokens;
    uint16_t *buffer;             /* B*T+1 tokens */
    int shuffle;
    uint64_t generator;           /* the loader's own, as llm.c's mt19937 */
    int *order;                   /* the shard's batches in this epoch's order */
};

/* xorshift64*: this loader's own generator. */
static uint32_t loader_random(struct data_loader *loader)
{
    loader->generator ^= loader->generator >> 12;
    loader->generator ^= loader->generator << 25;
    loader->generator ^= loader->generator >> 27;
    return (uint32_t)((loader->generator * 0x2545f4914f6cdd1dULL) >> 32);
}

static long loader_load_shard(struct data_loader *loader, size_t shard)
{
    const char *path = loader->shards.gl_pathv[shard];
    if (loader->tokens != NULL && fclose(loader->tokens) != 0)
        die(1, "fclose %s: %s", path, strerror(errno));
    loader->tokens = fopen(path, "rb");
    if (loader->tokens == NULL)
        die(1, "cannot open %s: %s", path, strerror(errno));
    int header[HEADER_INTS];
    if (fread(header, sizeof(int), HEADER_INTS, loader->tokens) != HEADER_INTS)
        die(3, "%s: shorter than its header", path);
    if (header[0] != TOKEN_MAGIC || header[1] != 1)
        die(3, "%s: bad magic or version", path);
    long ntok = header[2];
    if (ntok <= 0)
        die(3, "%s: no tokens in the file (llm.c asserts ntok > 0)", path);
    if (fseek(loader->tokens, 0, SEEK_END) != 0)
        die(1, "fseek %s: %s", path, strerror(errno));
    long size = ftell(loader->tokens);
    if (fseek(loader->tokens, 0, SEEK_SET) != 0)
        die(1, "fseek %s: %s", path, strerror(errno));
    if (size != HEADER_INTS * (long)sizeof(int) + ntok * 2)
        die(3, "%s: size %ld does not match the header's %ld tokens", path, size, ntok);
    loader->shard_samples = (size_t)(ntok * 2 - 2) / (loader->B * loader->T * 2);
    return ntok;
}

static void loader_prepare_order(struct data_loader *loader)
{
    free(loader->order);
    loader->order = malloc((loader->shard_samples + 1) * sizeof *loader->order);
    if (loader->order == NULL)
        die(1, "out of memory");
    for (size_t i = 0; i < loader->shard_samples; i++)
        loader->order[i] = (int)i;
    for (size_t i = loader->shard_samples; i-- > 1;) {
        size_t j = loader_random(loader) % (i + 1);
        int swap = loader->order[i];
        loader->order[i] = loader->order[j];
        loader->order[j] = swap;
    }
}

static void loader_reset(struct data_loader *loader)
{
    loader->shard_index = 0;
    loader->sample_index = 0;
    loader_load_shard(loader, loader->shard_index);
    if (loader->shuffle)
        loader_prepare_order(loader);
}

static void loader_advance(struct data_loader *loader)
{
    if (loader->shard_index == loader->shards.gl_pathc - 1) {
        loader_reset(loader);
        return;
    }
    loader->shard_index++;
    loader->sample_index = 0;
    loader_load_shard(loader, loader->shard_index);
    if (loader->shuffle)
        loader_prepare_order(loader);
}

static void loader_init(struct data_loader *loader, const char *pattern, size_t B, size_t T,
                        int shuffle)
{
    *loader = (struct data_loader){.B = B, .T = T, .shuffle = shuffle, .generator = 42};
    if (glob(pattern, 0, NULL, &loader->shards) != 0 || loader->shards.gl_pathc == 0)
        die(1, "no files match %s", pattern);
    for (size_t shard = 0; shard < loader->shards.gl_pathc; shard++) {
        long ntok = loader_load_shard(loader, shard);
        if (ntok < (long)(B * T + 1))
            die(3, "%s: %ld tokens, fewer than one batch of B*T+1 = %zu (llm.c asserts it)",
                loader->shards.gl_pathv[shard], ntok, B * T + 1);
    }
    loader->buffer = malloc((B * T + 1) * sizeof *loader->buffer);
    if (loader->buffer == NULL)
        die(1, "out of memory");
    loader_reset(loader);
}

static void loader_load_batch(struct data_loader *loader)
{
    size_t index = loader->shuffle ? (size_t)loader->order[loader->sample_index]
                                   : loader->sample_index;
    long offset = HEADER_INTS * (long)sizeof(int) + (long)(index * loader->B * loader->T * 2);
    const char *path = loader->shards.gl_pathv[loader->shard_index];
    if (fseek(loader->tokens, offset, SEEK_SET) != 0)
        die(1, "fseek %s: %s", path, strerror(errno));
    size_t want = loader->B * loader->T + 1;
    if (fread(loader->buffer, sizeof *loader->buffer, want, loader->tokens) != want)
        die(1, "%s: short read of the batch at %ld", path, offset);
}

static void loader_next_batch(struct data_loader *loader)
{
    if (loader->sample_index >= loader->shard_samples)
        loader_advance(loader);
    loader_load_batch(loader);
    loader->sample_index++;
}

/* True when the current shard has no batch left: the next batch resets. */
static int loader_epoch_done(const struct data_loader *loader)
{
    return loader->shard_index == loader->shards.gl_pathc - 1 &&
           loader->sample_index >= loader->shard_samples;
}

/* ---- the trainer ------------------------------------------------------------ */

static void load_checkpoint(const char *path, struct trainer_state *state)
{
    memset(state, 0, sizeof *state);
    memcpy(state->magic, CKPT_MAGIC, 4);
    state->version = 2;
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        printf("starting fresh\n");
        return;
    }
    struct trainer_state loaded;
    if (fread(&loaded, sizeof loaded, 1, file) != 1 || memcmp(loaded.magic, CKPT_MAGIC, 4) != 0 ||
        loaded.version != 2)
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

/* One bigram step over B*T tokens and their next token; returns the summed
 * negative log-likelihood. */
static double train_batch(struct trainer_state *state, const uint16_t *tokens, size_t count)
{
    double loss = 0;
    for (size_t i = 0; i < count; i++) {
        unsigned from = tokens[i] % CLASSES, to = tokens[i + 1] % CLASSES;
        uint64_t row = 0;
        for (unsigned c = 0; c < CLASSES; c++)
            row += state->bigram[from][c];
        loss -= log((state->bigram[from][to] + 1.0) / ((double)row + CLASSES));
        state->bigram[from][to]++;
    }
    return loss;
}

/* The state a checkpoint records now: once the loader has no batch left in
 * the epoch, the epoch in progress is the next one. */
static struct trainer_state state_to_save(const struct trainer_state *state,
                                          const struct data_loader *loader)
{
    struct trainer_state saved = *state;
    if (loader_epoch_done(loader)) {
        saved.epoch++;
        saved.epoch_batches = 0;
    }
    return saved;
}

int main(int argc, char **argv)
{
    struct options o;
    parse_options(argc, argv, &o);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct trainer_state state;
    load_checkpoint(o.checkpoint, &state);
    struct data_loader loader;
    loader_init(&loader, o.data, (size_t)o.batch, (size_t)o.seq, (int)o.shuffle);
    const size_t batch_tokens = (size_t)(o.batch * o.seq);
    double loss = 0;
    while (state.epoch < (uint64_t)o.epochs) {
        if (loader_epoch_done(&loader)) {
            printf("epoch %" PRIu64 " loss %.6f\n", state.epoch,
                   state.epoch_batches > 0
                       ? loss / (double)(state.epoch_batches * batch_tokens) : 0.0);
            state.epoch++;
            state.epoch_batches = 0;
            loss = 0;
            if (state.epoch == (uint64_t)o.epochs)
                break;
        }
        loader_next_batch(&loader);
        loss += train_batch(&state, loader.buffer, batch_tokens);
        if (o.sleep_us > 0)
            usleep((useconds_t)o.sleep_us);
        printf("epoch %" PRIu64 " record %u\n", state.epoch,
               (unsigned)loader.buffer[0] | (unsigned)loader.buffer[1] << 16);
        state.step++;
        state.epoch_batches++;
        if (state.step % (uint64_t)o.every == 0) {
            struct trainer_state saved = state_to_save(&state, &loader);
            save_checkpoint(o.checkpoint, &saved);
        }
    }
    save_checkpoint(o.checkpoint, &state);
    printf("done at step %" PRIu64 "\n", state.step);
    return 0;
}
