/* test_real_loaders.c - example trainers that read their data the way real
 * programs of each ecosystem do: llm.c's C loader (its own batch order by
 * fseek + fread), C++ std::ifstream, Python text and buffered binary files,
 * a PyTorch DataLoader over a map-style Dataset with 0 and 2 workers, and
 * an MPI trainer that counts its lines, rewinds and reads them again into
 * memory every epoch (llm_parallelisms.c's train_dp.c, run under mpirun).
 * Each is checked for (a) transparency: shard=0:shuffle=0 gives the output
 * of a run without the library; (b) two replicas see disjoint shares that
 * cover each epoch; (c) each epoch is a new permutation; (d) killed with
 * SIGKILL at seeded points and resumed (once with two replicas), every
 * epoch's records, counted up to the checkpoint each run was resumed from,
 * are delivered exactly once (up to AdaptDL's padding and the declared
 * lookahead), or, for loaders that visit records in their own order, never
 * lost.  Each trainer prints "epoch E record ID" per consumed record (see
 * harness.h, "Loader-style trainers"). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define EPOCHS 3
#define SEED_SETTING "ADAPTDL_SEED=5"

enum data_kind { DATA_RECORDS, DATA_TOKENS, DATA_LINES };

struct loader_case {
    const char *program;        /* build-relative path */
    const char *python_module;  /* what /usr/bin/python3 must import; NULL: compiled */
    enum data_kind kind;
    unsigned dim;               /* DATA_RECORDS: features per ADSD record */
    uint64_t records;           /* records (for tokens: batches) per epoch */
    const char *batch;
    const char *options[8];     /* trainer-specific, NULL-terminated */
    unsigned lookahead;         /* records a prefetching loader holds beyond its checkpoint */
    bool own_order;             /* visits the view in its own order: may repeat after resume */
    const char *sleep_us;       /* simulated compute per step */
    /* no read of its returns 0 (adaptshim(7) "Passes"): a checkpoint written after its
     * epoch's loop binds the complete pass, so a continued run's first
     * epoch reads that pass, header-only, and its next epoch a whole one */
    bool binds_complete_pass;
    /* records of each pass the loader never reads, per replica: llm.c reads
     * (ntok - 1) / (B*T) batches, so the last record of its view stays
     * unread, a different one in every pass */
    unsigned unread_per_pass;
    /* positions its first read after a restore by its own count of records
     * done: exact while the replica count stays (adaptshim(7) "Own
     * positioning"), so its kill sequence keeps one replica */
    bool own_position;
    const char *keys;           /* more keys of its ADAPTDL_DATA entry, or NULL */
    /* an MPI program: each run is one mpirun -np K, which gives the
     * replica count (no ADAPTDL_NUM_REPLICAS), its ranks sharing one
     * checkpoint that rank 0 writes */
    bool mpi;
    /* reads its whole view into memory before it trains on it: the shim
     * cannot see how much of a pass it trained, a checkpoint inside the
     * epoch binds the pass as consumed, and the resumed epoch trains again
     * what was trained of it before the kill (as without the library);
     * repeats are allowed, losses are not */
    bool loads_epoch_whole;
};

/* llm.c: B=4, T=16, one record = one batch of B*T tokens = 128 bytes. */
#define LLMC_B 4
#define LLMC_T 16
#define RECORD_CASE(dimension) \
    .kind = DATA_RECORDS, .dim = (dimension), .records = 201, .batch = "8", .sleep_us = "2000"
static const struct loader_case llmc_case = {
    .program = "trainers/llmc_loader", .kind = DATA_TOKENS, .records = 61, .batch = "4",
    .options = {"--seq", "16", NULL}, .own_order = true, .sleep_us = "2000",
    .unread_per_pass = 1};
/* the same loader in the file's order (llm.c without its shuffle) */
static const struct loader_case llmc_in_order_case = {
    .program = "trainers/llmc_loader", .kind = DATA_TOKENS, .records = 61, .batch = "4",
    .options = {"--seq", "16", "--shuffle", "0", NULL}, .sleep_us = "2000",
    .unread_per_pass = 1};
/* a trainer that restores its own epoch counter and reads each epoch to
 * its end; the same trainer seeking to where its epoch stopped */
static const struct loader_case epoch_reader_case = {
    .program = "trainers/epoch_reader", RECORD_CASE(6)};
static const struct loader_case epoch_reader_own_seek_case = {
    .program = "trainers/epoch_reader", RECORD_CASE(6), .options = {"--own-seek", NULL},
    .own_position = true};
static const struct loader_case epoch_reader_fseek_case = {
    .program = "trainers/epoch_reader", RECORD_CASE(6),
    .options = {"--own-seek", "--io", "stdio", NULL}, .own_position = true};
static const struct loader_case epoch_reader_pread_case = {
    .program = "trainers/epoch_reader", RECORD_CASE(6),
    .options = {"--own-seek", "--io", "pread", NULL}, .own_position = true};
static const struct loader_case ifstream_case = {
    .program = "trainers/ifstream_reader", RECORD_CASE(6)};
static const struct loader_case text_case = {
    .program = "trainers/text_lines.py", .python_module = "json", .kind = DATA_LINES,
    .records = 201, .batch = "8", .sleep_us = "2000"};
static const struct loader_case binary80_case = {
    .program = "trainers/binary_records.py", .python_module = "json", RECORD_CASE(17)};
static const struct loader_case binary64_case = {
    .program = "trainers/binary_records.py", .python_module = "json", RECORD_CASE(13)};
/* One descriptor opened before the checkpoint is loaded, os.fstat and
 * os.pread at every epoch: only the size question ends an epoch. */
static const struct loader_case binary_kept_open_case = {
    .program = "trainers/binary_records.py", .python_module = "json", RECORD_CASE(17),
    .options = {"--keep-open", NULL}, .binds_complete_pass = true};
/* DataLoader with W workers and prefetch factor 2: W*2 batches of 8 in flight. */
#define TORCH_CASE .program = "trainers/torch_dataset.py", .python_module = "torch", \
    .kind = DATA_RECORDS, .dim = 4, .records = 161, .batch = "8", .sleep_us = "10000"
static const struct loader_case torch_w0_case = {
    TORCH_CASE, .options = {"--workers", "0", "--shuffle", "0", NULL}};
static const struct loader_case torch_w0_shuffled_case = {
    TORCH_CASE, .options = {"--workers", "0", "--shuffle", "1", NULL}, .own_order = true};
static const struct loader_case torch_w2_case = {
    TORCH_CASE, .options = {"--workers", "2", "--shuffle", "0", NULL}, .lookahead = 2 * 2 * 8};
