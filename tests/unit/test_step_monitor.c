/* test_step_monitor.c - the step protocol with K replicas in one process: a
 * fake transport sums what every replica posted in the same round, as
 * MPI_Iallreduce would.  Checks that every replica stops at the same
 * boundary, that draining waits for a commit, that the agreed numbers are
 * the sums, and that measuring follows one agreed period. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "step_monitor.h"

#define MAX_REPLICAS 4

struct fake_round {
    double sums[PIGGYBACK_FIELD_COUNT];
    int posted;
};

struct fake_network {
    struct fake_round rounds[1024];
    int round_of[MAX_REPLICAS];      /* next round each replica posts to */
    double *receive_of[MAX_REPLICAS];
    int pending_round[MAX_REPLICAS];
};

struct fake_endpoint {
    struct fake_network *network;
    int replica;
};

static int fake_post(void *context, const double *send, double *receive, int count)
{
    struct fake_endpoint *endpoint = context;
    struct fake_network *network = endpoint->network;
    int round = network->round_of[endpoint->replica]++;
    for (int i = 0; i < count; i++)
        network->rounds[round].sums[i] += send[i];
    network->rounds[round].posted++;
    network->receive_of[endpoint->replica] = receive;
    network->pending_round[endpoint->replica] = round;
    return 0;
}

static int fake_complete(void *context)
{
    struct fake_endpoint *endpoint = context;
    struct fake_network *network = endpoint->network;
    int round = network->pending_round[endpoint->replica];
    memcpy(network->receive_of[endpoint->replica], network->rounds[round].sums,
           sizeof network->rounds[round].sums);
    return 0;
}

struct cluster {
    struct fake_network network;
    struct fake_endpoint endpoints[MAX_REPLICAS];
    struct step_monitor monitors[MAX_REPLICAS];
    int replicas;
};

static void cluster_init(struct cluster *cluster, int replicas, double drain)
{
    memset(cluster, 0, sizeof *cluster);
    cluster->replicas = replicas;
    for (int r = 0; r < replicas; r++) {
        cluster->endpoints[r] = (struct fake_endpoint){&cluster->network, r};
        step_monitor_init(&cluster->monitors[r],
                          (struct piggyback_transport){&cluster->endpoints[r], fake_post,
                                                       fake_complete},
                          (uint32_t)replicas, 8, drain, 0.0);
    }
}

/* One step on every replica: a gradient piece, then the boundary (all
 * replicas post before any completes, as the collective order guarantees).
 * Returns how many replicas were told to stop. */
static int cluster_step(struct cluster *cluster, int step, bool exit_on_replica_1,
                        bool commit_on_replica_0)
{
    static const int communicator;
    int stops = 0;
    for (int r = 0; r < cluster->replicas; r++) {
        struct step_monitor *monitor = &cluster->monitors[r];
        bool measuring = step_monitor_measuring(monitor);
        step_monitor_gradient(monitor, &communicator, measuring ? 2.0 + r : 0,
                              measuring ? 1.0 : 0, 0.001, measuring ? 0.0001 : 0);
        if (commit_on_replica_0 && r == 0)
            step_monitor_note_commit(monitor);
        if (step_monitor_boundary(monitor, 0.01 * step, (uint64_t)(step * 4),
                                  exit_on_replica_1 && r == 1, false) == STEP_STOP)
            stops++;
    }
    return stops;
}

Test(step_monitor, a_stop_on_one_replica_stops_every_replica_at_the_same_boundary)
{
    struct cluster cluster;
    cluster_init(&cluster, 3, 0);
    for (int step = 1; step <= 5; step++)
        cr_assert_eq(cluster_step(&cluster, step, false, false), 0);
    cr_assert_eq(cluster_step(&cluster, 6, true, false), 0, "the request travels first");
    cr_expect_eq(cluster_step(&cluster, 7, false, false), 3,
                 "every replica stops at the next boundary");
}

Test(step_monitor, drain_waits_for_the_next_commit)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 1000);
    cluster_step(&cluster, 1, true, false);
    for (int step = 2; step <= 6; step++)
        cr_assert_eq(cluster_step(&cluster, step, false, false), 0, "step %d runs on", step);
    cr_assert_eq(cluster_step(&cluster, 7, false, true), 0, "the commit travels first");
    cr_expect_eq(cluster_step(&cluster, 8, false, false), 2, "stop after the commit");
}

