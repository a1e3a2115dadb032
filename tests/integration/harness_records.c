/* harness_records.c - helpers for the loader-style example trainers (see
 * harness.h): their token files, the record streams they print, polling
 * them for a kill point, and cleaning up after a passing test. */
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

void harness_generate_tokens(const char *path, uint64_t records, unsigned tokens_per_record,
                             uint64_t seed)
{
    char records_text[32], tokens_text[32], seed_text[32];
    snprintf(records_text, sizeof records_text, "%llu", (unsigned long long)records);
    snprintf(tokens_text, sizeof tokens_text, "%u", tokens_per_record);
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    char *generator = strdup(harness_build_path("tools/gen_tokens"));
    char *argv[] = {generator, "--out", (char *)path, "--records", records_text,
                    "--tokens-per-record", tokens_text, "--seed", seed_text, NULL};
    struct run_result result;
    if (harness_run(&result, argv, NULL, false, 60) != 0) {
        fprintf(stderr, "gen_tokens failed: %s", result.err ? result.err : "");
        abort();
    }
    run_result_free(&result);
    free(generator);
}

/* One line of a record stream as an event; false for any other line. */
static bool record_stream_parse_line(const char *line, struct id_event *event)
{
    unsigned long long first, second;
    char end;  /* a record line ends where its number ends */
    if (sscanf(line, "epoch %llu record %llu%c", &first, &second, &end) == 2) {
        event->kind = ID_EVENT_RECORD;
        event->epoch = first;
        event->value = second;
    } else if (sscanf(line, "checkpoint step %llu%c", &first, &end) == 1) {
        event->kind = ID_EVENT_CHECKPOINT;
        event->value = first;
    } else {
        return false;
    }
    return true;
}

int harness_read_record_stream(const char *path, struct id_log *log)
{
    char *text = harness_read_file(path, NULL);
    if (text != NULL) {
        /* a last line without its newline was cut short by SIGKILL ("record 1"
         * of "record 12"): it was never completely printed */
        char *last_newline = strrchr(text, '\n');
        *(last_newline ? last_newline + 1 : text) = '\0';
    }
    id_log_parse_lines(log, text, record_stream_parse_line);
    return 0;
}

void record_stream_count_until(const struct id_log *log, uint64_t step, unsigned *counts,
                               uint64_t records, uint64_t epochs)
{
    size_t end = log->count;
    if (step != UINT64_MAX) {
        end = 0;  /* no such checkpoint: this run committed nothing that was resumed */
        for (size_t i = 0; i < log->count; i++)
            if (log->events[i].kind == ID_EVENT_CHECKPOINT && log->events[i].value == step) {
                end = i;
                break;
            }
    }
    for (size_t i = 0; i < end; i++) {
        const struct id_event *event = &log->events[i];
        if (event->kind == ID_EVENT_RECORD && event->epoch < epochs && event->value < records)
            counts[event->epoch * records + event->value]++;
    }
}

bool harness_resume_point(const char *output_path, uint64_t *step)
{
    char *text = harness_read_output(output_path);
    bool known = true;
    const char *resumed = strstr(text, "resumed at step ");
    if (resumed != NULL)
        *step = strtoull(resumed + strlen("resumed at step "), NULL, 10);
    else if (strstr(text, "starting fresh") != NULL)
        *step = 0;
    else
        known = false;
    free(text);
    return known;
}

size_t harness_count_lines_containing(const char *path, const char *needle)
{
    char *text = harness_read_file(path, NULL);
    if (text == NULL)
        return 0;
    size_t count = 0;
    for (char *line = text; *line;) {
        char *newline = strchr(line, '\n');
        if (newline == NULL)
            break;  /* a line still being written */
        *newline = '\0';
        if (strstr(line, needle) != NULL)
            count++;
        line = newline + 1;
    }
    free(text);
    return count;
}

bool harness_wait_for_lines(const char *path, const char *needle, size_t lines, pid_t pid,
                            double timeout_seconds)
{
    double deadline = harness_monotonic_seconds() + timeout_seconds;
    while (harness_monotonic_seconds() < deadline) {
        if (harness_count_lines_containing(path, needle) >= lines)
            return true;
        siginfo_t information = {0};
        /* WNOWAIT: notice its end without reaping it (harness_wait does) */
        if (waitid(P_PID, (id_t)pid, &information, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            information.si_pid == pid)
            return harness_count_lines_containing(path, needle) >= lines;
        usleep(1000);
    }
    return false;
}

/* An import of torch costs seconds of processor time, and about fifty tests
 * ask for it: the first test of the run that imports a module leaves a
 * mark under the run's root, and the tests after it take the mark for the
 * import.  A failed import leaves none (a test on a loaded machine may only
 * have run out of time): the next test tries again. */
bool harness_python_has(const char *module)
{
    char statement[256];
    snprintf(statement, sizeof statement, "import %s", module);
    char *argv[] = {"/usr/bin/python3", "-c", statement, NULL};
    if (access(argv[0], X_OK) != 0)
        return false;
    const char *root = getenv(HARNESS_ROOT_VARIABLE);
    char *mark = NULL;
    if (root != NULL && asprintf(&mark, "%s/python-imports-%s", root, module) < 0)
        abort();
    if (mark != NULL && access(mark, F_OK) == 0) {
        free(mark);
        return true;
    }
    struct run_result result;
    int status = harness_run(&result, argv, NULL, false, 60);
    run_result_free(&result);
    if (status == 0 && mark != NULL)
        harness_write_file(mark, "", 0);
    free(mark);
    return status == 0;
}