/* A Dataset built before the checkpoint is loaded whose length is the
 * header's count: after a restore inside an epoch it reads with the whole
 * file's count; served lengthened by default (the resumed epoch sees again,
 * in another order, what was consumed before), whole with resume=whole-pass
 * (the resumed epoch repeats what was trained of it, as without the shim). */
static const struct loader_case torch_header_count_case = {
    TORCH_CASE, .options = {"--workers", "0", "--shuffle", "0", "--dataset-first",
                            "--length-from-header", NULL}, .own_order = true};
static const struct loader_case torch_header_count_whole_pass_case = {
    TORCH_CASE, .options = {"--workers", "0", "--shuffle", "0", "--dataset-first",
                            "--length-from-header", NULL}, .own_order = true,
    .keys = ":resume=whole-pass"};
static const struct loader_case torch_w2_shuffled_case = {
    TORCH_CASE, .options = {"--workers", "2", "--shuffle", "1", NULL}, .lookahead = 2 * 2 * 8,
    .own_order = true};

/* llm_parallelisms.c's train_dp.c loader with epochs: every epoch it counts
 * the lines with fgets, rewinds, reads them again into memory and trains on
 * them with six all-reduces a step, under mpirun. */
static const struct loader_case count_rewind_mpi_case = {
    .program = "trainers/count_rewind_mpi", .kind = DATA_LINES, .records = 201, .batch = "8",
    .sleep_us = "2000", .mpi = true, .loads_epoch_whole = true};

/* Failed expectations of this test (each test runs in its own process); a
 * test that has none removes its directory. */
static unsigned failures;
#define EXPECT(condition, ...)                  \
    do {                                        \
        if (!(condition)) {                     \
            failures++;                         \
            cr_expect(false, __VA_ARGS__);      \
        }                                       \
    } while (0)

struct loader_job {
    const struct loader_case *trainer;
    const char *epochs;         /* --epochs of the runs started; NULL: EPOCHS */
    const char *directory;
    char *data;
    char state_setting[600];
    char save_setting[600];
};

static void loader_job_init(struct loader_job *job, const struct loader_case *trainer)
{
    if (trainer->python_module != NULL && !harness_python_has(trainer->python_module))
        cr_skip_test("/usr/bin/python3 cannot import %s: %s not run", trainer->python_module,
                     trainer->program);
    job->trainer = trainer;
    job->epochs = NULL;
    job->directory = harness_temp_dir();
    switch (trainer->kind) {
    case DATA_RECORDS:
        job->data = harness_path_in(job->directory, "train.bin");
        harness_generate_dataset(job->data, trainer->records, trainer->dim, 3);
        break;
    case DATA_TOKENS:
        job->data = harness_path_in(job->directory, "train_tokens.bin");
        harness_generate_tokens(job->data, trainer->records, LLMC_B * LLMC_T, 3);
        break;
    case DATA_LINES:
        job->data = harness_path_in(job->directory, "train.txt");
        harness_generate_text(job->data, trainer->records, 3);
        break;
    }
    snprintf(job->state_setting, sizeof job->state_setting, "ADAPTDL_CHECKPOINT_PATH=%s/state",
             job->directory);
    snprintf(job->save_setting, sizeof job->save_setting, "ADAPTDL_SAVE=%s/ckpt*",
             job->directory);
}

static void loader_job_finish(struct loader_job *job)
{
    if (failures == 0)
        harness_remove_tree(job->directory);
    else
        cr_log_warn("outputs left in %s", job->directory);
    free(job->data);
    free((char *)job->directory);
}

/* The ADAPTDL_DATA line each loader style needs (adaptshim(7) "LOADER STYLES"),
 * plus `extra_keys`. */
static char *data_setting(const struct loader_job *job, const char *extra_keys)
{
    const struct loader_case *trainer = job->trainer;
    char lookahead[256] = "";
    if (trainer->lookahead > 0)
        snprintf(lookahead, sizeof lookahead, ":lookahead=%u", trainer->lookahead);
    if (trainer->keys != NULL)
        strncat(lookahead, trainer->keys, sizeof lookahead - strlen(lookahead) - 1);
    char *setting = NULL;
    int length = -1;
    if (trainer->kind == DATA_RECORDS) {
        unsigned record = 8 + 4 * trainer->dim + 4;
        length = asprintf(&setting, "ADAPTDL_DATA=%s:record=%u:header=16:count=8,u64le,%u%s%s",
                          job->data, record, record, lookahead, extra_keys);
    } else if (trainer->kind == DATA_TOKENS) {
        /* record = the stride B*T*2; the extra token each batch reads is a
         * partial read of the next record, which does not deliver it */
        length = asprintf(&setting, "ADAPTDL_DATA=%s:record=%u:header=1024:count=8,u32le,2%s%s",
                          job->data, LLMC_B * LLMC_T * 2, lookahead, extra_keys);
    } else {
        length = asprintf(&setting, "ADAPTDL_DATA=%s:lines%s%s", job->data, lookahead,
                          extra_keys);
    }
    if (length < 0)
        abort();
    return setting;
}

struct trainer_process {
    /* the trainer; for an MPI trainer's rank 0 its mpirun, and 0 for its
     * other ranks (mpirun's status is theirs) */
    pid_t pid;
    bool mpirun;
    char *out_path;
    char *err_path;
};

/* Appends to argv[0..used) the options every loader takes, then the
 * trainer's own, and the terminating NULL. */
static void add_trainer_arguments(char **argv, size_t used, const struct loader_job *job,
                                    const char *checkpoint_path, const char *sleep_us)
{
    const char *common[] = {"--data", job->data, "--epochs", job->epochs ? job->epochs : "3",
                            "--batch", job->trainer->batch,
                            "--checkpoint", checkpoint_path, "--checkpoint-every", "4",
                            "--sleep-us", sleep_us};
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
        argv[used++] = (char *)common[i];
    for (size_t i = 0; job->trainer->options[i] != NULL; i++)
        argv[used++] = (char *)job->trainer->options[i];
    argv[used] = NULL;
}

/* Starts run `name` of an MPI trainer as mpirun -np `replicas`, with the
 * flags the MPI tests use; mpirun is not preloaded itself: -x passes the
 * library and `environment` to the ranks.  mpirun keeps each rank's stdout
 * apart (--output-filename DIR/name.ranks: Open MPI 4 writes rank R's to
 * 1/rank.R/stdout below it), ranks[R].out_path; its own stdout and stderr,
 * every rank's output mixed, go to DIR/name.out and .err (ranks[R].err_path).
 * Its TMPDIR is the job's directory: two mpirun starting at once in one
 * TMPDIR race to create their session directory, and one fails ("File
 * exists"). */
