#!/usr/bin/env python3
"""torch_dataset.py - an ordinary PyTorch training script: a map-style
Dataset over an ADSD file, a DataLoader, a linear model trained with SGD,
torch.save checkpoints.

    torch_dataset.py --data PATH --epochs E --batch B --checkpoint PATH
                     [--workers W=0] [--shuffle 0|1=1] [--checkpoint-every STEPS=4]
                     [--lr LR=0.05] [--seed S=0] [--sleep-us US=0] [--replay]
                     [--leave-open] [--size-first] [--dataset-once] [--dataset-first]
                     [--length-from-header] [--shard-itself]

The Dataset reads the 16-byte header ("ADSD", u32le dim, u64le count) once,
takes its length from os.path.getsize, and opens the file lazily in
__getitem__, once per process (DataLoader workers are forked and each opens
its own), which seeks to header + i * record and reads one record.  It is
built anew every epoch, as the file's length is read anew; with
--dataset-once the Dataset and its DataLoader are built once, before the
first epoch, as many scripts do (the workers are still forked anew at every
epoch); with --dataset-first they are built once before the checkpoint is
loaded, as most scripts do.  The DataLoader has W workers (each keeps prefetch_factor = 2
batches in flight) and shuffles with a generator seeded from S and the
epoch.

Prints "epoch E record ID" for each record of a batch once its step is done,
"epoch E loss L" per epoch.  Checkpoint: torch.save of the model, the
optimizer, the epoch in progress, the step counter and the batches done in
the epoch to PATH.tmp, os.replace'd onto PATH every STEPS steps and after
each epoch; "checkpoint step S" printed just before the replace.  On start a
checkpoint at PATH is loaded ("resumed at step S epoch E") and training
continues with its epoch; otherwise "starting fresh".  --replay: the
checkpoint's model, optimizer and step are loaded, but every epoch runs
again from the first (what ADAPTDL_RESUME=replay expects).  --leave-open:
the Dataset is never closed, as most are: its file stays open until the
garbage collector releases it, after the next epoch's Dataset is built.
--size-first: the Dataset asks os.path.getsize before it reads the header.
--length-from-header: the Dataset's length is the header's record count
(the file's size is never asked), as a loader of a format with a count
field does.  --shard-itself: the DataLoader samples with PyTorch's
DistributedSampler over the launcher's WORLD_SIZE and RANK (the standard
DDP recipe), seeded from S and the epoch.
"""
import os
import struct
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from trainer_common import argument_parser, print_resumed, print_starting_fresh, \
    replace_checkpoint

HEADER = struct.Struct("<4sIQ")


class RecordFile(Dataset):
    """The records of an ADSD file, read one by one on demand."""

    def __init__(self, path, size_first=False, length_from_header=False):
        self.path = path
        size = os.path.getsize(path) if size_first else None
        with open(path, "rb") as f:
            magic, self.dim, count = HEADER.unpack(f.read(HEADER.size))
        if magic != b"ADSD":
            raise ValueError(f"{path}: not an ADSD dataset")
        self.record = struct.Struct(f"<Q{self.dim}ff")
        self.file = None
        self.owner = None
        if length_from_header:
            self.length = count
            return
        if size is None:
            size = os.path.getsize(path)
        if (size - HEADER.size) % self.record.size:
            raise ValueError(f"{path}: not a whole number of records")
        self.length = (size - HEADER.size) // self.record.size

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.file is None or self.owner != os.getpid():
            self.file = open(self.path, "rb")
            self.owner = os.getpid()
        self.file.seek(HEADER.size + index * self.record.size)
        fields = self.record.unpack(self.file.read(self.record.size))
        return (torch.tensor(fields[0], dtype=torch.int64),
                torch.tensor(fields[1:-1], dtype=torch.float32),
                torch.tensor(fields[-1], dtype=torch.float32))

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None


def parse_arguments():
    parser = argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--shuffle", type=int, choices=(0, 1), default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replay", action="store_true")
    parser.add_argument("--leave-open", action="store_true")
    parser.add_argument("--size-first", action="store_true")
    parser.add_argument("--dataset-once", action="store_true")
    parser.add_argument("--dataset-first", action="store_true")
    parser.add_argument("--length-from-header", action="store_true")
    parser.add_argument("--shard-itself", action="store_true")
    return parser.parse_args()


def build_loader(arguments, generator, epoch):
    dataset = RecordFile(arguments.data, arguments.size_first, arguments.length_from_header)
    if arguments.shard_itself:
        sampler = DistributedSampler(dataset, num_replicas=int(os.environ["WORLD_SIZE"]),
                                     rank=int(os.environ["RANK"]),
                                     shuffle=bool(arguments.shuffle), seed=arguments.seed)
        sampler.set_epoch(epoch)
        loader = DataLoader(dataset, batch_size=arguments.batch, sampler=sampler,
                            num_workers=arguments.workers)
        return dataset, loader
    loader = DataLoader(dataset, batch_size=arguments.batch, shuffle=bool(arguments.shuffle),
                        num_workers=arguments.workers, generator=generator)
    return dataset, loader


def save_checkpoint(path, model, optimizer, epoch, step, batches_done):
    temp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": epoch, "step": step, "batches_done": batches_done}, temp)
    replace_checkpoint(temp, path, step)


def main():
    arguments = parse_arguments()
    torch.manual_seed(arguments.seed)
    torch.set_num_threads(1)
    dim = RecordFile(arguments.data).dim
    model = torch.nn.Linear(dim, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=arguments.lr)
    epoch, step = 0, 0
    dataset, loader, generator = None, None, torch.Generator()
    if arguments.dataset_first:
        dataset, loader = build_loader(arguments, generator, 0)
    if os.path.exists(arguments.checkpoint):
        checkpoint = torch.load(arguments.checkpoint)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        epoch, step = checkpoint["epoch"], checkpoint["step"]
        print_resumed(step, epoch)
        if arguments.replay:
            epoch = 0
    else:
        print_starting_fresh()

    while epoch < arguments.epochs:
        if loader is None or not (arguments.dataset_once or arguments.dataset_first):
            dataset, loader = build_loader(arguments, generator, epoch)
        generator.manual_seed(arguments.seed * 1000 + epoch)
        total_loss, batches_done = 0.0, 0
        for ids, x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
            loss.backward()
            optimizer.step()
            if arguments.sleep_us:
                time.sleep(arguments.sleep_us / 1e6)
            total_loss += loss.item()
            for record_id in ids.tolist():
                print(f"epoch {epoch} record {record_id}")
            sys.stdout.flush()
            step += 1
            batches_done += 1
            if step % arguments.checkpoint_every == 0:
                save_checkpoint(arguments.checkpoint, model, optimizer, epoch, step,
                                batches_done)
        if not arguments.leave_open:
            dataset.close()
        print(f"epoch {epoch} loss {total_loss / max(batches_done, 1):.6f}", flush=True)
        epoch += 1
        save_checkpoint(arguments.checkpoint, model, optimizer, epoch, step, 0)
    print(f"done at step {step}", flush=True)


if __name__ == "__main__":
    main()
