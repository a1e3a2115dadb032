/* test_torch_statistics.c - transparent gradient statistics for unmodified
 * PyTorch trainers (adaptshim(7) "PYTORCH"): trainers/torch_linear_ddp.py run by
 * /usr/bin/python3 with the library preloaded and the project's Python
 * directory on PYTHONPATH, two replicas over gloo started here with the
 * variables a launcher sets, or one process.
 *
 * The regression's per-sample gradient at its optimum is -2 e x with
 * e ~ N(0, 0.1^2) and x uniform on [-1, 1]^8: tr(Sigma) = 4 * 0.01 * 8 / 3,
 * which the job record's grad_var must match within 15%, from the DDP
 * hook's norms (two replicas) and from the difference estimator over
 * consecutive optimizer steps (one process).  The hook leaves the
 * averaged gradients bit-identical; a trainer's own hook is kept, with
 * one line; a stop signal stops both replicas at the same optimizer step
 * with 143 after the interpreter's own exit; a decision restarts the job
 * under adaptdl-wrap with a new --batch-size and --lr; and a Python
 * program that never imports torch does not get it, nor a start that
 * costs 20 ms more processor time. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define PYTHON "/usr/bin/python3"
#define DIM 8
#define NOISE_VARIANCE 0.01
#define ANALYTIC_GRAD_VAR (4.0 * NOISE_VARIANCE * DIM / 3.0)

static void skip_without_torch(void)
{
    if (!harness_python_has("torch"))
        cr_skip_test(PYTHON " cannot import torch (python3-torch, which make deps installs): "
                     "the PyTorch statistics are not tested");
}

struct torch_job {
    const char *directory;
    char port[16];
    unsigned replicas;
    bool shim;            /* preloaded, with the Python directory on PYTHONPATH */
    const char *extra[8]; /* more NAME=value settings */
};

static void torch_job_init(struct torch_job *job, unsigned replicas, bool shim)
{
    memset(job, 0, sizeof *job);
    job->directory = harness_temp_dir();
    job->replicas = replicas;
    job->shim = shim;
    /* the kernel's choice of port: several test runs share the machine */
    snprintf(job->port, sizeof job->port, "%u", harness_free_port());
}

static char *job_path(const struct torch_job *job, const char *name, unsigned rank)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s.%u", job->directory, name, rank) < 0)
        abort();
    return path;
}

/* Starts replica `rank` of the job with the trainer's arguments; its
 * output goes to NAME.out.RANK and NAME.err.RANK. */
static pid_t start_replica(const struct torch_job *job, const char *name, unsigned rank,
                           char *const arguments[])
{
    static char settings[16][1024];
    char *environment[32];
    size_t used = 0;
    snprintf(settings[0], sizeof settings[0], "MASTER_PORT=%s", job->port);
    snprintf(settings[1], sizeof settings[1], "WORLD_SIZE=%u", job->replicas);
    snprintf(settings[2], sizeof settings[2], "RANK=%u", rank);
    snprintf(settings[3], sizeof settings[3], "LOCAL_RANK=%u", rank);
    snprintf(settings[4], sizeof settings[4], "LOCAL_WORLD_SIZE=%u", job->replicas);
    snprintf(settings[5], sizeof settings[5], "PYTHONPATH=%s/scripts/python",
             harness_source_tree());
    snprintf(settings[6], sizeof settings[6], "ADAPTDL_CHECKPOINT_PATH=%s/state",
             job->directory);
    for (int i = 0; i < 5; i++)
        environment[used++] = settings[i];
    environment[used++] = "MASTER_ADDR=127.0.0.1";
    environment[used++] = "GLOO_SOCKET_IFNAME=lo";
    if (job->shim) {
        environment[used++] = settings[5];
        environment[used++] = settings[6];
        environment[used++] = "ADAPTDL_LOG=debug";
    }
    for (size_t i = 0; i < 8 && job->extra[i]; i++)
        environment[used++] = (char *)job->extra[i];
    environment[used] = NULL;

    char *argv[48] = {PYTHON, strdup(harness_build_path("trainers/torch_linear_ddp.py"))};
    size_t count = 2;
    for (size_t i = 0; arguments[i] && count < 46; i++)
        argv[count++] = arguments[i];
    argv[count] = NULL;
    char out_name[128], err_name[128];
    snprintf(out_name, sizeof out_name, "%s.out", name);
    snprintf(err_name, sizeof err_name, "%s.err", name);
    char *out = job_path(job, out_name, rank), *err = job_path(job, err_name, rank);
    pid_t pid = harness_start(argv, environment, job->shim, out, err);
    free(out);
    free(err);
    free(argv[1]);
    return pid;
}

