/* test_config.c - the ADAPTDL_* environment contract (adaptshim(7)
 * "ENVIRONMENT", "ADAPTDL_DATA", "BATCH-SIZE CONTROL").
 *
 * Every test builds its own envp array, so nothing depends on the
 * environment the test runner itself was started with.  Malformed values
 * are checked for the promise of adaptshim(7) "ENVIRONMENT": one line, naming the variable,
 * quoting the value and saying what is accepted, and a config left zeroed
 * rather than half filled. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_text.h"

/* envp from a list of "NAME=value" strings: ENV("A=1", "B=2"). */
#define ENV(...) ((char *const[]){__VA_ARGS__, NULL})
#define EMPTY_ENV ((char *const[]){NULL})

static struct adaptdl_config config;
static char error[1024];

static void free_config(void)
{
    config_free(&config);
}

TestSuite(config, .fini = free_config);

/* Parses envp into the global config; fills it with garbage first so that a
 * field config_parse forgets to set shows up. */
static int parse(char *const *envp)
{
    memset(&config, 0xa5, sizeof config);
    memset(error, 'x', sizeof error);
    error[sizeof error - 1] = '\0';
    return config_parse(&config, envp, error, sizeof error);
}

static void expect_ok(char *const *envp)
{
    int result = parse(envp);
    cr_assert_eq(result, 0, "config_parse failed: %s", error);
    cr_assert_str_empty(error);
}

static bool config_is_zeroed(void)
{
    static const struct adaptdl_config zero;
    return memcmp(&config, &zero, sizeof config) == 0;
}

/* Asserts the failure contract, and that the message names the variable
 * and contains fragment (NULL: no particular fragment). */
static void expect_error(char *const *envp, const char *variable, const char *fragment)
{
    int result = parse(envp);
    cr_assert_eq(result, -1, "config_parse accepted a malformed value");
    cr_assert(config_is_zeroed(), "failed parse left a half-filled config");
    cr_assert_not_null(strstr(error, variable), "message does not name %s: %s", variable, error);
    cr_assert_not_null(strstr(error, "accepted"), "message says nothing accepted: %s", error);
    cr_assert_null(strchr(error, '\n'), "message is not one line: %s", error);
    if (fragment != NULL)
        cr_assert_not_null(strstr(error, fragment), "message lacks \"%s\": %s", fragment, error);
}

/* Data entry helpers, through the full config_parse. */
static const struct data_entry *data_entry_at(size_t index)
{
    cr_assert_lt(index, config.data_count);
    return &config.data[index];
}

/* ---- defaults and lookups ---------------------------------------------- */

Test(config, defaults_without_any_variable)
{
    expect_ok(EMPTY_ENV);
    cr_assert_null(config.data);
    cr_assert_eq(config.data_count, 0);
    cr_assert_null(config.checkpoint_path);
    cr_assert_null(config.save_glob);
    cr_assert_eq(config.resume, RESUME_CONTINUE);
    cr_assert_eq(config.seed, 0);
    cr_assert_eq(config.num_replicas, 1);
    cr_assert_eq(config.replica_rank, 0);
    cr_assert_eq(config.num_nodes, 1);
    cr_assert_not(config.layout_from_mpi);
    cr_assert_eq(config.num_restarts, 0);
    cr_assert_eq(config.log_level, LOG_LEVEL_WARN);
    cr_assert_null(config.log_file);
    cr_assert_not(config.disabled);
    cr_assert_null(config.target);
    cr_assert_eq(config.grad_min, 1024);
    cr_assert_float_eq(config.drain_seconds, 0.0, 1e-12);
    cr_assert_float_eq(config.stop_seconds, 10.0, 1e-12);
    cr_assert_null(config.metrics_file);
    cr_assert_null(config.hints_file);
    cr_assert_eq(config.batch_size, 0);
    cr_assert_eq(config.max_batch_size, 0);
    cr_assert_eq(config.local_bsz_min, 0);
    cr_assert_eq(config.local_bsz_max, 0);
    cr_assert_eq(config.bsz_arg.kind, INJECT_NONE);
    cr_assert_null(config.bsz_arg.name);
    cr_assert_eq(config.lr_arg.kind, INJECT_NONE);
    cr_assert_eq(config.lr_rule, LR_RULE_NONE);
    cr_assert_float_eq(config.speedup_threshold, 1.05, 1e-12);
    cr_assert_float_eq(config.decide_seconds, 30.0, 1e-12);
    cr_assert_float_eq(config.payback_seconds, 600.0, 1e-12);
}

Test(config, null_envp_gives_defaults)
{
    expect_ok(NULL);
    cr_assert_eq(config.num_replicas, 1);
    cr_assert_eq(config.log_level, LOG_LEVEL_WARN);
}

Test(config, unrelated_variables_are_ignored)
{
    expect_ok(ENV("PATH=/bin", "HOME=/root", "ADAPTDL=1", "XADAPTDL_LOG=bogus"));
    cr_assert_eq(config.log_level, LOG_LEVEL_WARN);
}

Test(config, lookup_matches_whole_names_and_first_occurrence)
{
    char *const *envp = ENV("ADAPTDL_SEEDS=9", "ADAPTDL_SEED=1", "ADAPTDL_SEED=2", "EMPTY=");
    cr_assert_str_eq(config_lookup(envp, "ADAPTDL_SEED"), "1");
    cr_assert_str_eq(config_lookup(envp, "EMPTY"), "");
    cr_assert_null(config_lookup(envp, "ADAPTDL_SEE"));
    cr_assert_null(config_lookup(envp, "MISSING"));
    cr_assert_null(config_lookup(NULL, "ADAPTDL_SEED"));
}

Test(config, any_adaptdl_variable)
{
    cr_assert(config_any_adaptdl_variable(ENV("PATH=/bin", "ADAPTDL_LOG=info")));
    cr_assert(config_any_adaptdl_variable(ENV("ADAPTDL_WHATEVER=")));
    cr_assert_not(config_any_adaptdl_variable(ENV("PATH=/bin", "ADAPTDL=1", "MY_ADAPTDL_X=1")));
    cr_assert_not(config_any_adaptdl_variable(EMPTY_ENV));
    cr_assert_not(config_any_adaptdl_variable(NULL));
}

Test(config, log_level_names)
{
    cr_assert_str_eq(log_level_name(LOG_LEVEL_ERROR), "error");
    cr_assert_str_eq(log_level_name(LOG_LEVEL_WARN), "warn");
    cr_assert_str_eq(log_level_name(LOG_LEVEL_INFO), "info");
    cr_assert_str_eq(log_level_name(LOG_LEVEL_DEBUG), "debug");
    cr_assert_str_eq(log_level_name(LOG_LEVEL_TRACE), "trace");
}

Test(config, config_free_is_idempotent)
{
    expect_ok(ENV("ADAPTDL_DATA=a:record=4", "ADAPTDL_SAVE=ckpt*", "ADAPTDL_BSZ_ARG=argv:-b"));
    config_free(&config);
    cr_assert(config_is_zeroed());
    config_free(&config);
    config_free(NULL);
}

/* ---- simple variables -------------------------------------------------- */

Test(config, every_log_level)
{
    static const char *const levels[] = {"error", "warn", "info", "debug", "trace"};
    for (size_t i = 0; i < 5; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "ADAPTDL_LOG=%s", levels[i]);
        expect_ok(ENV(variable));
        cr_assert_eq(config.log_level, (enum log_level)i);
        config_free(&config);
    }
}

Test(config, unknown_log_level_message)
{
    expect_error(ENV("ADAPTDL_LOG=verbose"), "ADAPTDL_LOG", NULL);
    cr_assert_str_eq(error, "ADAPTDL_LOG: unknown level \"verbose\"; accepted: error, warn, "
                            "info, debug, trace");
}

Test(config, log_level_is_case_sensitive)
{
    expect_error(ENV("ADAPTDL_LOG=DEBUG"), "ADAPTDL_LOG", "\"DEBUG\"");
}

Test(config, resume_modes)
{
    expect_ok(ENV("ADAPTDL_RESUME=continue"));
    cr_assert_eq(config.resume, RESUME_CONTINUE);
    config_free(&config);
    expect_ok(ENV("ADAPTDL_RESUME=replay"));
    cr_assert_eq(config.resume, RESUME_REPLAY);
}

Test(config, unknown_resume_mode)
{
    expect_error(ENV("ADAPTDL_RESUME=restart"), "ADAPTDL_RESUME", "replay, continue");
}

Test(config, string_variables_are_copied)
{
    char *const *envp = ENV("ADAPTDL_CHECKPOINT_PATH=/ckpt", "ADAPTDL_SAVE=model-*.pt",
                            "ADAPTDL_LOG_FILE=/tmp/log.%r.%p", "ADAPTDL_TARGET=train*",
                            "ADAPTDL_METRICS_FILE=/tmp/m.%r.jsonl", "ADAPTDL_HINTS_FILE=/tmp/h");
    expect_ok(envp);
    cr_assert_str_eq(config.checkpoint_path, "/ckpt");
    cr_assert_str_eq(config.save_glob, "model-*.pt");
    cr_assert_str_eq(config.log_file, "/tmp/log.%r.%p");
    cr_assert_str_eq(config.target, "train*");
    cr_assert_str_eq(config.metrics_file, "/tmp/m.%r.jsonl");
    cr_assert_str_eq(config.hints_file, "/tmp/h");
    /* Copies, not pointers into envp. */
    cr_assert_neq(config.checkpoint_path, config_lookup(envp, "ADAPTDL_CHECKPOINT_PATH"));
}

Test(config, empty_string_variables_are_errors)
{
    static const char *const names[] = {"ADAPTDL_CHECKPOINT_PATH", "ADAPTDL_SAVE",
                                        "ADAPTDL_LOG_FILE",        "ADAPTDL_TARGET",
                                        "ADAPTDL_METRICS_FILE",    "ADAPTDL_HINTS_FILE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "%s=", names[i]);
        expect_error(ENV(variable), names[i], "empty value");
    }
}

Test(config, seed_takes_any_uint64)
{
    expect_ok(ENV("ADAPTDL_SEED=18446744073709551615"));
    cr_assert_eq(config.seed, UINT64_MAX);
    config_free(&config);
    expect_ok(ENV("ADAPTDL_SEED=0042"));
    cr_assert_eq(config.seed, 42);
}