Test(step_monitor, agreed_numbers_are_the_sums_over_replicas)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 0);
    cluster_step(&cluster, 1, false, false);
    cluster_step(&cluster, 2, false, false);
    cr_assert(cluster.monitors[0].has_last);
    cr_expect(cluster.monitors[0].last.warm_up, "a run's first step holds its start-up");
    cr_expect_eq(cluster.monitors[0].last.batch_global, 0);
    cr_expect_not(grad_noise_has_estimate(&cluster.monitors[0].noise));
    cluster_step(&cluster, 3, false, false);
    const struct agreed_step *step = &cluster.monitors[0].last;
    cr_expect_not(step->warm_up);
    cr_expect_eq(step->batch_global, 8);
    cr_expect_eq(step->replicas, 2);
    cr_expect_eq(step->replicas_with_gradient, 2);
    cr_expect_eq(step->global_records, 8, "4 records on each replica");
    cr_expect_eq(step->local_records, 4);
    cr_expect(fabs(step->local_sqr_mean - 2.5) < 1e-12, "mean of 2 and 3");
    cr_expect(fabs(step->total_sqr - 1.0) < 1e-12);
    cr_expect(grad_noise_has_estimate(&cluster.monitors[0].noise));
    const struct agreed_step *other = &cluster.monitors[1].last;
    cr_expect_eq(other->global_records, step->global_records, "the same sums everywhere");
    cr_expect_eq(other->total_sqr, step->total_sqr);
    cr_expect_eq(other->step_time, step->step_time);
}

/* Steps are numbered from 1 as they end; the last one's sums, drained at
 * MPI_Finalize, carry its own number (the step counter of the statistical
 * epochs counts each number once, so a repeated one would be lost). */
Test(step_monitor, agreed_steps_are_numbered_and_the_drained_one_too)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 0);
    for (int step = 1; step <= 3; step++)
        cluster_step(&cluster, step, false, false);
    cr_expect_eq(cluster.monitors[0].last.step, 2, "step 3's sums are in flight");
    for (int r = 0; r < 2; r++)
        cr_assert(step_monitor_drain_reduction(&cluster.monitors[r]));
    cr_expect_eq(cluster.monitors[0].last.step, 3);
    cr_expect_eq(cluster.monitors[1].last.step, 3);
    cr_expect_eq(cluster.monitors[0].last.global_records, 8);
    cr_expect_not(step_monitor_drain_reduction(&cluster.monitors[0]), "nothing left");
}

Test(step_monitor, every_replica_measures_the_same_steps)
{
    struct cluster cluster;
    cluster_init(&cluster, 3, 0);
    /* norm time 0.0001 s in a 0.01 s step: 1% > 0.5%, so a period of 2 */
    for (int step = 1; step <= 40; step++) {
        bool first = step_monitor_measuring(&cluster.monitors[0]);
        for (int r = 1; r < 3; r++)
            cr_assert_eq(step_monitor_measuring(&cluster.monitors[r]), first, "step %d", step);
        cluster_step(&cluster, step, false, false);
    }
    cr_expect_eq(cluster.monitors[0].measure_period, 2);
}

Test(step_monitor, a_collective_on_the_step_communicator_ends_the_step)
{
    struct cluster cluster;
    cluster_init(&cluster, 1, 0);
    static const int step_communicator, other_communicator;
    struct step_monitor *monitor = &cluster.monitors[0];
    cr_expect_not(step_monitor_ends_step(monitor, &step_communicator), "no step yet");
    step_monitor_gradient(monitor, &step_communicator, 1, 1, 0.001, 0);
    cr_expect(step_monitor_ends_step(monitor, &step_communicator));
    cr_expect_not(step_monitor_ends_step(monitor, &other_communicator));
}

Test(step_monitor, local_boundaries_count_steps_that_consumed_records)
{
    struct cluster cluster;
    cluster_init(&cluster, 1, 0);
    struct step_monitor *monitor = &cluster.monitors[0];
    cr_expect_not(step_monitor_local_boundary(monitor, 0.5, 0), "nothing read yet");
    cr_expect(step_monitor_local_boundary(monitor, 1.0, 16));
    cr_expect_eq(monitor->last.local_records, 16);
    cr_expect(fabs(monitor->last.step_time - 1.0) < 1e-12);
    cr_expect(step_monitor_local_boundary(monitor, 1.5, 32));
    cr_expect(fabs(monitor->last.step_time - 0.5) < 1e-12);
}