/* Runs every replica to its end; each must exit 0. */
static void run_job(const struct torch_job *job, const char *name, char *const arguments[])
{
    pid_t pids[4];
    for (unsigned rank = 0; rank < job->replicas; rank++)
        pids[rank] = start_replica(job, name, rank, arguments);
    for (unsigned rank = 0; rank < job->replicas; rank++) {
        int status = harness_wait(pids[rank], 200);
        char *err_name = NULL;
        if (asprintf(&err_name, "%s.err", name) < 0)
            abort();
        char *err = job_path(job, err_name, rank);
        char *text = harness_read_output(err);
        cr_assert_eq(status, 0, "%s rank %u: %s\n%s", name, rank,
                     harness_describe_status(status), text);
        free(text);
        free(err);
        free(err_name);
    }
}

static char *replica_output(const struct torch_job *job, const char *name, const char *stream,
                            unsigned rank)
{
    char suffix[128];
    snprintf(suffix, sizeof suffix, "%s.%s", name, stream);
    char *path = job_path(job, suffix, rank);
    char *text = harness_read_output(path);
    free(path);
    return text;
}

/* The value after `key` on the line that holds `marker`, or NAN. */
static double number_after(const char *text, const char *marker, const char *key)
{
    const char *line = strstr(text, marker);
    if (line == NULL)
        return NAN;
    const char *found = strstr(line, key);
    return found ? strtod(found + strlen(key), NULL) : NAN;
}

/* The job record's grad_var as rank 0 writes it at exit. */
static double job_record_grad_var(const struct torch_job *job, const char *name)
{
    char *err = replica_output(job, name, "err", 0);
    double grad_var = number_after(err, "job record written (exit)", "grad_var ");
    cr_assert(!isnan(grad_var), "no job record line in:\n%s", err);
    free(err);
    return grad_var;
}

static void expect_analytic_noise(unsigned replicas)
{
    skip_without_torch();
    struct torch_job job;
    torch_job_init(&job, replicas, true);
    /* an initial global batch of 8: the averages cover the last few
     * hundred steps, as in the MPI test */
    job.extra[0] = "ADAPTDL_BATCH_SIZE=8";
    char *arguments[] = {"--batch-size", replicas == 1 ? "8" : "4", "--lr", "0.02",
                         "--steps", "2000", "--start-at-optimum", NULL};
    run_job(&job, "noise", arguments);
    double grad_var = job_record_grad_var(&job, "noise");
    cr_expect(grad_var > 0.85 * ANALYTIC_GRAD_VAR && grad_var < 1.15 * ANALYTIC_GRAD_VAR,
              "%u replica(s): grad_var %g, analytic %g", replicas, grad_var,
              ANALYTIC_GRAD_VAR);
    harness_remove_temp_dir(job.directory);
}

Test(torch_statistics, two_replicas_over_gloo_estimate_the_analytic_noise_within_15_percent,
     .timeout = 300)
{
    expect_analytic_noise(2);
}

Test(torch_statistics, one_process_estimates_the_analytic_noise_within_15_percent,
     .timeout = 300)
{
    expect_analytic_noise(1);
}

/* "params HASH" of a replica's run. */
static char *parameters_hash(const struct torch_job *job, const char *name, unsigned rank)
{
    char *out = replica_output(job, name, "out", rank);
    const char *line = strstr(out, "params ");
    cr_assert_not_null(line, "%s rank %u printed no parameters:\n%s", name, rank, out);
    char *hash = strndup(line + strlen("params "), 64);
    free(out);
    return hash;
}

static void expect_same_parameters(const struct torch_job *plain, const struct torch_job *shim,
                                   const char *name)
{
    for (unsigned rank = 0; rank < 2; rank++) {
        char *without = parameters_hash(plain, name, rank);
        char *with = parameters_hash(shim, name, rank);
        cr_expect_str_eq(with, without, "rank %u: parameters differ with the hook", rank);
        free(without);
        free(with);
    }
}

