/* test_event_lines.c - the metrics file's event lines (event_lines.h): the
 * members each carries, and the ones that are null or left out, read back
 * from the text the writer would write. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "batch_decision.h"
#include "event_lines.h"
#include "grad_noise.h"
#include "replica_choice.h"
#include "run_policy.h"

/* The line is complete and holds `member` ("\"key\": value") as written. */
static void expect_member(const struct json_line *line, const char *member)
{
    cr_assert(line->complete && !line->invalid, "a whole line: %.*s", (int)line->length,
              line->text);
    cr_expect(strstr(line->text, member) != NULL, "%s in %s", member, line->text);
}

static void expect_no_member(const struct json_line *line, const char *key)
{
    cr_expect(strstr(line->text, key) == NULL, "no %s in %s", key, line->text);
}

Test(event_lines, a_pass_end_carries_what_was_consumed_and_a_begin_does_not)
{
    static const unsigned char bytes[8 * 8] = {0};
    struct data_entry entry = {.record_size = 8, .role = DATA_ROLE_TRAIN, .shuffle = true,
                               .shard = true, .tail = TAIL_ERROR};
    struct dataset_file file;
    char error[512] = "";
    cr_assert_eq(dataset_file_init(&file, &entry, "/data/train.bin", bytes, sizeof bytes, 3, 2,
                                   1, error, sizeof error),
                 0, "%s", error);
    struct json_line line;
    event_line_pass(&line, 12.5, &file, true, 0, 0, "first record read");
    expect_member(&line, "\"type\": \"pass_begin\"");
    expect_member(&line, "\"file\": \"/data/train.bin\"");
    expect_member(&line, "\"role\": \"train\"");
    expect_member(&line, "\"length\": 4");
    expect_member(&line, "\"records\": 8");
    expect_member(&line, "\"replicas\": 2");
    expect_member(&line, "\"rank\": 1");
    expect_member(&line, "\"skipped\": false");
    expect_no_member(&line, "\"consumed\"");
    event_line_pass(&line, 13, &file, false, 0, 4, "rewound");
    expect_member(&line, "\"type\": \"pass_end\"");
    expect_member(&line, "\"consumed\": 4");
    expect_member(&line, "\"why\": \"rewound\"");
    dataset_file_release(&file);
}

Test(event_lines, a_start_without_injection_has_null_batch_and_learning_rate)
{
    struct run_start start = {.restarts = 2, .replicas = 4, .rank = 3};
    struct json_line line;
    event_line_start(&line, 1, &start);
    expect_member(&line, "\"type\": \"start\"");
    expect_member(&line, "\"restarts\": 2");
    expect_member(&line, "\"local_bsz\": null");
    expect_member(&line, "\"global_bsz\": null");
    expect_member(&line, "\"lr\": null");
    expect_member(&line, "\"lr_rule\": null");

    start.batch_injected = true;
    start.local_bsz = 16;
    start.global_bsz = 64;
    start.learning_rate_injected = true;
    start.learning_rate = 0.5;
    start.lr_rule = "sqrt";
    event_line_start(&line, 1, &start);
    expect_member(&line, "\"local_bsz\": 16");
    expect_member(&line, "\"global_bsz\": 64");
    expect_member(&line, "\"lr\": 0.5");
    expect_member(&line, "\"lr_rule\": \"sqrt\"");
}