Test(step_monitor, profiles_are_bucketed_by_configuration)
{
    struct cluster cluster;
    cluster_init(&cluster, 1, 0);
    struct step_monitor *monitor = &cluster.monitors[0];
    struct adaptdl_job_record record;
    job_record_init(&record);
    /* the first step read the whole data set ahead: no profile of it */
    step_monitor_local_boundary(monitor, 0.5, 1000);
    cr_assert_eq(step_monitor_record_profile(monitor, 1, &record), 0);
    cr_expect_eq(record.profile_count, 0);
    step_monitor_local_boundary(monitor, 1.0, 1016);
    cr_assert_eq(step_monitor_record_profile(monitor, 1, &record), 0);
    step_monitor_local_boundary(monitor, 2.0, 1032);
    cr_assert_eq(step_monitor_record_profile(monitor, 1, &record), 0);
    step_monitor_local_boundary(monitor, 2.5, 1040);
    cr_assert_eq(step_monitor_record_profile(monitor, 1, &record), 0);
    cr_assert_eq(record.profile_count, 2, "batches of 16 and of 8");
    cr_expect_eq(record.profiles[0].local_bsz, 16);
    cr_expect_eq(record.profiles[0].count, 2);
    cr_expect(fabs(record.profiles[0].step_time_sum - 1.5) < 1e-12);
    cr_expect_eq(record.profiles[1].local_bsz, 8);
    job_record_free(&record);
}

/* A piece whose norms cannot be read (a freed request) counts toward the
 * step, and no replica takes statistics from that step: one replica
 * reports it unmeasured, so the agreed "measured" count falls short. */
Test(step_monitor, an_unmeasured_piece_counts_but_keeps_the_step_out_of_the_statistics)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 0);
    static const int communicator;
    for (int r = 0; r < 2; r++) {
        struct step_monitor *monitor = &cluster.monitors[r];
        cr_assert(step_monitor_measuring(monitor), "K = 2 measures its first step");
        step_monitor_gradient(monitor, &communicator, 2.0 + r, 1.0, 0.001, 0.0001);
        if (r == 1)
            step_monitor_gradient_unmeasured(monitor, &communicator, 0.001);
        cr_expect(step_monitor_ends_step(monitor, &communicator), "the step is in progress");
        step_monitor_boundary(monitor, 0.01, 4, false, false);
    }
    cluster_step(&cluster, 2, false, false);   /* step 1's sums arrive */
    const struct agreed_step *step = &cluster.monitors[0].last;
    cr_expect_eq(step->step, 1);
    cr_expect_eq(step->replicas_with_gradient, 2, "the freed piece made a step on replica 1");
    cr_expect_not(step->statistics_updated, "one replica could not measure that step");
    cr_expect_not(grad_noise_has_estimate(&cluster.monitors[0].noise));
    cr_expect_eq(cluster.monitors[1].boundaries, 2);
}

/* K = 1: AdaptDL's difference estimator over consecutive steps.  Step 1's
 * gradient a (|a|^2 = 2) has no pair; step 2's b (|b|^2 = 4) comes with
 * |(a + b)/2|^2 = 2.5, which gives grad_sqr = (2 * 2.5 - 3) / 1 = 2 and
 * grad_var = (3 - 2.5) * 2 * 16 = 16 per sample.  A pair marked invalid
 * (the previous step had no such piece) starts the estimator over.  (At
 * the synchronized boundary, where the single-replica statistics run.) */