Test(config, seed_overflow)
{
    expect_error(ENV("ADAPTDL_SEED=18446744073709551616"), "ADAPTDL_SEED", "out of range");
}

Test(config, numbers_reject_signs)
{
    expect_error(ENV("ADAPTDL_SEED=-1"), "ADAPTDL_SEED", "\"-1\"");
    expect_error(ENV("ADAPTDL_SEED=+1"), "ADAPTDL_SEED", "\"+1\"");
}

Test(config, numbers_reject_garbage_blanks_and_empty)
{
    expect_error(ENV("ADAPTDL_SEED=12abc"), "ADAPTDL_SEED", "not an unsigned decimal integer");
    expect_error(ENV("ADAPTDL_SEED= 12"), "ADAPTDL_SEED", NULL);
    expect_error(ENV("ADAPTDL_SEED=12 "), "ADAPTDL_SEED", NULL);
    expect_error(ENV("ADAPTDL_SEED=0x10"), "ADAPTDL_SEED", NULL);
    expect_error(ENV("ADAPTDL_SEED="), "ADAPTDL_SEED", "\"\"");
}

Test(config, disable_flag)
{
    expect_ok(ENV("ADAPTDL_DISABLE=0"));
    cr_assert_not(config.disabled);
    config_free(&config);
    expect_ok(ENV("ADAPTDL_DISABLE=1"));
    cr_assert(config.disabled);
}

Test(config, disable_skips_every_other_variable)
{
    expect_ok(ENV("ADAPTDL_DISABLE=1", "ADAPTDL_LOG=verbose", "ADAPTDL_DATA=;;",
                  "ADAPTDL_REPLICA_RANK=9"));
    cr_assert(config.disabled);
    cr_assert_eq(config.log_level, LOG_LEVEL_WARN);
    cr_assert_null(config.data);
}

Test(config, bad_booleans)
{
    expect_error(ENV("ADAPTDL_DISABLE=yes"), "ADAPTDL_DISABLE", "\"yes\"");
    expect_error(ENV("ADAPTDL_DISABLE=2"), "ADAPTDL_DISABLE", "0, 1");
    expect_error(ENV("ADAPTDL_DISABLE="), "ADAPTDL_DISABLE", NULL);
}

Test(config, grad_min_restarts_and_nodes)
{
    expect_ok(ENV("ADAPTDL_GRAD_MIN=0", "ADAPTDL_NUM_RESTARTS=7", "ADAPTDL_NUM_NODES=3",
                  "ADAPTDL_NUM_REPLICAS=6"));
    cr_assert_eq(config.grad_min, 0);
    cr_assert_eq(config.num_restarts, 7);
    cr_assert_eq(config.num_nodes, 3);
}

Test(config, bad_integers_in_other_variables)
{
    expect_error(ENV("ADAPTDL_NUM_NODES=0"), "ADAPTDL_NUM_NODES", "out of range");
    expect_error(ENV("ADAPTDL_NUM_RESTARTS=4294967296"), "ADAPTDL_NUM_RESTARTS", "out of range");
    expect_error(ENV("ADAPTDL_NUM_RESTARTS=-1"), "ADAPTDL_NUM_RESTARTS", NULL);
    expect_error(ENV("ADAPTDL_GRAD_MIN=1k"), "ADAPTDL_GRAD_MIN", NULL);
}

/* ---- floating values --------------------------------------------------- */

Test(config, floating_values)
{
    expect_ok(ENV("ADAPTDL_DRAIN=2.5", "ADAPTDL_SPEEDUP=1", "ADAPTDL_DECIDE_SECONDS=0.25",
                  "ADAPTDL_PAYBACK_SECONDS=1e3", "ADAPTDL_STOP_SECONDS=0.5"));
    cr_assert_float_eq(config.drain_seconds, 2.5, 1e-12);
    cr_assert_float_eq(config.stop_seconds, 0.5, 1e-12);
    cr_assert_float_eq(config.speedup_threshold, 1.0, 1e-12);
    cr_assert_float_eq(config.decide_seconds, 0.25, 1e-12);
    cr_assert_float_eq(config.payback_seconds, 1000.0, 1e-9);
}

Test(config, floating_ranges)
{
    expect_error(ENV("ADAPTDL_DRAIN=-1"), "ADAPTDL_DRAIN", "out of range");
    expect_error(ENV("ADAPTDL_STOP_SECONDS=-0.5"), "ADAPTDL_STOP_SECONDS", ">= 0");
    expect_error(ENV("ADAPTDL_SPEEDUP=0.99"), "ADAPTDL_SPEEDUP", ">= 1");
    expect_error(ENV("ADAPTDL_DECIDE_SECONDS=0"), "ADAPTDL_DECIDE_SECONDS", "> 0");
    expect_error(ENV("ADAPTDL_PAYBACK_SECONDS=-5"), "ADAPTDL_PAYBACK_SECONDS", "> 0");
}

Test(config, non_finite_floats)
{
    static const char *const names[] = {"ADAPTDL_DRAIN", "ADAPTDL_SPEEDUP",
                                        "ADAPTDL_DECIDE_SECONDS", "ADAPTDL_PAYBACK_SECONDS",
                                        "ADAPTDL_STOP_SECONDS"};
    static const char *const values[] = {"inf", "-inf", "nan", "infinity", "1e999"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        for (size_t j = 0; j < 5; j++) {
            char variable[64];
            snprintf(variable, sizeof variable, "%s=%s", names[i], values[j]);
            expect_error(ENV(variable), names[i], "not a finite number");
        }
    }
}

Test(config, floats_reject_garbage)
{
    expect_error(ENV("ADAPTDL_DECIDE_SECONDS=30s"), "ADAPTDL_DECIDE_SECONDS", "\"30s\"");
    expect_error(ENV("ADAPTDL_DECIDE_SECONDS= 30"), "ADAPTDL_DECIDE_SECONDS", NULL);
    expect_error(ENV("ADAPTDL_SPEEDUP="), "ADAPTDL_SPEEDUP", NULL);
}

/* ---- replica layout ---------------------------------------------------- */

Test(config, layout_from_adaptdl_variables)
{
    expect_ok(ENV("ADAPTDL_NUM_REPLICAS=4", "ADAPTDL_REPLICA_RANK=3", "ADAPTDL_NUM_NODES=2"));
    cr_assert_eq(config.num_replicas, 4);
    cr_assert_eq(config.replica_rank, 3);
    cr_assert_eq(config.num_nodes, 2);
    cr_assert_not(config.layout_from_mpi);
}

Test(config, layout_from_open_mpi)
{
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=5"));
    cr_assert_eq(config.num_replicas, 8);
    cr_assert_eq(config.replica_rank, 5);
    cr_assert(config.layout_from_mpi);
}

Test(config, layout_from_pmi)
{
    expect_ok(ENV("PMI_SIZE=3", "PMI_RANK=2"));
    cr_assert_eq(config.num_replicas, 3);
    cr_assert_eq(config.replica_rank, 2);
    cr_assert(config.layout_from_mpi);
}

Test(config, open_mpi_takes_precedence_over_pmi)
{
    expect_ok(ENV("PMI_SIZE=3", "PMI_RANK=2", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=7"));
    cr_assert_eq(config.num_replicas, 8);
    cr_assert_eq(config.replica_rank, 7);
}

Test(config, adaptdl_variables_take_precedence_over_mpi)
{
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=7", "ADAPTDL_NUM_REPLICAS=16",
                  "ADAPTDL_REPLICA_RANK=9"));
    cr_assert_eq(config.num_replicas, 16);
    cr_assert_eq(config.replica_rank, 9);
    cr_assert_not(config.layout_from_mpi);
}

Test(config, replica_count_from_wrapper_rank_from_mpirun)
{
    /* The wrapper exports one ADAPTDL_NUM_REPLICAS; mpirun gives ranks. */
    expect_ok(ENV("ADAPTDL_NUM_REPLICAS=4", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2"));
    cr_assert_eq(config.num_replicas, 4);
    cr_assert_eq(config.replica_rank, 2);
    cr_assert(config.layout_from_mpi);
}

/* What `srun --mpi=pmix -n 4` gives each task (adaptshim(7) "ENVIRONMENT"): the task's rank
 * and the step's task and node counts; before, every task took itself for
 * rank 0 of 1. */
Test(config, layout_from_srun_with_pmix)
{
    expect_ok(ENV("SLURM_JOB_ID=7", "SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_STEP_NUM_TASKS=4",
                  "SLURM_PROCID=3", "PMIX_RANK=3", "SLURM_NNODES=2", "SLURM_STEP_NUM_NODES=2"));
    cr_assert_eq(config.num_replicas, 4);
    cr_assert_eq(config.replica_rank, 3);
    cr_assert_eq(config.num_nodes, 2);
    cr_assert(config.layout_from_mpi, "PMIx started it: MPI");
    cr_assert(config.replica_count_given);
    cr_assert(config.replica_rank_given);
}

Test(config, layout_from_srun_without_pmix)
{
    expect_ok(ENV("SLURM_STEP_ID=1", "SLURM_NTASKS=3", "SLURM_PROCID=2", "SLURM_NNODES=1"));
    cr_assert_eq(config.num_replicas, 3);
    cr_assert_eq(config.replica_rank, 2);
    cr_assert_eq(config.num_nodes, 1);
    cr_assert_not(config.layout_from_mpi, "srun --mpi=none starts plain processes");
}

/* `srun -n 2` inside an allocation of 4 tasks: the step's 2 tasks. */
Test(config, srun_step_task_count_before_the_job_task_count)
{
    expect_ok(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_STEP_NUM_TASKS=2", "SLURM_PROCID=1",
                  "SLURM_NNODES=2", "SLURM_STEP_NUM_NODES=1"));
    cr_assert_eq(config.num_replicas, 2);
    cr_assert_eq(config.replica_rank, 1);
    cr_assert_eq(config.num_nodes, 1);
}

/* A batch script's environment has SLURM_NTASKS (the job's) and
 * SLURM_PROCID=0 too, and every process the script starts inherits them:
 * without an srun step they describe no replica. */
Test(config, slurm_batch_script_variables_are_not_a_layout)
{
    expect_ok(ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4", "SLURM_PROCID=0", "SLURM_NNODES=2"));
    cr_assert_eq(config.num_replicas, 1);
    cr_assert_eq(config.replica_rank, 0);
    cr_assert_eq(config.num_nodes, 1);
    cr_assert_not(config.replica_count_given);
    config_free(&config);
    /* mpirun's ranks in a batch script: Open MPI's numbers */
    expect_ok(ENV("SLURM_JOB_ID=7", "SLURM_NTASKS=4", "SLURM_PROCID=0", "SLURM_NNODES=2",
                  "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2"));
    cr_assert_eq(config.num_replicas, 4);
    cr_assert_eq(config.replica_rank, 2);
    cr_assert_eq(config.num_nodes, 1, "mpirun's ranks take their nodes from the wrapper");
}

/* mpirun or torchrun run by an srun task: their variables describe the
 * processes they start, not the task's; and the wrapper's
 * ADAPTDL_NUM_REPLICAS=1 for a lone trainer keeps srun's nodes out. */
Test(config, launchers_inside_an_srun_task_describe_their_processes)
{
    expect_ok(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=1", "SLURM_STEP_NUM_NODES=2",
                  "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=5"));
    cr_assert_eq(config.num_replicas, 8);
    cr_assert_eq(config.replica_rank, 5);
    cr_assert_eq(config.num_nodes, 1);
    config_free(&config);
    expect_ok(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=1", "SLURM_STEP_NUM_NODES=2",
                  "WORLD_SIZE=8", "RANK=6", "LOCAL_WORLD_SIZE=4"));
    cr_assert_eq(config.num_replicas, 8);
    cr_assert_eq(config.replica_rank, 6);
    cr_assert_eq(config.num_nodes, 2, "torchrun's WORLD_SIZE / LOCAL_WORLD_SIZE");
    config_free(&config);
    expect_ok(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=1", "SLURM_STEP_NUM_NODES=2",
                  "ADAPTDL_NUM_REPLICAS=1", "ADAPTDL_REPLICA_RANK=0"));
    cr_assert_eq(config.num_replicas, 1);
    cr_assert_eq(config.num_nodes, 1);
}