static void start_mpi_trainer(struct trainer_process ranks[], unsigned replicas,
                              const struct loader_job *job, const char *name,
                              const char *checkpoint, const char *sleep_us, bool preload,
                              char *const environment[])
{
    char file[128], replicas_text[16], preload_setting[600], tmpdir_setting[600];
    snprintf(file, sizeof file, "%s.ranks", name);
    char *rank_outputs = harness_path_in(job->directory, file);
    snprintf(file, sizeof file, "%s.out", name);
    char *mpirun_out = harness_path_in(job->directory, file);
    snprintf(replicas_text, sizeof replicas_text, "%u", replicas);
    snprintf(preload_setting, sizeof preload_setting, "LD_PRELOAD=%s",
             harness_build_path("libadaptshim.so"));
    snprintf(tmpdir_setting, sizeof tmpdir_setting, "TMPDIR=%s", job->directory);
    char *checkpoint_path = harness_path_in(job->directory, checkpoint);
    char *program = strdup(harness_build_path(job->trainer->program));
    char *argv[64];
    size_t used = 0;
    const char *head[] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
                          "--mca", "btl_vader_single_copy_mechanism", "none",
                          "-np", replicas_text, "--output-filename", rank_outputs};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[used++] = (char *)head[i];
    if (preload) {
        argv[used++] = "-x";
        argv[used++] = preload_setting;
    }
    for (size_t i = 0; environment != NULL && environment[i] != NULL; i++) {
        argv[used++] = "-x";
        argv[used++] = environment[i];
    }
    argv[used++] = program;
    add_trainer_arguments(argv, used, job, checkpoint_path, sleep_us);
    char *mpirun_environment[] = {harness_mpirun_as_root[0], harness_mpirun_as_root[1],
                                  tmpdir_setting, NULL};
    char *mpirun_err = NULL;
    if (asprintf(&mpirun_err, "%s.err", mpirun_out) < 0)
        abort();
    pid_t mpirun = harness_start(argv, mpirun_environment, false, mpirun_out, mpirun_err);
    for (unsigned rank = 0; rank < replicas; rank++) {
        snprintf(file, sizeof file, "1/rank.%u/stdout", rank);
        ranks[rank] = (struct trainer_process){
            .pid = rank == 0 ? mpirun : 0, .mpirun = true,
            .out_path = harness_path_in(rank_outputs, file), .err_path = strdup(mpirun_err)};
    }
    free(program);
    free(checkpoint_path);
    free(mpirun_err);
    free(mpirun_out);
    free(rank_outputs);
}

/* Starts the trainer as run `name`, with its checkpoint at DIR/`checkpoint`. */
static void start_trainer(struct trainer_process *process, const struct loader_job *job,
                          const char *name, const char *checkpoint, const char *sleep_us,
                          bool preload, char *const environment[])
{
    if (job->trainer->mpi) {
        start_mpi_trainer(process, 1, job, name, checkpoint, sleep_us, preload, environment);
        return;
    }
    char file[128];
    snprintf(file, sizeof file, "%s.out", name);
    process->out_path = harness_path_in(job->directory, file);
    snprintf(file, sizeof file, "%s.err", name);
    process->err_path = harness_path_in(job->directory, file);
    char *checkpoint_path = harness_path_in(job->directory, checkpoint);
    char *program = strdup(harness_build_path(job->trainer->program));
    char *argv[32];
    size_t used = 0;
    if (job->trainer->python_module != NULL)
        argv[used++] = "/usr/bin/python3";
    argv[used++] = program;
    add_trainer_arguments(argv, used, job, checkpoint_path, sleep_us);
    process->pid = harness_start(argv, environment, preload, process->out_path,
                                 process->err_path);
    free(program);
    free(checkpoint_path);
}

static void trainer_process_free(struct trainer_process *process)
{
    free(process->out_path);
    free(process->err_path);
}

/* Waits for a run to end: a trainer, or the mpirun of an MPI trainer's
 * rank 0 (nothing for its other ranks, which end with it). */
static int wait_for_trainer(const struct trainer_process *process, double timeout_seconds)
{
    if (process->mpirun)
        return process->pid == 0 ? 0 : harness_wait_mpirun(process->pid, timeout_seconds);
    return harness_wait(process->pid, timeout_seconds);
}

/* Waits for a trainer that must finish; asserts exit status 0. */
static void expect_success(struct trainer_process *process, const char *what)
{
    int status = wait_for_trainer(process, 60);
    if (status != 0) {
        char *err = harness_read_output(process->err_path);
        failures++;
        cr_assert_fail("%s exited %d: %.2000s", what, status, err);
    }
}

/* A run's records in consumption order, per epoch. */
struct epoch_orders {
    uint64_t *ids[EPOCHS];
    size_t count[EPOCHS];
};

static void read_epoch_orders(const char *out_path, uint64_t records, struct epoch_orders *orders)
{
    struct id_log log;
    harness_read_record_stream(out_path, &log);
    for (unsigned e = 0; e < EPOCHS; e++) {
        orders->ids[e] = calloc(log.count + 1, sizeof *orders->ids[e]);
        orders->count[e] = 0;
    }
    for (size_t i = 0; i < log.count; i++) {
        const struct id_event *event = &log.events[i];
        EXPECT(event->kind != ID_EVENT_RECORD || (event->epoch < EPOCHS && event->value < records),
               "%s: record %llu in epoch %llu is out of range", out_path,
               (unsigned long long)event->value, (unsigned long long)event->epoch);
        if (event->kind == ID_EVENT_RECORD && event->epoch < EPOCHS)
            orders->ids[event->epoch][orders->count[event->epoch]++] = event->value;
    }
    id_log_free(&log);
}

static void epoch_orders_free(struct epoch_orders *orders)
{
    for (unsigned e = 0; e < EPOCHS; e++)
        free(orders->ids[e]);
}

static bool same_order(const struct epoch_orders *a, unsigned epoch_a,
                       const struct epoch_orders *b, unsigned epoch_b)
{
    return a->count[epoch_a] == b->count[epoch_b] &&
           memcmp(a->ids[epoch_a], b->ids[epoch_b], a->count[epoch_a] * sizeof(uint64_t)) == 0;
}

