/* harness.h - running programs under the shim from Criterion tests.
 *
 * Integration tests start real processes (example trainers, coreutils) with
 * a controlled environment: the caller's environment minus every ADAPTDL_*,
 * SLURM_* and PMIX_* variable and LD_PRELOAD, plus what the test adds.  Output is captured in
 * files so that large outputs never block a pipe. */
#ifndef ADAPTSHIM_TEST_HARNESS_H
#define ADAPTSHIM_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The status of a process that a signal ended: negative, so that it never
 * reads as an exit status (a shell would report both as 128 + N, and an
 * exit with 143 is exactly what the shim's stops promise). */
#define HARNESS_KILLED_BY(signal_number) (-(signal_number))
/* "exit status N" or "killed by signal N", for messages. */
const char *harness_describe_status(int status);

struct run_result {
    int status;        /* exit status 0..255, or HARNESS_KILLED_BY(signal) */
    char *out;         /* captured stdout (NUL-terminated) */
    char *err;         /* captured stderr */
};

/* The environment variable that names the run's root directory, under
 * which every test's directories live (harness.c). */
#define HARNESS_ROOT_VARIABLE "ADAPTSHIM_TEST_ROOT"

/* Absolute path of a build product, e.g. "libadaptshim.so", "trainers/sgd_read". */
const char *harness_build_path(const char *relative);
/* A fresh temporary directory (a new string each call), under the run's
 * root: removed after the run when every test passed, kept (and named on
 * stderr) when one failed. */
const char *harness_temp_dir(void);
char *harness_path_in(const char *directory, const char *name);
/* Removes a directory and everything in it (a passing test's leftovers). */
void harness_remove_tree(const char *directory);
/* Removes a directory made by harness_temp_dir() and everything in it; a
 * test calls it once it has passed, so that only failures leave files. */
void harness_remove_temp_dir(const char *directory);

/* Runs argv with `environment` added ("NAME=value" entries, NULL-terminated)
 * and `preload` true to set LD_PRELOAD to the library.  Waits at most
 * timeout seconds (then SIGKILL: status HARNESS_KILLED_BY(SIGKILL)). */
int harness_run(struct run_result *result, char *const argv[], char *const environment[],
                bool preload, double timeout_seconds);
/* Open MPI's consent to run as root (CI runs as root), NULL-terminated: the
 * environment of a started mpirun. */
extern char *const harness_mpirun_as_root[];
/* Starts an mpirun command line (not preloaded itself: it passes the preload
 * to its ranks with -x) with stdout in `out` and stderr in `out`.err. */
pid_t harness_start_mpirun(char *const argv[], const char *out);
/* The pid of rank `rank` of a job that `mpirun` launched on this host (its
 * child started with OMPI_COMM_WORLD_RANK=rank), or 0 while there is none. */
pid_t harness_mpirun_rank_pid(pid_t mpirun, unsigned rank);
/* Waits for a started mpirun as harness_wait does; at the timeout its ranks
 * are killed with it (a killed mpirun leaves its ranks running). */
int harness_wait_mpirun(pid_t mpirun, double timeout_seconds);
/* Starts without waiting; output goes to the given files (may be NULL). */
pid_t harness_start(char *const argv[], char *const environment[], bool preload,
                    const char *out_path, const char *err_path);
/* Waits for a started process; returns its status as harness_run does. */
int harness_wait(pid_t pid, double timeout_seconds);
void run_result_free(struct run_result *result);

/* Whole file as a NUL-terminated string (NULL if missing); *size optional. */
char *harness_read_file(const char *path, size_t *size);
int harness_write_file(const char *path, const void *data, size_t size);

/* Generates a binary ADSD dataset with the project's generator. */
void harness_generate_dataset(const char *path, uint64_t records, unsigned dim, uint64_t seed);
void harness_generate_text(const char *path, uint64_t records, uint64_t seed);

/* A generated dataset in a fresh directory and the settings that bind a job
 * to it: ADAPTDL_DATA (records of `dim` float features, the header's count
 * rewritten for each view), ADAPTDL_CHECKPOINT_PATH=DIR/state and
 * ADAPTDL_SAVE=DIR/ck*. */
struct dataset_job {
    const char *directory;
    char *data;                 /* DIR/train.bin */
    char data_setting[600];
    char state_setting[600];
    char save_setting[600];
};
void dataset_job_init(struct dataset_job *job, uint64_t records, unsigned dim, uint64_t seed);

/* Parsed ids-log of an example trainer: "id ID epoch E" per record, "step S"
 * after each batch's records, "ckpt STEP", "epoch_end E" lines. */
enum id_event_kind { ID_EVENT_RECORD, ID_EVENT_CHECKPOINT, ID_EVENT_EPOCH_END, ID_EVENT_STEP };
struct id_event {
    enum id_event_kind kind;
    uint64_t value;    /* id, step or epoch */
    uint64_t epoch;
};
struct id_log {
    struct id_event *events;
    size_t count;
};
/* Fills `log` with the events `parse_line` makes of the lines of `text`
 * (it returns false for a line to pass over), then frees `text`; a NULL
 * text is an empty log. */
void id_log_parse_lines(struct id_log *log, char *text,
                        bool (*parse_line)(const char *line, struct id_event *event));
int harness_read_id_log(const char *path, struct id_log *log);
/* Drops everything after the last checkpoint line (what a crash loses). */
void id_log_truncate_to_last_checkpoint(struct id_log *log);
void id_log_free(struct id_log *log);

/* Adds to counts[epoch * records + id] every record of a batch whose step is
 * at most `last_step` (what the next run resumed from); UINT64_MAX keeps all. */
void id_log_count_committed(const struct id_log *log, uint64_t last_step, unsigned *counts,
                            uint64_t records, uint64_t epochs);
/* One run of a job that is killed and resumed again and again: how many
 * replicas it had, and each rank's id log and stdout. */
#define HARNESS_MAX_REPLICAS 8
struct harness_killed_run {
    unsigned replicas;
    char *logs[HARNESS_MAX_REPLICAS];
    char *outputs[HARNESS_MAX_REPLICAS];
};
/* Counts (a new array, counts[epoch * records + id]) every record each of
 * `runs` runs consumed up to the step the next run resumed at: a run
 * killed before it printed where it resumed changed nothing, and the last
 * run that started fresh restarted the whole history. */
unsigned *harness_count_committed_records(const struct harness_killed_run *killed_runs,
                                          unsigned runs, uint64_t records, uint64_t epochs);
/* The step a trainer printed it resumed at ("resumed at step S"), 0 if fresh. */
uint64_t harness_resumed_step(const char *output);
/* Reads the whole stdout file of a started process. */
char *harness_read_output(const char *path);

/* FNV-1a 64 of a buffer (what the probe programs print). */
uint64_t harness_fnv1a(const void *data, size_t size);
/* How many times needle occurs in text, without overlaps. */
size_t harness_count_occurrences(const char *text, const char *needle);
/* Asserts that adaptdl-inspect lists every one of `symbols` (NULL-ended,
 * "name@" prefixes) among what the shim intercepts in the build's
 * `program`: a test of an entry point really calls it. */
void harness_expect_intercepted_imports(const char *program, const char *const symbols[]);
/* Seconds on the monotonic clock, for deadlines. */
double harness_monotonic_seconds(void);
/* The value of the last event of `kind` in the log (0 when none). */
uint64_t id_log_last_value(const struct id_log *log, enum id_event_kind kind);
/* The last "step S" a trainer logged in its id log (0 when none). */
uint64_t harness_last_logged_step(const char *log_path);
/* The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z'...), 0 if gone. */
char harness_process_state(pid_t pid);
/* Running: it exists and is not a zombie (an orphan's zombie may wait for
 * its reaper). */
bool harness_process_running(pid_t pid);
/* A TCP port on the loopback interface that nothing listens on now (the
 * kernel's choice for port 0), for a rendezvous of the test's processes. */
unsigned harness_free_port(void);
/* Appends the NULL-ended list `more` (NULL: nothing) to list[used...] and
 * ends list with NULL; asserts that all of it fits in `capacity` entries.
 * Returns the new count of entries before the NULL. */
size_t harness_append_list(char **list, size_t used, size_t capacity, char *const more[]);
/* splitmix64: the next number of a seeded sequence, so that a random
 * schedule (kill points, delays) can be replayed from its seed. */
uint64_t harness_splitmix64(uint64_t *state);
/* Polls (every 0.5 ms, at most `attempts` times) until the process has
 * logged a step at least `step` in its id log or has ended, then kills it
 * with SIGKILL; the process is not reaped. */
void harness_kill_once_past_step(pid_t pid, const char *log_path, uint64_t step, int attempts);
/* Writes an executable shell script DIRECTORY/NAME; returns its path. */
char *harness_write_script(const char *directory, const char *name, const char *body);
/* Runs a command line (not preloaded, within 30 s) that must be refused:
 * it exits with 2 and writes one line, holding `expected`, on stderr;
 * `index` names the case in the messages. */
void harness_expect_refused_command(char *const argv[], char *const environment[],
                                    size_t index, const char *expected);
/* An adaptive job of trainers/sgd_mpi under adaptdl-wrap: a fresh dataset
 * job (seed 3) with the trainer's checkpoint in DIR/ck, the wrapper's
 * stdout in DIR/out and its stderr in DIR/err. */
struct harness_wrapped_job {
    struct dataset_job job;
    char *checkpoint;
    char *out, *err;
};
void harness_wrapped_job_init(struct harness_wrapped_job *wrapped, uint64_t records,
                              unsigned dim);
/* Starts `adaptdl-wrap -n REPLICAS --mpirun-arg --oversubscribe -- sgd_mpi
 * --data DATA --epochs EPOCHS --batch-size 16 --lr 0.01 --checkpoint CK
 * --resume --sleep-us SLEEP_US trainer_options...` (NULL-terminated, may be
 * NULL) with mpirun's consent to run as root, the job's data, state and
 * save settings, and `environment` (likewise). */
pid_t harness_start_wrapped_sgd_mpi(const struct harness_wrapped_job *wrapped,
                                    const char *replicas, const char *epochs,
                                    const char *sleep_us, char *const trainer_options[],
                                    char *const environment[]);
/* Runs the same job to its end (at most 280 s), asserts that it exited 0,
 * and returns its stderr (malloc'ed). */
char *harness_run_wrapped_sgd_mpi(const struct harness_wrapped_job *wrapped,
                                  const char *replicas, const char *epochs,
                                  const char *sleep_us, char *const environment[]);
/* The source tree the tests run for (ADAPTSHIM_SOURCE); asserts it is set. */
const char *harness_source_tree(void);
/* Runs `make install` of the source tree into DIRECTORY/prefix, then the
 * shell `commands` (under set -e, within 240 s), and expects it all to
 * exit with 0 (the message shows stdout and stderr). */
void harness_run_after_install(struct run_result *result, const char *directory,
                               const char *commands);

/* A job's files between runs (harness_state.c). */

/* Copies `from` to `to` (false, `to` untouched, when `from` does not
 * exist), as a launcher hands rank 0's checkpoint to another replica. */
bool harness_copy_file(const char *from, const char *to);
/* Hands rank 0's checkpoint DIR/ck0 to ranks 1 to replicas - 1 as DIR/ckR,
 * as a launcher does before every run: an old ckR is removed first, so
 * that without a ck0 there is none. */
void harness_hand_out_first_checkpoint(const char *directory, unsigned replicas);
struct adaptdl_snapshot;
/* Rewrites every snapshot of a state directory through `edit`, sealed with
 * a valid checksum again (a hand edit, an old or a hostile file); returns
 * how many there were. */
size_t harness_edit_snapshots(const char *state, void (*edit)(struct adaptdl_snapshot *snapshot));

/* Loader-style trainers (harness_records.c).  Their stdout is a record
 * stream: "epoch E record ID" per consumed record, "checkpoint step S" just
 * before each checkpoint commit, and first "resumed at step S ..." or
 * "starting fresh"; other lines are ignored. */

/* An llm.c-format token file of `records` records of `tokens_per_record`
 * tokens (tests/tools/gen_tokens). */
void harness_generate_tokens(const char *path, uint64_t records, unsigned tokens_per_record,
                             uint64_t seed);
/* Parses a record stream into RECORD (value = id) and CHECKPOINT (value =
 * step) events. */
int harness_read_record_stream(const char *path, struct id_log *log);
/* Adds to counts[epoch * records + id] every record logged before the
 * checkpoint line of step `step` (none if there is no such line);
 * UINT64_MAX counts every record. */
void record_stream_count_until(const struct id_log *log, uint64_t step, unsigned *counts,
                               uint64_t records, uint64_t epochs);
/* Where a run started: true with *step = S for "resumed at step S", with 0
 * for "starting fresh"; false if it printed neither (killed first). */
bool harness_resume_point(const char *output_path, uint64_t *step);
/* Lines of a file that contain `needle`. */
size_t harness_count_lines_containing(const char *path, const char *needle);
/* Polls until the file has `lines` lines containing `needle` (true) or the
 * process has ended or `timeout_seconds` passed (false).  The process is
 * not reaped. */
bool harness_wait_for_lines(const char *path, const char *needle, size_t lines, pid_t pid,
                            double timeout_seconds);
/* Whether /usr/bin/python3 can import `module`. */
bool harness_python_has(const char *module);

#endif
