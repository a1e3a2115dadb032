/* events.c - the metrics file (see events.h): its writer, and the calls
 * that hand it each event's line (runtime/event_lines.c builds them).  Lines
 * are built in a fixed buffer and written with one write(2) each, so ranks
 * that share a file never interleave; step lines are rate-limited by the
 * writer. */
#include "events.h"

#include "clock_time.h"
#include "hints_file.h"
#include "log.h"
#include "metrics.h"
#include "shim.h"

static struct metrics_writer shim_metrics;

static void shim_events_pass_observer(const struct dataset_file *file, bool begins,
                                      uint64_t pass, uint64_t records_consumed,
                                      const char *why)
{
    struct json_line line;
    event_line_pass(&line, clock_unix_seconds(), file, begins, pass, records_consumed, why);
    metrics_write_event(&shim_metrics, &line);
}

int shim_events_descriptor(void)
{
    return metrics_writer_enabled(&shim_metrics) ? shim_metrics.fd : -1;
}

void shim_events_open(void)
{
    const char *pattern = shim_session.config.metrics_file;
    if (pattern == NULL)
        return;
    char error[512];
    if (metrics_writer_open(&shim_metrics, pattern, shim_session.config.replica_rank, error,
                            sizeof error) != 0) {
        log_warn("%s; no metrics are written", error);
        return;
    }
    view_cursor_pass_observer = shim_events_pass_observer;
}

void shim_events_start(const struct run_start *start)
{
    if (!metrics_writer_enabled(&shim_metrics))
        return;
    struct json_line line;
    event_line_start(&line, clock_unix_seconds(), start);
    metrics_write_event(&shim_metrics, &line);
}

void shim_events_step(const struct agreed_step *step, const struct grad_noise_state *noise,
                      const struct job_position *position, bool local_bsz_known,
                      const struct goodput_model *model, uint32_t nodes)
{
    if (!metrics_writer_enabled(&shim_metrics))
        return;
    struct json_line line;
    event_line_step(&line, clock_unix_seconds(), step, noise, position, local_bsz_known, model,
                    nodes);
    metrics_offer_step(&shim_metrics, &line, log_monotonic_seconds());
}

void shim_events_snapshot(const char *checkpoint_path, const struct content_identity *identity,
                          bool written)
{
    if (!metrics_writer_enabled(&shim_metrics))
        return;
    struct json_line line;
    event_line_snapshot(&line, clock_unix_seconds(), checkpoint_path, identity, written);
    metrics_write_event(&shim_metrics, &line);
}

void shim_events_restore(const char *checkpoint_path, int status)
{
    if (!metrics_writer_enabled(&shim_metrics))
        return;
    struct json_line line;
    event_line_restore(&line, clock_unix_seconds(), checkpoint_path, status);
    metrics_write_event(&shim_metrics, &line);
}

void shim_events_exit(int status, const char *why)
{
    if (!metrics_writer_enabled(&shim_metrics))
        return;
    metrics_flush_latest_step(&shim_metrics);
    struct json_line line;
    event_line_exit(&line, clock_unix_seconds(), status, why);
    metrics_write_event(&shim_metrics, &line);
}

void shim_events_decision(const struct batch_decision_inputs *inputs,
                          const struct batch_decision *decision, bool restart)
{
    if (!metrics_writer_enabled(&shim_metrics))
        return;
    struct json_line line;
    event_line_decision(&line, clock_unix_seconds(), inputs, decision, restart);
    metrics_write_event(&shim_metrics, &line);
}

void shim_events_replica_decision(const struct replica_choice *choice, uint32_t replicas,
                                  double restart_cost, bool restart)
{
    if (!metrics_writer_enabled(&shim_metrics))
        return;
    struct json_line line;
    event_line_replica_decision(&line, clock_unix_seconds(), choice, replicas, restart_cost,
                                restart);
    metrics_write_event(&shim_metrics, &line);
}

void shim_events_write_hints(const char *path, const struct batch_decision_inputs *inputs,
                             const struct batch_decision *decision,
                             uint32_t max_replicas_profiled)
{
    if (path == NULL || !decision->valid)
        return;
    struct json_line line;
    hints_format(&line, clock_unix_seconds(), inputs, decision, max_replicas_profiled);
    char error[512];
    if (hints_write(path, &line, error, sizeof error) != 0)
        log_warn("%s", error);
}