/* (a) shard=0:shuffle=0: the same stdout as without the library. */
static void check_transparency(const struct loader_case *trainer)
{
    struct loader_job job;
    loader_job_init(&job, trainer);
    struct trainer_process plain, shimmed;
    start_trainer(&plain, &job, "plain", "ckpt-plain", "0", false, NULL);
    expect_success(&plain, "run without the library");
    char *data = data_setting(&job, ":shard=0:shuffle=0");
    char *environment[] = {data, SEED_SETTING, NULL};
    start_trainer(&shimmed, &job, "shimmed", "ckpt-shimmed", "0", true, environment);
    expect_success(&shimmed, "run under the library");
    size_t plain_size, shimmed_size;
    char *expected = harness_read_file(plain.out_path, &plain_size);
    char *actual = harness_read_file(shimmed.out_path, &shimmed_size);
    cr_assert(expected != NULL && actual != NULL);
    EXPECT(harness_count_lines_containing(plain.out_path, " record ") ==
               EPOCHS * (trainer->records - trainer->unread_per_pass),
           "the plain run consumed %zu records, expected %llu",
           harness_count_lines_containing(plain.out_path, " record "),
           (unsigned long long)(EPOCHS * (trainer->records - trainer->unread_per_pass)));
    size_t differ = 0;
    while (differ < plain_size && differ < shimmed_size && expected[differ] == actual[differ])
        differ++;
    EXPECT(plain_size == shimmed_size && differ == plain_size,
           "output differs from the run without the library at byte %zu (sizes %zu, %zu): "
           "expected \"%.80s\", got \"%.80s\"",
           differ, plain_size, shimmed_size, expected + differ, actual + differ);
    free(expected);
    free(actual);
    free(data);
    trainer_process_free(&plain);
    trainer_process_free(&shimmed);
    loader_job_finish(&job);
}

/* Starts ranks 0 and 1 of two as runs "rank0" and "rank1" with their own
 * checkpoints ("ckpt-rankR"), each with `shared` (NULL-terminated, at most
 * 8) and its rank setting, `rank_format` with the rank for %u.  An MPI
 * trainer's two ranks are one run, "ranks", of mpirun -np 2 with `shared`
 * and one checkpoint, "ckpt": MPI tells each its rank. */
static void start_two_ranks(struct trainer_process ranks[2], const struct loader_job *job,
                            char *const shared[], const char *rank_format)
{
    if (job->trainer->mpi) {
        start_mpi_trainer(ranks, 2, job, "ranks", "ckpt", "0", true, shared);
        return;
    }
    for (unsigned rank = 0; rank < 2; rank++) {
        char rank_setting[64], name[32], checkpoint[32];
        snprintf(rank_setting, sizeof rank_setting, rank_format, rank);
        snprintf(name, sizeof name, "rank%u", rank);
        snprintf(checkpoint, sizeof checkpoint, "ckpt-rank%u", rank);
        char *environment[10];
        size_t used = 0;
        for (; shared[used] != NULL && used < 8; used++)
            environment[used] = shared[used];
        environment[used++] = rank_setting;
        environment[used] = NULL;
        start_trainer(&ranks[rank], job, name, checkpoint, "0", true, environment);
    }
}

/* (b) two replicas: per epoch, each rank's share of ceil(N/2) records,
 * disjoint up to the padding, together covering the dataset. */
static void check_sharding(const struct loader_case *trainer)
{
    struct loader_job job;
    loader_job_init(&job, trainer);
    char *data = data_setting(&job, "");
    struct trainer_process ranks[2];
    /* under mpirun the replica count is MPI's */
    char *shared[] = {data, SEED_SETTING, trainer->mpi ? NULL : "ADAPTDL_NUM_REPLICAS=2", NULL};
    start_two_ranks(ranks, &job, shared, "ADAPTDL_REPLICA_RANK=%u");
    for (unsigned rank = 0; rank < 2; rank++)
        expect_success(&ranks[rank], rank == 0 ? "rank 0" : "rank 1");
    const uint64_t records = trainer->records;
    const size_t share = (records + 1) / 2, padding = 2 * share - records;
    struct epoch_orders orders[2];
    for (unsigned rank = 0; rank < 2; rank++)
        read_epoch_orders(ranks[rank].out_path, records, &orders[rank]);
    unsigned *seen = calloc(records, sizeof *seen);
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        memset(seen, 0, records * sizeof *seen);
        for (unsigned rank = 0; rank < 2; rank++) {
            EXPECT(orders[rank].count[epoch] == share - trainer->unread_per_pass,
                   "epoch %u: rank %u consumed %zu records, its share is %zu (%u unread)",
                   epoch, rank, orders[rank].count[epoch], share, trainer->unread_per_pass);
            for (size_t i = 0; i < orders[rank].count[epoch]; i++)
                seen[orders[rank].ids[epoch][i]]++;
        }
        size_t missing = 0, twice = 0, more = 0;
        for (uint64_t id = 0; id < records; id++) {
            missing += seen[id] == 0;
            twice += seen[id] == 2;
            more += seen[id] > 2;
        }
        EXPECT(missing <= 2 * trainer->unread_per_pass && more == 0 && twice <= padding,
               "epoch %u: %zu records seen by neither rank, %zu by both (padding allows %zu), "
               "%zu more than twice",
               epoch, missing, twice, padding, more);
    }
    free(seen);
    for (unsigned rank = 0; rank < 2; rank++) {
        epoch_orders_free(&orders[rank]);
        trainer_process_free(&ranks[rank]);
    }
    free(data);
    loader_job_finish(&job);
}

/* (c) one replica, shuffled: every epoch is a permutation of all records,
 * no two epochs alike, and none in the order the trainer sees without the
 * library (which catches an unshuffled view behind a self-shuffling loader). */
