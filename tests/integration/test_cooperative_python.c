/* test_cooperative_python.c - the cooperative API for Python trainers
 * (`import adaptshim`, scripts/python/adaptshim) through real jobs of
 * tests/trainers/coop_scenario.py, which checks AdaptDL's values itself
 * and prints "FAIL ..." for each one missed:
 *
 * - AdaptDL's accumulator and data loader scenario across 1 -> 4 -> 2
 *   replicas with its exact values, under mpirun (the package joins MPI's
 *   world) and as torch.distributed processes over gloo started here with
 *   MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and LOCAL_RANK (the package
 *   gives the library an all-gather over torch.distributed);
 * - AdaptDL's epoch scenario across 1 -> 3 replicas under mpirun;
 * - register_state brings a torch model and its optimizer back across a
 *   restart;
 * - without the preload the script runs as one replica against the
 *   stand-in, bad use raising one-line errors; torch.distributed replicas
 *   still sum over each other there;
 * - `make install` installs the package where it finds the installed
 *   stand-in.
 * The parts that need torch skip, saying so, when /usr/bin/python3 has none. */
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define PYTHON "/usr/bin/python3"
#define MAX_RANKS 4

/* PYTHONPATH naming the source tree's package, and the stand-in it falls
 * back to without the preload (the installed layout is tested below). */
static void python_settings(char *pythonpath, size_t pythonpath_size, char *standalone,
                            size_t standalone_size)
{
    snprintf(pythonpath, pythonpath_size, "PYTHONPATH=%s/scripts/python", harness_source_tree());
    snprintf(standalone, standalone_size, "ADAPTSHIM_STANDALONE=%s",
             harness_build_path("libadaptdl.so"));
}

/* Expects every one of `ranks` outputs in `text` to have passed: no FAIL
 * line and `expected` said `count` times. */
static void expect_passed(int status, const char *text, const char *what, const char *expected,
                          size_t count)
{
    cr_expect_eq(status, 0, "%s: %s\n%s", what, harness_describe_status(status), text);
    cr_expect_null(strstr(text, "FAIL"), "%s:\n%s", what, text);
    cr_expect_eq(harness_count_occurrences(text, expected), count,
                 "%s: %zu of %zu replicas said \"%s\"\n%s", what,
                 harness_count_occurrences(text, expected), count, expected, text);
}

/* mpirun -np RANKS python3 coop_scenario.py SCENARIO DIR/ck under the
 * preload, with the job's state directory and restart count. */
static void run_under_mpirun(const char *directory, const char *scenario, unsigned ranks,
                             unsigned restarts, const char *expected)
{
    char ranks_text[16], restarts_text[64], state[600], save[600], preload[600];
    char pythonpath[600], standalone[600], name[64];
    python_settings(pythonpath, sizeof pythonpath, standalone, sizeof standalone);
    snprintf(ranks_text, sizeof ranks_text, "%u", ranks);
    snprintf(restarts_text, sizeof restarts_text, "ADAPTDL_NUM_RESTARTS=%u", restarts);
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    snprintf(save, sizeof save, "ADAPTDL_SAVE=%s/ck", directory);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so"));
    snprintf(name, sizeof name, "%s-mpi-%u.out", scenario, restarts);
    char *out = harness_path_in(directory, name);
    char *checkpoint = harness_path_in(directory, "ck");
    char *script = strdup(harness_build_path("trainers/coop_scenario.py"));
    char *argv[] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                    "btl_vader_single_copy_mechanism", "none", "-np", ranks_text,
                    "-x", preload, "-x", pythonpath, "-x", state, "-x", save,
                    "-x", restarts_text, "-x", "ADAPTDL_LOG=warn", "-x",
                    "PYTHONDONTWRITEBYTECODE=1", PYTHON, script,
                    (char *)scenario, checkpoint, NULL};
    int status = harness_wait_mpirun(harness_start_mpirun(argv, out), 180);
    char *text = harness_read_output(out);
    char what[128];
    snprintf(what, sizeof what, "%s, restart %u on %u replicas under mpirun", scenario,
             restarts, ranks);
    /* mpirun forwards the ranks' output as it comes, so one rank's line
     * may lose its place: each rank's own "rank R ok" is looked for */
    cr_expect_eq(status, 0, "%s: %s\n%s", what, harness_describe_status(status), text);
    cr_expect_null(strstr(text, "FAIL"), "%s:\n%s", what, text);
    for (unsigned rank = 0; rank < ranks; rank++) {
        char said[64];
        snprintf(said, sizeof said, "rank %u%s%s", rank, expected[0] == ' ' ? "" : " ",
                 expected);
        char *line_end = strchr(said, '\n');
        if (line_end != NULL)
            *line_end = '\0';
        cr_expect_not_null(strstr(text, said), "%s: rank %u did not say \"%s\"\n%s", what, rank,
                           said, text);
    }
    free(text);
    free(script);
    free(checkpoint);
    free(out);
}