Test(torch_statistics, parameters_after_50_steps_are_bit_identical_with_and_without_the_hook,
     .timeout = 300)
{
    skip_without_torch();
    char *arguments[] = {"--batch-size", "5", "--lr", "0.002", "--steps", "50", "--dim", "1000",
                         NULL};
    struct torch_job plain, shim;
    torch_job_init(&plain, 2, false);
    torch_job_init(&shim, 2, true);
    run_job(&plain, "run", arguments);
    run_job(&shim, "run", arguments);
    expect_same_parameters(&plain, &shim, "run");
    /* (trained, not diverged: the hashes compare real numbers) */
    char *out = replica_output(&shim, "run", "out", 0);
    double weight = number_after(out, "max_abs_weight", "max_abs_weight ");
    cr_expect(isfinite(weight) && weight > 0.01 && weight < 10, "weights %g:\n%s", weight, out);
    free(out);
    /* the hook did run: the replicas' norms gave statistics */
    double grad_var = job_record_grad_var(&shim, "run");
    cr_expect(grad_var > 0, "no gradient statistics with the hook: grad_var %g", grad_var);
    harness_remove_temp_dir(plain.directory);
    harness_remove_temp_dir(shim.directory);
}

Test(torch_statistics, a_trainer_with_its_own_comm_hook_keeps_it_and_is_told_once,
     .timeout = 300)
{
    skip_without_torch();
    char *arguments[] = {"--batch-size", "4", "--lr", "0.05", "--steps", "30", "--own-hook",
                         NULL};
    struct torch_job shim;
    torch_job_init(&shim, 2, true);
    run_job(&shim, "own", arguments);
    for (unsigned rank = 0; rank < 2; rank++) {
        char *out = replica_output(&shim, "own", "out", rank);
        char *err = replica_output(&shim, "own", "err", rank);
        cr_expect(strstr(out, "own hook calls 30\n") != NULL,
                  "rank %u: the trainer's hook reduced every step:\n%s", rank, out);
        cr_expect_eq(harness_count_occurrences(err, "communication hook"), 1,
                     "rank %u: one line about the trainer's hook:\n%s", rank, err);
        cr_expect(strstr(err, "counting_allreduce_hook") != NULL &&
                      strstr(err, "no gradient statistics") != NULL,
                  "rank %u: the line names the hook and what is lost:\n%s", rank, err);
        free(out);
        free(err);
    }
    /* the steps still agree; their statistics are absent */
    char *err = replica_output(&shim, "own", "err", 0);
    cr_expect(strstr(err, "job record written (exit): 1 profiles, grad_sqr nan, grad_var nan") !=
                  NULL,
              "statistics without a measured step:\n%s", err);
    cr_expect(strstr(err, " 30 steps,") != NULL, "30 agreed steps:\n%s", err);
    free(err);
    harness_remove_temp_dir(shim.directory);
}

/* A trainer that restores its optimizer's state from its checkpoint puts
 * the saved learning rate back over the one the command line gave, which
 * the shim injects for the batch size (ADAPTDL_LR_ARG): one line says so,
 * with both rates; a trainer that loads the same rate is not told. */
Test(torch_statistics, a_checkpoint_that_restores_another_learning_rate_is_told_in_one_line,
     .timeout = 300)
{
    skip_without_torch();
    struct torch_job job;
    torch_job_init(&job, 1, true);
    char checkpoint[512];
    snprintf(checkpoint, sizeof checkpoint, "%s/model.pt", job.directory);
    job.extra[0] = "ADAPTDL_LR_ARG=argv:--lr";
    char *first[] = {"--batch-size", "4", "--lr", "0.05", "--steps", "10", "--checkpoint",
                     checkpoint, "--checkpoint-every", "5", "--restore-optimizer", NULL};
    run_job(&job, "first", first);
    char *same[] = {"--batch-size", "4", "--lr", "0.05", "--steps", "15", "--checkpoint",
                    checkpoint, "--checkpoint-every", "5", "--restore-optimizer", NULL};
    run_job(&job, "same", same);
    char *other[] = {"--batch-size", "4", "--lr", "0.2", "--steps", "20", "--checkpoint",
                     checkpoint, "--checkpoint-every", "5", "--restore-optimizer", NULL};
    run_job(&job, "other", other);

    char *same_err = replica_output(&job, "same", "err", 0);
    cr_expect(strstr(same_err, "load_state_dict") == NULL,
              "the same rate restored is nothing to tell:\n%s", same_err);
    char *other_out = replica_output(&job, "other", "out", 0);
    cr_expect(strstr(other_out, "resumed at step 15") != NULL, "it resumed:\n%s", other_out);
    char *other_err = replica_output(&job, "other", "err", 0);
    cr_expect_eq(harness_count_occurrences(other_err, "load_state_dict"), 1,
                 "one line about the restored rate:\n%s", other_err);
    cr_expect(strstr(other_err, "learning rate 0.05 over the 0.2") != NULL &&
                  strstr(other_err, "ADAPTDL_LR_ARG") != NULL,
              "the line gives both rates and the variable:\n%s", other_err);
    free(same_err);
    free(other_out);
    free(other_err);
    harness_remove_temp_dir(job.directory);
}