static void check_new_permutation(const struct loader_case *trainer)
{
    struct loader_job job;
    loader_job_init(&job, trainer);
    struct trainer_process plain, shimmed;
    start_trainer(&plain, &job, "plain", "ckpt-plain", "0", false, NULL);
    expect_success(&plain, "run without the library");
    char *data = data_setting(&job, "");
    char *environment[] = {data, SEED_SETTING, NULL};
    start_trainer(&shimmed, &job, "shimmed", "ckpt-shimmed", "0", true, environment);
    expect_success(&shimmed, "run under the library");
    struct epoch_orders plain_orders, orders;
    read_epoch_orders(plain.out_path, trainer->records, &plain_orders);
    read_epoch_orders(shimmed.out_path, trainer->records, &orders);
    unsigned *seen = calloc(trainer->records, sizeof *seen);
    uint64_t unread_ids[EPOCHS] = {0};
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        memset(seen, 0, trainer->records * sizeof *seen);
        for (size_t i = 0; i < orders.count[epoch]; i++)
            seen[orders.ids[epoch][i]]++;
        size_t wrong = 0;
        for (uint64_t id = 0; id < trainer->records; id++) {
            wrong += seen[id] != 1;
            if (seen[id] == 0)
                unread_ids[epoch] = id;
        }
        EXPECT(orders.count[epoch] == trainer->records - trainer->unread_per_pass &&
                   wrong == trainer->unread_per_pass,
               "epoch %u: %zu records consumed, %zu records not seen exactly once (%u unread "
               "expected)", epoch, orders.count[epoch], wrong, trainer->unread_per_pass);
        EXPECT(!same_order(&orders, epoch, &plain_orders, epoch),
               "epoch %u comes in the order of the run without the library", epoch);
        for (unsigned earlier = 0; earlier < epoch; earlier++)
            EXPECT(!same_order(&orders, epoch, &orders, earlier),
                   "epoch %u repeats the order of epoch %u", epoch, earlier);
    }
    /* a new pass each epoch leaves another record unread: one pass held
     * across epochs would leave the same one (its view's last) every time */
    if (trainer->unread_per_pass > 0)
        EXPECT(unread_ids[0] != unread_ids[1] || unread_ids[1] != unread_ids[2],
               "every epoch left record %llu unread: the epochs are one pass",
               (unsigned long long)unread_ids[0]);
    free(seen);
    epoch_orders_free(&plain_orders);
    epoch_orders_free(&orders);
    free(data);
    trainer_process_free(&plain);
    trainer_process_free(&shimmed);
    loader_job_finish(&job);
}

/* The step of the last checkpoint line a trainer printed (0: none). */
static uint64_t last_checkpoint_step(const char *out_path)
{
    struct id_log log;
    harness_read_record_stream(out_path, &log);
    uint64_t step = id_log_last_value(&log, ID_EVENT_CHECKPOINT);
    id_log_free(&log);
    return step;
}

/* Polls until the trainer has printed a checkpoint line of at least `step`,
 * or has ended. */
