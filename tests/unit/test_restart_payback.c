/* test_restart_payback.c - the restart cost a decision assumes and the
 * time a faster configuration takes to earn a restart back
 * (runtime/restart_payback.h). */
#include <criterion/criterion.h>

#include <math.h>

#include "restart_payback.h"

Test(restart_payback, a_measured_cost_is_used_as_is)
{
    struct adaptdl_job_record record;
    job_record_init(&record);
    record.restart_cost_seconds = 4.5;
    cr_expect_eq(restart_cost_seconds(&record), 4.5);
}

Test(restart_payback, an_unmeasured_cost_is_the_default)
{
    struct adaptdl_job_record record;
    job_record_init(&record);
    cr_expect_eq(restart_cost_seconds(&record), RESTART_DEFAULT_COST_SECONDS,
                 "a new record says -1: not measured");
    record.restart_cost_seconds = 0;
    cr_expect_eq(restart_cost_seconds(&record), RESTART_DEFAULT_COST_SECONDS,
                 "no restart takes no time: 0 is not a measurement");
}

Test(restart_payback, payback_is_cost_times_speedup_over_speedup_minus_one)
{
    cr_expect_float_eq(restart_payback_seconds(30, 1.5), 90, 1e-9);
    cr_expect_float_eq(restart_payback_seconds(30, 2), 60, 1e-9);
    cr_expect_float_eq(restart_payback_seconds(10, 1.01), 1010, 1e-9);
    cr_expect_eq(restart_payback_seconds(0, 1.2), 0, "a free restart pays at once");
}

Test(restart_payback, a_configuration_that_is_not_faster_never_pays_back)
{
    cr_expect(isinf(restart_payback_seconds(30, 1)));
    cr_expect(isinf(restart_payback_seconds(30, 0.8)));
    cr_expect(isinf(restart_payback_seconds(30, NAN)), "an unknown speedup is no speedup");
    cr_expect(isinf(restart_payback_seconds(30, -INFINITY)));
}

Test(restart_payback, an_infinite_speedup_pays_back_in_the_restart_cost)
{
    cr_expect_eq(restart_payback_seconds(30, INFINITY), 30, "the limit, not NAN");
}