/* Last "step S" of a replica's step log (0 before any). */
static uint64_t last_logged_step(const struct torch_job *job, unsigned rank)
{
    char *path = job_path(job, "steps", rank);
    uint64_t last = harness_last_logged_step(path);
    free(path);
    return last;
}

Test(torch_statistics, sigusr1_to_both_replicas_stops_them_at_the_same_step_with_143,
     .timeout = 300)
{
    skip_without_torch();
    struct torch_job job;
    torch_job_init(&job, 2, true);
    job.extra[0] = "PYTHONUNBUFFERED=";   /* stdout buffered, as a trainer's usually is */
    pid_t pids[2];
    char *logs[2];
    for (unsigned rank = 0; rank < 2; rank++) {
        logs[rank] = job_path(&job, "steps", rank);
        char *arguments[] = {"--batch-size", "4", "--lr", "0.02", "--steps", "1000000",
                             "--sleep", "0.005", "--step-log", logs[rank], NULL};
        pids[rank] = start_replica(&job, "stop", rank, arguments);
    }
    for (int attempt = 0; attempt < 12000; attempt++) {
        if (last_logged_step(&job, 0) >= 20 && last_logged_step(&job, 1) >= 20)
            break;
        usleep(10000);
    }
    cr_assert_geq(last_logged_step(&job, 1), 20, "the replicas never reached step 20");
    kill(pids[0], SIGUSR1);
    kill(pids[1], SIGUSR1);
    for (unsigned rank = 0; rank < 2; rank++) {
        int status = harness_wait(pids[rank], 120);
        cr_expect_eq(status, 143, "rank %u: %s", rank, harness_describe_status(status));
        char *out = replica_output(&job, "stop", "out", rank);
        cr_expect(strstr(out, "atexit handler ran") != NULL,
                  "rank %u: the interpreter exited as usual (atexit, buffers):\n%s", rank, out);
        free(out);
    }
    cr_expect_eq(last_logged_step(&job, 0), last_logged_step(&job, 1),
                 "rank 0 stopped after step %llu, rank 1 after %llu",
                 (unsigned long long)last_logged_step(&job, 0),
                 (unsigned long long)last_logged_step(&job, 1));
    char *record = NULL;
    if (asprintf(&record, "%s/state/job.msgpack", job.directory) < 0)
        abort();
    struct stat status;
    cr_expect(stat(record, &status) == 0 && status.st_size > 0,
              "the job record is written at the stop");
    free(record);
    free(logs[0]);
    free(logs[1]);
    harness_remove_temp_dir(job.directory);
}

/* "batch_size B lr LR" lines of the wrapper's output, in order. */
static size_t launches(const char *out, unsigned *batch, double *lr, size_t capacity)
{
    size_t count = 0;
    for (const char *line = strstr(out, "batch_size "); line && count < capacity;
         line = strstr(line + 1, "batch_size ")) {
        batch[count] = (unsigned)strtoul(line + strlen("batch_size "), NULL, 10);
        const char *value = strstr(line, " lr ");
        lr[count] = value ? strtod(value + 4, NULL) : NAN;
        count++;
    }
    return count;
}

/* A job under adaptdl-wrap with batch-size control: its decision restarts
 * it (143) with a larger --batch-size and the linear rule's --lr.  One
 * replica runs directly; several under --launcher torch, each printing the
 * same line per launch (so equal neighbours are one launch). */