static void wait_for_checkpoint(const struct trainer_process *process, uint64_t step)
{
    for (int attempt = 0; attempt < 30000; attempt++) {
        if (last_checkpoint_step(process->out_path) >= step)
            return;
        siginfo_t information = {0};
        if (waitid(P_PID, (id_t)process->pid, &information, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            information.si_pid == process->pid)
            return;
        usleep(1000);
    }
}

#define MAX_RUNS 6

struct run_outputs {
    unsigned replicas;
    char *out_paths[2];
};

/* Starts run `run` of a kill sequence with `replicas` ranks as separate
 * processes, each resumed from rank 0's checkpoint of the previous run;
 * rank 0 is the slowest.  An MPI trainer's ranks are one mpirun -np
 * `replicas` and share one checkpoint, which rank 0 writes. */
static void start_kill_sequence_run(struct trainer_process processes[2],
                                    const struct loader_job *job, unsigned run,
                                    unsigned replicas, char *data)
{
    const struct loader_case *trainer = job->trainer;
    if (trainer->mpi) {
        char name[32];
        snprintf(name, sizeof name, "run%u", run);
        char *environment[] = {data, (char *)job->state_setting, (char *)job->save_setting,
                               "ADAPTDL_RESUME=continue", "ADAPTDL_SEED=9", NULL};
        start_mpi_trainer(processes, replicas, job, name, "ckpt", trainer->sleep_us, true,
                          environment);
        return;
    }
    char *checkpoint0 = harness_path_in(job->directory, "ckpt-rank0");
    char replicas_setting[64];
    snprintf(replicas_setting, sizeof replicas_setting, "ADAPTDL_NUM_REPLICAS=%u", replicas);
    for (unsigned rank = 0; rank < replicas; rank++) {
        char rank_setting[64], name[32], checkpoint[32], slower[32];
        snprintf(rank_setting, sizeof rank_setting, "ADAPTDL_REPLICA_RANK=%u", rank);
        snprintf(name, sizeof name, "run%u-rank%u", run, rank);
        snprintf(checkpoint, sizeof checkpoint, "ckpt-rank%u", rank);
        if (rank > 0) {
            char *own = harness_path_in(job->directory, checkpoint);
            /* every replica starts from rank 0's checkpoint, or none */
            if (!harness_copy_file(checkpoint0, own))
                unlink(own);
            free(own);
        }
        snprintf(slower, sizeof slower, "%ld", 2 * strtol(trainer->sleep_us, NULL, 10));
        char *environment[] = {data, (char *)job->state_setting, (char *)job->save_setting,
                               "ADAPTDL_RESUME=continue", "ADAPTDL_SEED=9",
                               replicas_setting, rank_setting, NULL};
        start_trainer(&processes[rank], job, name, checkpoint,
                      rank == 0 && replicas > 1 ? slower : trainer->sleep_us, true,
                      environment);
    }
    free(checkpoint0);
}

/* Kills a run of a kill sequence with SIGKILL, rank 0 first (once it has
 * consumed `target` records), then the other ranks once they have printed
 * rank 0's last checkpoint.  An MPI trainer's rank 0 is found among
 * mpirun's children; mpirun then ends the other ranks itself. */
static void kill_sequence_run(struct trainer_process processes[2], unsigned replicas,
                              size_t target)
{
    harness_wait_for_lines(processes[0].out_path, " record ", target, processes[0].pid, 60);
    if (processes[0].mpirun) {
        pid_t rank0 = harness_mpirun_rank_pid(processes[0].pid, 0);
        if (rank0 > 0)  /* 0: the job had ended already */
            kill(rank0, SIGKILL);
        return;
    }
    kill(processes[0].pid, SIGKILL);
    siginfo_t information;
    waitid(P_PID, (id_t)processes[0].pid, &information, WEXITED | WNOWAIT);
    uint64_t reached = last_checkpoint_step(processes[0].out_path);
    for (unsigned rank = 1; rank < replicas; rank++) {
        wait_for_checkpoint(&processes[rank], reached);
        kill(processes[rank].pid, SIGKILL);
    }
}

/* Runs the plan's runs in turn (start_kill_sequence_run), killing every
 * run but the last at a seeded number of consumed records
 * (kill_sequence_run). */
static void run_kill_sequence(const struct loader_job *job, const unsigned *plan, unsigned runs,
                              uint64_t seed, struct run_outputs *outputs)
{
    const struct loader_case *trainer = job->trainer;
    uint64_t random_state = seed;
    char *data = data_setting(job, "");
    for (unsigned run = 0; run < runs; run++) {
        unsigned replicas = plan[run];
        bool last = run + 1 == runs;
        outputs[run].replicas = replicas;
        struct trainer_process processes[2];
        start_kill_sequence_run(processes, job, run, replicas, data);
        if (!last) {
            size_t target =
                (trainer->records / 4 + harness_splitmix64(&random_state) % trainer->records) /
                replicas;
            kill_sequence_run(processes, replicas, target);
        }
        for (unsigned rank = 0; rank < replicas; rank++) {
            if (last)
                expect_success(&processes[rank], "the last run");
            else
                wait_for_trainer(&processes[rank], 60);
            outputs[run].out_paths[rank] = strdup(processes[rank].out_path);
            trainer_process_free(&processes[rank]);
        }
    }
    free(data);
}

/* (d) kill and resume: per epoch and record, the times it was consumed up
 * to the checkpoint the next run resumed from. */
static void check_kill_and_resume_runs(const struct loader_case *trainer, uint64_t seed,
                                       bool one_replica);

static void check_kill_and_resume(const struct loader_case *trainer, uint64_t seed)
{
    check_kill_and_resume_runs(trainer, seed, trainer->own_position);
}

/* A loader in its own order resumed by one replica each time: its
 * snapshots keep the set of records it consumed (adaptshim(7) "Readers in their own order"), so
 * the resumed passes repeat at most the lookahead, as an in-order loader's do. */
static void check_own_order_resumes_repeat_at_most_the_lookahead(
    const struct loader_case *trainer, uint64_t seed)
{
    check_kill_and_resume_runs(trainer, seed, true);
}

static void check_kill_and_resume_runs(const struct loader_case *trainer, uint64_t seed,
                                       bool one_replica)
{
    struct loader_job job;
    loader_job_init(&job, trainer);
    static const unsigned changing[] = {1, 2, 1, 1}, one[] = {1, 1, 1, 1};
    const unsigned *plan = one_replica ? one : changing;
    const unsigned runs = sizeof changing / sizeof changing[0];
    struct run_outputs outputs[MAX_RUNS];
    run_kill_sequence(&job, plan, runs, seed, outputs);

    /* a run killed before it said where it started changed nothing: the cut
     * of run i is where the first later run that did say so started */
    uint64_t cuts[MAX_RUNS], cut = UINT64_MAX;
    unsigned first_counted = 0;
    for (unsigned run = runs; run-- > 0;) {
        cuts[run] = cut;
        uint64_t step;
        if (harness_resume_point(outputs[run].out_paths[0], &step))
            cut = step;
    }
    /* a fresh start (killed before the first checkpoint) redoes everything */
    for (unsigned run = 0; run < runs; run++) {
        uint64_t step;
        if (harness_resume_point(outputs[run].out_paths[0], &step) && step == 0)
            first_counted = run;
    }
    const uint64_t records = trainer->records;
    unsigned *counts = calloc(EPOCHS * records, sizeof *counts);
    for (unsigned run = first_counted; run < runs; run++)
        for (unsigned rank = 0; rank < outputs[run].replicas; rank++) {
            struct id_log log;
            harness_read_record_stream(outputs[run].out_paths[rank], &log);
            record_stream_count_until(&log, cuts[run], counts, records, EPOCHS);
            id_log_free(&log);
        }

    /* AdaptDL's padding: a pass continued over K replicas repeats up to K-1 */
    unsigned allowance = 0;
    for (unsigned run = 0; run < runs; run++)
        allowance += plan[run] - 1 + trainer->lookahead;
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        size_t lost = 0, repeated = 0, total = 0;
        long first_lost = -1, first_repeated = -1;
        for (uint64_t id = 0; id < records; id++) {
            unsigned seen = counts[epoch * records + id];
            total += seen;
            if (seen == 0 && lost++ == 0)
                first_lost = (long)id;
            if (seen > 1) {
                repeated += seen - 1;
                if (first_repeated < 0)
                    first_repeated = (long)id;
            }
        }
        /* a loader that leaves records of each view unread leaves those of
         * the epoch's last view (one per replica) */
        EXPECT(lost <= 2 * trainer->unread_per_pass,
               "epoch %u: %zu records lost across the resumes (first: %ld), %u allowed", epoch,
               lost, first_lost, 2 * trainer->unread_per_pass);
        /* with several replicas, each sees only its own deliveries: the
         * snapshot binds their in-order prefix, and the rest comes again */
        if ((trainer->own_order && !one_replica) || trainer->loads_epoch_whole)
            cr_log_info("epoch %u: %zu records repeated (a loader in its own order, or one "
                        "that loads its epoch whole, may)", epoch, repeated);
        else
            EXPECT(total <= records + allowance,
                   "epoch %u: %zu records repeated across the resumes (first: %ld), at most %u "
                   "allowed",
                   epoch, repeated, first_repeated, allowance);
    }
    free(counts);
    for (unsigned run = 0; run < runs; run++)
        for (unsigned rank = 0; rank < outputs[run].replicas; rank++)
            free(outputs[run].out_paths[rank]);
    loader_job_finish(&job);
}

/* (e) a finished run continued: a run of one epoch ends (its last
 * checkpoint says "epoch 1", written after the epoch's loop), then a run of
 * EPOCHS epochs restores it.  Its epochs 1 and 2 must each be a whole new
 * pass: the snapshot bound to that last checkpoint must not show epoch 1 an
 * empty or short view. */
static void check_finished_run_continued(const struct loader_case *trainer)
{
    struct loader_job job;
    loader_job_init(&job, trainer);
    char *data = data_setting(&job, "");
    char *environment[] = {data, job.state_setting, job.save_setting,
                           "ADAPTDL_RESUME=continue", SEED_SETTING, NULL};
    struct trainer_process first, second;
    job.epochs = "1";
    start_trainer(&first, &job, "first", "ckpt", "0", true, environment);
    expect_success(&first, "the one-epoch run");
    job.epochs = NULL;
    start_trainer(&second, &job, "second", "ckpt", "0", true, environment);
    expect_success(&second, "the continued run");
    struct epoch_orders first_orders, orders;
    read_epoch_orders(first.out_path, trainer->records, &first_orders);
    read_epoch_orders(second.out_path, trainer->records, &orders);
    EXPECT(first_orders.count[0] == trainer->records - trainer->unread_per_pass,
           "the first run's epoch 0: %zu records", first_orders.count[0]);
    EXPECT(orders.count[0] == 0, "the continued run repeated epoch 0 (%zu records)",
           orders.count[0]);
    unsigned *seen = calloc(trainer->records, sizeof *seen);
    unsigned first_whole = 1;
    if (trainer->binds_complete_pass) {
        EXPECT(orders.count[1] == 0, "continued epoch 1 reads the complete pass: %zu records",
               orders.count[1]);
        first_whole = 2;
    }
    for (unsigned epoch = first_whole; epoch < EPOCHS; epoch++) {
        memset(seen, 0, trainer->records * sizeof *seen);
        for (size_t i = 0; i < orders.count[epoch]; i++)
            seen[orders.ids[epoch][i]]++;
        size_t wrong = 0;
        for (uint64_t id = 0; id < trainer->records; id++)
            wrong += seen[id] != 1;
        EXPECT(orders.count[epoch] == trainer->records - trainer->unread_per_pass &&
                   wrong == trainer->unread_per_pass,
               "continued epoch %u: %zu records consumed, %zu records not seen exactly once",
               epoch, orders.count[epoch], wrong);
    }
    EXPECT(!same_order(&orders, first_whole, &first_orders, 0),
           "epoch %u repeats the order of epoch 0", first_whole);
    free(seen);
    epoch_orders_free(&first_orders);
    epoch_orders_free(&orders);
    free(data);
    trainer_process_free(&first);
    trainer_process_free(&second);
    loader_job_finish(&job);
}