/* RANKS processes of coop_scenario.py SCENARIO DIR/ck as a torch launcher
 * starts them, with `preload` the library and the job's settings, without
 * it none (the stand-in). */
static void run_over_torch(const char *directory, const char *scenario, unsigned ranks,
                           unsigned restarts, bool preload, const char *expected)
{
    char restarts_text[64], state[600], save[600], pythonpath[600], standalone[600];
    char port[64], world[64];
    python_settings(pythonpath, sizeof pythonpath, standalone, sizeof standalone);
    snprintf(restarts_text, sizeof restarts_text, "ADAPTDL_NUM_RESTARTS=%u", restarts);
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    snprintf(save, sizeof save, "ADAPTDL_SAVE=%s/ck", directory);
    snprintf(port, sizeof port, "MASTER_PORT=%u", harness_free_port());
    snprintf(world, sizeof world, "WORLD_SIZE=%u", ranks);
    char *checkpoint = harness_path_in(directory, "ck");
    char *script = strdup(harness_build_path("trainers/coop_scenario.py"));
    pid_t pids[MAX_RANKS];
    char *outs[MAX_RANKS];
    cr_assert_leq(ranks, MAX_RANKS);
    for (unsigned rank = 0; rank < ranks; rank++) {
        char rank_text[32], local_text[32], name[64];
        snprintf(rank_text, sizeof rank_text, "RANK=%u", rank);
        snprintf(local_text, sizeof local_text, "LOCAL_RANK=%u", rank);
        snprintf(name, sizeof name, "%s-torch-%u-%u.out", scenario, restarts, rank);
        outs[rank] = harness_path_in(directory, name);
        char *err = NULL;
        if (asprintf(&err, "%s.err", outs[rank]) < 0)
            abort();
        char *job[] = {state, save, restarts_text, "ADAPTDL_LOG=warn", NULL};
        char *environment[16] = {pythonpath, standalone, "PYTHONDONTWRITEBYTECODE=1",
                                 "MASTER_ADDR=127.0.0.1", port, world, rank_text, local_text,
                                 NULL};
        size_t used = 8;
        for (size_t i = 0; preload && job[i] != NULL; i++)
            environment[used++] = job[i];
        environment[used] = NULL;
        char *argv[] = {PYTHON, script, (char *)scenario, checkpoint, NULL};
        pids[rank] = harness_start(argv, environment, preload, outs[rank], err);
        free(err);
    }
    for (unsigned rank = 0; rank < ranks; rank++) {
        int status = harness_wait(pids[rank], 180);
        char *text = harness_read_output(outs[rank]);
        char *err_path = NULL;
        if (asprintf(&err_path, "%s.err", outs[rank]) < 0)
            abort();
        char *err = harness_read_output(err_path);
        char what[160];
        snprintf(what, sizeof what, "%s, restart %u, rank %u of %u over torch.distributed%s "
                 "(stderr: %s)", scenario, restarts, rank, ranks,
                 preload ? "" : " without the preload", err ? err : "");
        expect_passed(status, text ? text : "", what, expected, 1);
        free(err);
        free(err_path);
        free(text);
        free(outs[rank]);
    }
    free(script);
    free(checkpoint);
}

static bool torch_available(void)
{
    if (harness_python_has("torch.distributed"))
        return true;
    return false;
}

Test(cooperative_python, adaptdl_accumulator_and_loop_restarts_one_four_two_under_mpirun,
     .timeout = 600)
{
    const char *directory = harness_temp_dir();
    run_under_mpirun(directory, "accumulator_and_loop", 1, 0, "restart with 4 replicas");
    run_under_mpirun(directory, "accumulator_and_loop", 4, 1, "restart with 2 replicas");
    run_under_mpirun(directory, "accumulator_and_loop", 2, 2, " ok\n");
    harness_remove_temp_dir(directory);
}

Test(cooperative_python, adaptdl_accumulator_and_loop_restarts_one_four_two_over_torch_gloo,
     .timeout = 600)
{
    if (!torch_available())
        cr_skip_test("%s cannot import torch.distributed: the torch.distributed job is not run",
                     PYTHON);
    const char *directory = harness_temp_dir();
    run_over_torch(directory, "accumulator_and_loop", 1, 0, true, "restart with 4 replicas");
    run_over_torch(directory, "accumulator_and_loop", 4, 1, true, "restart with 2 replicas");
    run_over_torch(directory, "accumulator_and_loop", 2, 2, true, " ok\n");
    harness_remove_temp_dir(directory);
}

Test(cooperative_python, adaptdl_epochs_restart_one_three_under_mpirun, .timeout = 600)
{
    const char *directory = harness_temp_dir();
    run_under_mpirun(directory, "epochs", 1, 0, "restart with 1 replicas");
    run_under_mpirun(directory, "epochs", 3, 1, " ok\n");
    harness_remove_temp_dir(directory);
}

