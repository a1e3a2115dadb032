#!/usr/bin/python3
"""memmap_reader.py - the data side of an unmodified numpy trainer that maps
its dataset instead of reading it (adaptshim(7) "Mappings").

    memmap_reader.py PATH DIM [EPOCHS=1]
    memmap_reader.py --npy PATH [EPOCHS=1]
    memmap_reader.py --windows PATH BATCHES

The first form maps an ADSD dataset written by tests/tools/gen_dataset.c (a
16-byte header, then records of u64 id, float32 x[DIM], float32 y) with
numpy.memmap(mode='r'), sizing it from os.path.getsize as a trainer would.
The second maps an .npy file of such records (a structured array with
fields id, x, y) with np.load(mmap_mode='r').  Each epoch makes a fresh
mapping, visits every record in order and prints "id I epoch E" for each,
then "epoch E records C digest D" (D: SHA-256 of the mapped records), and
drops the mapping before the next epoch.  The third samples random windows
the way nanoGPT's get_batch does: for every batch a fresh
numpy.memmap(PATH, dtype=uint16, mode='r') of the whole file, four random
start offsets (a generator seeded with 1337), windows of 65 tokens, and
"batch B starts S1 S2 S3 S4"."""
import hashlib
import os
import sys

import numpy as np

HEADER_SIZE = 16


def record_type(dim):
    return np.dtype([("id", "<u8"), ("x", "<f4", (dim,)), ("y", "<f4")])


def map_adsd(path, dim):
    dtype = record_type(dim)
    count = (os.path.getsize(path) - HEADER_SIZE) // dtype.itemsize
    return np.memmap(path, mode="r", dtype=dtype, offset=HEADER_SIZE, shape=(count,))


def map_npy(path):
    return np.load(path, mmap_mode="r")


def visit(records, epoch):
    for identifier in records["id"]:
        print(f"id {int(identifier)} epoch {epoch}")
    digest = hashlib.sha256(np.ascontiguousarray(records).tobytes()).hexdigest()
    print(f"epoch {epoch} records {len(records)} digest {digest}")


def sample_windows(path, batches):
    generator = np.random.default_rng(1337)
    for batch in range(batches):
        data = np.memmap(path, dtype=np.uint16, mode="r")
        starts = generator.integers(len(data) - 65, size=4)
        windows = np.stack([np.asarray(data[start:start + 65]) for start in starts])
        print(f"batch {batch} starts {' '.join(str(int(s)) for s in starts)} "
              f"sum {int(windows.sum())}")
        del data
    return 0


def main(arguments):
    if len(arguments) == 3 and arguments[0] == "--windows":
        return sample_windows(arguments[1], int(arguments[2]))
    if len(arguments) >= 2 and arguments[0] == "--npy":
        path, epochs = arguments[1], int(arguments[2]) if len(arguments) > 2 else 1
        open_records = lambda: map_npy(path)
    elif len(arguments) >= 2:
        path, dim = arguments[0], int(arguments[1])
        epochs = int(arguments[2]) if len(arguments) > 2 else 1
        open_records = lambda: map_adsd(path, dim)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for epoch in range(epochs):
        records = open_records()
        visit(records, epoch)
        del records  # the mapping goes with it: the next epoch maps again
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
