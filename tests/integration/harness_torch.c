/* harness_torch.c - a job of trainers/torch_ddp.py (see harness_torch.h). */
#include "harness_torch.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void torch_job_init(struct torch_job *torch, unsigned records, unsigned dim, unsigned seed)
{
    dataset_job_init(&torch->job, records, dim, seed);
    torch->checkpoint = harness_path_in(torch->job.directory, "ck");
    torch->out = harness_path_in(torch->job.directory, "out");
    torch->err = harness_path_in(torch->job.directory, "err");
    torch->log_pattern = harness_path_in(torch->job.directory, "log.%n.%r");
}

char *torch_job_log_path(const struct torch_job *torch, unsigned run, unsigned rank)
{
    char name[64];
    snprintf(name, sizeof name, "log.%u.%u", run, rank);
    return harness_path_in(torch->job.directory, name);
}

void torch_job_skip_without_torch(void)
{
    if (!harness_python_has("torch")) {
        fprintf(stderr, "skipped: /usr/bin/python3 cannot import torch\n");
        cr_skip_test("/usr/bin/python3 cannot import torch: torch_ddp.py not run");
    }
}

void torch_job_expect_disjoint_halves(const struct torch_job *torch, unsigned run,
                                      unsigned records, unsigned epochs)
{
    unsigned *counts = calloc((size_t)epochs * records, sizeof *counts);
    unsigned *mine = calloc((size_t)epochs * records, sizeof *mine);
    if (counts == NULL || mine == NULL)
        abort();
    for (unsigned rank = 0; rank < 2; rank++) {
        memset(mine, 0, (size_t)epochs * records * sizeof *mine);
        char *path = torch_job_log_path(torch, run, rank);
        struct id_log log;
        harness_read_record_stream(path, &log);
        record_stream_count_until(&log, UINT64_MAX, mine, records, epochs);
        id_log_free(&log);
        for (unsigned epoch = 0; epoch < epochs; epoch++) {
            unsigned seen = 0;
            for (unsigned id = 0; id < records; id++) {
                seen += mine[epoch * records + id];
                counts[epoch * records + id] += mine[epoch * records + id];
            }
            cr_expect_eq(seen, records / 2, "rank %u epoch %u trained %u records", rank, epoch,
                         seen);
        }
        free(path);
    }
    size_t wrong = 0;
    for (unsigned i = 0; i < epochs * records; i++)
        if (counts[i] != 1 && wrong++ < 5)
            cr_expect_fail("epoch %u record %u seen %u times by the two replicas", i / records,
                           i % records, counts[i]);
    cr_expect_eq(wrong, 0, "%zu records not seen exactly once", wrong);
    free(mine);
    free(counts);
}
