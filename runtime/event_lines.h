/* event_lines.h - the lines of the metrics file (ADAPTDL_METRICS_FILE,
 * adaptshim(7) "Metrics file"), one per event: what each carries, and which values are absent
 * (null, so that every line of a type has the same members).  Each function builds
 * the whole line, json_line_end included, for the shim's metrics writer
 * (shim/events.c) to write; `time_seconds` is the wall-clock time of the
 * event.  adaptshim(7) "Metrics file" lists the members. */
#ifndef ADAPTSHIM_EVENT_LINES_H
#define ADAPTSHIM_EVENT_LINES_H

#include <stdbool.h>
#include <stdint.h>

#include "dataset_view.h"
#include "metrics.h"
#include "state_store.h"
#include "step_monitor.h"

struct batch_decision_inputs;
struct batch_decision;
struct goodput_model;
struct replica_choice;

/* What a run was started with, for the "start" event written once per run
 * before the trainer's main: the restart count, the replica layout, and the
 * batch size and learning rate injected into the trainer (absent when the
 * shim injected none). */
struct run_start {
    uint32_t restarts;
    uint32_t replicas;
    uint32_t rank;
    bool batch_injected;
    uint64_t local_bsz;
    uint64_t global_bsz;
    uint64_t initial_global_bsz;
    bool learning_rate_injected;
    double trainer_learning_rate;   /* the trainer's own, for the initial batch */
    double learning_rate;           /* what the trainer was given */
    double lr_factor;
    const char *lr_rule;            /* ADAPTDL_LR_RULE's name */
};

/* Where the job is: the step counter and progress continue across
 * restarts (they are bound in snapshots), unlike agreed_step.step. */
struct job_position {
    uint64_t step;
    uint64_t epoch;
    double progress;
};

/* "pass_begin" / "pass_end" of a data file (`records_consumed` at the end
 * only); a pass replay skips says so, its lengths not being the epoch's. */
void event_line_pass(struct json_line *line, double time_seconds,
                     const struct dataset_file *file, bool begins, uint64_t pass,
                     uint64_t records_consumed, const char *why);
/* "start", once per run: what the shim injected is null when it injected
 * nothing. */
void event_line_start(struct json_line *line, double time_seconds,
                      const struct run_start *start);
/* "step": the batch is null when the trainer's local batch is not known;
 * `model` (may be NULL): once a decision fitted one, the line also carries
 * the efficiency and goodput of the step's batch. */
void event_line_step(struct json_line *line, double time_seconds,
                     const struct agreed_step *step, const struct grad_noise_state *noise,
                     const struct job_position *position, bool local_bsz_known,
                     const struct goodput_model *model, uint32_t nodes);
/* "snapshot": the checkpoint it is bound to, by size and hash (hex). */
void event_line_snapshot(struct json_line *line, double time_seconds,
                         const char *checkpoint_path, const struct content_identity *identity,
                         bool written);
/* "restore": `status` 0 when the snapshot was restored. */
void event_line_restore(struct json_line *line, double time_seconds,
                        const char *checkpoint_path, int status);
void event_line_exit(struct json_line *line, double time_seconds, int status,
                     const char *why);
/* "decision": a batch-size decision with its inputs and outputs (adaptshim(7)
 * "Metrics file"). */
void event_line_decision(struct json_line *line, double time_seconds,
                         const struct batch_decision_inputs *inputs,
                         const struct batch_decision *decision, bool restart);
/* "replica_decision": the goodputs compared, the speedup and the payback
 * time of a restart with another replica count. */
void event_line_replica_decision(struct json_line *line, double time_seconds,
                                 const struct replica_choice *choice, uint32_t replicas,
                                 double restart_cost, bool restart);

#endif
