"""trainer_common.py - what the Python example trainers share: the options
every one of them takes, and checkpoints committed as a real trainer commits
them (written to PATH.tmp, then os.replace'd onto PATH) with the lines the
tests read ("starting fresh", "resumed at step S epoch E", "checkpoint step
S").  Nothing here reads a data file: each trainer keeps its own way of
reading.
"""
import argparse
import json
import os
import sys
import time


def argument_parser(description):
    """A parser with the options of every trainer; a trainer adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--checkpoint-every", type=int, default=4)
    parser.add_argument("--sleep-us", type=int, default=0)
    return parser


def print_resumed(step, epoch):
    print(f"resumed at step {step} epoch {epoch}", flush=True)


def print_starting_fresh():
    print("starting fresh", flush=True)


def replace_checkpoint(temp, path, step):
    """Commits the checkpoint written to temp: the line first, so that a
    test that kills the trainer on it finds the previous checkpoint."""
    print(f"checkpoint step {step}", flush=True)
    os.replace(temp, path)


def load_json_checkpoint(path, fresh_state):
    """The JSON checkpoint at path, or fresh_state when there is none."""
    try:
        with open(path) as f:
            state = json.load(f)
    except FileNotFoundError:
        print_starting_fresh()
        return fresh_state
    print_resumed(state["step"], state["epoch"])
    return state


def save_json_checkpoint(path, state):
    temp = path + ".tmp"
    with open(temp, "w") as f:
        json.dump(state, f)
    replace_checkpoint(temp, path, state["step"])


def record_step(state, record_ids, epoch_progress_key, sleep_us):
    """After a step's update: the --sleep-us pause (the compute time of a
    real model's step), "epoch E record ID" for each record of the step, and
    the step and epoch-progress counters."""
    if sleep_us:
        time.sleep(sleep_us / 1e6)
    for record_id in record_ids:
        print(f"epoch {state['epoch']} record {record_id}")
    sys.stdout.flush()
    state["step"] += 1
    state[epoch_progress_key] += len(record_ids)


def save_json_checkpoint_if_due(path, state, every):
    """After a step: a checkpoint every `every` steps."""
    if state["step"] % every == 0:
        save_json_checkpoint(path, state)


def train_epochs_with_json_checkpoints(arguments, fresh_state, epoch_progress_key, run_epoch):
    """The epoch loop of a trainer whose state is JSON: resumes from the
    checkpoint, runs run_epoch(state, arguments) (its mean loss) until
    --epochs, and checkpoints after each epoch with the epoch's progress
    counter (epoch_progress_key) back at 0."""
    state = load_json_checkpoint(arguments.checkpoint, fresh_state)
    while state["epoch"] < arguments.epochs:
        loss = run_epoch(state, arguments)
        print(f"epoch {state['epoch']} loss {loss:.6f}", flush=True)
        state["epoch"] += 1
        state[epoch_progress_key] = 0
        save_json_checkpoint(arguments.checkpoint, state)
    print(f"done at step {state['step']}", flush=True)