#define LOADER_TESTS(name, trainer, seed)                                           \
    Test(real_loaders, name##_transparent, .timeout = 60)                           \
    {                                                                               \
        check_transparency(&(trainer));                                             \
    }                                                                               \
    Test(real_loaders, name##_two_replicas_share_each_epoch, .timeout = 60)         \
    {                                                                               \
        check_sharding(&(trainer));                                                 \
    }                                                                               \
    Test(real_loaders, name##_new_permutation_each_epoch, .timeout = 60)            \
    {                                                                               \
        check_new_permutation(&(trainer));                                          \
    }                                                                               \
    Test(real_loaders, name##_kill_and_resume, .timeout = 120)                      \
    {                                                                               \
        check_kill_and_resume(&(trainer), seed);                                    \
    }                                                                               \
    Test(real_loaders, name##_finished_run_continued, .timeout = 60)                \
    {                                                                               \
        check_finished_run_continued(&(trainer));                                   \
    }

LOADER_TESTS(llmc, llmc_case, 101)
LOADER_TESTS(llmc_in_order, llmc_in_order_case, 109)
LOADER_TESTS(epoch_reader, epoch_reader_case, 110)
LOADER_TESTS(epoch_reader_own_seek, epoch_reader_own_seek_case, 111)
LOADER_TESTS(epoch_reader_own_fseek, epoch_reader_fseek_case, 114)
LOADER_TESTS(epoch_reader_own_pread_offset, epoch_reader_pread_case, 115)
LOADER_TESTS(ifstream, ifstream_case, 102)
LOADER_TESTS(python_text_lines, text_case, 103)
LOADER_TESTS(python_binary_80, binary80_case, 104)
LOADER_TESTS(python_binary_64, binary64_case, 105)
LOADER_TESTS(python_binary_kept_open, binary_kept_open_case, 106)
/* count_rewind_mpi reads each epoch twice (count, rewind, read) and then
 * trains from memory: both readings are the same pass (adaptshim(7) "Reading
 * twice before training"), and a kill inside an epoch repeats what was
 * trained of it (loads_epoch_whole). */
LOADER_TESTS(count_rewind_mpi, count_rewind_mpi_case, 116)

/* PyTorch: 0 workers without and with the DataLoader's own shuffling
 * (which a real user keeps), 2 workers likewise; kill-and-resume with the
 * lookahead each one needs. */
Test(real_loaders, torch_w0_transparent, .timeout = 60)
{
    check_transparency(&torch_w0_case);
}

Test(real_loaders, torch_w2_shuffled_transparent, .timeout = 60)
{
    check_transparency(&torch_w2_shuffled_case);
}

Test(real_loaders, torch_w0_shuffled_two_replicas_share_each_epoch, .timeout = 60)
{
    check_sharding(&torch_w0_shuffled_case);
}

Test(real_loaders, torch_w2_two_replicas_share_each_epoch, .timeout = 60)
{
    check_sharding(&torch_w2_case);
}

Test(real_loaders, torch_w0_new_permutation_each_epoch, .timeout = 60)
{
    check_new_permutation(&torch_w0_case);
}

Test(real_loaders, torch_w2_shuffled_new_permutation_each_epoch, .timeout = 60)
{
    check_new_permutation(&torch_w2_shuffled_case);
}

Test(real_loaders, torch_w0_kill_and_resume, .timeout = 120)
{
    check_kill_and_resume(&torch_w0_case, 106);
}

/* A checkpoint committed after an epoch's loop, before the next epoch
 * reopens the file, binds the covered pass whole: the workers that
 * delivered it have exited, so none of the lookahead= records can still be
 * in flight (dataset_view_records_in_flight). */
Test(real_loaders, torch_w2_kill_and_resume, .timeout = 120)
{
    check_kill_and_resume(&torch_w2_case, 107);
}

Test(real_loaders, torch_w2_shuffled_kill_and_resume, .timeout = 120)
{
    check_kill_and_resume(&torch_w2_shuffled_case, 108);
}

Test(real_loaders, torch_w0_finished_run_continued, .timeout = 60)
{
    check_finished_run_continued(&torch_w0_case);
}

Test(real_loaders, torch_w2_finished_run_continued, .timeout = 60)
{
    check_finished_run_continued(&torch_w2_case);
}

Test(real_loaders, torch_w2_shuffled_finished_run_continued, .timeout = 60)
{
    check_finished_run_continued(&torch_w2_shuffled_case);
}

/* The Dataset that takes its length from the header's count, built before
 * its checkpoint is loaded, under every check (adaptshim(7) "LOADER STYLES", loaders that take
 * the size once). */
LOADER_TESTS(torch_header_count, torch_header_count_case, 112)

Test(real_loaders, torch_header_count_whole_pass_kill_and_resume, .timeout = 120)
{
    check_kill_and_resume(&torch_header_count_whole_pass_case, 113);
}

Test(real_loaders, torch_header_count_whole_pass_finished_run_continued, .timeout = 60)
{
    check_finished_run_continued(&torch_header_count_whole_pass_case);
}

/* adaptshim(7) "LOADER STYLES", trainers that shard themselves: the standard DDP recipe's
 * DistributedSampler over WORLD_SIZE and RANK, on top of the shim's own
 * sharding (taken from the same variables), reads half of each replica's
 * view per epoch.  Each replica says so in one warn line naming shard=0;
 * the same trainer without its sampler says nothing. */
static const struct loader_case torch_shard_itself_case = {
    TORCH_CASE, .options = {"--workers", "0", "--shuffle", "1", "--shard-itself", NULL}};

static void run_two_torchrun_ranks(const struct loader_case *trainer, size_t expected_lines)
{
    struct loader_job job;
    loader_job_init(&job, trainer);
    job.epochs = "2";
    char *data = data_setting(&job, "");
    struct trainer_process ranks[2];
    char *shared[] = {data, SEED_SETTING, "WORLD_SIZE=2", NULL};
    start_two_ranks(ranks, &job, shared, "RANK=%u");
    for (unsigned rank = 0; rank < 2; rank++) {
        expect_success(&ranks[rank], rank == 0 ? "rank 0" : "rank 1");
        char *err = harness_read_output(ranks[rank].err_path);
        size_t lines = harness_count_occurrences(err, "shard the data itself");
        EXPECT(lines == expected_lines, "rank %u: %zu lines about its own sharding, %zu "
               "expected: %s", rank, lines, expected_lines, err);
        if (expected_lines > 0)
            EXPECT(strstr(err, "shard=0") != NULL && strstr(err, job.data) != NULL,
                   "rank %u: the line names the file and shard=0: %s", rank, err);
        free(err);
        trainer_process_free(&ranks[rank]);
    }
    free(data);
    loader_job_finish(&job);
}

Test(real_loaders, torch_distributed_sampler_on_a_sharded_view_is_named_once, .timeout = 90)
{
    run_two_torchrun_ranks(&torch_shard_itself_case, 1);
}

Test(real_loaders, torch_without_its_own_sampler_is_not_named, .timeout = 90)
{
    run_two_torchrun_ranks(&torch_w0_shuffled_case, 0);
}

/* adaptshim(7) "Own positioning", no silent loss: the own-seek trainer killed with one replica
 * and resumed with two seeks by its count of records done, past records
 * of its new view that nothing delivered; reading to the end then ends the
 * pass with them unread, and each replica says so in one warn line. */
Test(real_loaders, a_seek_past_records_then_the_end_names_the_lost_records, .timeout = 90)
{
    struct loader_job job;
    loader_job_init(&job, &epoch_reader_own_seek_case);
    job.epochs = "1";
    char *data = data_setting(&job, "");
    char *first_environment[] = {data, job.state_setting, job.save_setting, SEED_SETTING, NULL};
    struct trainer_process first;
    start_trainer(&first, &job, "first", "ckpt-rank0", "3000", true, first_environment);
    harness_wait_for_lines(first.out_path, "checkpoint step", 6, first.pid, 60);
    kill(first.pid, SIGKILL);
    harness_wait(first.pid, 30);
    trainer_process_free(&first);
    char *checkpoint0 = harness_path_in(job.directory, "ckpt-rank0");
    char *checkpoint1 = harness_path_in(job.directory, "ckpt-rank1");
    cr_assert(harness_copy_file(checkpoint0, checkpoint1));
    struct trainer_process ranks[2];
    char *shared[] = {data, job.state_setting, job.save_setting, SEED_SETTING,
                      "ADAPTDL_NUM_REPLICAS=2", NULL};
    start_two_ranks(ranks, &job, shared, "ADAPTDL_REPLICA_RANK=%u");
    for (unsigned rank = 0; rank < 2; rank++) {
        expect_success(&ranks[rank], rank == 0 ? "rank 0" : "rank 1");
        char *err = harness_read_output(ranks[rank].err_path);
        EXPECT(harness_count_occurrences(err, "never read") == 1 && strstr(err, job.data),
               "rank %u: one line names the file and the records never read: %s", rank, err);
        free(err);
        trainer_process_free(&ranks[rank]);
    }
    free(checkpoint0);
    free(checkpoint1);
    free(data);
    loader_job_finish(&job);
}

/* A stop signal to a trainer without MPI that reads only with preadv at
 * its own offsets ends it at its next read, through exit(3): 143, its
 * atexit handlers run (before, preadv skipped the hook pread runs, and the
 * trainer ended at ADAPTDL_STOP_SECONDS without them). */
Test(real_loaders, a_preadv_reader_stops_at_its_next_read_with_its_exit_handlers,
     .timeout = 90)
{
    static const struct loader_case preadv_case = {
        .program = "trainers/epoch_reader", RECORD_CASE(6), .options = {"--io", "preadv", NULL}};
    struct loader_job job;
    loader_job_init(&job, &preadv_case);
    job.epochs = "1000";
    char *data = data_setting(&job, "");
    char *environment[] = {data, job.state_setting, job.save_setting, SEED_SETTING,
                           "ADAPTDL_STOP_SECONDS=60", NULL};
    struct trainer_process trainer;
    start_trainer(&trainer, &job, "trainer", "ckpt", "2000", true, environment);
    cr_assert(harness_wait_for_lines(trainer.out_path, " record ", 40, trainer.pid, 60),
              "the trainer reads");
    kill(trainer.pid, SIGTERM);
    /* the deadline is 60 s away: a trainer that waits for it is still
     * running when this wait gives up */
    int status = harness_wait(trainer.pid, 40);
    char *out = harness_read_output(trainer.out_path);
    EXPECT(status == 143, "status %d: %s", status, harness_describe_status(status));
    EXPECT(strstr(out, "exit handlers ran") != NULL, "its atexit handlers ran: %.300s",
           out + (strlen(out) > 300 ? strlen(out) - 300 : 0));
    free(out);
    free(data);
    trainer_process_free(&trainer);
    loader_job_finish(&job);
}

/* adaptshim(7) "Readers in their own order", loaders that visit their own order: resumed by one
 * replica, such a loader repeats at most its lookahead (before the delivered set,
 * llm.c repeated every batch its interrupted epoch had read beyond the
 * first one not read, a shuffled DataLoader most of its epoch). */
Test(real_loaders, llmc_own_order_resumes_repeat_at_most_the_lookahead, .timeout = 120)
{
    check_own_order_resumes_repeat_at_most_the_lookahead(&llmc_case, 121);
}

Test(real_loaders, torch_w0_shuffled_own_order_resumes_repeat_at_most_the_lookahead,
     .timeout = 120)
{
    check_own_order_resumes_repeat_at_most_the_lookahead(&torch_w0_shuffled_case, 122);
}

Test(real_loaders, torch_w2_shuffled_own_order_resumes_repeat_at_most_the_lookahead,
     .timeout = 120)
{
    check_own_order_resumes_repeat_at_most_the_lookahead(&torch_w2_shuffled_case, 123);
}
