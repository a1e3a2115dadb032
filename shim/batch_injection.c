/* batch_injection.c - puts the planned batch size and learning rate into the
 * trainer's argv or environment before its main runs (adaptshim(7) "BATCH-SIZE CONTROL"), and
 * writes the run's "start" metrics event with what was injected.  The plan is
 * runtime/batch_plan; the rewriting is runtime/injection. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "batch_plan.h"
#include "events.h"
#include "injection.h"
#include "log.h"
#include "shim.h"
#include "pass_planning.h"
#include "steps.h"
#include "sysio.h"

extern char **environ;

/* Rewrites one value where `target` says; argv may be replaced. */
static void shim_inject_value(const struct injection_target *target,
                              enum injection_quantity quantity, const char *value, int *argc,
                              char ***argv)
{
    char error[1024];
    if (target->kind == INJECT_ARGV) {
        int new_argc;
        char **new_argv;
        if (injection_rewrite_argv(target, quantity, *argc, *argv, value, &new_argc, &new_argv,
                                   error, sizeof error) != 0)
            shim_exit_with_message(error);
        /* kept for the life of the process: main owns it now */
        *argc = new_argc;
        *argv = new_argv;
    } else if (target->kind == INJECT_ENV) {
        char **new_environment;
        if (injection_rewrite_environment(target, quantity, environ, value, &new_environment,
                                          error, sizeof error) != 0)
            shim_exit_with_message(error);
        environ = new_environment;
    }
}

/* The value the trainer was given where `target` says, into *value; returns
 * whether it was given one.  A value that is not a number ends the run. */
static bool shim_read_trainer_value(const struct injection_target *target,
                                    enum injection_quantity quantity, int argc, char **argv,
                                    double *value)
{
    char error[1024];
    bool present;
    if (injection_read_value(target, quantity, argc, argv, environ, value, &present, error,
                             sizeof error) != 0)
        shim_exit_with_message(error);
    return present;
}

/* Fills the learning-rate part of `start` when one was injected. */
static void shim_inject_learning_rate(const struct batch_plan *plan, int *argc, char ***argv,
                                      struct run_start *start)
{
    const struct adaptdl_config *config = &shim_session.config;
    if (config->lr_arg.kind == INJECT_NONE)
        return;
    double learning_rate;
    if (!shim_read_trainer_value(&config->lr_arg, INJECTION_LEARNING_RATE, *argc, *argv,
                                 &learning_rate)) {
        log_warn("ADAPTDL_LR_ARG: the trainer was given no %s: its learning rate cannot be "
                 "rescaled", config->lr_arg.name);
        return;
    }
    char text[INJECTION_NUMBER_SIZE];
    injection_format_number(learning_rate * plan->lr_factor, false, text, sizeof text);
    shim_inject_value(&config->lr_arg, INJECTION_LEARNING_RATE, text, argc, argv);
    static const char *const rule_names[] = {"none", "linear", "sqrt", "adascale"};
    log_info("learning rate: %s %g -> %s (rule %s, factor %g)", config->lr_arg.name,
             learning_rate, text, rule_names[config->lr_rule], plan->lr_factor);
    start->learning_rate_injected = true;
    start->trainer_learning_rate = learning_rate;
    /* the value the trainer parses, not the unrounded product */
    start->learning_rate = strtod(text, NULL);
    start->lr_factor = plan->lr_factor;
    start->lr_rule = rule_names[config->lr_rule];
}

/* Fills the batch part of `start` (and its learning rate) when a batch size
 * was injected. */
static void shim_inject_planned_batch(int *argc, char ***argv, struct run_start *start)
{
    const struct adaptdl_config *config = &shim_session.config;
    if (config->batch_size > 0)
        shim_steps_declare_local_batch((config->batch_size + config->num_replicas - 1) /
                                       config->num_replicas);
    if (config->bsz_arg.kind == INJECT_NONE)
        return;
    double trainer_value;
    bool present = shim_read_trainer_value(&config->bsz_arg, INJECTION_BATCH_SIZE, *argc,
                                           *argv, &trainer_value);
    struct adaptdl_job_record *record = shim_steps_job_record();
    struct batch_plan plan;
    char error[1024];
    if (batch_plan_decide(config, record, trainer_value, present, &plan, error,
                          sizeof error) != 0)
        shim_exit_with_message(error);
    if (plan.initial_is_new) {
        record->initial_global_bsz = plan.initial_global;
        shim_steps_save_job_record("initial batch size learned");
    }
    char text[INJECTION_NUMBER_SIZE];
    injection_format_number((double)plan.local, true, text, sizeof text);
    shim_inject_value(&config->bsz_arg, INJECTION_BATCH_SIZE, text, argc, argv);
    shim_steps_declare_local_batch(plan.local);
    log_info("batch size: %s %s on each of %u replicas (global %llu, initial %llu%s)",
             config->bsz_arg.name, text, config->num_replicas,
             (unsigned long long)plan.global, (unsigned long long)plan.initial_global,
             present ? "" : "; the trainer was given none");
    start->batch_injected = true;
    start->local_bsz = plan.local;
    start->global_bsz = plan.global;
    start->initial_global_bsz = plan.initial_global;
    shim_inject_learning_rate(&plan, argc, argv, start);
    shim_epochs_configure(&plan, record);
}

void shim_inject_batch_size(int *argc, char ***argv)
{
    const struct adaptdl_config *config = &shim_session.config;
    struct run_start start = {
        .restarts = config->num_restarts,
        .replicas = config->num_replicas,
        .rank = config->replica_rank,
    };
    shim_inject_planned_batch(argc, argv, &start);
    /* once per run: this is the one place every run passes before main */
    shim_events_start(&start);
}