Test(config, bad_slurm_layout_variables_are_named)
{
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=two", "SLURM_PROCID=0"), "SLURM_NTASKS",
                 "\"two\"");
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=2"), "SLURM_PROCID",
                 "SLURM_NTASKS \"2\"");
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=0",
                     "SLURM_STEP_NUM_NODES=0"),
                 "SLURM_STEP_NUM_NODES", "out of range");
    expect_error(ENV("SLURM_STEP_ID=0", "SLURM_NTASKS=2", "SLURM_PROCID=0",
                     "SLURM_STEP_NUM_NODES=3"),
                 "SLURM_STEP_NUM_NODES", "above SLURM_NTASKS \"2\"");
}

/* Whether a variable gave each number: one none gave is a default that
 * MPI's world replaces for the cooperative API once MPI is up. */
Test(config, the_layout_says_which_numbers_a_variable_gave)
{
    expect_ok(EMPTY_ENV);
    cr_expect_not(config.replica_count_given);
    cr_expect_not(config.replica_rank_given);
    config_free(&config);
    expect_ok(ENV("ADAPTDL_NUM_REPLICAS=2"));
    cr_expect(config.replica_count_given);
    cr_expect_not(config.replica_rank_given, "rank 0 is the default");
    config_free(&config);
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1"));
    cr_expect(config.replica_count_given);
    cr_expect(config.replica_rank_given);
    config_free(&config);
    expect_ok(ENV("WORLD_SIZE=4", "RANK=3"));
    cr_expect(config.replica_count_given, "torchrun's variables give them too");
    cr_expect(config.replica_rank_given);
}

/* ---- torchrun's variables ---------------------------------------------- */

Test(config, layout_from_torchrun_alone)
{
    expect_ok(ENV("WORLD_SIZE=4", "RANK=3", "LOCAL_WORLD_SIZE=4", "LOCAL_RANK=3"));
    cr_assert_eq(config.num_replicas, 4);
    cr_assert_eq(config.replica_rank, 3);
    cr_assert_eq(config.num_nodes, 1);
    /* torchrun starts plain processes: nothing says MPI is there */
    cr_assert_not(config.layout_from_mpi);
}

Test(config, open_mpi_takes_precedence_over_torchrun)
{
    expect_ok(ENV("WORLD_SIZE=4", "RANK=3", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_RANK=5"));
    cr_assert_eq(config.num_replicas, 8);
    cr_assert_eq(config.replica_rank, 5);
    cr_assert(config.layout_from_mpi);
}

/* Open MPI's launcher says how many nodes it mapped the ranks to: the hosts
 * in use, unless ADAPTDL_NUM_NODES says otherwise; a value that cannot be
 * Open MPI's (not a count, more nodes than ranks) is passed over. */
Test(config, node_count_from_open_mpi_mapping)
{
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3",
                  "OMPI_MCA_orte_num_nodes=2"));
    cr_assert_eq(config.num_nodes, 2);
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3",
                  "OMPI_MCA_orte_num_nodes=2", "ADAPTDL_NUM_NODES=1"));
    cr_assert_eq(config.num_nodes, 1, "ADAPTDL_NUM_NODES first");
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3",
                  "OMPI_MCA_orte_num_nodes=2", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=1"));
    cr_assert_eq(config.num_nodes, 2, "Open MPI's before torchrun's");
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1",
                  "OMPI_MCA_orte_num_nodes=3"));
    cr_assert_eq(config.num_nodes, 1, "more nodes than ranks is not a mapping");
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1",
                  "OMPI_MCA_orte_num_nodes=two"));
    cr_assert_eq(config.num_nodes, 1);
    expect_ok(ENV("OMPI_MCA_orte_num_nodes=2"));
    cr_assert_eq(config.num_nodes, 1, "not an Open MPI rank");
}

Test(config, pmi_takes_precedence_over_torchrun)
{
    expect_ok(ENV("WORLD_SIZE=4", "RANK=3", "PMI_SIZE=6", "PMI_RANK=1"));
    cr_assert_eq(config.num_replicas, 6);
    cr_assert_eq(config.replica_rank, 1);
    cr_assert(config.layout_from_mpi);
}

Test(config, adaptdl_variables_take_precedence_over_mpi_and_torchrun)
{
    expect_ok(ENV("WORLD_SIZE=4", "RANK=3", "LOCAL_WORLD_SIZE=2", "OMPI_COMM_WORLD_SIZE=8",
                  "OMPI_COMM_WORLD_RANK=7", "PMI_SIZE=6", "PMI_RANK=5",
                  "ADAPTDL_NUM_REPLICAS=16", "ADAPTDL_REPLICA_RANK=9", "ADAPTDL_NUM_NODES=5"));
    cr_assert_eq(config.num_replicas, 16);
    cr_assert_eq(config.replica_rank, 9);
    cr_assert_eq(config.num_nodes, 5);
    cr_assert_not(config.layout_from_mpi);
}

Test(config, torchrun_rank_without_world_size_checks_against_default_count)
{
    expect_error(ENV("RANK=1"), "RANK", "ADAPTDL_NUM_REPLICAS unset");
    expect_error(ENV("WORLD_SIZE=2", "RANK=2"), "RANK", "WORLD_SIZE \"2\"");
}

