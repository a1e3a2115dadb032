/* replica_choice.c - the replica count a job runs with next (see
 * replica_choice.h). */
#include "replica_choice.h"
#include "run_policy.h"

#include <math.h>
#include <stdio.h>

void replica_goodputs_clear(struct replica_goodputs *table)
{
    for (size_t i = 0; i <= REPLICA_CHOICE_MAX_REPLICAS; i++)
        table->goodput[i] = NAN;
}

void replica_goodputs_predict(const struct goodput_model *model, uint32_t nodes,
                              uint32_t most_profiled, uint32_t current,
                              uint64_t max_global_bsz, uint64_t local_bsz_min,
                              uint64_t local_bsz_max, struct replica_goodputs *out)
{
    replica_goodputs_clear(out);
    /* AdaptDL trusts its model up to twice the most replicas it has seen */
    uint32_t most = most_profiled ? most_profiled : current;
    uint64_t last = 2 * (uint64_t)most;
    if (last > REPLICA_CHOICE_MAX_REPLICAS)
        last = REPLICA_CHOICE_MAX_REPLICAS;
    for (uint32_t replicas = 1; replicas <= last; replicas++) {
        struct goodput_choice choice;
        if (goodput_optimize(model, nodes ? nodes : 1, replicas, max_global_bsz,
                             local_bsz_min, local_bsz_max, false, &choice) == 0)
            out->goodput[replicas] = choice.goodput;
    }
}

bool replica_goodputs_known(const struct replica_goodputs *table, uint32_t replicas)
{
    if (replicas == 0 || replicas > REPLICA_CHOICE_MAX_REPLICAS)
        return false;
    double goodput = table->goodput[replicas];
    return isfinite(goodput) && goodput > 0;
}

static double replica_goodput_or_nan(const struct replica_goodputs *table, uint32_t replicas)
{
    return replica_goodputs_known(table, replicas) ? table->goodput[replicas] : NAN;
}

int replica_choice_pick(const struct replica_goodputs *table, uint32_t minimum,
                        uint32_t maximum, uint32_t current, double speedup_threshold,
                        struct replica_choice *out)
{
    if (minimum == 0 || minimum > maximum || current == 0 || !isfinite(speedup_threshold) ||
        speedup_threshold < 1)
        return -1;
    struct replica_choice choice = {
        .minimum = minimum,
        .maximum = maximum,
        .current = current < minimum ? minimum : current > maximum ? maximum : current,
        .threshold = speedup_threshold,
    };
    choice.clamped = choice.current != current;
    choice.replicas = choice.current;
    /* strictly greater: of equal goodputs the smallest count wins */
    double best_goodput = 0;
    uint32_t last = maximum < REPLICA_CHOICE_MAX_REPLICAS ? maximum : REPLICA_CHOICE_MAX_REPLICAS;
    for (uint32_t replicas = minimum; replicas <= last; replicas++)
        if (replica_goodputs_known(table, replicas) && table->goodput[replicas] > best_goodput) {
            best_goodput = table->goodput[replicas];
            choice.best = replicas;
        }
    choice.goodput_current = replica_goodput_or_nan(table, choice.current);
    choice.goodput_chosen = choice.goodput_current;
    if (!replica_goodputs_known(table, choice.current)) {
        choice.speedup = NAN;
        choice.reason = REPLICA_CHOICE_KEPT_NO_PREDICTION;
    } else {
        /* the current count has a prediction, so a best one exists */
        choice.speedup = best_goodput / choice.goodput_current;
        if (choice.best == choice.current || !(choice.speedup > 1)) {
            choice.reason = REPLICA_CHOICE_KEPT_BEST;
        } else if (choice.speedup > speedup_threshold) {
            choice.reason = REPLICA_CHOICE_MOVED;
            choice.replicas = choice.best;
            choice.goodput_chosen = best_goodput;
        } else {
            choice.reason = REPLICA_CHOICE_KEPT_BELOW_THRESHOLD;
        }
    }
    *out = choice;
    return 0;
}

bool replica_choice_restart_pays(const struct replica_choice *choice, double restart_cost,
                                 double payback_seconds)
{
    if (choice->reason != REPLICA_CHOICE_MOVED || choice->replicas == choice->current)
        return false;
    double speedup = choice->speedup;
    if (!isfinite(speedup) || !(speedup > 1) || !(restart_cost >= 0))
        return false;
    return restart_payback_seconds(restart_cost, speedup) <= payback_seconds;
}

/* "replica" or "replicas", for messages. */
static const char *replica_noun(uint32_t count)
{
    return count == 1 ? "replica" : "replicas";
}

const char *replica_choice_describe(const struct replica_choice *choice, char *out,
                                    size_t out_size)
{
    char clamped[96] = "";
    if (choice->clamped)
        snprintf(clamped, sizeof clamped, " (moved into %u..%u)", choice->minimum,
                 choice->maximum);
    switch (choice->reason) {
    case REPLICA_CHOICE_MOVED:
        snprintf(out, out_size,
                 "%u %s: predicted goodput %.6g against %.6g with %u%s (speedup %.3f > %.3f)",
                 choice->replicas, replica_noun(choice->replicas), choice->goodput_chosen,
                 choice->goodput_current, choice->current, clamped, choice->speedup,
                 choice->threshold);
        break;
    case REPLICA_CHOICE_KEPT_BELOW_THRESHOLD:
        snprintf(out, out_size,
                 "%u %s%s kept: %u would give goodput %.6g against %.6g (speedup %.3f, "
                 "not above %.3f)",
                 choice->replicas, replica_noun(choice->replicas), clamped, choice->best,
                 choice->goodput_current * choice->speedup, choice->goodput_current,
                 choice->speedup, choice->threshold);
        break;
    case REPLICA_CHOICE_KEPT_BEST:
        snprintf(out, out_size,
                 "%u %s%s kept: the best predicted goodput in %u..%u (%.6g)",
                 choice->replicas, replica_noun(choice->replicas), clamped, choice->minimum, choice->maximum,
                 choice->goodput_current);
        break;
    case REPLICA_CHOICE_KEPT_NO_PREDICTION:
    default:
        snprintf(out, out_size, "%u %s%s kept: no predicted goodput for %u %s",
                 choice->replicas, replica_noun(choice->replicas), clamped, choice->replicas,
                 replica_noun(choice->replicas));
        break;
    }
    return out;
}
