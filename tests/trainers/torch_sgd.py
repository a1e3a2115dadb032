#!/usr/bin/env python3
"""torch_sgd.py - the PyTorch sibling of sgd_mpi.c: an ordinary DDP script
(one process per replica, gloo) that fits a linear model to an ADSD dataset
until a validation loss, for the time-to-target benchmark.

    torch_sgd.py --data PATH --valid PATH --target LOSS --batch-size B --lr LR
                 --checkpoint PATH [--valid-every RECORDS=1024] [--epochs E=100000]
                 [--sleep-us US=0] [--cost-per-record-ns NS=0] [--checkpoint-every STEPS=10]

A plain user program: it knows nothing about any preloaded library.  With
WORLD_SIZE above 1 (set by its launcher with RANK, LOCAL_RANK, MASTER_ADDR
and MASTER_PORT) it joins a gloo process group and wraps the model in
DistributedDataParallel; it does not shard the data itself.

The model is y = w . x (torch.nn.Linear without bias, w = 0 at the start),
the loss the mean squared error of the batch, the optimizer plain SGD with
--lr; --batch-size is this process's batch.  Each epoch builds a map-style
Dataset over the file (its length from os.path.getsize, records read one
by one with seek and read) and a DataLoader that does not shuffle.

Simulated compute, as sgd_mpi's: --cost-per-record-ns NS sleeps NS
nanoseconds per local record before the backward pass, --sleep-us US after
every step.

Validation: every --valid-every train records (counted over all replicas,
kept in the checkpoint), every process computes the validation file's mean
squared error with numpy (the weights are the same on every replica, so is
the loss); rank 0 prints "valid records R loss L seconds T unix U", and once
L <= --target, "target reached records R loss L seconds T unix U"; then
every process ends with status 0.

Checkpoints (rank 0): torch.save of the model, the optimizer, the epoch, the
step and the records, to PATH.tmp, os.replace'd onto PATH every STEPS steps
and after every epoch.  A checkpoint at PATH is loaded at the start by every
process, and training continues with its epoch, at the command line's
learning rate (a restart for another batch size comes with its own rate;
the one saved with the optimizer belonged to the previous batch).
"""
import argparse
import os
import struct
import sys
import time

import numpy
import torch
from torch.utils.data import DataLoader, Dataset

HEADER = struct.Struct("<4sIQ")
PROCESS_START = time.monotonic()


class RecordFile(Dataset):
    """The (x, y) records of an ADSD file, read one by one on demand."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            magic, self.dim, _count = HEADER.unpack(f.read(HEADER.size))
        if magic != b"ADSD":
            raise ValueError(f"{path}: not an ADSD dataset")
        self.record = struct.Struct(f"<Q{self.dim}ff")
        self.length = (os.path.getsize(path) - HEADER.size) // self.record.size
        self.file = None

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.file is None:
            self.file = open(self.path, "rb")
        self.file.seek(HEADER.size + index * self.record.size)
        values = self.record.unpack(self.file.read(self.record.size))
        return torch.tensor(values[1:1 + self.dim]), torch.tensor(values[1 + self.dim])

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None


def validation_loss(path, weights):
    """The mean squared error of the weights over the whole file."""
    with open(path, "rb") as f:
        _magic, dim, _count = HEADER.unpack(f.read(HEADER.size))
        kind = numpy.dtype([("id", "<u8"), ("x", "<f4", (dim,)), ("y", "<f4")])
        records = numpy.frombuffer(f.read(), dtype=kind)
    errors = records["x"].astype(numpy.float64) @ weights.astype(numpy.float64) - records["y"]
    return float(numpy.mean(errors * errors))


def print_validation(rank, what, records, loss):
    if rank == 0:
        print(f"{what} records {records} loss {loss:.6g} seconds "
              f"{time.monotonic() - PROCESS_START:.3f} unix {time.time():.3f}", flush=True)


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--valid", required=True)
    parser.add_argument("--target", type=float, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--valid-every", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=100000)
    parser.add_argument("--sleep-us", type=int, default=0)
    parser.add_argument("--cost-per-record-ns", type=int, default=0)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    arguments = parser.parse_args()
    if arguments.batch_size < 1 or arguments.lr <= 0 or arguments.valid_every < 1:
        parser.error("--batch-size and --valid-every must be at least 1, --lr above 0")
    return arguments


def save_checkpoint(path, model, optimizer, state):
    temp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), **state}, temp)
    os.replace(temp, path)


def main():
    arguments = parse_arguments()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("gloo", world_size=world, rank=rank)
    dim = RecordFile(arguments.data).dim
    linear = torch.nn.Linear(dim, 1, bias=False)
    torch.nn.init.zeros_(linear.weight)
    model = torch.nn.parallel.DistributedDataParallel(linear) if world > 1 else linear
    optimizer = torch.optim.SGD(model.parameters(), lr=arguments.lr)
    state = {"epoch": 0, "step": 0, "records": 0}
    if os.path.exists(arguments.checkpoint):
        saved = torch.load(arguments.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        # the rate is the command line's (a restart for another batch size
        # comes with the rate for it), not the one saved with the optimizer
        for group in optimizer.param_groups:
            group["lr"] = arguments.lr
        state = {key: saved[key] for key in state}
        print(f"rank {rank} resumed at step {state['step']} epoch {state['epoch']}", flush=True)
    next_validation = (state["records"] // arguments.valid_every + 1) * arguments.valid_every
    while state["epoch"] < arguments.epochs:
        dataset = RecordFile(arguments.data)
        for x, y in DataLoader(dataset, batch_size=arguments.batch_size, shuffle=False):
            optimizer.zero_grad()
            loss = torch.mean((model(x).squeeze(1) - y) ** 2)
            if arguments.cost_per_record_ns:
                time.sleep(arguments.cost_per_record_ns * len(y) / 1e9)
            loss.backward()
            optimizer.step()
            if arguments.sleep_us:
                time.sleep(arguments.sleep_us / 1e6)
            state["step"] += 1
            state["records"] += len(y) * world
            if rank == 0 and state["step"] % arguments.checkpoint_every == 0:
                save_checkpoint(arguments.checkpoint, model, optimizer, state)
            if state["records"] >= next_validation:
                next_validation += arguments.valid_every
                weights = linear.weight.detach().numpy()[0]
                valid = validation_loss(arguments.valid, weights)
                print_validation(rank, "valid", state["records"], valid)
                if valid <= arguments.target:
                    print_validation(rank, "target reached", state["records"], valid)
                    if rank == 0:
                        save_checkpoint(arguments.checkpoint, model, optimizer, state)
                    dataset.close()
                    return 0
        dataset.close()
        state["epoch"] += 1
        if rank == 0:
            save_checkpoint(arguments.checkpoint, model, optimizer, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
