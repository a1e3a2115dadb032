/* event_lines.c - the lines of the metrics file, one per event (see
 * event_lines.h). */
#include "event_lines.h"

#include <stdio.h>

#include "batch_decision.h"
#include "goodput.h"
#include "hints_file.h"
#include "replica_choice.h"
#include "run_policy.h"

void event_line_pass(struct json_line *line, double time_seconds,
                     const struct dataset_file *file, bool begins, uint64_t pass,
                     uint64_t records_consumed, const char *why)
{
    json_line_begin(line, begins ? "pass_begin" : "pass_end", time_seconds);
    json_line_add_string(line, "file", file->path);
    json_line_add_string(line, "role", file->entry->role == DATA_ROLE_TRAIN ? "train" : "eval");
    json_line_add_uint(line, "pass", pass);
    json_line_add_uint(line, "start_index", file->view_start_index);
    json_line_add_uint(line, "length", file->view_length);
    json_line_add_uint(line, "pass_length", file->view_pass_length);
    json_line_add_uint(line, "records", file->record_count);
    json_line_add_uint(line, "replicas", file->replicas);
    json_line_add_uint(line, "rank", file->rank);
    /* a pass replay skips is header-only: its lengths are not the epoch's */
    json_line_add_bool(line, "skipped", file->shared->tracker.skipped);
    if (!begins)
        json_line_add_uint(line, "consumed", records_consumed);
    json_line_add_string(line, "why", why);
    json_line_end(line);
}

void event_line_start(struct json_line *line, double time_seconds,
                      const struct run_start *start)
{
    json_line_begin(line, "start", time_seconds);
    json_line_add_uint(line, "restarts", start->restarts);
    json_line_add_uint(line, "replicas", start->replicas);
    json_line_add_uint(line, "rank", start->rank);
    json_line_add_double_or_null_if(line, "local_bsz", start->batch_injected,
                                    (double)start->local_bsz);
    json_line_add_double_or_null_if(line, "global_bsz", start->batch_injected,
                                    (double)start->global_bsz);
    json_line_add_double_or_null_if(line, "initial_global_bsz", start->batch_injected,
                                    (double)start->initial_global_bsz);
    json_line_add_double_or_null_if(line, "lr", start->learning_rate_injected,
                                    start->learning_rate);
    json_line_add_double_or_null_if(line, "trainer_lr", start->learning_rate_injected,
                                    start->trainer_learning_rate);
    json_line_add_double_or_null_if(line, "lr_factor", start->learning_rate_injected,
                                    start->lr_factor);
    json_line_add_string(line, "lr_rule", start->learning_rate_injected ? start->lr_rule : NULL);
    json_line_end(line);
}

void event_line_step(struct json_line *line, double time_seconds,
                     const struct agreed_step *step, const struct grad_noise_state *noise,
                     const struct job_position *position, bool local_bsz_known,
                     const struct goodput_model *model, uint32_t nodes)
{
    json_line_begin(line, "step", time_seconds);
    json_line_add_uint(line, "step", position->step);
    json_line_add_uint(line, "epoch", position->epoch);
    json_line_add_uint(line, "replicas", step->replicas);
    uint64_t local_bsz = agreed_step_local_batch(step);
    local_bsz_known = local_bsz_known && local_bsz > 0;
    json_line_add_double_or_null_if(line, "local_bsz", local_bsz_known, (double)local_bsz);
    json_line_add_double_or_null_if(line, "global_bsz", local_bsz_known,
                                    (double)step->batch_global);
    json_line_add_double(line, "step_time", step->step_time);
    json_line_add_double(line, "sync_time", step->sync_time);
    json_line_add_double(line, "grad_sqr", grad_noise_sqr(noise));
    json_line_add_double(line, "grad_var", grad_noise_var(noise));
    json_line_add_double(line, "noise_scale", grad_noise_scale_simple(noise));
    json_line_add_double(line, "progress", position->progress);
    if (model != NULL && local_bsz_known) {
        json_line_add_double(line, "efficiency",
                             goodput_efficiency(model, (double)step->batch_global));
        json_line_add_double(line, "goodput",
                             goodput_evaluate(model, nodes ? nodes : 1, step->replicas,
                                              (double)local_bsz, 0));
    }
    json_line_end(line);
}