Test(event_lines, a_step_has_a_null_batch_when_unknown_and_no_goodput_without_a_model)
{
    struct agreed_step step = {.step = 7, .replicas = 2, .global_records = 64,
                               .local_records = 32, .step_time = 0.25, .sync_time = 0.125,
                               .batch_global = 64};
    struct grad_noise_state noise;
    grad_noise_init(&noise, 64);
    struct job_position position = {.step = 107, .epoch = 3, .progress = 0.5};
    struct json_line line;
    event_line_step(&line, 2, &step, &noise, &position, false, NULL, 1);
    expect_member(&line, "\"type\": \"step\"");
    expect_member(&line, "\"step\": 107");
    expect_member(&line, "\"epoch\": 3");
    expect_member(&line, "\"local_bsz\": null");
    expect_member(&line, "\"step_time\": 0.25");
    expect_no_member(&line, "\"goodput\"");
    event_line_step(&line, 2, &step, &noise, &position, true, NULL, 1);
    expect_member(&line, "\"local_bsz\": 32");
    expect_member(&line, "\"global_bsz\": 64");
    expect_no_member(&line, "\"efficiency\"");
    step.batch_global = 0;   /* a first step, or data read ahead: never a batch of 0 */
    event_line_step(&line, 2, &step, &noise, &position, true, NULL, 1);
    expect_member(&line, "\"local_bsz\": null");
    expect_member(&line, "\"global_bsz\": null");
}

Test(event_lines, a_snapshot_names_its_binding_by_size_and_hex_hash)
{
    struct content_identity identity = {.size = 4096, .hash = 0xabcull};
    struct json_line line;
    event_line_snapshot(&line, 3, "/ck/model.pt", &identity, true);
    expect_member(&line, "\"checkpoint\": \"/ck/model.pt\"");
    expect_member(&line, "\"size\": 4096");
    expect_member(&line, "\"hash\": \"0000000000000abc\"");
    expect_member(&line, "\"written\": true");
}

Test(event_lines, restore_and_exit)
{
    struct json_line line;
    event_line_restore(&line, 4, "/ck/model.pt", -1);
    expect_member(&line, "\"type\": \"restore\"");
    expect_member(&line, "\"restored\": false");
    event_line_exit(&line, 5, 143, "stop signal");
    expect_member(&line, "\"type\": \"exit\"");
    expect_member(&line, "\"status\": 143");
    expect_member(&line, "\"why\": \"stop signal\"");
}

Test(event_lines, a_decision_carries_its_inputs_and_choice)
{
    struct batch_decision_inputs inputs = {.grad_sqr = 1, .grad_var = 2, .nodes = 2,
                                           .replicas = 2, .current_local_bsz = 16,
                                           .initial_global_bsz = 32, .max_global_bsz = 1024};
    struct batch_decision decision = {.speedup = 1.5, .restart_cost = 2.5,
                                      .payback_time = 10};
    decision.choice.global_bsz = 128;
    decision.choice.local_bsz = 64;
    struct json_line line;
    event_line_decision(&line, 6, &inputs, &decision, true);
    expect_member(&line, "\"type\": \"decision\"");
    expect_member(&line, "\"restart\": true");
    expect_member(&line, "\"nodes\": 2");
    expect_member(&line, "\"current_global_bsz\": 32");
    expect_member(&line, "\"chosen_global_bsz\": 128");
    expect_member(&line, "\"chosen_local_bsz\": 64");
    expect_member(&line, "\"speedup\": 1.5");
    expect_member(&line, "\"payback_seconds\": 10");
    expect_member(&line, "\"reason\": \"");
}

Test(event_lines, a_replica_decision_carries_the_payback_of_its_restart)
{
    struct replica_choice choice = {.replicas = 4, .minimum = 1, .maximum = 8, .best = 4,
                                    .goodput_current = 100, .goodput_chosen = 150,
                                    .speedup = 1.5, .threshold = 1.2};
    struct json_line line;
    event_line_replica_decision(&line, 7, &choice, 2, 3, false);
    expect_member(&line, "\"type\": \"replica_decision\"");
    expect_member(&line, "\"replicas\": 2");
    expect_member(&line, "\"chosen_replicas\": 4");
    expect_member(&line, "\"speedup_threshold\": 1.2");
    expect_member(&line, "\"restart_cost\": 3");
    char payback[64];
    snprintf(payback, sizeof payback, "\"payback_seconds\": %g",
             restart_payback_seconds(3, 1.5));
    expect_member(&line, payback);
}
