/* replica_choice.h - which replica count a job runs with next, from the
 * predicted goodput of each count (AdaptDL's scheduler role for one job;
 * adaptdl-wrap(1) "The replica count").
 *
 * One rule, used on both sides so that they agree:
 *
 *   - the launcher's helper (adaptdl-replicas, called by adaptdl-wrap
 *     before each relaunch of `-n MIN:MAX`) applies it to the goodput table
 *     of ADAPTDL_HINTS_FILE (hints_file.h);
 *   - the shim's rank 0 applies it to the same table computed from the
 *     model it just fitted, and requests a restart when the count it picks
 *     differs from the current one and the restart pays back in time (the
 *     rule of adaptshim(7) "Decisions" for batch sizes).
 *
 * The rule: among the counts in [MIN, MAX] that have a prediction, take the
 * one with the highest goodput (the smallest of equal ones); move to it only
 * when its goodput exceeds the current count's by more than the speedup
 * threshold (ADAPTDL_SPEEDUP, default 1.05), so that noise in the model
 * does not make the job flap between counts.  No prediction for the current
 * count (no hints yet, or a count beyond what the model predicts): keep it.
 * A current count outside [MIN, MAX] is first moved to the nearest end.
 *
 * Pure: no allocation, no I/O. */
#ifndef ADAPTSHIM_REPLICA_CHOICE_H
#define ADAPTSHIM_REPLICA_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "goodput.h"

/* The hints' goodput table stops at 64 replicas (AdaptDL predicts up to
 * twice the most replicas profiled; beyond that the model is a guess). */
#define REPLICA_CHOICE_MAX_REPLICAS 64

/* The speedup a move must beat when ADAPTDL_SPEEDUP is not set (adaptshim(7) "BATCH-SIZE
 * CONTROL"). */
#define REPLICA_CHOICE_DEFAULT_SPEEDUP 1.05

/* Predicted goodput by replica count: goodput[k] for k replicas, NAN where
 * nothing was predicted (index 0 is never used). */
struct replica_goodputs {
    double goodput[REPLICA_CHOICE_MAX_REPLICAS + 1];
};

/* Every entry NAN. */
void replica_goodputs_clear(struct replica_goodputs *table);

/* The table the hints file holds (shim/events.c writes it with this): for
 * k = 1 .. min(2 * most_profiled, 64) replicas (most_profiled 0: the
 * current count), the goodput of the best batch size with k replicas on
 * `nodes` nodes under the batch-size limits (goodput_optimize); NAN where
 * the optimizer refuses the configuration. */
void replica_goodputs_predict(const struct goodput_model *model, uint32_t nodes,
                              uint32_t most_profiled, uint32_t current,
                              uint64_t max_global_bsz, uint64_t local_bsz_min,
                              uint64_t local_bsz_max, struct replica_goodputs *out);

/* A usable prediction: finite and > 0. */
bool replica_goodputs_known(const struct replica_goodputs *table, uint32_t replicas);

enum replica_choice_reason {
    REPLICA_CHOICE_KEPT_BEST = 0,     /* the current count is the best */
    REPLICA_CHOICE_KEPT_BELOW_THRESHOLD, /* a better one gains too little */
    REPLICA_CHOICE_KEPT_NO_PREDICTION,   /* nothing predicted for the current count */
    REPLICA_CHOICE_MOVED,             /* the best gains more than the threshold */
};

struct replica_choice {
    uint32_t replicas;           /* the count to run with next */
    uint32_t minimum, maximum;   /* the range it was chosen in */
    uint32_t current;            /* the current count, moved into [MIN, MAX] */
    bool clamped;                /* the current count was outside [MIN, MAX] */
    uint32_t best;               /* best predicted count in range, 0 if none */
    double goodput_current;      /* NAN when not predicted */
    double goodput_chosen;       /* NAN when not predicted */
    double speedup;              /* goodput of best / goodput of current, NAN if unknown */
    double threshold;
    enum replica_choice_reason reason;
};

/* Applies the rule above.  Returns 0 with *out filled, or -1 (out
 * untouched) for arguments no caller should pass: minimum 0, minimum >
 * maximum, current 0, a threshold that is not a finite number >= 1. */
int replica_choice_pick(const struct replica_goodputs *table, uint32_t minimum,
                        uint32_t maximum, uint32_t current, double speedup_threshold,
                        struct replica_choice *out);

/* True when a choice that moves is worth a restart: the restart of
 * `restart_cost` seconds pays back within `payback_seconds`,
 * C * S / (S - 1) <= payback (adaptshim(7) "Decisions").  Also false for a
 * choice that keeps the count. */
bool replica_choice_restart_pays(const struct replica_choice *choice, double restart_cost,
                                 double payback_seconds);

/* One line for logs, e.g. "2 replicas: predicted goodput 180 vs 100 with
 * 1 (speedup 1.800 > 1.050)".  Returns out. */
const char *replica_choice_describe(const struct replica_choice *choice, char *out,
                                    size_t out_size);

#endif
