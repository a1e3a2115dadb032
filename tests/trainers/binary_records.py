#!/usr/bin/env python3
"""binary_records.py - linear-regression SGD over an ADSD dataset read with
Python's buffered binary files: f.read(RECORD) in a loop.

    binary_records.py --data PATH --epochs E --batch B --checkpoint PATH
                      [--checkpoint-every STEPS=4] [--lr LR=0.05] [--sleep-us US=0]

Every epoch opens the file with open(path, 'rb') (a BufferedReader, which
reads the file 4 KiB at a time and so holds records the loop has not asked
for yet), reads the 16-byte header ("ADSD", u32le dim, u64le count), checks
it against os.fstat's size, then reads one record (u64le id, float32 x[dim],
float32 y; 8 + 4*dim + 4 bytes, 80 for dim 17, 64 for dim 13) after another
until f.read returns b''.  Every B records make one SGD step, after which
"epoch E record ID" is printed for each of them; "epoch E loss L" ends an
epoch.  Checkpoint (JSON: epoch in progress, step, records done in the epoch,
weights) written to PATH.tmp and os.replace'd onto PATH every STEPS steps
and after each epoch, "checkpoint step S" printed just before the replace.
On start a checkpoint at PATH is loaded ("resumed at step S epoch E") and
training continues with its epoch; otherwise "starting fresh".
"""
import os
import struct
import sys
import time

from trainer_common import argument_parser, load_json_checkpoint, save_json_checkpoint

HEADER = struct.Struct("<4sIQ")


def parse_arguments():
    parser = argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args()


def load_checkpoint(path):
    return load_json_checkpoint(path, {"epoch": 0, "step": 0, "epoch_records": 0,
                                       "weights": None})


def train_step(weights, batch, lr):
    """One SGD step on the mean squared error; returns the summed loss."""
    gradient = [0.0] * len(weights)
    loss = 0.0
    for _, x, y in batch:
        error = sum(w * v for w, v in zip(weights, x)) - y
        loss += error * error
        for j, v in enumerate(x):
            gradient[j] += 2.0 * error * v / len(batch)
    for j, g in enumerate(gradient):
        weights[j] -= lr * g
    return loss


def finish_step(state, batch, arguments):
    if arguments.sleep_us:
        time.sleep(arguments.sleep_us / 1e6)
    for record_id, _, _ in batch:
        print(f"epoch {state['epoch']} record {record_id}")
    sys.stdout.flush()
    state["step"] += 1
    state["epoch_records"] += len(batch)
    batch.clear()


def run_epoch(state, arguments):
    with open(arguments.data, "rb") as f:
        magic, dim, count = HEADER.unpack(f.read(HEADER.size))
        if magic != b"ADSD":
            sys.exit(f"binary_records: {arguments.data}: not an ADSD dataset")
        record = struct.Struct(f"<Q{dim}ff")
        if os.fstat(f.fileno()).st_size != HEADER.size + count * record.size:
            sys.exit(f"binary_records: {arguments.data}: size does not match the header")
        if state["weights"] is None:
            state["weights"] = [0.0] * dim
        loss, seen, batch = 0.0, 0, []
        while True:
            data = f.read(record.size)
            if not data:
                break
            if len(data) != record.size:
                sys.exit(f"binary_records: {arguments.data}: a partial record at the end")
            fields = record.unpack(data)
            batch.append((fields[0], fields[1:-1], fields[-1]))
            seen += 1
            if len(batch) == arguments.batch:
                loss += train_step(state["weights"], batch, arguments.lr)
                finish_step(state, batch, arguments)
                if state["step"] % arguments.checkpoint_every == 0:
                    save_json_checkpoint(arguments.checkpoint, state)
        if batch:
            loss += train_step(state["weights"], batch, arguments.lr)
            finish_step(state, batch, arguments)
    return loss / max(seen, 1)


def main():
    arguments = parse_arguments()
    state = load_checkpoint(arguments.checkpoint)
    while state["epoch"] < arguments.epochs:
        loss = run_epoch(state, arguments)
        print(f"epoch {state['epoch']} loss {loss:.6f}", flush=True)
        state["epoch"] += 1
        state["epoch_records"] = 0
        save_json_checkpoint(arguments.checkpoint, state)
    print(f"done at step {state['step']}", flush=True)


if __name__ == "__main__":
    main()
