/* batch_decision.h - one batch-size decision (adaptshim(7) "Decisions"): fit the
 * throughput model to the job record's step profiles, pick the batch size
 * with the best goodput, and say whether a restart pays for itself.
 *
 * The choice is AdaptDL's.  Whether to restart for it adds three rules of
 * ours (adaptshim(7) "Decisions"), because every change of an
 * unmodified trainer's batch costs a restart:
 *   1. no restart on statistics that cannot support a decision
 *      (grad_noise_trustworthy: too few observations, a relative standard
 *      error above 0.5, or grad_sqr not positive);
 *   2. the speedup that must beat ADAPTDL_SPEEDUP and pay back is the
 *      pessimistic one: the gradient statistics moved by one standard error
 *      against the change (for a larger batch, a smaller noise scale), so
 *      a change the model cannot tell from noise is never made;
 *   3. going back toward the batch before the last change (a reversal)
 *      must beat the threshold squared: the job does not flap;
 *   4. while every profile has the same local batch, the fit's constant
 *      compute time is AdaptDL's prior (half the step), which is all the
 *      model knows and can be far off; AdaptDL measures a second size for
 *      free by changing the batch in place, a restart-based job has to pay
 *      for it.  So with trusted statistics, a job that would keep its
 *      batch restarts once at twice the local batch (or the model's larger
 *      choice) when the speedup there, with the step time bounded by the
 *      current one and the statistics one standard error against the
 *      change, beats ADAPTDL_SPEEDUP squared and pays back: an exploration.
 *      The worst case (compute all per sample) costs one more restart back,
 *      decided on a model fit to two sizes.  It never explores where the
 *      model, prior included, predicts a loss beyond the noise band (a
 *      speedup below 1 / ADAPTDL_SPEEDUP): a job whose noise scale says
 *      its batch is already right keeps it;
 *   5. a restart moves the local batch at most BATCH_DECISION_EXTRAPOLATION
 *      times beyond the largest local batch whose steps were measured: the
 *      fit says little far from its points (a fit to two sizes once sent a
 *      job from 32 to 2048, whose step took 9 s);
 *   6. a move that went wrong is undone at the next decision, trusted
 *      statistics or not: statistical efficiency never falls when the batch
 *      gets smaller, so a smaller measured batch whose measured throughput
 *      beats the current one's by ADAPTDL_SPEEDUP has at least that speedup
 *      in goodput (a retreat). */
#ifndef ADAPTSHIM_BATCH_DECISION_H
#define ADAPTSHIM_BATCH_DECISION_H

#include <stdbool.h>
#include <stdint.h>

#include "goodput.h"
#include "state_store.h"

/* Rule 5: how far beyond the largest measured local batch a restart goes. */
#define BATCH_DECISION_EXTRAPOLATION 4

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
    /* rule 1 and 2: whether the statistics can be trusted, and their
     * standard errors (0: exact, as tests may say) */
    bool statistics_trusted;
    double grad_sqr_error;
    double grad_var_error;
    /* rule 3: the global batch before the last change (0: none) */
    uint64_t previous_global_bsz;
};

/* Why a decision restarts or not, for the log and the metrics
 * (batch_decision_reasons.def). */
enum batch_decision_reason {
#define BATCH_DECISION_REASON(suffix, text) BATCH_DECISION_##suffix,
#include "batch_decision_reasons.def"
#undef BATCH_DECISION_REASON
};

struct batch_decision {
    bool valid;                  /* a model could be fit */
    bool restart;                /* speedup and payback both hold */
    struct perf_params perf;
    struct goodput_choice choice;        /* what the job does next */
    struct goodput_choice model_choice;  /* the model's best (rule 4 may explore instead) */
    uint64_t local_bsz_limit;    /* the largest local batch the model could choose (rule 5) */
    double goodput_current;
    double speedup;              /* goodput_chosen / goodput_current */
    double speedup_pessimistic;  /* rule 2 (rule 4: the bound that explores) */
    enum batch_decision_reason reason;
    double restart_cost;         /* seconds */
    double payback_time;         /* C * S / (S - 1) */
};

/* 0 with *decision filled (valid false when there is too little to fit),
 * -1 on an internal error with a message. */
int batch_decide(const struct batch_decision_inputs *inputs, struct batch_decision *decision,
                 char *error, size_t error_size);

/* A few words for each reason ("untrusted statistics", ...). */
const char *batch_decision_reason_text(enum batch_decision_reason reason);

/* The local batch a job that can change it in place (a cooperative loop,
 * AdaptDL's _sync_local_bsz) uses next: the decision's choice when there is
 * no current batch yet, or when the statistics are trusted (rule 1) and its
 * pessimistic speedup (rule 2) exceeds `speedup_threshold`; else the
 * current one; the current one also when no model could be fit. */
uint64_t batch_decision_in_place(const struct batch_decision *decision, uint64_t current_local,
                                 double speedup_threshold);

#endif