Test(config, node_count_from_torchrun_local_world_size)
{
    expect_ok(ENV("WORLD_SIZE=8", "RANK=0", "LOCAL_WORLD_SIZE=2"));
    cr_assert_eq(config.num_nodes, 4);
    expect_ok(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=8"));
    cr_assert_eq(config.num_nodes, 1);
    /* either variable alone says nothing about nodes */
    expect_ok(ENV("WORLD_SIZE=8", "RANK=0"));
    cr_assert_eq(config.num_nodes, 1);
    expect_ok(ENV("LOCAL_WORLD_SIZE=2"));
    cr_assert_eq(config.num_nodes, 1);
}

Test(config, node_count_from_torchrun_with_mpi_replica_layout)
{
    /* the node count has its own sources: torchrun's ratio still counts */
    expect_ok(ENV("OMPI_COMM_WORLD_SIZE=6", "OMPI_COMM_WORLD_RANK=0", "WORLD_SIZE=6",
                  "LOCAL_WORLD_SIZE=3"));
    cr_assert_eq(config.num_nodes, 2);
}

Test(config, adaptdl_num_nodes_takes_precedence_over_torchrun)
{
    expect_ok(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=2", "ADAPTDL_NUM_NODES=3"));
    cr_assert_eq(config.num_nodes, 3);
    /* not even read then: a broken LOCAL_WORLD_SIZE cannot stop the job */
    expect_ok(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=3", "ADAPTDL_NUM_NODES=2"));
    cr_assert_eq(config.num_nodes, 2);
}

Test(config, local_world_size_that_does_not_divide_world_size)
{
    expect_error(ENV("WORLD_SIZE=8", "RANK=0", "LOCAL_WORLD_SIZE=3"), "LOCAL_WORLD_SIZE",
                 "does not divide WORLD_SIZE \"8\"");
    cr_assert_not_null(strstr(error, "\"3\""), "%s", error);
    cr_assert_not_null(strstr(error, "ADAPTDL_NUM_NODES"), "%s", error);
    expect_error(ENV("WORLD_SIZE=2", "LOCAL_WORLD_SIZE=4"), "LOCAL_WORLD_SIZE",
                 "does not divide WORLD_SIZE");
}

Test(config, malformed_torchrun_variables)
{
    expect_error(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=0"), "LOCAL_WORLD_SIZE",
                 "is not a positive integer");
    cr_assert_not_null(strstr(error, "WORLD_SIZE \"8\""), "%s", error);
    expect_error(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=two"), "LOCAL_WORLD_SIZE", "\"two\"");
    expect_error(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE="), "LOCAL_WORLD_SIZE",
                 "is not a positive integer");
    expect_error(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=-2"), "LOCAL_WORLD_SIZE", "\"-2\"");
    expect_error(ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=99999999999"), "LOCAL_WORLD_SIZE",
                 "too large");
    expect_error(ENV("WORLD_SIZE=0", "RANK=0"), "WORLD_SIZE", "out of range");
    expect_error(ENV("WORLD_SIZE=4x", "RANK=0"), "WORLD_SIZE", "\"4x\"");
    expect_error(ENV("WORLD_SIZE=4", "RANK=one"), "RANK", "\"one\"");
    /* a WORLD_SIZE that only feeds the node count is checked all the same */
    expect_error(ENV("ADAPTDL_NUM_REPLICAS=2", "WORLD_SIZE=two", "LOCAL_WORLD_SIZE=1"),
                 "WORLD_SIZE", "\"two\"");
}

/* Every node runs at least one replica. */
Test(config, more_nodes_than_replicas_is_an_error)
{
    expect_error(ENV("ADAPTDL_NUM_NODES=5", "ADAPTDL_NUM_REPLICAS=2"), "ADAPTDL_NUM_NODES",
                 "\"5\" is above ADAPTDL_NUM_REPLICAS \"2\"");
    cr_expect_not_null(strstr(error, "from 1 to 2"), "%s", error);
    expect_error(ENV("ADAPTDL_NUM_NODES=2", "OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_RANK=0"),
                 "ADAPTDL_NUM_NODES", "above OMPI_COMM_WORLD_SIZE \"1\"");
    expect_error(ENV("ADAPTDL_NUM_NODES=2"), "ADAPTDL_NUM_NODES",
                 "above the default replica count 1");
    /* torchrun's ratio with a replica count set below its WORLD_SIZE */
    expect_error(ENV("ADAPTDL_NUM_REPLICAS=2", "WORLD_SIZE=8", "LOCAL_WORLD_SIZE=2"),
                 "LOCAL_WORLD_SIZE", "make 4 nodes, above ADAPTDL_NUM_REPLICAS \"2\"");
    expect_ok(ENV("ADAPTDL_NUM_NODES=2", "ADAPTDL_NUM_REPLICAS=2"));
    cr_expect_eq(config.num_nodes, 2);
}

Test(config, rank_not_below_replicas)
{
    expect_error(ENV("ADAPTDL_NUM_REPLICAS=4", "ADAPTDL_REPLICA_RANK=4"), "ADAPTDL_REPLICA_RANK",
                 "ADAPTDL_NUM_REPLICAS");
    cr_assert_not_null(strstr(error, "\"4\""));
    expect_error(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=5"), "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE");
}

Test(config, rank_without_replica_count)
{
    expect_error(ENV("ADAPTDL_REPLICA_RANK=1"), "ADAPTDL_REPLICA_RANK", "ADAPTDL_NUM_REPLICAS");
}

Test(config, replica_count_bounds)
{
    expect_error(ENV("ADAPTDL_NUM_REPLICAS=0"), "ADAPTDL_NUM_REPLICAS", "from 1 to 1048576");
    expect_error(ENV("ADAPTDL_NUM_REPLICAS=1048577"), "ADAPTDL_NUM_REPLICAS", NULL);
    expect_error(ENV("PMI_SIZE=x"), "PMI_SIZE", NULL);
    expect_ok(ENV("ADAPTDL_NUM_REPLICAS=1048576", "ADAPTDL_REPLICA_RANK=1048575"));
}

/* ---- batch-size control ------------------------------------------------ */

Test(config, batch_size_variables)
{
    expect_ok(ENV("ADAPTDL_BATCH_SIZE=128", "ADAPTDL_MAX_BATCH_SIZE=4096",
                  "ADAPTDL_LOCAL_BSZ_BOUNDS=16:512", "ADAPTDL_BSZ_ARG=argv:--batch-size",
                  "ADAPTDL_LR_ARG=env:LEARNING_RATE", "ADAPTDL_LR_RULE=sqrt"));
    cr_assert_eq(config.batch_size, 128);
    cr_assert_eq(config.max_batch_size, 4096);
    cr_assert_eq(config.local_bsz_min, 16);
    cr_assert_eq(config.local_bsz_max, 512);
    cr_assert_eq(config.bsz_arg.kind, INJECT_ARGV);
    cr_assert_str_eq(config.bsz_arg.name, "--batch-size");
    cr_assert_eq(config.lr_arg.kind, INJECT_ENV);
    cr_assert_str_eq(config.lr_arg.name, "LEARNING_RATE");
    cr_assert_eq(config.lr_rule, LR_RULE_SQRT);
}

Test(config, equal_batch_bounds_are_fine)
{
    expect_ok(ENV("ADAPTDL_BATCH_SIZE=64", "ADAPTDL_MAX_BATCH_SIZE=64",
                  "ADAPTDL_LOCAL_BSZ_BOUNDS=8:8"));
    cr_assert_eq(config.local_bsz_min, 8);
    cr_assert_eq(config.local_bsz_max, 8);
}

Test(config, batch_size_zero)
{
    expect_error(ENV("ADAPTDL_BATCH_SIZE=0"), "ADAPTDL_BATCH_SIZE", NULL);
    expect_error(ENV("ADAPTDL_MAX_BATCH_SIZE=0"), "ADAPTDL_MAX_BATCH_SIZE", NULL);
}

Test(config, max_batch_below_initial)
{
    expect_error(ENV("ADAPTDL_BATCH_SIZE=128", "ADAPTDL_MAX_BATCH_SIZE=64"),
                 "ADAPTDL_MAX_BATCH_SIZE", "ADAPTDL_BATCH_SIZE");
    cr_assert_not_null(strstr(error, "\"64\""));
    cr_assert_not_null(strstr(error, "\"128\""));
}

Test(config, max_batch_without_initial)
{
    /* The initial batch may come from the trainer's own argument
     * (adaptshim(7) "Batch-size control"). */
    expect_ok(ENV("ADAPTDL_MAX_BATCH_SIZE=64"));
    cr_assert_eq(config.max_batch_size, 64);
}

Test(config, inverted_local_bounds)
{
    expect_error(ENV("ADAPTDL_LOCAL_BSZ_BOUNDS=64:8"), "ADAPTDL_LOCAL_BSZ_BOUNDS", "MIN above MAX");
}

Test(config, malformed_local_bounds)
{
    static const char *const values[] = {"8", "0:8", "8:", ":8", "a:b", "8:16:32", "-1:8", ""};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "ADAPTDL_LOCAL_BSZ_BOUNDS=%s", values[i]);
        expect_error(ENV(variable), "ADAPTDL_LOCAL_BSZ_BOUNDS", "MIN:MAX");
    }
}

/* ---- replica range (adaptdl-wrap -n MIN:MAX) ----------------------------- */

Test(config, replicas_range)
{
    expect_ok(ENV("ADAPTDL_REPLICAS_RANGE=1:4"));
    cr_assert_eq(config.replicas_min, 1);
    cr_assert_eq(config.replicas_max, 4);
    config_free(&config);
    expect_ok(ENV("ADAPTDL_REPLICAS_RANGE=3:3"));
    cr_assert_eq(config.replicas_min, 3);
    cr_assert_eq(config.replicas_max, 3);
    config_free(&config);
    expect_ok(ENV("ADAPTDL_LOG=warn"));
    cr_assert_eq(config.replicas_max, 0, "unset: no range");
}

Test(config, malformed_replicas_range)
{
    static const char *const values[] = {"4", "0:2", "2:", ":2", "a:b", "1:2:3", "-1:2", "",
                                         "1:1048577"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "ADAPTDL_REPLICAS_RANGE=%s", values[i]);
        expect_error(ENV(variable), "ADAPTDL_REPLICAS_RANGE", "MIN:MAX");
    }
    expect_error(ENV("ADAPTDL_REPLICAS_RANGE=4:2"), "ADAPTDL_REPLICAS_RANGE", "MIN above MAX");
}

/* The two MIN:MAX variables share one parser: each keeps its own words and
 * its own limit in the message. */
Test(config, range_messages_name_their_counts_and_limits)
{
    expect_error(ENV("ADAPTDL_LOCAL_BSZ_BOUNDS=8"), "ADAPTDL_LOCAL_BSZ_BOUNDS", NULL);
    cr_assert_str_eq(error, "ADAPTDL_LOCAL_BSZ_BOUNDS: \"8\" is not MIN:MAX of two positive "
                            "integers; accepted: MIN:MAX with 1 <= MIN <= MAX <= 2^40");
    expect_error(ENV("ADAPTDL_REPLICAS_RANGE=4:2"), "ADAPTDL_REPLICAS_RANGE", NULL);
    cr_assert_str_eq(error, "ADAPTDL_REPLICAS_RANGE: \"4:2\" has MIN above MAX; accepted: "
                            "MIN:MAX with 1 <= MIN <= MAX <= 1048576");
    expect_error(ENV("ADAPTDL_REPLICAS_RANGE=1:x"), "ADAPTDL_REPLICAS_RANGE", NULL);
    cr_assert_str_eq(error, "ADAPTDL_REPLICAS_RANGE: \"1:x\" is not MIN:MAX of two replica "
                            "counts; accepted: MIN:MAX with 1 <= MIN <= MAX <= 1048576");
}

Test(config, injection_forms)
{
    expect_ok(ENV("ADAPTDL_BSZ_ARG=argv:-b", "ADAPTDL_LR_ARG=argv:--lr"));
    cr_assert_eq(config.bsz_arg.kind, INJECT_ARGV);
    cr_assert_str_eq(config.bsz_arg.name, "-b");
    cr_assert_eq(config.lr_arg.kind, INJECT_ARGV);
    cr_assert_str_eq(config.lr_arg.name, "--lr");
    config_free(&config);
    expect_ok(ENV("ADAPTDL_BSZ_ARG=env:_BATCH_SIZE2"));
    cr_assert_eq(config.bsz_arg.kind, INJECT_ENV);
    cr_assert_str_eq(config.bsz_arg.name, "_BATCH_SIZE2");
}

Test(config, bad_injection_forms)
{
    static const char *const values[] = {
        "--batch-size", "argv:batch-size", "argv:", "argv:-", "argv:--", "argv:--bs=3",
        "argv:--bs x",  "env:",            "env:1BS", "env:BATCH-SIZE", "ENV:BS", "",
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "ADAPTDL_BSZ_ARG=%s", values[i]);
        expect_error(ENV(variable), "ADAPTDL_BSZ_ARG", "argv:");
        snprintf(variable, sizeof variable, "ADAPTDL_LR_ARG=%s", values[i]);
        expect_error(ENV(variable), "ADAPTDL_LR_ARG", "env:NAME");
    }
}