static void expect_a_decision_restart(const char *replicas, const char *initial_global)
{
    skip_without_torch();
    const char *directory = harness_temp_dir();
    char state[600], save[600], checkpoint[600], batch_size[64];
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    snprintf(save, sizeof save, "ADAPTDL_SAVE=%s/ck*", directory);
    snprintf(checkpoint, sizeof checkpoint, "%s/ck.pt", directory);
    snprintf(batch_size, sizeof batch_size, "ADAPTDL_BATCH_SIZE=%s", initial_global);
    char *environment[] = {state, save, "ADAPTDL_BSZ_ARG=argv:--batch-size",
                           "ADAPTDL_LR_ARG=argv:--lr", "ADAPTDL_LR_RULE=linear",
                           batch_size, "ADAPTDL_MAX_BATCH_SIZE=256",
                           "ADAPTDL_DECIDE_SECONDS=0.3", "ADAPTDL_PAYBACK_SECONDS=100000",
                           "ADAPTDL_LOG=info", NULL};
    char *trainer = strdup(harness_build_path("trainers/torch_linear_ddp.py"));
    char *argv[] = {(char *)harness_build_path("adaptdl-wrap"), "-n", (char *)replicas,
                    "--launcher", "torch", "--", PYTHON, trainer, "--batch-size", "8", "--lr",
                    "0.01", "--steps", "4000", "--checkpoint", checkpoint,
                    "--checkpoint-every", "20", NULL};
    if (strcmp(replicas, "1") == 0) {   /* one replica: run directly, no launcher */
        memmove(&argv[3], &argv[5], (sizeof argv / sizeof argv[0] - 5) * sizeof argv[0]);
    }
    struct run_result result;
    int status = harness_run(&result, argv, environment, false, 360);
    cr_assert_eq(status, 0, "%s\n%s\n%s", harness_describe_status(status), result.out,
                 result.err);
    unsigned batch[64];
    double lr[64];
    size_t lines = launches(result.out, batch, lr, 64), count = 0;
    for (size_t i = 0; i < lines; i++)
        if (count == 0 || batch[i] != batch[count - 1] || lr[i] != lr[count - 1]) {
            batch[count] = batch[i];
            lr[count++] = lr[i];
        }
    cr_assert_geq(count, 2, "no restart:\n%s\n%s", result.out, result.err);
    cr_expect_eq(batch[0], 8);
    cr_expect(batch[1] > 8, "the restart's batch size %u", batch[1]);
    double expected_lr = 0.01 * batch[1] / 8.0;
    cr_expect(fabs(lr[1] - expected_lr) < 1e-6 * expected_lr,
              "the restart's lr %g, linear rule %g", lr[1], expected_lr);
    cr_expect(strstr(result.out, "resumed at step") != NULL, "the restart resumed:\n%s",
              result.out);
    run_result_free(&result);
    free(trainer);
    harness_remove_temp_dir(directory);
}

Test(torch_statistics, a_decision_restarts_the_job_with_a_new_batch_size_and_lr,
     .timeout = 400)
{
    expect_a_decision_restart("1", "8");
}

Test(torch_statistics, a_decision_restarts_two_gloo_replicas_with_a_new_batch_size_and_lr,
     .timeout = 400)
{
    expect_a_decision_restart("2", "16");
}

