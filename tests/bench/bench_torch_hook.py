#!/usr/bin/env python3
"""bench_torch_hook.py - the step time of a small PyTorch model, for the
cost of the transparent gradient statistics (adaptshim(7) "PYTORCH"; the target: a
trainer's step time under the shim within 1% of without it).

    bench_torch_hook.py [--steps S=400] [--batch B=32] [--warmup W=50]

A small MLP (64 -> 256 -> 256 -> 10, ReLU, cross-entropy) trained with SGD
on random in-memory data: DistributedDataParallel over gloo when
WORLD_SIZE > 1 (MASTER_ADDR, MASTER_PORT, RANK set), one plain process
otherwise.  Run it plain and with the library preloaded and the project's
Python directory on PYTHONPATH (then the DDP hook, the step reduction or
the single-process measurement run at every step); the runner alternates
the two and prints the ratios.  Rank 0 prints "step_seconds S cpu_seconds C":
the median wall time of the steps after the warm-up, and the median
processor time of this process (every thread) per step, which a loaded
machine moves less than the wall time.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=50)
    arguments = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(arguments.batch, 64)
    labels = torch.randint(0, 10, (arguments.batch,))
    times = []
    cpu_times = []
    for step in range(arguments.warmup + arguments.steps):
        started = time.perf_counter()
        cpu_started = time.process_time()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        if step >= arguments.warmup:
            times.append(time.perf_counter() - started)
            cpu_times.append(time.process_time() - cpu_started)
    if rank == 0:
        print(f"step_seconds {statistics.median(times):.9f} "
              f"cpu_seconds {statistics.median(cpu_times):.9f}", flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