Test(config, lr_rules)
{
    static const char *const rules[] = {"none", "linear", "sqrt", "adascale"};
    static const enum lr_rule expected[] = {LR_RULE_NONE, LR_RULE_LINEAR, LR_RULE_SQRT,
                                            LR_RULE_ADASCALE};
    for (size_t i = 0; i < 4; i++) {
        char variable[64];
        snprintf(variable, sizeof variable, "ADAPTDL_LR_RULE=%s", rules[i]);
        expect_ok(ENV(variable));
        cr_assert_eq(config.lr_rule, expected[i]);
        config_free(&config);
    }
}

Test(config, unknown_lr_rule)
{
    expect_error(ENV("ADAPTDL_LR_RULE=cosine"), "ADAPTDL_LR_RULE",
                 "none, linear, sqrt, adascale");
}

/* ---- globs fnmatch cannot match as written ------------------------------ */

/* glibc's fnmatch takes an unclosed '[' literally and matches nothing for
 * a lone trailing backslash: ADAPTDL_TARGET=train[ left every program
 * untouched, ADAPTDL_SAVE=ck[0-9 bound no checkpoint, and nothing said so. */
Test(config, malformed_target_and_save_globs_are_errors)
{
    expect_error(ENV("ADAPTDL_TARGET=[unclosed"), "ADAPTDL_TARGET",
                 "\"[unclosed\" has a '[' that no ']' closes");
    cr_expect_not_null(strstr(error, "glob of program basenames"), "%s", error);
    cr_expect_not_null(strstr(error, "write \\[ for a literal '['"), "%s", error);
    expect_error(ENV("ADAPTDL_SAVE=/ck/model-[0-9.pt"), "ADAPTDL_SAVE",
                 "\"/ck/model-[0-9.pt\" has a '[' that no ']' closes (\"[0-9.pt\")");
    cr_expect_not_null(strstr(error, "the trainer's checkpoint files"), "%s", error);
    expect_error(ENV("ADAPTDL_SAVE=ck\\"), "ADAPTDL_SAVE", "ends in a lone backslash");
    expect_error(ENV("ADAPTDL_TARGET=[[:digits:]]*"), "ADAPTDL_TARGET",
                 "unknown character class \"[:digits:]\"");
    expect_error(ENV("ADAPTDL_SAVE=ck[9-0]"), "ADAPTDL_SAVE", "reversed range \"9-0\"");
}

Test(config, well_formed_target_and_save_globs_are_kept)
{
    expect_ok(ENV("ADAPTDL_TARGET=train[_-]*", "ADAPTDL_SAVE=/ck/model-[0-9]*.pt\\[1\\]"));
    cr_expect_str_eq(config.target, "train[_-]*");
    cr_expect_str_eq(config.save_glob, "/ck/model-[0-9]*.pt\\[1\\]");
}

Test(config, malformed_data_glob_names_the_entry)
{
    expect_error(ENV("ADAPTDL_DATA=/d/train.bin:record=4;/d/shard[0-9.bin:record=4"),
                 "ADAPTDL_DATA entry 2 (\"/d/shard[0-9.bin:record=4\")",
                 "glob \"/d/shard[0-9.bin\" has a '[' that no ']' closes");
    cr_expect_not_null(strstr(error, "accepted: a well-formed fnmatch(3) glob"), "%s", error);
    expect_error(ENV("ADAPTDL_DATA=[unclosed:record=4"), "ADAPTDL_DATA entry 1",
                 "glob \"[unclosed\"");
    /* the \: escape of adaptshim(7) "ADAPTDL_DATA" is undone first: "a\:[" is the glob "a:[" */
    expect_error(ENV("ADAPTDL_DATA=a\\:[:record=4"), "ADAPTDL_DATA entry 1", "glob \"a:[\"");
    expect_error(ENV("ADAPTDL_DATA=x\\"), "ADAPTDL_DATA entry 1", "ends in a lone backslash");
    /* an escaped '[' is a literal one, as fnmatch reads it */
    expect_ok(ENV("ADAPTDL_DATA=/d/run\\[1\\]/*.bin:record=4"));
    cr_expect_str_eq(data_entry_at(0)->glob, "/d/run\\[1\\]/*.bin");
}

/* Two entries with one glob: only the first would ever apply. */
Test(config, the_same_data_glob_in_two_entries_is_an_error)
{
    expect_error(ENV("ADAPTDL_DATA=a.bin:record=4;b.bin:record=4;a.bin:record=8"),
                 "ADAPTDL_DATA entries 1 and 3", "both have the glob \"a.bin\"");
    expect_error(ENV("ADAPTDL_DATA=/d/*.bin:record=4;/d/*.bin:record=4:role=eval"),
                 "ADAPTDL_DATA entries 1 and 2", "\"/d/*.bin\"");
    /* compared once unescaped: "c\:d" is the glob "c:d" */
    expect_error(ENV("ADAPTDL_DATA=c\\:d:record=4;c\\:d:record=4"), "ADAPTDL_DATA entries 1 and 2",
                 "\"c:d\"");
    expect_ok(ENV("ADAPTDL_DATA=a.bin:record=4;a.bin.1:record=4"));
}

/* ---- ADAPTDL_DATA: accepted forms -------------------------------------- */

Test(config, data_minimal_entry_defaults)
{
    expect_ok(ENV("ADAPTDL_DATA=train.bin:record=4"));
    cr_assert_eq(config.data_count, 1);
    const struct data_entry *entry = data_entry_at(0);
    cr_assert_str_eq(entry->glob, "train.bin");
    cr_assert_eq(entry->record_size, 4);
    cr_assert_not(entry->lines);
    cr_assert_eq(entry->header_size, 0);
    cr_assert_eq(entry->role, DATA_ROLE_TRAIN);
    cr_assert(entry->shuffle);
    cr_assert(entry->shard);
    cr_assert_eq(entry->tail, TAIL_ERROR);
    cr_assert_eq(entry->lookahead, 0);
    cr_assert_not(entry->resume_whole_pass);
    cr_assert_not(entry->has_count_field);
}

Test(config, data_every_key)
{
    expect_ok(ENV("ADAPTDL_DATA=tok/*.bin:record=2:header=16:role=eval:shuffle=1:shard=0:"
                  "tail=drop:lookahead=64:resume=whole-pass:count=8,u64be,2"));
    const struct data_entry *entry = data_entry_at(0);
    cr_assert_str_eq(entry->glob, "tok/*.bin");
    cr_assert_eq(entry->record_size, 2);
    cr_assert_eq(entry->header_size, 16);
    cr_assert_eq(entry->role, DATA_ROLE_EVAL);
    cr_assert(entry->shuffle);
    cr_assert_not(entry->shard);
    cr_assert_eq(entry->tail, TAIL_DROP);
    cr_assert_eq(entry->lookahead, 64);
    cr_assert(entry->resume_whole_pass);
    cr_assert(entry->has_count_field);
    cr_assert_eq(entry->count_offset, 8);
    cr_assert_eq(entry->count_type, COUNT_FIELD_U64BE);
    cr_assert_eq(entry->count_unit, 2);
}

Test(config, data_every_count_type)
{
    static const char *const names[] = {"u32le", "u32be", "i32le", "u64le", "u64be"};
    static const enum count_field_type types[] = {COUNT_FIELD_U32LE, COUNT_FIELD_U32BE,
                                                  COUNT_FIELD_I32LE, COUNT_FIELD_U64LE,
                                                  COUNT_FIELD_U64BE};
    for (size_t i = 0; i < 5; i++) {
        char variable[128];
        snprintf(variable, sizeof variable, "ADAPTDL_DATA=f:record=1:header=8:count=0,%s,1",
                 names[i]);
        expect_ok(ENV(variable));
        cr_assert_eq(data_entry_at(0)->count_type, types[i]);
        config_free(&config);
    }
}

Test(config, data_lines_entry)
{
    expect_ok(ENV("ADAPTDL_DATA=corpus.txt:lines:header=0"));
    const struct data_entry *entry = data_entry_at(0);
    cr_assert(entry->lines);
    cr_assert_eq(entry->record_size, 0);
}

Test(config, data_record_upper_bound)
{
    expect_ok(ENV("ADAPTDL_DATA=f:record=1099511627776:header=1099511627776"));
    cr_assert_eq(data_entry_at(0)->record_size, UINT64_C(1) << 40);
    cr_assert_eq(data_entry_at(0)->header_size, UINT64_C(1) << 40);
}

Test(config, data_glob_escapes)
{
    expect_ok(ENV("ADAPTDL_DATA=c\\:\\\\data\\;v2/*.bin:record=8;x\\*y:record=1"));
    cr_assert_eq(config.data_count, 2);
    /* \: and \; are unescaped, \\ stays for fnmatch. */
    cr_assert_str_eq(data_entry_at(0)->glob, "c:\\\\data;v2/*.bin");
    cr_assert_eq(data_entry_at(0)->record_size, 8);
    cr_assert_str_eq(data_entry_at(1)->glob, "x\\*y");
}

Test(config, data_escaped_backslash_before_separator)
{
    /* `\\` is one fnmatch pair, so the `:` or `;` after it is a separator. */
    expect_ok(ENV("ADAPTDL_DATA=a\\\\:record=1;b:record=2"));
    cr_assert_eq(config.data_count, 2);
    cr_assert_str_eq(data_entry_at(0)->glob, "a\\\\");
    cr_assert_eq(data_entry_at(0)->record_size, 1);
    config_free(&config);
    /* Entry 1 is the bare glob `a\\`, which lacks a record size. */
    expect_error(ENV("ADAPTDL_DATA=a\\\\;b:record=2"), "ADAPTDL_DATA entry 1", "no record size");
}

Test(config, data_config_parse_data_directly)
{
    struct data_entry *entries = (struct data_entry *)1;
    size_t count = 99;
    cr_assert_eq(config_parse_data("a:record=1;b:lines", &entries, &count, error, sizeof error),
                 0, "%s", error);
    cr_assert_eq(count, 2);
    cr_assert_str_eq(entries[1].glob, "b");
    struct adaptdl_config holder = {.data = entries, .data_count = count};
    config_free(&holder);

    cr_assert_eq(config_parse_data("a:record=0", &entries, &count, error, sizeof error), -1);
    cr_assert_null(entries);
    cr_assert_eq(count, 0);
}