Test(step_monitor, single_replica_pairs_feed_the_difference_estimator)
{
    struct cluster cluster;
    cluster_init(&cluster, 1, 0);
    struct step_monitor *monitor = &cluster.monitors[0];
    static const char communicator[] = "k1";
    cr_assert(step_monitor_measuring(monitor), "K = 1 measures every step");
    /* a run's first step (start-up reads of 1000 records) is no sample */
    step_monitor_gradient_pair(monitor, 0.0, false);
    step_monitor_gradient(monitor, communicator, 7.0, 7.0, 0.001, 0);
    step_monitor_boundary(monitor, 0.5, 1000, false, false);
    step_monitor_gradient_pair(monitor, 0.0, false);
    step_monitor_gradient(monitor, communicator, 2.0, 2.0, 0.001, 0);
    step_monitor_boundary(monitor, 1.0, 1016, false, false);
    cr_expect(!grad_noise_has_estimate(&monitor->noise), "a first pair is not valid");
    step_monitor_gradient_pair(monitor, 2.5, true);
    step_monitor_gradient(monitor, communicator, 4.0, 4.0, 0.001, 0);
    step_monitor_boundary(monitor, 2.0, 1032, false, false);
    cr_assert(grad_noise_has_estimate(&monitor->noise));
    cr_expect(fabs(grad_noise_sqr(&monitor->noise) - 2.0) < 1e-12, "%g",
              grad_noise_sqr(&monitor->noise));
    cr_expect(fabs(grad_noise_var(&monitor->noise) - 16.0) < 1e-9, "%g",
              grad_noise_var(&monitor->noise));
    uint64_t observations = monitor->noise.observations;
    step_monitor_gradient_pair(monitor, 9.0, false);
    step_monitor_gradient(monitor, communicator, 6.0, 6.0, 0.001, 0);
    step_monitor_boundary(monitor, 3.0, 1048, false, false);
    cr_expect_eq(monitor->noise.observations, observations, "an invalid pair adds nothing");
}

/* The statistics a run leaves in the job record are the ones the next run
 * starts from: the same estimates, the same confidence. */
Test(step_monitor, statistics_survive_a_restart_through_the_job_record)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 0);
    for (int step = 1; step <= 40; step++)
        cluster_step(&cluster, step, false, false);
    const struct grad_noise_state *before = &cluster.monitors[0].noise;
    cr_assert(grad_noise_has_estimate(before));
    struct adaptdl_job_record record;
    job_record_init(&record);
    cr_assert_eq(step_monitor_record_profile(&cluster.monitors[0], 1, &record), 0);

    struct cluster restarted;
    cluster_init(&restarted, 2, 0);
    struct step_monitor *monitor = &restarted.monitors[0];
    cr_assert_not(grad_noise_has_estimate(&monitor->noise), "a new run knows nothing");
    step_monitor_restore_statistics(monitor, &record);
    cr_expect_eq(grad_noise_sqr(&monitor->noise), grad_noise_sqr(before));
    cr_expect_eq(grad_noise_var(&monitor->noise), grad_noise_var(before));
    double sqr_error, var_error, restored_sqr_error, restored_var_error;
    grad_noise_standard_errors(before, &sqr_error, &var_error);
    grad_noise_standard_errors(&monitor->noise, &restored_sqr_error, &restored_var_error);
    cr_expect_eq(restored_sqr_error, sqr_error);
    cr_expect_eq(restored_var_error, var_error);
    cr_expect_eq(grad_noise_trustworthy(&monitor->noise), grad_noise_trustworthy(before));
    job_record_free(&record);
}

Test(step_monitor, a_record_without_statistics_restores_nothing)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 0);
    struct adaptdl_job_record record;
    job_record_init(&record);
    record.grad_sqr_biased = 5.0;   /* no weight: not an estimate */
    step_monitor_restore_statistics(&cluster.monitors[0], &record);
    cr_expect_not(grad_noise_has_estimate(&cluster.monitors[0].noise));
    cr_expect(isnan(grad_noise_sqr(&cluster.monitors[0].noise)));
}

/* What a checkpoint commit counts that no agreed step has counted yet.
 * Two replicas: a boundary after 4 records each posts the step's sums;
 * until they arrive, that step is in flight with 8 records over both.
 * Records read after the boundary belong to the next step only once its
 * gradient was reduced. */
