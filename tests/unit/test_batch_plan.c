/* test_batch_plan.c - the batch size a run injects, per adaptshim(7) "BATCH-SIZE CONTROL". */
#include <criterion/criterion.h>
#include <math.h>

#include "batch_plan.h"

static struct adaptdl_config plan_config(uint32_t replicas, uint64_t batch_size)
{
    struct adaptdl_config config;
    memset(&config, 0, sizeof config);
    config.num_replicas = replicas;
    config.batch_size = batch_size;
    config.bsz_arg = (struct injection_target){INJECT_ARGV, "--batch-size"};
    return config;
}

Test(batch_plan, nothing_to_inject_without_a_target)
{
    struct adaptdl_config config = plan_config(2, 64);
    config.bsz_arg.kind = INJECT_NONE;
    struct adaptdl_job_record record;
    job_record_init(&record);
    struct batch_plan plan;
    char error[256];
    cr_assert_eq(batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error), 0);
    cr_expect_not(plan.active);
}

/* The plan when the trainer passes its own batch size, trainer_value. */
static struct batch_plan plan_with_trainer_value(const struct adaptdl_config *config,
                                                 const struct adaptdl_job_record *record,
                                                 double trainer_value)
{
    struct batch_plan plan;
    char error[256] = "";
    cr_assert_eq(batch_plan_decide(config, record, trainer_value, true, &plan, error,
                                   sizeof error),
                 0, "%s", error);
    return plan;
}

Test(batch_plan, the_initial_batch_is_split_over_replicas_rounded_up)
{
    struct adaptdl_config config = plan_config(3, 64);
    struct adaptdl_job_record record;
    job_record_init(&record);
    struct batch_plan plan = plan_with_trainer_value(&config, &record, 10);
    cr_expect(plan.active);
    cr_expect_eq(plan.initial_global, 64, "ADAPTDL_BATCH_SIZE wins over the trainer's value");
    cr_expect_eq(plan.local, 22);
    cr_expect_eq(plan.global, 66);
    cr_expect_eq(plan.lr_factor, 1.0, "rule none");
}

Test(batch_plan, the_trainers_value_times_replicas_is_the_initial_batch_and_is_saved)
{
    struct adaptdl_config config = plan_config(4, 0);
    struct adaptdl_job_record record;
    job_record_init(&record);
    struct batch_plan plan = plan_with_trainer_value(&config, &record, 16);
    cr_expect_eq(plan.initial_global, 64);
    cr_expect(plan.initial_is_new);
    cr_expect_eq(plan.local, 16);
    /* a later run with 2 replicas keeps the saved meaning */
    record.initial_global_bsz = 64;
    config.num_replicas = 2;
    plan = plan_with_trainer_value(&config, &record, 16);
    cr_expect_eq(plan.initial_global, 64);
    cr_expect_not(plan.initial_is_new);
    cr_expect_eq(plan.local, 32);
}

Test(batch_plan, no_initial_batch_anywhere_is_an_error)
{
    struct adaptdl_config config = plan_config(2, 0);
    struct adaptdl_job_record record;
    job_record_init(&record);
    struct batch_plan plan;
    char error[256] = "";
    cr_assert_eq(batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error), -1);
    cr_expect(strstr(error, "ADAPTDL_BATCH_SIZE") != NULL, "%s", error);
    cr_expect(strstr(error, "accepted") != NULL, "%s", error);
}

Test(batch_plan, a_decision_applies_only_with_adaptation_and_within_bounds)
{
    struct adaptdl_config config = plan_config(2, 32);
    struct adaptdl_job_record record;
    job_record_init(&record);
    record.decided_global_bsz = 128;
    struct batch_plan plan;
    char error[256];
    cr_assert_eq(batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error), 0);
    cr_expect_eq(plan.global, 32, "no ADAPTDL_MAX_BATCH_SIZE: no adaptation");
    config.max_batch_size = 256;
    cr_assert_eq(batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error), 0);
    cr_expect_eq(plan.global, 128);
    cr_expect_eq(plan.local, 64);
    config.local_bsz_max = 40;
    cr_assert_eq(batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error), 0);
    cr_expect_eq(plan.local, 40, "the local bound wins");
    cr_expect_eq(plan.global, 80);
}

Test(batch_plan, learning_rate_rules_follow_the_scale)
{
    struct adaptdl_config config = plan_config(4, 32);
    config.local_bsz_min = 32;   /* forces a global batch of 128: scale 4 */
    struct adaptdl_job_record record;
    job_record_init(&record);
    struct batch_plan plan;
    char error[256];
    config.lr_rule = LR_RULE_LINEAR;
    cr_assert_eq(batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error), 0);
    cr_expect_eq(plan.scale, 4.0);
    cr_expect_eq(plan.lr_factor, 4.0);
    config.lr_rule = LR_RULE_SQRT;
    batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error);
    cr_expect(fabs(plan.lr_factor - 2.0) < 1e-12);
    config.lr_rule = LR_RULE_ADASCALE;
    record.grad_sqr = NAN;
    record.grad_var = NAN;
    batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error);
    cr_expect_eq(plan.lr_factor, 1.0, "no statistics: gain 1");
    record.grad_sqr = 1.0;
    record.grad_var = 32.0;     /* var_b = 1: gain (1 + 1) / (1/4 + 1) = 1.6 */
    batch_plan_decide(&config, &record, 0, false, &plan, error, sizeof error);
    cr_expect(fabs(plan.lr_factor - 1.6) < 1e-9, "gain %g", plan.lr_factor);
}