Test(config, data_role_defaults)
{
    expect_ok(ENV("ADAPTDL_DATA=train.bin:record=4;val.bin:record=4;test.bin:record=4"));
    cr_assert_eq(config.data_count, 3);
    cr_assert_eq(data_entry_at(0)->role, DATA_ROLE_TRAIN);
    cr_assert_eq(data_entry_at(1)->role, DATA_ROLE_EVAL);
    cr_assert_eq(data_entry_at(2)->role, DATA_ROLE_EVAL);
}

Test(config, data_first_entry_can_be_eval)
{
    expect_ok(ENV("ADAPTDL_DATA=val.bin:record=4:role=eval;train.bin:record=4:role=train"));
    cr_assert_eq(data_entry_at(0)->role, DATA_ROLE_EVAL);
    cr_assert_not(data_entry_at(0)->shuffle);
    cr_assert_eq(data_entry_at(1)->role, DATA_ROLE_TRAIN);
    cr_assert(data_entry_at(1)->shuffle);
}

Test(config, data_shuffle_defaults_follow_role)
{
    /* shuffle follows the role even when role= comes after shuffle's place. */
    expect_ok(ENV("ADAPTDL_DATA=a:record=1;b:record=1;c:record=1:role=train;d:role=eval:"
                  "record=1:shuffle=1;e:shuffle=0:record=1"));
    cr_assert(data_entry_at(0)->shuffle);
    cr_assert_not(data_entry_at(1)->shuffle);
    cr_assert(data_entry_at(2)->shuffle);
    cr_assert(data_entry_at(3)->shuffle);
    cr_assert_not(data_entry_at(4)->shuffle);
    cr_assert_eq(data_entry_at(4)->role, DATA_ROLE_EVAL);
}

Test(config, data_several_train_entries_allowed)
{
    /* A dataset split into shard files: several train entries. */
    expect_ok(ENV("ADAPTDL_DATA=shard0.bin:record=4:role=train;shard1.bin:record=4:role=train"));
    cr_assert_eq(data_entry_at(0)->role, DATA_ROLE_TRAIN);
    cr_assert_eq(data_entry_at(1)->role, DATA_ROLE_TRAIN);
}

Test(config, data_count_field_fits_exactly)
{
    expect_ok(ENV("ADAPTDL_DATA=f:record=4:count=4,u32be,4:header=8"));
    cr_assert_eq(data_entry_at(0)->count_offset, 4);
}

/* ---- ADAPTDL_DATA: malformed forms ------------------------------------- */

Test(config, data_empty_value)
{
    expect_error(ENV("ADAPTDL_DATA="), "ADAPTDL_DATA", "empty");
}

Test(config, data_empty_entries)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=1;;b:record=1"), "ADAPTDL_DATA entry 2",
                 "empty entry");
    expect_error(ENV("ADAPTDL_DATA=a:record=1;"), "ADAPTDL_DATA entry 2", "empty entry");
    expect_error(ENV("ADAPTDL_DATA=;a:record=1"), "ADAPTDL_DATA entry 1", "empty entry");
}

Test(config, data_empty_glob)
{
    expect_error(ENV("ADAPTDL_DATA=:record=4"), "ADAPTDL_DATA entry 1", "empty glob");
}

Test(config, data_unknown_key)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=4:stride=2"), "ADAPTDL_DATA entry 1",
                 "unknown key \"stride\"");
    cr_assert_not_null(strstr(error, "record, lines, header, role"));
}

Test(config, data_empty_key)
{
    expect_error(ENV("ADAPTDL_DATA=a::record=4"), "ADAPTDL_DATA", "empty key");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:"), "ADAPTDL_DATA", "empty key");
    expect_error(ENV("ADAPTDL_DATA=a:=4"), "ADAPTDL_DATA", "empty key");
}

Test(config, data_key_without_value)
{
    expect_error(ENV("ADAPTDL_DATA=a:record"), "ADAPTDL_DATA", "record has no value");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:role"), "ADAPTDL_DATA", "role has no value");
    expect_error(ENV("ADAPTDL_DATA=a:record="), "ADAPTDL_DATA", "record=\"\"");
}

Test(config, data_flag_with_value)
{
    expect_error(ENV("ADAPTDL_DATA=a:lines=1"), "ADAPTDL_DATA", "takes no value");
}

Test(config, data_record_zero)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=0"), "ADAPTDL_DATA", "record=\"0\" is not a positive");
}

Test(config, data_record_not_a_number_message)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=4;train/*.bin:record=abc"), "ADAPTDL_DATA", NULL);
    cr_assert_str_eq(error, "ADAPTDL_DATA entry 2 (\"train/*.bin:record=abc\"): record=\"abc\" "
                            "is not a positive integer; accepted: record=BYTES (1..2^40)");
}

Test(config, data_record_signed)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=-5"), "ADAPTDL_DATA", "record=\"-5\"");
    expect_error(ENV("ADAPTDL_DATA=a:record=+5"), "ADAPTDL_DATA", "record=\"+5\"");
}

Test(config, data_record_too_large)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=1099511627777"), "ADAPTDL_DATA", "too large");
    expect_error(ENV("ADAPTDL_DATA=a:record=99999999999999999999999"), "ADAPTDL_DATA",
                 "too large");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:header=1099511627777"), "ADAPTDL_DATA",
                 "header=");
}

Test(config, data_lines_with_record)
{
    expect_error(ENV("ADAPTDL_DATA=a:lines:record=4"), "ADAPTDL_DATA", "exclude each other");
}

Test(config, data_neither_lines_nor_record)
{
    expect_error(ENV("ADAPTDL_DATA=a"), "ADAPTDL_DATA entry 1", "record=BYTES");
    expect_error(ENV("ADAPTDL_DATA=a:record=4;b:header=8"), "ADAPTDL_DATA entry 2", "lines");
}

Test(config, data_duplicate_key)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=4:role=train:role=eval"), "ADAPTDL_DATA",
                 "role given twice");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:record=4"), "ADAPTDL_DATA", "record given twice");
    expect_error(ENV("ADAPTDL_DATA=a:lines:lines"), "ADAPTDL_DATA", "lines given twice");
}

Test(config, data_bad_count_type)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=4:header=8:count=0,u16le,1"), "ADAPTDL_DATA",
                 "unknown TYPE");
    cr_assert_not_null(strstr(error, "u32le, u32be, i32le, u64le, u64be"));
}

Test(config, data_malformed_count)
{
    static const char *const values[] = {"0", "0,u32le", "x,u32le,1", ",u32le,1",
                                         "0,u32le,0", "0,u32le,", "0,u32le,1,2", "-1,u32le,1"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        char variable[128];
        snprintf(variable, sizeof variable, "ADAPTDL_DATA=a:record=4:header=8:count=%s",
                 values[i]);
        expect_error(ENV(variable), "ADAPTDL_DATA", "count=");
    }
}

Test(config, data_count_outside_header)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=4:header=8:count=4,u64le,1"), "ADAPTDL_DATA",
                 "outside the header");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:count=0,u32le,1"), "ADAPTDL_DATA",
                 "outside the header");
}

Test(config, data_bad_flags_and_words)
{
    expect_error(ENV("ADAPTDL_DATA=a:record=4:shuffle=2"), "ADAPTDL_DATA", "shuffle=\"2\"");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:shard=yes"), "ADAPTDL_DATA", "shard=\"yes\"");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:role=test"), "ADAPTDL_DATA", "role=\"test\"");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:tail=pad"), "ADAPTDL_DATA", "tail=\"pad\"");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:lookahead=-1"), "ADAPTDL_DATA", "lookahead=");
    expect_error(ENV("ADAPTDL_DATA=a:record=4:resume=whole"), "ADAPTDL_DATA",
                 "resume=\"whole\"");
}

Test(config, data_error_frees_earlier_entries)
{
    /* ASan would report the globs of entries 1 and 2 if they leaked. */
    expect_error(ENV("ADAPTDL_DATA=a:record=1;b:record=2;c:record=x"), "ADAPTDL_DATA entry 3",
                 NULL);
}

/* ---- messages ---------------------------------------------------------- */

Test(config, error_messages_stay_on_one_line)
{
    expect_error(ENV("ADAPTDL_LOG=de\nbug"), "ADAPTDL_LOG", "de\\x0abug");
    expect_error(ENV("ADAPTDL_DATA=a:record=4\n"), "ADAPTDL_DATA", "\\x0a");
}

Test(config, long_values_are_cut_in_messages)
{
    char variable[4096];
    int length = snprintf(variable, sizeof variable, "ADAPTDL_LOG=");
    memset(variable + length, 'v', sizeof variable - (size_t)length - 1);
    variable[sizeof variable - 1] = '\0';
    expect_error(ENV(variable), "ADAPTDL_LOG", "...");
    cr_assert_lt(strlen(error), 400);
}

Test(config, small_error_buffer_is_not_overrun)
{
    char small[16];
    memset(&config, 0, sizeof config);
    cr_assert_eq(config_parse(&config, ENV("ADAPTDL_LOG=verbose"), small, sizeof small), -1);
    cr_assert_eq(strlen(small), sizeof small - 1);
    cr_assert_eq(config_parse(&config, ENV("ADAPTDL_LOG=verbose"), NULL, 0), -1);
}

Test(config, first_error_wins_and_config_is_zeroed)
{
    expect_error(ENV("ADAPTDL_SAVE=x*", "ADAPTDL_CHECKPOINT_PATH=/c", "ADAPTDL_DATA=a:record=4",
                     "ADAPTDL_SEED=bad", "ADAPTDL_LOG=bad"),
                 "ADAPTDL_LOG", NULL);
    cr_assert_null(strstr(error, "ADAPTDL_SEED"));
}

/* Every malformed variable yields a message naming it and saying what is
 * accepted (adaptshim(7) "ENVIRONMENT"), whatever the variable. */