Test(step_monitor, a_commit_counts_the_step_in_flight_and_a_reduced_step_in_progress)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 0);
    struct step_monitor *monitor = &cluster.monitors[0];
    uint64_t steps, records;
    cr_expect_eq(step_monitor_records_in_flight(monitor), 0, "nothing posted yet");
    step_monitor_uncounted_steps(monitor, true, 0, &steps, &records);
    cr_expect_eq(steps, 0);
    cr_expect_eq(records, 0);

    static const int communicator;
    step_monitor_gradient(monitor, &communicator, 2.0, 1.0, 0.001, 0.0001);
    step_monitor_boundary(monitor, 0.01, 4, false, false);
    cr_assert(monitor->posted);
    cr_expect_eq(step_monitor_records_in_flight(monitor), 8, "4 records on each of 2");
    step_monitor_uncounted_steps(monitor, true, 7, &steps, &records);
    cr_expect_eq(steps, 1, "3 records read, no gradient yet: not a step of the checkpoint");
    cr_expect_eq(records, 8);

    step_monitor_gradient(monitor, &communicator, 2.0, 1.0, 0.001, 0.0001);
    step_monitor_uncounted_steps(monitor, true, 7, &steps, &records);
    cr_expect_eq(steps, 2, "the gradient was reduced: the trainer finished that step");
    cr_expect_eq(records, 8 + 3 * 2);
}

Test(step_monitor, an_unsynchronized_commit_counts_the_records_since_the_last_boundary)
{
    struct cluster cluster;
    cluster_init(&cluster, 1, 0);
    struct step_monitor *monitor = &cluster.monitors[0];
    uint64_t steps, records;
    cr_assert(step_monitor_local_boundary(monitor, 1.0, 16));
    step_monitor_uncounted_steps(monitor, false, 16, &steps, &records);
    cr_expect_eq(steps, 0, "nothing read since the boundary");
    cr_expect_eq(records, 0);
    step_monitor_uncounted_steps(monitor, false, 21, &steps, &records);
    cr_expect_eq(steps, 1);
    cr_expect_eq(records, 5);
    cr_expect_eq(step_monitor_records_in_flight(monitor), 0, "local boundaries post nothing");
}

/* A loader that reads its whole data set before the first step (train_dp's)
 * leaves the later steps without records: their batch is unknown, never 0
 * and never the start-up reads, and after STEP_UNKNOWN_BATCH_STEPS such
 * steps one line names ADAPTDL_BATCH_SIZE. */
Test(step_monitor, data_read_ahead_leaves_the_batch_unknown_and_says_so_once)
{
    struct cluster cluster;
    cluster_init(&cluster, 2, 0);
    for (int r = 0; r < 2; r++)
        cluster.monitors[r].noise.initial_global_bsz = 0;   /* none configured */
    static const int communicator;
    char message[512];
    for (int step = 1; step <= STEP_UNKNOWN_BATCH_STEPS + 3; step++) {
        for (int r = 0; r < 2; r++) {
            struct step_monitor *monitor = &cluster.monitors[r];
            step_monitor_gradient(monitor, &communicator, 2.0 + r, 1.0, 0.001, 0.0001);
            step_monitor_boundary(monitor, 0.01 * step, 64066, false, false);
        }
        struct step_monitor *first = &cluster.monitors[0];
        cr_assert_eq(first->last.batch_global, 0, "step %d", step);
        cr_assert_not(grad_noise_has_estimate(&first->noise));
        cr_assert_eq(first->noise.initial_global_bsz, 0, "not the start-up reads");
        if (step < STEP_UNKNOWN_BATCH_STEPS + 2)
            cr_assert_not(step_monitor_unknown_batch_warning(first, message, sizeof message),
                          "step %d", step);
    }
    cr_assert(step_monitor_unknown_batch_warning(&cluster.monitors[0], message, sizeof message));
    cr_expect(strstr(message, "ADAPTDL_BATCH_SIZE") != NULL, "%s", message);
    cr_expect(strstr(message, "128132") != NULL, "both replicas' reads: %s", message);
    cr_expect_not(step_monitor_unknown_batch_warning(&cluster.monitors[0], message,
                                                     sizeof message), "once");
}

/* A loader that reads ahead in chunks: the steps that read nothing take
 * the mean records per step of the run after its first step. */
Test(step_monitor, a_step_without_reads_takes_the_runs_mean_batch)
{
    struct cluster cluster;
    cluster_init(&cluster, 1, 0);
    struct step_monitor *monitor = &cluster.monitors[0];
    step_monitor_local_boundary(monitor, 1.0, 500);        /* start-up */
    step_monitor_local_boundary(monitor, 2.0, 532);        /* 32 */
    step_monitor_local_boundary(monitor, 3.0, 564);        /* 32 */
    cr_expect_eq(monitor->last.batch_global, 32);
    cr_expect(fabs(step_monitor_median_step_time(monitor) - 1.0) < 1e-12);
}