/* The first run trains a model with an SGD optimizer (momentum), registers
 * both, checkpoints with their values in the checkpoint's text; the second
 * builds them from another seed and, once it read the checkpoint, holds
 * the very values saved (coop_scenario.py compares them). */
Test(cooperative_python, register_state_brings_a_model_and_optimizer_back, .timeout = 600)
{
    if (!torch_available())
        cr_skip_test("%s cannot import torch: register_state of a model is not run", PYTHON);
    const char *directory = harness_temp_dir();
    run_over_torch(directory, "state", 1, 0, true, "restart with 1 replicas");
    run_over_torch(directory, "state", 1, 1, true, " ok\n");
    harness_remove_temp_dir(directory);
}

/* Without the preload: one replica against the stand-in, the API's
 * refusals as one-line exceptions, no torch imported by the package. */
Test(cooperative_python, without_the_preload_the_script_runs_as_one_replica, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char pythonpath[600], standalone[600];
    python_settings(pythonpath, sizeof pythonpath, standalone, sizeof standalone);
    char *checkpoint = harness_path_in(directory, "ck");
    char *script = strdup(harness_build_path("trainers/coop_scenario.py"));
    char *argv[] = {PYTHON, script, "alone", checkpoint, NULL};
    char *environment[] = {pythonpath, standalone, "PYTHONDONTWRITEBYTECODE=1", NULL};
    struct run_result result;
    harness_run(&result, argv, environment, false, 120);
    expect_passed(result.status, result.out, "alone, without the preload", " ok\n", 1);
    cr_expect_eq(result.err[0], '\0', "nothing on stderr: %s", result.err);
    run_result_free(&result);

    /* and the library it needs missing: one line naming what to do */
    char *missing_argv[] = {PYTHON, "-c", "import adaptshim; adaptshim.Accumulator()", NULL};
    char *missing_environment[] = {pythonpath, "ADAPTSHIM_STANDALONE=/nonexistent.so",
                                   "PYTHONDONTWRITEBYTECODE=1", NULL};
    harness_run(&result, missing_argv, missing_environment, false, 60);
    cr_expect_neq(result.status, 0);
    cr_expect_not_null(strstr(result.err, "OSError: adaptshim: libadaptshim.so is not preloaded "
                                          "and libadaptdl.so was not found"),
                       "%s", result.err);
    run_result_free(&result);
    free(script);
    free(checkpoint);
    harness_remove_temp_dir(directory);
}

/* torch.distributed replicas without the preload nor any ADAPTDL_*
 * variable: the stand-in takes their layout from the package's
 * all-gather, so accumulators sum over both and a loop shares the records. */
Test(cooperative_python, torch_replicas_without_the_preload_sum_over_each_other, .timeout = 600)
{
    if (!torch_available())
        cr_skip_test("%s cannot import torch.distributed: the torch.distributed job is not run",
                     PYTHON);
    const char *directory = harness_temp_dir();
    run_over_torch(directory, "world", 2, 0, false, " ok\n");
    harness_remove_temp_dir(directory);
}

/* `make install` puts the package in PREFIX/share/adaptshim/python, where
 * it finds the installed stand-in by itself (no ADAPTSHIM_STANDALONE), and
 * under the installed preload it answers from the library. */
Test(cooperative_python, make_install_installs_the_package_beside_the_library, .timeout = 300)
{
    const char *source = harness_source_tree();
    const char *directory = harness_temp_dir();
    const char *program =
        "import adaptshim\n"
        "accum = adaptshim.Accumulator()\n"
        "accum['x'] += 2\n"
        "with accum.synchronized():\n"
        "    print('replicas', adaptshim.num_replicas(), 'x', accum['x'])\n";
    char *script = harness_path_in(directory, "program.py");
    cr_assert_eq(harness_write_file(script, program, strlen(program)), 0);
    char *commands = NULL;
    if (asprintf(&commands,
                 "export PYTHONPATH='%s/prefix/share/adaptshim/python'\n"
                 "unset ADAPTSHIM_STANDALONE\n"
                 "%s '%s'\n"
                 "LD_PRELOAD='%s/prefix/lib/libadaptshim.so' %s '%s'\n"
                 "make -s -C '%s' BUILD='%s' PREFIX='%s/prefix' uninstall >/dev/null\n"
                 "test -z \"$(find '%s/prefix' -type f)\" && echo uninstalled\n",
                 directory, PYTHON, script, directory, PYTHON, script, source,
                 harness_build_path("."), directory, directory) < 0)
        abort();
    struct run_result result;
    harness_run_after_install(&result, directory, commands);
    cr_expect_eq(harness_count_occurrences(result.out, "replicas 1 x 2.0\n"), 2, "%s\n%s",
                 result.out, result.err);
    cr_expect_eq(harness_count_occurrences(result.out, "uninstalled\n"), 1,
                 "make uninstall removes the package too: %s", result.out);
    run_result_free(&result);
    free(commands);
    free(script);
    harness_remove_temp_dir(directory);
}
