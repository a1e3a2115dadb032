/* restart_payback.h - what a restart costs and how soon a faster
 * configuration earns it back (SPEC §7 "Decisions").
 *
 * A restart for a batch size or a replica count stops the job for C
 * seconds; afterwards it runs S times faster.  The time lost is made up
 * after C * S / (S - 1) seconds of the new configuration: the payback.
 * The batch-size decision and the replica-count choice both weigh a
 * restart this way, with the same cost, so the arithmetic lives here once. */
#ifndef ADAPTSHIM_RESTART_PAYBACK_H
#define ADAPTSHIM_RESTART_PAYBACK_H

#include "state_store.h"

/* Pollux's restart cost until one has been measured. */
#define RESTART_DEFAULT_COST_SECONDS 30.0

/* The job record's measured restart cost, or the default while none has
 * been measured (a cost of 0 or less is "not measured"). */
double restart_cost_seconds(const struct adaptdl_job_record *record);

/* C * S / (S - 1) for a speedup S above 1; C itself for an infinite
 * speedup (the limit); INFINITY for a speedup of 1 or less or NAN: a
 * configuration that is not faster never pays a restart back. */
double restart_payback_seconds(double restart_cost, double speedup);

#endif