/* The summary's step time: the median of the run's steps after its first,
 * which a slow start-up step does not move. */
Test(step_monitor, the_median_step_time_leaves_out_the_first_step)
{
    struct cluster cluster;
    cluster_init(&cluster, 1, 0);
    struct step_monitor *monitor = &cluster.monitors[0];
    cr_expect_eq(step_monitor_median_step_time(monitor), 0);
    uint64_t records = 0;
    step_monitor_local_boundary(monitor, 0.15, records += 64066);
    double now = 0.15;
    for (int step = 0; step < 99; step++)
        step_monitor_local_boundary(monitor, now += step % 10 == 0 ? 0.004 : 0.0015,
                                    records += 16);
    cr_expect(fabs(step_monitor_median_step_time(monitor) - 0.0015) < 1e-9, "%g",
              step_monitor_median_step_time(monitor));
}

/* One replica whose step monitor agrees through the loopback transport
 * (what a single process without a collective library uses), global batch
 * 8. */
struct single_replica {
    struct piggyback_loopback loopback;
    struct step_monitor monitor;
};

/* The communicator the single replica's gradients go through (the monitor
 * knows a communicator by its address). */
static const char single_communicator[] = "optimizer";

static void single_replica_start(struct single_replica *single)
{
    step_monitor_init(&single->monitor, piggyback_loopback_transport(&single->loopback), 1, 8,
                      0, 0.0);
}

/* A single process without a collective library agrees with itself: the
 * loopback hands back what it posted, so a stop requested at one boundary
 * is taken at the next, and the sums are its own numbers. */
Test(step_monitor, a_loopback_agrees_with_itself_one_boundary_later)
{
    struct single_replica single;
    single_replica_start(&single);
    step_monitor_gradient(&single.monitor, single_communicator, 3.0, 3.0, 0.0, 0.0);
    cr_assert_eq(step_monitor_boundary(&single.monitor, 1.0, 8, false, false), STEP_CONTINUE);
    step_monitor_gradient(&single.monitor, single_communicator, 3.0, 3.0, 0.0, 0.0);
    cr_assert_eq(step_monitor_boundary(&single.monitor, 2.0, 16, true, false), STEP_CONTINUE,
                 "the request travels first");
    cr_assert(single.monitor.has_last);
    cr_expect_eq(single.monitor.last.global_records, 8);
    cr_expect_eq(single.monitor.last.step, 1);
    cr_expect(fabs(single.monitor.last.local_sqr_mean - 3.0) < 1e-12);
    step_monitor_gradient(&single.monitor, single_communicator, 3.0, 3.0, 0.0, 0.0);
    cr_expect_eq(step_monitor_boundary(&single.monitor, 3.0, 24, false, false), STEP_STOP);
}

/* A step whose batch the trainer reported counts that batch, whatever the
 * data views counted (a loader reading ahead, or no view at all). */
Test(step_monitor, a_reported_step_batch_overrides_the_views_count)
{
    struct single_replica single;
    single_replica_start(&single);
    /* the views counted 100 records (read ahead); the model saw 12 */
    step_monitor_gradient(&single.monitor, single_communicator, 1.0, 1.0, 0.0, 0.0);
    step_monitor_set_step_records(&single.monitor, 100, 12);
    step_monitor_boundary(&single.monitor, 1.0, 100, false, false);
    /* no view at all: the views' total stays 100 */
    step_monitor_gradient(&single.monitor, single_communicator, 1.0, 1.0, 0.0, 0.0);
    step_monitor_set_step_records(&single.monitor, 100, 12);
    step_monitor_boundary(&single.monitor, 2.0, 100, false, false);
    cr_expect_eq(single.monitor.last.global_records, 12);
    cr_expect_eq(single.monitor.last.local_records, 12);
    step_monitor_gradient(&single.monitor, single_communicator, 1.0, 1.0, 0.0, 0.0);
    step_monitor_boundary(&single.monitor, 3.0, 100, false, false);
    cr_expect_eq(single.monitor.last.global_records, 12, "the second reported step");
}
