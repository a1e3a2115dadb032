/* events.h - the machine-readable metrics file (ADAPTDL_METRICS_FILE,
 * adaptshim(7) "Metrics file"): one JSON line per optimizer step (rate-limited, the latest always
 * written before exit) and one per event (start, pass begin/end, snapshot,
 * restore, decision, exit). */
#ifndef ADAPTSHIM_EVENTS_H
#define ADAPTSHIM_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "event_lines.h"

void shim_events_open(void);
/* The metrics file's descriptor, or -1 when none is written. */
int shim_events_descriptor(void);

void shim_events_start(const struct run_start *start);
void shim_events_step(const struct agreed_step *step, const struct grad_noise_state *noise,
                      const struct job_position *position, bool local_bsz_known,
                      const struct goodput_model *model, uint32_t nodes);
void shim_events_snapshot(const char *checkpoint_path, const struct content_identity *identity,
                          bool written);
void shim_events_restore(const char *checkpoint_path, int status);
void shim_events_exit(int status, const char *why);

struct batch_decision_inputs;
struct batch_decision;
/* A batch-size decision with its inputs and outputs (adaptshim(7) "Decisions"). */
void shim_events_decision(const struct batch_decision_inputs *inputs,
                          const struct batch_decision *decision, bool restart);
struct replica_choice;
/* Whether another replica count in ADAPTDL_REPLICAS_RANGE pays a restart
 * (adaptdl-wrap(1) "The replica count"): a "replica_decision" event with the goodputs it
 * compared, the speedup and the payback time. */
void shim_events_replica_decision(const struct replica_choice *choice, uint32_t replicas,
                                  double restart_cost, bool restart);
/* ADAPTDL_HINTS_FILE: the latest model as JSON, for a launcher or a
 * scheduler (AdaptDL's scheduler hints). */
void shim_events_write_hints(const char *path, const struct batch_decision_inputs *inputs,
                             const struct batch_decision *decision,
                             uint32_t max_replicas_profiled);

#endif
