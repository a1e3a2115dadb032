#!/usr/bin/env python3
"""text_lines.py - a character-frequency "language model" over a text file
of one example per line, read with Python's ordinary `for line in open(path)`.

    text_lines.py --data PATH --epochs E --batch B --checkpoint PATH
                  [--checkpoint-every STEPS=4] [--sleep-us US=0]

Lines are "<id>\t<text>" (gen_dataset --text).  Every epoch opens the file
in text mode and iterates over it; Python's text layer reads the file in
chunks of several KiB, so it holds lines the loop has not reached yet.
Every B lines make one step, after which "epoch E record ID" is printed for
each of them; "epoch E loss L" ends an epoch.  Checkpoint (JSON: epoch in
progress, step, lines done in the epoch, the letter counts) written to
PATH.tmp and os.replace'd onto PATH every STEPS steps and after each epoch,
"checkpoint step S" printed just before the replace.  On start a checkpoint
at PATH is loaded ("resumed at step S epoch E") and training continues with
its epoch, read from the file as any epoch is; otherwise "starting fresh".
"""
import argparse
import json
import math
import os
import sys
import time


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--checkpoint-every", type=int, default=4)
    parser.add_argument("--sleep-us", type=int, default=0)
    return parser.parse_args()


def load_checkpoint(path):
    try:
        with open(path) as f:
            state = json.load(f)
    except FileNotFoundError:
        print("starting fresh", flush=True)
        return {"epoch": 0, "step": 0, "epoch_lines": 0, "counts": [1] * 27}
    print(f"resumed at step {state['step']} epoch {state['epoch']}", flush=True)
    return state


def save_checkpoint(path, state):
    temp = path + ".tmp"
    with open(temp, "w") as f:
        json.dump(state, f)
    print(f"checkpoint step {state['step']}", flush=True)
    os.replace(temp, path)


def letter_class(character):
    return 26 if character == " " else ord(character) - ord("a")


def train_step(state, texts):
    """Scores the batch under the current counts, then adds it to them."""
    counts = state["counts"]
    total = sum(counts)
    loss = 0.0
    for text in texts:
        for character in text:
            loss -= math.log(counts[letter_class(character)] / total)
        for character in text:
            counts[letter_class(character)] += 1
    return loss


def finish_step(state, batch, arguments):
    if arguments.sleep_us:
        time.sleep(arguments.sleep_us / 1e6)
    for record_id, _ in batch:
        print(f"epoch {state['epoch']} record {record_id}")
    sys.stdout.flush()
    state["step"] += 1
    state["epoch_lines"] += len(batch)
    batch.clear()


def run_epoch(state, arguments):
    loss, lines = 0.0, 0
    batch = []
    for line in open(arguments.data):
        record_id, text = line.rstrip("\n").split("\t", 1)
        batch.append((int(record_id), text))
        lines += 1
        if len(batch) == arguments.batch:
            loss += train_step(state, [text for _, text in batch])
            finish_step(state, batch, arguments)
            if state["step"] % arguments.checkpoint_every == 0:
                save_checkpoint(arguments.checkpoint, state)
    if batch:
        loss += train_step(state, [text for _, text in batch])
        finish_step(state, batch, arguments)
    return loss / max(lines, 1)


def main():
    arguments = parse_arguments()
    state = load_checkpoint(arguments.checkpoint)
    while state["epoch"] < arguments.epochs:
        loss = run_epoch(state, arguments)
        print(f"epoch {state['epoch']} loss {loss:.6f}", flush=True)
        state["epoch"] += 1
        state["epoch_lines"] = 0
        save_checkpoint(arguments.checkpoint, state)
    print(f"done at step {state['step']}", flush=True)


if __name__ == "__main__":
    main()
