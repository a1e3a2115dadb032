/* harness_torch.c - a job of trainers/torch_ddp.py (see harness_torch.h). */
#include "harness_torch.h"

#include <criterion/criterion.h>
#include <stdio.h>

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
