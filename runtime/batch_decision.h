/* batch_decision.h - one batch-size decision (SPEC §7 "Decisions"): fit the
 * throughput model to the job record's step profiles, pick the batch size
 * with the best goodput, and say whether a restart pays for itself. */
#ifndef ADAPTSHIM_BATCH_DECISION_H
#define ADAPTSHIM_BATCH_DECISION_H

#include <stdbool.h>
#include <stdint.h>

#include "goodput.h"
#include "state_store.h"

/* Pollux's restart cost until one has been measured. */
#define BATCH_DECISION_DEFAULT_RESTART_COST 30.0

struct batch_decision_inputs {
    const struct adaptdl_job_record *record;   /* profiles, restart cost */
    double grad_sqr;
    double grad_var;                           /* per sample */
    uint32_t nodes;
    uint32_t replicas;
    uint64_t current_local_bsz;
    uint64_t initial_global_bsz;
    uint64_t max_global_bsz;
    uint64_t local_bsz_min;                    /* 0: none */
    uint64_t local_bsz_max;                    /* 0: none */
    double speedup_threshold;                  /* ADAPTDL_SPEEDUP */
    double payback_seconds;                    /* ADAPTDL_PAYBACK_SECONDS */
};

struct batch_decision {
    bool valid;                  /* a model could be fit */
    bool restart;                /* speedup and payback both hold */
    struct perf_params perf;
    struct goodput_choice choice;
    double goodput_current;
    double speedup;              /* goodput_chosen / goodput_current */
    double restart_cost;         /* seconds */
    double payback_time;         /* C * S / (S - 1) */
};

/* 0 with *decision filled (valid false when there is too little to fit),
 * -1 on an internal error with a message. */
int batch_decide(const struct batch_decision_inputs *inputs, struct batch_decision *decision,
                 char *error, size_t error_size);

/* The local batch a job that can change it in place (a cooperative loop,
 * AdaptDL's _sync_local_bsz) uses next: the decision's choice when there is
 * no current batch yet or when its speedup exceeds `speedup_threshold`,
 * else the current one; the current one also when no model could be fit. */
uint64_t batch_decision_in_place(const struct batch_decision *decision, uint64_t current_local,
                                 double speedup_threshold);

#endif