Test(config, every_error_names_variable_and_accepted_forms)
{
    static const struct {
        const char *assignment;
        const char *variable;
    } cases[] = {
        {"ADAPTDL_DATA=a:record=4;;", "ADAPTDL_DATA"},
        {"ADAPTDL_CHECKPOINT_PATH=", "ADAPTDL_CHECKPOINT_PATH"},
        {"ADAPTDL_SAVE=", "ADAPTDL_SAVE"},
        {"ADAPTDL_RESUME=x", "ADAPTDL_RESUME"},
        {"ADAPTDL_SEED=x", "ADAPTDL_SEED"},
        {"ADAPTDL_NUM_REPLICAS=x", "ADAPTDL_NUM_REPLICAS"},
        {"ADAPTDL_REPLICA_RANK=x", "ADAPTDL_REPLICA_RANK"},
        {"ADAPTDL_NUM_NODES=x", "ADAPTDL_NUM_NODES"},
        {"ADAPTDL_NUM_RESTARTS=x", "ADAPTDL_NUM_RESTARTS"},
        {"ADAPTDL_LOG=x", "ADAPTDL_LOG"},
        {"ADAPTDL_LOG_FILE=", "ADAPTDL_LOG_FILE"},
        {"ADAPTDL_DISABLE=x", "ADAPTDL_DISABLE"},
        {"ADAPTDL_TARGET=", "ADAPTDL_TARGET"},
        {"ADAPTDL_GRAD_MIN=x", "ADAPTDL_GRAD_MIN"},
        {"ADAPTDL_DRAIN=x", "ADAPTDL_DRAIN"},
        {"ADAPTDL_STOP_SECONDS=x", "ADAPTDL_STOP_SECONDS"},
        {"ADAPTDL_METRICS_FILE=", "ADAPTDL_METRICS_FILE"},
        {"ADAPTDL_HINTS_FILE=", "ADAPTDL_HINTS_FILE"},
        {"ADAPTDL_BATCH_SIZE=x", "ADAPTDL_BATCH_SIZE"},
        {"ADAPTDL_MAX_BATCH_SIZE=x", "ADAPTDL_MAX_BATCH_SIZE"},
        {"ADAPTDL_LOCAL_BSZ_BOUNDS=x", "ADAPTDL_LOCAL_BSZ_BOUNDS"},
        {"ADAPTDL_BSZ_ARG=x", "ADAPTDL_BSZ_ARG"},
        {"ADAPTDL_LR_ARG=x", "ADAPTDL_LR_ARG"},
        {"ADAPTDL_LR_RULE=x", "ADAPTDL_LR_RULE"},
        {"ADAPTDL_SPEEDUP=x", "ADAPTDL_SPEEDUP"},
        {"ADAPTDL_DECIDE_SECONDS=x", "ADAPTDL_DECIDE_SECONDS"},
        {"ADAPTDL_PAYBACK_SECONDS=x", "ADAPTDL_PAYBACK_SECONDS"},
        {"ADAPTDL_REPLICAS_RANGE=x", "ADAPTDL_REPLICAS_RANGE"},
        {"OMPI_COMM_WORLD_SIZE=x", "OMPI_COMM_WORLD_SIZE"},
        {"OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_RANK"},
        {"PMI_SIZE=x", "PMI_SIZE"},
        {"PMI_RANK=x", "PMI_RANK"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char assignment[128];
        snprintf(assignment, sizeof assignment, "%s", cases[i].assignment);
        expect_error(ENV(assignment), cases[i].variable, NULL);
        /* The value is quoted (x, or the empty string). */
        cr_assert(strstr(error, "\"x") != NULL || strstr(error, "\"\"") != NULL ||
                      strstr(error, "entry 2") != NULL,
                  "value not quoted: %s", error);
    }
}

/* --- unknown ADAPTDL_* names (adaptshim(7) "ENVIRONMENT": a typo is a warning naming the
 * closest known variable) ------------------------------------------------- */

/* Every variable of the table in adaptshim(7) "ENVIRONMENT", and the launcher's ADAPTDL_LIB. */
static const char *const contract_variables[] = {
    "ADAPTDL_DATA", "ADAPTDL_CHECKPOINT_PATH", "ADAPTDL_SAVE", "ADAPTDL_RESUME",
    "ADAPTDL_SEED", "ADAPTDL_NUM_REPLICAS", "ADAPTDL_REPLICA_RANK", "ADAPTDL_NUM_NODES",
    "ADAPTDL_NUM_RESTARTS", "ADAPTDL_LOG", "ADAPTDL_LOG_FILE", "ADAPTDL_DISABLE",
    "ADAPTDL_TARGET", "ADAPTDL_GRAD_MIN", "ADAPTDL_DRAIN", "ADAPTDL_STOP_SECONDS",
    "ADAPTDL_METRICS_FILE", "ADAPTDL_HINTS_FILE", "ADAPTDL_BATCH_SIZE",
    "ADAPTDL_MAX_BATCH_SIZE", "ADAPTDL_LOCAL_BSZ_BOUNDS", "ADAPTDL_BSZ_ARG", "ADAPTDL_LR_ARG",
    "ADAPTDL_LR_RULE", "ADAPTDL_SPEEDUP", "ADAPTDL_DECIDE_SECONDS", "ADAPTDL_PAYBACK_SECONDS",
    "ADAPTDL_LIB",
};

Test(config, every_variable_of_the_contract_is_known)
{
    for (size_t i = 0; i < sizeof contract_variables / sizeof contract_variables[0]; i++) {
        const char *name = contract_variables[i];
        cr_expect(config_is_known_variable(name, strlen(name)), "%s", name);
        cr_expect_str_eq(config_closest_variable(name, strlen(name)), name);
    }
    cr_expect_not(config_is_known_variable("ADAPTDL_SEEDS", 13));
    cr_expect_not(config_is_known_variable("ADAPTDL_SEE", 11));
    cr_expect(config_is_known_variable("ADAPTDL_SEEDS", 12), "the length decides");
}

Test(config, the_table_lists_each_variable_it_reads_once)
{
    size_t count = config_table_variable_count();
    cr_assert_gt(count, 20);
    for (size_t i = 0; i < count; i++) {
        const char *name = config_table_variable_name(i);
        cr_assert_not_null(name, "entry %zu", i);
        cr_expect_eq(strncmp(name, "ADAPTDL_", 8), 0, "%s", name);
        cr_expect(config_is_known_variable(name, strlen(name)), "%s", name);
        for (size_t j = 0; j < i; j++)
            cr_expect_str_neq(config_table_variable_name(j), name, "listed twice");
    }
    cr_expect_null(config_table_variable_name(count));
    cr_expect_null(config_table_variable_name(SIZE_MAX));
}

Test(config, a_typo_names_the_closest_known_variable)
{
    static const struct {
        const char *typo, *closest;
    } cases[] = {
        {"ADAPTDL_SEEDS", "ADAPTDL_SEED"},
        {"ADAPTDL_SEDE", "ADAPTDL_SEED"}, /* a transposition is one edit */
        {"ADAPTDL_CHECKPOINT_DIR", "ADAPTDL_CHECKPOINT_PATH"},
        {"ADAPTDL_CHEKPOINT_PATH", "ADAPTDL_CHECKPOINT_PATH"},
        {"ADAPTDL_NUM_REPLICA", "ADAPTDL_NUM_REPLICAS"},
        {"ADAPTDL_MAXBATCH_SIZE", "ADAPTDL_MAX_BATCH_SIZE"},
        {"ADAPTDL_DAT", "ADAPTDL_DATA"},
        {"ADAPTDL_LOGFILE", "ADAPTDL_LOG_FILE"},
        {"ADAPTDL_RESUME_MODE", "ADAPTDL_RESUME"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_str_eq(config_closest_variable(cases[i].typo, strlen(cases[i].typo)),
                         cases[i].closest, "%s", cases[i].typo);
}

Test(config, unknown_variables_are_reported_one_line_each_in_order)
{
    char *const *envp = ENV("PATH=/bin", "ADAPTDL_SEED=1", "ADAPTDL_SEEDS=9", "ADAPTDL=1",
                            "ADAPTDL_CHECKPOINT_DIR=/tmp/x", "MY_ADAPTDL_X=1",
                            "ADAPTDL_LOG=info", "ADAPTDL_\nEVIL=1",
                            "ADAPTDL_AN_EXTREMELY_LONG_NAME_THAT_NOBODY_WOULD_EVER_TYPE_BY_"
                            "ACCIDENT_REALLY=1");
    size_t cursor = 0;
    char message[512];
    static const char *const expected[][2] = {
        {"ADAPTDL_SEEDS", "ADAPTDL_SEED"},
        {"ADAPTDL_CHECKPOINT_DIR", "ADAPTDL_CHECKPOINT_PATH"},
        {"ADAPTDL_\\x0aEVIL", NULL},
        {"ADAPTDL_AN_EXTREMELY_LONG_NAME", NULL},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        cr_assert(config_next_unknown_variable(envp, &cursor, message, sizeof message),
                  "warning %zu", i);
        cr_expect_not_null(strstr(message, expected[i][0]), "%s", message);
        if (expected[i][1] != NULL)
            cr_expect_not_null(strstr(message, expected[i][1]), "names %s: %s",
                               expected[i][1], message);
        cr_expect_not_null(strstr(message, "closest known"), "%s", message);
        cr_expect_null(strchr(message, '\n'), "one line: %s", message);
        cr_expect_null(strstr(message, "=9"), "the value is not the name: %s", message);
    }
    cr_expect_not(config_next_unknown_variable(envp, &cursor, message, sizeof message));
    cursor = 0;
    cr_expect_not(config_next_unknown_variable(ENV("ADAPTDL_SEED=1", "ADAPTDL_LIB=/x.so"),
                                               &cursor, message, sizeof message));
    cursor = 0;
    cr_expect_not(config_next_unknown_variable(NULL, &cursor, message, sizeof message));
}

/* ---- the words and numbers underneath (config_text.h) ------------------ */

/* The plain decimal every count of the contract is: digits only, within
 * [minimum, maximum], checked for overflow; anything else leaves *out alone
 * and says which of malformed, too small or too large it is. */
Test(config, a_decimal_takes_digits_within_its_bounds)
{
    uint64_t value = 0;
    cr_expect_eq(config_parse_decimal("0", 0, 10, &value), NUMBER_OK);
    cr_expect_eq(value, 0);
    cr_expect_eq(config_parse_decimal("10", 0, 10, &value), NUMBER_OK, "the maximum is in");
    cr_expect_eq(value, 10);
    cr_expect_eq(config_parse_decimal("3", 3, 10, &value), NUMBER_OK, "the minimum is in");
    cr_expect_eq(value, 3);
    cr_expect_eq(config_parse_decimal("007", 1, 10, &value), NUMBER_OK, "leading zeros");
    cr_expect_eq(value, 7);
    cr_expect_eq(config_parse_decimal("18446744073709551615", 0, UINT64_MAX, &value), NUMBER_OK);
    cr_expect_eq(value, UINT64_MAX);
}

Test(config, a_decimal_outside_its_bounds_is_too_small_or_too_large)
{
    uint64_t value = 42;
    cr_expect_eq(config_parse_decimal("0", 1, 10, &value), NUMBER_TOO_SMALL);
    cr_expect_eq(config_parse_decimal("2", 3, 10, &value), NUMBER_TOO_SMALL);
    cr_expect_eq(config_parse_decimal("11", 0, 10, &value), NUMBER_TOO_LARGE);
    cr_expect_eq(config_parse_decimal("18446744073709551616", 0, UINT64_MAX, &value),
                 NUMBER_TOO_LARGE, "2^64 overflows");
    cr_expect_eq(config_parse_decimal("99999999999999999999", 0, UINT64_MAX, &value),
                 NUMBER_TOO_LARGE);
    cr_expect_eq(value, 42, "a failure leaves *out alone");
}

Test(config, a_decimal_rejects_signs_blanks_hex_and_garbage)
{
    static const char *const malformed[] = {"", "-1", "+1", " 1", "1 ", "0x10", "1.0", "1e3",
                                            "12a", "\t7", "\n", "99999999999999999999x"};
    uint64_t value = 42;
    for (size_t i = 0; i < CONFIG_COUNT_OF(malformed); i++)
        cr_expect_eq(config_parse_decimal(malformed[i], 0, UINT64_MAX, &value),
                     NUMBER_MALFORMED, "\"%s\"", malformed[i]);
    cr_expect_eq(value, 42);
}

Test(config, a_decimal_span_stops_at_its_length)
{
    uint64_t value = 0;
    const char *field = "12,u32,4";
    cr_expect_eq(config_parse_decimal_span(field, 2, 0, 100, &value), NUMBER_OK);
    cr_expect_eq(value, 12, "the bytes after the span are not read");
    cr_expect_eq(config_parse_decimal_span(field, 3, 0, 100, &value), NUMBER_MALFORMED,
                 "the comma inside the span is garbage");
    cr_expect_eq(config_parse_decimal_span(field, 0, 0, 100, &value), NUMBER_MALFORMED,
                 "an empty span is no number");
    cr_expect_eq(config_parse_decimal_span("1234", 1, 0, 100, &value), NUMBER_OK);
    cr_expect_eq(value, 1);
    cr_expect_eq(config_parse_decimal_span("1234", 4, 0, 100, &value), NUMBER_TOO_LARGE);
}

Test(config, a_number_problem_reads_after_the_value)
{
    cr_expect_null(config_describe_number_problem(NUMBER_OK, 1));
    cr_expect_str_eq(config_describe_number_problem(NUMBER_TOO_LARGE, 0), "is too large");
    cr_expect_str_eq(config_describe_number_problem(NUMBER_TOO_LARGE, 1), "is too large");
    cr_expect_str_eq(config_describe_number_problem(NUMBER_TOO_SMALL, 1),
                     "is not a positive integer");
    cr_expect_str_eq(config_describe_number_problem(NUMBER_MALFORMED, 1),
                     "is not a positive integer");
    cr_expect_str_eq(config_describe_number_problem(NUMBER_MALFORMED, 0),
                     "is not an unsigned integer");
}

/* A real number must be the whole text and finite: strtod alone would take
 * leading blanks, "inf", "nan" and the prefix of "30s". */
Test(config, a_finite_number_is_the_whole_text)
{
    double value = 0;
    cr_expect(config_parse_finite_number("1.5", &value));
    cr_expect_eq(value, 1.5);
    cr_expect(config_parse_finite_number("-2e3", &value));
    cr_expect_eq(value, -2000);
    cr_expect(config_parse_finite_number("0", &value));
    cr_expect_eq(value, 0);
    cr_expect(config_parse_finite_number(".25", &value));
    cr_expect_eq(value, 0.25);
    value = 42;
    static const char *const rejected[] = {"", " 1", "\t1", "\n1", "1 ", "30s", "inf", "-inf",
                                           "nan", "1e400", "abc", "1,5"};
    for (size_t i = 0; i < CONFIG_COUNT_OF(rejected); i++)
        cr_expect_not(config_parse_finite_number(rejected[i], &value), "\"%s\"", rejected[i]);
    cr_expect_eq(value, 42, "a rejected text leaves *out alone");
}

/* Word tables: an exact, case-sensitive lookup, and the list of accepted
 * words a message ends with. */
static const struct word_choice colours[] = {{"red", 1}, {"green", 2}, {"blue", 3}};

Test(config, a_word_choice_is_found_by_its_exact_word)
{
    int value = -1;
    cr_expect(config_find_word_choice(colours, CONFIG_COUNT_OF(colours), "red", &value));
    cr_expect_eq(value, 1);
    cr_expect(config_find_word_choice(colours, CONFIG_COUNT_OF(colours), "blue", &value));
    cr_expect_eq(value, 3);
    value = -1;
    cr_expect_not(config_find_word_choice(colours, CONFIG_COUNT_OF(colours), "Red", &value));
    cr_expect_not(config_find_word_choice(colours, CONFIG_COUNT_OF(colours), "re", &value));
    cr_expect_not(config_find_word_choice(colours, CONFIG_COUNT_OF(colours), "reds", &value));
    cr_expect_not(config_find_word_choice(colours, CONFIG_COUNT_OF(colours), "", &value));
    cr_expect_not(config_find_word_choice(colours, 2, "blue", &value), "only count entries");
    cr_expect_not(config_find_word_choice(colours, 0, "red", &value));
    cr_expect_eq(value, -1, "a miss leaves *value alone");
}

Test(config, word_choices_join_into_an_accepted_list)
{
    char out[64];
    memset(out, 'x', sizeof out);
    cr_expect_eq(config_join_word_choices(out, sizeof out, colours, CONFIG_COUNT_OF(colours)),
                 out);
    cr_expect_str_eq(out, "red, green, blue");
    cr_expect_str_eq(config_join_word_choices(out, sizeof out, colours, 1), "red");
    cr_expect_str_eq(config_join_word_choices(out, sizeof out, colours, 0), "",
                     "nothing left over from before");
    char small[8];
    cr_expect_str_eq(config_join_word_choices(small, sizeof small, colours, 3), "red, gr",
                     "cut at the buffer");
}

Test(config, a_list_item_follows_a_comma_unless_the_list_is_empty)
{
    char list[16] = "";
    config_append_to_list(list, sizeof list, "a");
    cr_expect_str_eq(list, "a");
    config_append_to_list(list, sizeof list, "bc");
    cr_expect_str_eq(list, "a, bc");
    config_append_to_list(list, sizeof list, "defghijkl");
    cr_expect_str_eq(list, "a, bc, defghijk", "cut to the 15 bytes that fit");
    config_append_to_list(list, sizeof list, "m");
    cr_expect_str_eq(list, "a, bc, defghijk", "a full list stays as it is");
    char one[1] = "";
    config_append_to_list(one, sizeof one, "z");
    cr_expect_str_eq(one, "");
}

/* A value quoted into a message stays on one line and cannot end the
 * quotes: control bytes become \xNN and a double quote \" ; a value too long
 * for the buffer ends in "...", with room always left for the NUL. */
Test(config, a_quoted_value_escapes_control_bytes_and_quotes)
{
    char out[QUOTED_SIZE];
    cr_expect_eq(config_quote_for_message(out, sizeof out, "plain", 5), out);
    cr_expect_str_eq(out, "plain");
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "a\nb\tc\x7f", 6),
                     "a\\x0ab\\x09c\\x7f");
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "say \"hi\"", 8),
                     "say \\\"hi\\\"");
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "", 0), "");
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "abcdef", 3), "abc",
                     "only length bytes are read");
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "a\0b", 3), "a\\x00b");
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "caf\xc3\xa9", 5), "caf\xc3\xa9",
                     "bytes above 0x7f are kept");
}

