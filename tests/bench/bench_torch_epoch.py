#!/usr/bin/env python3
"""bench_torch_epoch.py - times the epochs of a PyTorch trainer, for adaptshim(7) "Benchmarks"
("a PyTorch trainer's epoch, map-style Dataset, 0 and 2 workers").

    bench_torch_epoch.py --data PATH --workers W [--epochs E=1] [--batch B=64]

The trainer is tests/trainers/torch_dataset.py's, without its output and
checkpoints: its map-style Dataset (RecordFile: seek to header + i * record,
read one record), a shuffled DataLoader with W workers, a linear model
trained with SGD.  An epoch is timed from building its Dataset and
DataLoader to the end of its last step, as a trainer lives it (workers are
forked anew every epoch).  Run it once plain and once with the library
preloaded; the runner prints the ratio.  Prints "seconds S", the median of
the E epochs' times.
"""
import argparse
import os
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trainers"))
from torch_dataset import RecordFile  # noqa: E402  (the path above first)


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    return parser.parse_args()


def run_epoch(arguments, model, optimizer, epoch):
    """One epoch; returns its wall seconds."""
    start = time.perf_counter()
    dataset = RecordFile(arguments.data)
    generator = torch.Generator()
    generator.manual_seed(epoch)
    loader = DataLoader(dataset, batch_size=arguments.batch, shuffle=True,
                        num_workers=arguments.workers, generator=generator)
    for _ids, x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        optimizer.step()
    dataset.close()
    return time.perf_counter() - start


def main():
    arguments = parse_arguments()
    if arguments.workers < 0 or arguments.epochs < 1 or arguments.batch < 1:
        sys.exit("bench_torch_epoch.py: --workers must be at least 0, --epochs and --batch "
                 "at least 1")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(RecordFile(arguments.data).dim, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    seconds = [run_epoch(arguments, model, optimizer, epoch) for epoch in range(arguments.epochs)]
    print(f"seconds {statistics.median(seconds):.4f}", flush=True)


if __name__ == "__main__":
    main()
