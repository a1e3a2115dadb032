/* test_decision_text.c - the readable line of a batch-size decision
 * (runtime/decision_text): the current and best batch, the predicted
 * speedup, the payback and why the job restarts or keeps its batch, one
 * reason batch_decide gives for keeping it; a short buffer cuts the
 * line but reports its whole length; and on decisions batch_decide made
 * itself, the line says "restarting" exactly when the decision restarts. */
#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

#include "decision_text.h"

static struct adaptdl_job_record empty_record;

static struct batch_decision_inputs two_replicas_at(uint64_t current_local)
{
    return (struct batch_decision_inputs){
        .record = &empty_record,
        .replicas = 2,
        .current_local_bsz = current_local,
        .initial_global_bsz = 8,
        .max_global_bsz = 256,
        .speedup_threshold = 1.05,
        .payback_seconds = 600,
        .statistics_trusted = true,
    };
}

/* A decision for 90 = 45 x 2 with speedup S and cost 30 s: payback
 * 30 S / (S - 1). */
static struct batch_decision decision_with_speedup(double speedup)
{
    return (struct batch_decision){
        .valid = true,
        .choice = {.global_bsz = 90, .local_bsz = 45},
        .speedup = speedup,
        .speedup_pessimistic = speedup,
        .restart_cost = 30,
        .payback_time = speedup > 1 ? 30 * speedup / (speedup - 1) : INFINITY,
        .restart = true,
        .reason = BATCH_DECISION_RESTART,
    };
}

static void expect_line(const struct batch_decision_inputs *inputs,
                        const struct batch_decision *decision, bool restart,
                        const char *expected)
{
    char text[1024];
    size_t length = batch_decision_describe(inputs, decision, restart, text, sizeof text);
    cr_expect_str_eq(text, expected);
    cr_expect_eq(length, strlen(expected));
}

/* Each reason batch_decide gives, on two replicas with a best batch of
 * 90 = 45 x 2 and a restart cost of 30 s: the whole line. */
