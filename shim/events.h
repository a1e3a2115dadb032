/* events.h - the machine-readable metrics file (ADAPTDL_METRICS_FILE, SPEC
 * §9): one JSON line per optimizer step (rate-limited, the latest always
 * written before exit) and one per event (start, pass begin/end, snapshot,
 * restore, decision, exit). */
#ifndef ADAPTSHIM_EVENTS_H
#define ADAPTSHIM_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "state_store.h"
#include "step_monitor.h"

void shim_events_open(void);
/* The metrics file's descriptor, or -1 when none is written. */
int shim_events_descriptor(void);

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
void shim_events_start(const struct run_start *start);
struct goodput_model;
/* Where the job is: the step counter and progress continue across
 * restarts (they are bound in snapshots), unlike agreed_step.step. */
struct job_position {
    uint64_t step;
    uint64_t epoch;
    double progress;
};
/* `model` (may be NULL): once a decision fitted one, the step line also
 * carries the efficiency and goodput of the step's batch. */
void shim_events_step(const struct agreed_step *step, const struct grad_noise_state *noise,
                      const struct job_position *position, bool local_bsz_known,
                      const struct goodput_model *model, uint32_t nodes);
void shim_events_snapshot(const char *checkpoint_path, const struct content_identity *identity,
                          bool written);
void shim_events_restore(const char *checkpoint_path, int status);
void shim_events_exit(int status, const char *why);

struct batch_decision_inputs;
struct batch_decision;
/* A batch-size decision with its inputs and outputs (SPEC §7 "Events"). */
void shim_events_decision(const struct batch_decision_inputs *inputs,
                          const struct batch_decision *decision, bool restart);
struct replica_choice;
/* Whether another replica count in ADAPTDL_REPLICAS_RANGE pays a restart
 * (README "Launcher"): a "replica_decision" event with the goodputs it
 * compared, the speedup and the payback time. */
void shim_events_replica_decision(const struct replica_choice *choice, uint32_t replicas,
                                  double restart_cost, bool restart);
/* ADAPTDL_HINTS_FILE: the latest model as JSON, for a launcher or a
 * scheduler (AdaptDL's scheduler hints). */
void shim_events_write_hints(const char *path, const struct batch_decision_inputs *inputs,
                             const struct batch_decision *decision,
                             uint32_t max_replicas_profiled);

#endif