void event_line_snapshot(struct json_line *line, double time_seconds,
                         const char *checkpoint_path, const struct content_identity *identity,
                         bool written)
{
    json_line_begin(line, "snapshot", time_seconds);
    json_line_add_string(line, "checkpoint", checkpoint_path);
    json_line_add_uint(line, "size", identity->size);
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)identity->hash);
    json_line_add_string(line, "hash", hash);
    json_line_add_bool(line, "written", written);
    json_line_end(line);
}

void event_line_restore(struct json_line *line, double time_seconds,
                        const char *checkpoint_path, int status)
{
    json_line_begin(line, "restore", time_seconds);
    json_line_add_string(line, "checkpoint", checkpoint_path);
    json_line_add_bool(line, "restored", status == 0);
    json_line_end(line);
}

void event_line_exit(struct json_line *line, double time_seconds, int status,
                     const char *why)
{
    json_line_begin(line, "exit", time_seconds);
    json_line_add_int(line, "status", status);
    json_line_add_string(line, "why", why);
    json_line_end(line);
}

void event_line_decision(struct json_line *line, double time_seconds,
                         const struct batch_decision_inputs *inputs,
                         const struct batch_decision *decision, bool restart)
{
    json_line_begin(line, "decision", time_seconds);
    json_line_add_bool(line, "restart", restart);
    hints_add_fitted_model(line, &decision->perf, inputs->grad_sqr, inputs->grad_var);
    /* the node count the decision's step times were predicted for: with
     * more than one, the inter-node terms alpha_n and beta_n are used */
    json_line_add_uint(line, "nodes", inputs->nodes ? inputs->nodes : 1);
    json_line_add_uint(line, "replicas", inputs->replicas);
    json_line_add_uint(line, "current_global_bsz",
                       inputs->current_local_bsz * inputs->replicas);
    json_line_add_uint(line, "initial_global_bsz", inputs->initial_global_bsz);
    json_line_add_uint(line, "max_global_bsz", inputs->max_global_bsz);
    json_line_add_uint(line, "chosen_global_bsz", decision->choice.global_bsz);
    json_line_add_uint(line, "chosen_local_bsz", decision->choice.local_bsz);
    json_line_add_uint(line, "best_global_bsz", decision->model_choice.global_bsz);
    json_line_add_uint(line, "best_local_bsz", decision->model_choice.local_bsz);
    json_line_add_uint(line, "local_bsz_limit", decision->local_bsz_limit);
    json_line_add_double(line, "goodput_current", decision->goodput_current);
    json_line_add_double(line, "goodput_chosen", decision->choice.goodput);
    json_line_add_double(line, "speedup", decision->speedup);
    json_line_add_double(line, "speedup_pessimistic", decision->speedup_pessimistic);
    json_line_add_string(line, "reason", batch_decision_reason_text(decision->reason));
    json_line_add_double(line, "restart_cost", decision->restart_cost);
    json_line_add_double(line, "payback_seconds", decision->payback_time);
    json_line_end(line);
}

void event_line_replica_decision(struct json_line *line, double time_seconds,
                                 const struct replica_choice *choice, uint32_t replicas,
                                 double restart_cost, bool restart)
{
    json_line_begin(line, "replica_decision", time_seconds);
    json_line_add_bool(line, "restart", restart);
    json_line_add_uint(line, "replicas", replicas);
    json_line_add_uint(line, "min_replicas", choice->minimum);
    json_line_add_uint(line, "max_replicas", choice->maximum);
    json_line_add_uint(line, "chosen_replicas", choice->replicas);
    json_line_add_uint(line, "best_replicas", choice->best);
    json_line_add_double(line, "goodput_current", choice->goodput_current);
    json_line_add_double(line, "goodput_chosen", choice->goodput_chosen);
    json_line_add_double(line, "speedup", choice->speedup);
    json_line_add_double(line, "speedup_threshold", choice->threshold);
    json_line_add_double(line, "restart_cost", restart_cost);
    json_line_add_double(line, "payback_seconds",
                         restart_payback_seconds(restart_cost, choice->speedup));
    json_line_end(line);
}
