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

from trainer_common import argument_parser, record_step, save_json_checkpoint_if_due, \
    train_epochs_with_json_checkpoints

HEADER = struct.Struct("<4sIQ")


def parse_arguments():
    parser = argument_parser(__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args()


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
    record_step(state, [record_id for record_id, _, _ in batch], "epoch_records",
                arguments.sleep_us)
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
                save_json_checkpoint_if_due(arguments.checkpoint, state,
                                            arguments.checkpoint_every)
        if batch:
            loss += train_step(state["weights"], batch, arguments.lr)
            finish_step(state, batch, arguments)
    return loss / max(seen, 1)


def main():
    fresh_state = {"epoch": 0, "step": 0, "epoch_records": 0,
                   "weights": None}
    train_epochs_with_json_checkpoints(parse_arguments(), fresh_state, "epoch_records", run_epoch)


if __name__ == "__main__":
    main()
