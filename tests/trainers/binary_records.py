#!/usr/bin/env python3
"""binary_records.py - linear-regression SGD over an ADSD dataset read with
Python's buffered binary files: f.read(RECORD) in a loop.

    binary_records.py --data PATH --epochs E --batch B --checkpoint PATH
                      [--checkpoint-every STEPS=4] [--lr LR=0.05] [--sleep-us US=0]
                      [--keep-open]

Every epoch opens the file with open(path, 'rb') (a BufferedReader, which
reads the file 4 KiB at a time and so holds records the loop has not asked
for yet), reads the 16-byte header ("ADSD", u32le dim, u64le count), checks
it against os.fstat's size, then reads one record (u64le id, float32 x[dim],
float32 y; 8 + 4*dim + 4 bytes, 80 for dim 17, 64 for dim 13) after another
until f.read returns b''.  With --keep-open the file is opened once, with
os.open, before the checkpoint is loaded, and every epoch asks os.fstat
first, then reads the header and record 0 .. count-1 with os.pread at their
offsets: a loader that never rewinds nor reopens, whose size question is
what ends an epoch (a pread of the header never does: adaptshim(7) "Passes").  Every B records make one SGD step, after which
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
    parser.add_argument("--keep-open", action="store_true")
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


def records_read_to_the_end(f, size, path):
    """f.read(size) until it returns b''."""
    while True:
        data = f.read(size)
        if not data:
            return
        if len(data) != size:
            sys.exit(f"binary_records: {path}: a partial record at the end")
        yield data


def records_read_at_their_offsets(fd, size, count, path):
    """os.pread of records 0 .. count-1."""
    for index in range(count):
        data = os.pread(fd, size, HEADER.size + index * size)
        if len(data) != size:
            sys.exit(f"binary_records: {path}: record {index} is cut short")
        yield data


def train_on_file(state, arguments, fd, read_header, read_records):
    """The epoch over one file: the header checked against os.fstat, then
    SGD over the records read_records(record_size, count) yields."""
    size = os.fstat(fd).st_size
    magic, dim, count = HEADER.unpack(read_header(HEADER.size))
    if magic != b"ADSD":
        sys.exit(f"binary_records: {arguments.data}: not an ADSD dataset")
    record = struct.Struct(f"<Q{dim}ff")
    if size != HEADER.size + count * record.size:
        sys.exit(f"binary_records: {arguments.data}: size does not match the header")
    if state["weights"] is None:
        state["weights"] = [0.0] * dim
    loss, seen, batch = 0.0, 0, []
    for data in read_records(record.size, count):
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


def run_epoch_opening_the_file(state, arguments):
    with open(arguments.data, "rb") as f:
        return train_on_file(state, arguments, f.fileno(), f.read,
                             lambda size, count: records_read_to_the_end(f, size,
                                                                         arguments.data))


def run_epoch_on_descriptor(state, arguments, fd):
    return train_on_file(state, arguments, fd, lambda size: os.pread(fd, size, 0),
                         lambda size, count: records_read_at_their_offsets(
                             fd, size, count, arguments.data))


def main():
    fresh_state = {"epoch": 0, "step": 0, "epoch_records": 0,
                   "weights": None}
    arguments = parse_arguments()
    if not arguments.keep_open:
        train_epochs_with_json_checkpoints(arguments, fresh_state, "epoch_records",
                                           run_epoch_opening_the_file)
        return
    fd = os.open(arguments.data, os.O_RDONLY)
    train_epochs_with_json_checkpoints(
        arguments, fresh_state, "epoch_records",
        lambda state, arguments: run_epoch_on_descriptor(state, arguments, fd))
    os.close(fd)


if __name__ == "__main__":
    main()
