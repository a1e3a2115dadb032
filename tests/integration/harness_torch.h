/* harness_torch.h - a job of the DDP test trainer trainers/torch_ddp.py, as
 * the PyTorch launcher tests run it on one host or over several. */
#ifndef ADAPTSHIM_HARNESS_TORCH_H
#define ADAPTSHIM_HARNESS_TORCH_H

#include "harness.h"

/* Its data, state and checkpoint settings, the wrapper's stdout and
 * stderr, and the record streams of run N rank R in DIR/log.N.R. */
struct torch_job {
    struct dataset_job job;
    char *checkpoint, *out, *err, *log_pattern;
};

/* A job over `records` records of dimension `dim` (made with `seed`). */
void torch_job_init(struct torch_job *torch, unsigned records, unsigned dim, unsigned seed);
/* DIR/log.RUN.RANK (newly allocated). */
char *torch_job_log_path(const struct torch_job *torch, unsigned run, unsigned rank);
/* Run `run` of a 2-replica job over `records` records for `epochs` epochs:
 * in each epoch the two replicas' record streams are disjoint halves that
 * cover the data (each record trained exactly once). */
void torch_job_expect_disjoint_halves(const struct torch_job *torch, unsigned run,
                                      unsigned records, unsigned epochs);
/* Skips the test, in one line, when /usr/bin/python3 cannot import torch. */
void torch_job_skip_without_torch(void);

#endif