Test(config, a_quoted_value_too_long_for_the_buffer_ends_in_dots)
{
    char out[16];
    /* 16 bytes hold 9 plain bytes uncut: an escape and "..." stay reserved */
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "123456789", 9), "123456789");
    cr_expect_str_eq(config_quote_for_message(out, sizeof out, "1234567890", 10),
                     "123456789...");
    char newlines[64];
    memset(newlines, '\n', sizeof newlines);
    config_quote_for_message(out, sizeof out, newlines, sizeof newlines);
    cr_expect_lt(strlen(out), sizeof out);
    cr_expect_str_eq(out, "\\x0a\\x0a\\x0a...", "escapes are never split");

    char guarded[QUOTED_SIZE + 8];
    memset(guarded, '#', sizeof guarded);
    char value[1000];
    memset(value, '"', sizeof value);
    config_quote_for_message(guarded, QUOTED_SIZE, value, sizeof value);
    size_t length = strlen(guarded);
    cr_expect_lt(length, QUOTED_SIZE);
    cr_expect_str_eq(guarded + length - 3, "...");
    for (size_t i = QUOTED_SIZE; i < sizeof guarded; i++)
        cr_expect_eq(guarded[i], '#', "byte %zu past the buffer was written", i);
}

/* What config_parse_data returned goes back whole: every glob and the
 * array; a NULL array (what a failed parse leaves) is fine.  ASan reports
 * anything left or freed twice. */
Test(config, data_entries_are_freed_with_their_globs)
{
    struct data_entry *entries = NULL;
    size_t count = 0;
    cr_assert_eq(config_parse_data("a*:record=4;b\\:c:lines;d:record=1:role=eval", &entries,
                                   &count, error, sizeof error),
                 0, "%s", error);
    cr_assert_eq(count, 3);
    cr_expect_str_eq(entries[1].glob, "b:c");
    config_free_data_entries(entries, count);

    config_free_data_entries(NULL, 0);
    config_free_data_entries(NULL, 3);
    /* a partly parsed array: the entries not reached have no glob yet */
    struct data_entry *partial = calloc(3, sizeof *partial);
    cr_assert_not_null(partial);
    partial[0].glob = strdup("x");
    config_free_data_entries(partial, 3);

    cr_expect_eq(config_parse_data("a:record=1;b:record=x", &entries, &count, error,
                                   sizeof error),
                 -1);
    cr_expect_null(entries);
    config_free_data_entries(entries, count);
}