Test(decision_text, each_reason_gives_its_whole_line)
{
    static const struct {
        const char *name;
        uint64_t current_local;
        double payback_seconds;
        double speedup;
        bool restart;
        enum batch_decision_reason reason;
        const char *line;
    } cases[] = {
        {"a_restart_names_both_rules_it_meets", 4, 600, 1.5, true, BATCH_DECISION_RESTART,
         "batch-size decision: current global 8 (local 4 x 2 replicas), best global 90 "
         "(local 45), predicted speedup 1.500x (1.500x pessimistic), payback 90.0 s (restart cost 30.0 s): "
         "restarting: the pessimistic speedup is above ADAPTDL_SPEEDUP 1.05 and the "
         "payback within "
         "ADAPTDL_PAYBACK_SECONDS 600"},
        {"the_current_batch_is_kept_when_it_is_the_best", 45, 600, 1.0, false,
         BATCH_DECISION_KEEP,
         "batch-size decision: current global 90 (local 45 x 2 replicas), best global 90 "
         "(local 45), predicted speedup 1.000x (1.000x pessimistic), a restart never pays back (restart cost "
         "30.0 s): keeping the current batch: the best batch is the current one"},
        {"a_small_speedup_names_adaptdl_speedup", 4, 600, 1.02, false,
         BATCH_DECISION_BELOW_THRESHOLD,
         "batch-size decision: current global 8 (local 4 x 2 replicas), best global 90 "
         "(local 45), predicted speedup 1.020x (1.020x pessimistic), payback 1530.0 s "
         "(restart cost 30.0 s): keeping the current batch: the speedup, 1.020x with "
         "the statistics one standard error against the change, is not above "
         "ADAPTDL_SPEEDUP 1.05"},
        {"a_long_payback_names_adaptdl_payback_seconds", 4, 60, 1.5, false,
         BATCH_DECISION_NO_PAYBACK,
         "batch-size decision: current global 8 (local 4 x 2 replicas), best global 90 "
         "(local 45), predicted speedup 1.500x (1.500x pessimistic), payback 90.0 s (restart cost 30.0 s): "
         "keeping the current batch: the payback is longer than "
         "ADAPTDL_PAYBACK_SECONDS 60"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct batch_decision_inputs inputs = two_replicas_at(cases[i].current_local);
        inputs.payback_seconds = cases[i].payback_seconds;
        struct batch_decision decision = decision_with_speedup(cases[i].speedup);
        decision.restart = cases[i].restart;
        decision.reason = cases[i].reason;
        char text[1024];
        size_t length = batch_decision_describe(&inputs, &decision, cases[i].restart, text,
                                                sizeof text);
        cr_expect_str_eq(text, cases[i].line, "%s", cases[i].name);
        cr_expect_eq(length, strlen(cases[i].line), "%s", cases[i].name);
    }
}

/* A kept batch whose reason is not one of the whole-line cases above says
 * why in its own words (the decision as decision_with_speedup(1.5) makes
 * it, on 4 x 2). */
Test(decision_text, other_reasons_to_keep_the_batch_say_why)
{
    static const struct {
        const char *name;
        bool decision_restarts;     /* what batch_decide wanted */
        enum batch_decision_reason reason;
        uint64_t previous_global_bsz;
        const char *says;
    } cases[] = {
        {"a_restart_the_caller_vetoes_says_why", true, BATCH_DECISION_RESTART, 0,
         ": keeping the current batch: a restart would pay off, but without "
         "ADAPTDL_SAVE no checkpoint can carry the job across it"},
        {"untrusted_statistics_say_so", false, BATCH_DECISION_UNTRUSTED, 0,
         ": keeping the current batch: the gradient statistics are not "
         "trustworthy yet"},
        {"a_reversal_says_so", false, BATCH_DECISION_REVERSAL, 128,
         "it would go back toward global 128, which needs a speedup above "
         "ADAPTDL_SPEEDUP squared (1.103), not 1.500x"},
        {"an_unknown_reason_still_gives_a_line", false, (enum batch_decision_reason)99, 0,
         ": keeping the current batch: the decision rules ask for no "
         "restart"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct batch_decision_inputs inputs = two_replicas_at(4);
        inputs.previous_global_bsz = cases[i].previous_global_bsz;
        struct batch_decision decision = decision_with_speedup(1.5);
        decision.restart = cases[i].decision_restarts;
        decision.reason = cases[i].reason;
        char text[1024];
        batch_decision_describe(&inputs, &decision, false, text, sizeof text);
        cr_expect(strstr(text, cases[i].says) != NULL, "%s: %s", cases[i].name, text);
    }
}

Test(decision_text, no_model_and_unknown_numbers_are_said_in_words)
{
    struct batch_decision_inputs inputs = two_replicas_at(4);
    inputs.replicas = 1;
    struct batch_decision none = {.valid = false, .speedup = NAN};
    expect_line(&inputs, &none, false,
                "batch-size decision: current global 4 (local 4 x 1 replica): no throughput "
                "model yet (no step profile to fit): keeping the current batch");
    struct batch_decision unknown = decision_with_speedup(NAN);
    unknown.restart = false;
    unknown.reason = BATCH_DECISION_BELOW_THRESHOLD;
    char text[1024];
    batch_decision_describe(&inputs, &unknown, false, text, sizeof text);
    cr_expect(strstr(text, ", predicted speedup unknown, a restart never pays back") != NULL,
              "%s", text);
    cr_expect(strstr(text, "is not above ADAPTDL_SPEEDUP") != NULL, "%s", text);
    cr_expect(strchr(text, '\n') == NULL, "one line");
}

Test(decision_text, a_short_buffer_cuts_the_line_and_reports_its_length)
{
    struct batch_decision_inputs inputs = two_replicas_at(4);
    struct batch_decision decision = decision_with_speedup(1.5);
    char whole[1024];
    size_t length = batch_decision_describe(&inputs, &decision, true, whole, sizeof whole);
    char cut[40];
    memset(cut, 'x', sizeof cut);
    cr_expect_eq(batch_decision_describe(&inputs, &decision, true, cut, sizeof cut), length);
    cr_expect_eq(strlen(cut), sizeof cut - 1, "NUL-terminated within the buffer");
    cr_expect_eq(strncmp(cut, whole, sizeof cut - 1), 0);
    cr_expect_eq(batch_decision_describe(&inputs, &decision, true, NULL, 0), length);
}

/* Profiles of a job whose step time grows little with the batch: a larger
 * batch pays off when the noise scale is large. */
static void fill_profiles(struct step_profile *profiles, size_t *count)
{
    static const uint64_t local_batches[] = {4, 8, 16, 32, 64};
    *count = 0;
    for (size_t i = 0; i < sizeof local_batches / sizeof local_batches[0]; i++) {
        double step = 0.01 + 1e-4 * (double)local_batches[i];
        profiles[(*count)++] = (struct step_profile){
            .nodes = 1, .replicas = 2, .local_bsz = local_batches[i], .count = 20,
            .step_time_sum = 20 * step, .sync_time_sum = 20 * 0.2 * step};
    }
}

Test(decision_text, says_restarting_exactly_when_batch_decide_restarts)
{
    struct step_profile profiles[8];
    struct adaptdl_job_record record;
    job_record_init(&record);
    record.profiles = profiles;
    fill_profiles(profiles, &record.profile_count);
    static const double thresholds[] = {1.0, 1.05, 2.0, 100.0};
    static const double paybacks[] = {1, 600, 1e9};
    static const double noise_variances[] = {0.01, 10, 1000};
    unsigned restarts = 0, keeps = 0;
    for (size_t t = 0; t < sizeof thresholds / sizeof thresholds[0]; t++) {
        for (size_t p = 0; p < sizeof paybacks / sizeof paybacks[0]; p++) {
            for (size_t v = 0; v < sizeof noise_variances / sizeof noise_variances[0]; v++) {
                struct batch_decision_inputs inputs = two_replicas_at(4);
                inputs.record = &record;
                inputs.grad_sqr = 1;
                inputs.grad_var = noise_variances[v];
                inputs.nodes = 1;
                inputs.speedup_threshold = thresholds[t];
                inputs.payback_seconds = paybacks[p];
                struct batch_decision decision;
                char error[256];
                cr_assert_eq(batch_decide(&inputs, &decision, error, sizeof error), 0, "%s",
                             error);
                cr_assert(decision.valid);
                char text[1024];
                batch_decision_describe(&inputs, &decision, decision.restart, text,
                                        sizeof text);
                bool says_restart = strstr(text, ": restarting: ") != NULL;
                cr_expect_eq(says_restart, decision.restart, "%s", text);
                cr_expect(strstr(text, "the decision rules ask for no restart") == NULL,
                          "every keep of batch_decide has a named reason: %s", text);
                if (decision.restart)
                    restarts++;
                else
                    keeps++;
            }
        }
    }
    cr_expect_gt(restarts, 0, "some inputs restart");
    cr_expect_gt(keeps, 0, "some inputs keep the batch");
}

Test(decision_text, an_exploration_says_why_it_restarts)
{
    struct batch_decision_inputs inputs = two_replicas_at(4);
    struct batch_decision decision = decision_with_speedup(1.31);
    decision.choice = (struct goodput_choice){.global_bsz = 16, .local_bsz = 8};
    decision.speedup = 0.87;
    decision.reason = BATCH_DECISION_EXPLORE;
    char text[1024];
    batch_decision_describe(&inputs, &decision, true, text, sizeof text);
    cr_expect(strstr(text, "restarting to measure a second batch size: every step so far had "
                           "local batch 4, so the throughput model is a prior; at local 8, "
                           "with a step no longer than now, the speedup would be 1.310x "
                           "(above ADAPTDL_SPEEDUP squared, 1.103)") != NULL,
              "%s", text);
}
