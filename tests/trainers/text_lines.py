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
import math

from trainer_common import argument_parser, record_step, save_json_checkpoint_if_due, \
    train_epochs_with_json_checkpoints


def parse_arguments():
    return argument_parser(__doc__.splitlines()[0]).parse_args()


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
    record_step(state, [record_id for record_id, _ in batch], "epoch_lines", arguments.sleep_us)
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
            save_json_checkpoint_if_due(arguments.checkpoint, state, arguments.checkpoint_every)
    if batch:
        loss += train_step(state, [text for _, text in batch])
        finish_step(state, batch, arguments)
    return loss / max(lines, 1)


def main():
    fresh_state = {"epoch": 0, "step": 0, "epoch_lines": 0,
                   "counts": [1] * 27}
    train_epochs_with_json_checkpoints(parse_arguments(), fresh_state, "epoch_lines", run_epoch)


if __name__ == "__main__":
    main()