/* The processor seconds a run of argv took (it must exit 0). */
static double start_cpu_seconds(char *const argv[], char *const environment[], bool preload)
{
    pid_t pid = harness_start(argv, environment, preload, "/dev/null", "/dev/null");
    int status;
    struct rusage usage;
    cr_assert_eq(wait4(pid, &status, 0, &usage), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s failed", argv[0]);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec * 1e-6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6;
}

static int compare_seconds(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A Python program that never imports torch: torch stays out of it, the
 * sitecustomize it hides still runs, and starting costs less than 20 ms
 * more than without the preload (medians of alternating runs' processor
 * time, which a loaded machine inflates far less than wall time). */
Test(torch_statistics, a_program_that_never_imports_torch_is_untouched, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    /* a sitecustomize further on the path, which the project's one hides */
    char *chained_directory = harness_path_in(directory, "chained");
    cr_assert_eq(mkdir(chained_directory, 0755), 0);
    char *chained = harness_path_in(chained_directory, "sitecustomize.py");
    const char *body = "import builtins\nbuiltins.chained_sitecustomize_ran = True\n";
    cr_assert_eq(harness_write_file(chained, body, strlen(body)), 0);
    char python_path[1200], state[600];
    snprintf(python_path, sizeof python_path, "PYTHONPATH=%s/scripts/python:%s",
             harness_source_tree(), chained_directory);
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    char *with[] = {python_path, state, NULL};
    char *probe[] = {PYTHON, "-c",
                     "import sys, builtins\n"
                     "print('torch' in sys.modules, 'ctypes' in sys.modules,\n"
                     "      getattr(builtins, 'chained_sitecustomize_ran', False))",
                     NULL};
    struct run_result result;
    int status = harness_run(&result, probe, with, true, 60);
    cr_assert_eq(status, 0, "%s", result.err);
    cr_expect_str_eq(result.out, "False False True\n",
                     "torch and ctypes not imported, the chained sitecustomize run: %s",
                     result.out);
    run_result_free(&result);

    /* Processor time (user + system) of each start, as wait4 reports it:
     * on a loaded machine a process's wall time mostly measures how long
     * it waited for a processor, which is not what it costs. */
    enum { RUNS = 21 };
    double plain[RUNS], shim[RUNS];
    char *pass[] = {PYTHON, "-c", "pass", NULL};
    for (int run = 0; run < RUNS; run++) {
        plain[run] = start_cpu_seconds(pass, NULL, false);
        shim[run] = start_cpu_seconds(pass, with, true);
    }
    qsort(plain, RUNS, sizeof plain[0], compare_seconds);
    qsort(shim, RUNS, sizeof shim[0], compare_seconds);
    double cost = shim[RUNS / 2] - plain[RUNS / 2];
    cr_expect(cost < 0.020, "start-up cost %.1f ms of processor time (median %.1f ms against "
              "%.1f ms)", cost * 1e3, shim[RUNS / 2] * 1e3, plain[RUNS / 2] * 1e3);
    free(chained);
    free(chained_directory);
    harness_remove_temp_dir(directory);
}

/* The exported API the Python glue uses refuses misuse with one line each
 * and a -1, and works once installed: a boundary before any transport, a
 * transport given half, a second transport, an element size that is not
 * a float's or a double's, norms that are not finite. */
Test(torch_statistics, the_steps_api_refuses_misuse_with_one_line_each, .timeout = 60)
{
    const char *directory = harness_temp_dir();
    char state[600];
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    char *environment[] = {state, NULL};
    const char *script =
        "import ctypes\n"
        "lib = ctypes.CDLL(None)\n"
        "POST = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,\n"
        "                        ctypes.c_void_p, ctypes.c_int)\n"
        "COMPLETE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)\n"
        "lib.adaptdl_steps_install_transport.argtypes = [ctypes.c_uint, POST, COMPLETE,\n"
        "                                                ctypes.c_void_p]\n"
        "lib.adaptdl_steps_report_gradient.argtypes = [ctypes.c_double] * 4\n"
        "lib.adaptdl_steps_boundary.argtypes = [ctypes.c_uint64]\n"
        "norm = ctypes.c_double()\n"
        "data = (ctypes.c_float * 3)(1, 2, 2)\n"
        "print(lib.adaptdl_steps_active(),\n"
        "      lib.adaptdl_steps_boundary(4),\n"
        "      lib.adaptdl_steps_install_transport(2, POST(), COMPLETE(), None),\n"
        "      lib.adaptdl_steps_install_transport(1, POST(), COMPLETE(), None),\n"
        "      lib.adaptdl_steps_install_transport(1, POST(), COMPLETE(), None),\n"
        "      lib.adaptdl_steps_squared_norm(data, 3, 2, ctypes.byref(norm)),\n"
        "      lib.adaptdl_steps_squared_norm(data, 3, 4, ctypes.byref(norm)), norm.value,\n"
        "      lib.adaptdl_steps_report_gradient(float('nan'), 1.0, 0.0, 0.0),\n"
        "      lib.adaptdl_steps_report_gradient(9.0, 9.0, 0.0, 0.0),\n"
        "      lib.adaptdl_steps_boundary(4), lib.adaptdl_steps_boundary(4))\n";
    char *argv[] = {PYTHON, "-c", (char *)script, NULL};
    struct run_result result;
    int status = harness_run(&result, argv, environment, true, 60);
    cr_assert_eq(status, 0, "%s", result.err);
    cr_expect_str_eq(result.out, "1 -1 -1 0 -1 -1 0 9.0 -1 0 0 0\n", "%s", result.err);
    const char *expected[] = {
        "adaptdl_steps_boundary: no transport installed (adaptdl_steps_install_transport first)",
        "adaptdl_steps_install_transport: give post and complete for 2 replicas, or neither "
        "for one replica (a loopback)",
        "adaptdl_steps_install_transport: a transport is installed already (once per process)",
        "adaptdl_steps_squared_norm: give floats (element size 4) or doubles (8) and a result "
        "pointer (got element size 2)",
        "adaptdl_steps_report_gradient: squared norms must be finite and at least 0 (got nan, "
        "1)",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        cr_expect_eq(harness_count_occurrences(result.err, expected[i]), 1,
                     "one line \"%s\" in:\n%s", expected[i], result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 5, "nothing else:\n%s",
                 result.err);
    run_result_free(&result);
    harness_remove_temp_dir(directory);
}
