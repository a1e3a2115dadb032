#!/usr/bin/env python3
"""torch_ddp.py - an ordinary data-parallel PyTorch training script, as a
torchrun job runs it: one process per replica, DistributedDataParallel over
gloo, a map-style Dataset of an ADSD file, a DataLoader, SGD, torch.save
checkpoints written by rank 0.

    torch_ddp.py --data PATH --epochs E --batch-size B --lr LR --checkpoint PATH
                 [--log PATTERN] [--checkpoint-every STEPS=4] [--shuffle 0|1=1]
                 [--seed S=0] [--sleep-us US=0]
                 [--crash-rank R --crash-step S --crash-marker PATH]

The process group comes from the launcher's variables (MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK); without WORLD_SIZE the script runs alone,
without DDP.  The Dataset is torch_dataset.py's RecordFile (length from the
file's size, built anew every epoch, the file opened lazily, one seek and
read per record).

Prints on stdout, first, "rank R of W local L of LW batch size B lr LR pid
P parent PP host H gloo interface I" (what the launcher and the shim gave
it; H: the host name, I: GLOO_SOCKET_IFNAME or "-").  --log PATTERN ("%r":
the rank, "%n": ADAPTDL_NUM_RESTARTS, the run) is the rank's record stream,
appended to: "starting fresh" or "resumed at
step S epoch E", "epoch E record ID" for each record of a step once the
step is done, "checkpoint step S" at every checkpoint step (on every rank:
the records before it are what that checkpoint covers).  Rank 0 saves the
model, the optimizer, the epoch in progress and the step to PATH.tmp and
os.replace's it onto PATH every STEPS steps and after each epoch; every rank
loads PATH at start when it exists and continues with its epoch.
--crash-rank R --crash-step S: rank R exits with status 3 once it finished
step S, unless PATH of --crash-marker exists (it is created first), so that
the crash happens once.
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from torch_dataset import RecordFile


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--log")
    parser.add_argument("--checkpoint-every", type=int, default=4)
    parser.add_argument("--shuffle", type=int, choices=(0, 1), default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sleep-us", type=int, default=0)
    parser.add_argument("--crash-rank", type=int, default=-1)
    parser.add_argument("--crash-step", type=int, default=-1)
    parser.add_argument("--crash-marker")
    return parser.parse_args()


class RecordStream:
    """The rank's record stream (--log), or nothing."""

    def __init__(self, pattern, rank):
        self.file = None
        if pattern:
            run = os.environ.get("ADAPTDL_NUM_RESTARTS", "0")
            self.file = open(pattern.replace("%r", str(rank)).replace("%n", run), "a")

    def line(self, text):
        if self.file:
            self.file.write(text + "\n")
            self.file.flush()


def save_checkpoint(path, model, optimizer, epoch, step):
    temp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": epoch, "step": step}, temp)
    os.replace(temp, path)


def crash_if_asked(arguments, rank, step):
    if rank != arguments.crash_rank or step != arguments.crash_step:
        return
    if arguments.crash_marker is None or os.path.exists(arguments.crash_marker):
        return
    open(arguments.crash_marker, "w").close()
    print(f"rank {rank} crashing at step {step}", flush=True)
    os._exit(3)


def main():
    arguments = parse_arguments()
    torch.manual_seed(arguments.seed)
    torch.set_num_threads(1)
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    print(f"rank {rank} of {world} local {os.environ.get('LOCAL_RANK', '0')} of "
          f"{os.environ.get('LOCAL_WORLD_SIZE', '1')} batch size {arguments.batch_size} "
          f"lr {arguments.lr:g} pid {os.getpid()} parent {os.getppid()} "
          f"host {socket.gethostname()} gloo interface "
          f"{os.environ.get('GLOO_SOCKET_IFNAME', '-')}", flush=True)
    stream = RecordStream(arguments.log, rank)

    dim = RecordFile(arguments.data).dim
    model = torch.nn.Linear(dim, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=arguments.lr)
    epoch, step = 0, 0
    # every rank loads before DDP is built: rank 0 cannot save a newer
    # checkpoint before the others have loaded this one
    if os.path.exists(arguments.checkpoint):
        checkpoint = torch.load(arguments.checkpoint)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        epoch, step = checkpoint["epoch"], checkpoint["step"]
        stream.line(f"resumed at step {step} epoch {epoch}")
    else:
        stream.line("starting fresh")
    trained = torch.nn.parallel.DistributedDataParallel(model) if distributed else model

    generator = torch.Generator()
    while epoch < arguments.epochs:
        dataset = RecordFile(arguments.data)
        generator.manual_seed(arguments.seed * 1000 + epoch)
        loader = DataLoader(dataset, batch_size=arguments.batch_size,
                            shuffle=bool(arguments.shuffle), generator=generator)
        for ids, x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(trained(x).squeeze(1), y)
            loss.backward()
            optimizer.step()
            if arguments.sleep_us:
                time.sleep(arguments.sleep_us / 1e6)
            for record_id in ids.tolist():
                stream.line(f"epoch {epoch} record {record_id}")
            step += 1
            crash_if_asked(arguments, rank, step)
            if step % arguments.checkpoint_every == 0:
                stream.line(f"checkpoint step {step}")
                if rank == 0:
                    save_checkpoint(arguments.checkpoint, model, optimizer, epoch, step)
        dataset.close()
        epoch += 1
        stream.line(f"checkpoint step {step}")
        if rank == 0:
            save_checkpoint(arguments.checkpoint, model, optimizer, epoch, step)
    print(f"rank {rank} done at step {step}", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
