#!/usr/bin/python3
"""coop_scenario.py - AdaptDL's restart scenarios through the Python
cooperative API (`import adaptshim`), with AdaptDL's exact values: the
Python twin of tests/tools/coop_scenario.c, run by
tests/integration/test_cooperative_python.c under mpirun and as
torch.distributed processes over gloo (MASTER_ADDR, MASTER_PORT,
WORLD_SIZE, RANK set: the script initializes the process group itself,
as a trainer does).

  coop_scenario.py accumulator_and_loop CHECKPOINT
      accumulator_test and test_dataloader_restarts of AdaptDL, run with 1,
      then 4, then 2 replicas (ADAPTDL_NUM_RESTARTS 0, 1, 2): updates summed
      over the replicas, earlier results replayed without communicating; a
      loop over 100 records in global batches of 10 takes 2 batches with 1
      replica (local 10), 5 with 4 (local 3) and 2 with 2 (local 5).
  coop_scenario.py epochs CHECKPOINT
      epoch_test: 10 epochs, a restart in epoch 5 continues at epoch 5.
  coop_scenario.py state CHECKPOINT
      register_state of a torch model and its SGD optimizer (with
      momentum): the first run trains, checkpoints and records what it
      saved in the checkpoint; the second builds them afresh from another
      seed, loads the checkpoint and must hold the very tensors saved.  The
      first also reads a TensorDataset through AdaptiveDataLoader.
  coop_scenario.py world CHECKPOINT
      the replicas a launcher started, without any ADAPTDL_* variable (and
      without the preload: the stand-in): accumulators sum over all of
      them, a loop hands each its share of the records.
  coop_scenario.py alone CHECKPOINT
      one replica with nothing to restore (the stand-in library): the API
      works as one replica, bad use raises one-line errors, importing
      adaptshim imported no torch, AdaptiveDataLoader batches a sequence
      through its collate_fn.

A "restart" is synchronize_states on every replica, rank 0 writing
CHECKPOINT.tmp and renaming it onto CHECKPOINT, and exit 0; the next run
reads CHECKPOINT first.  A failed expectation prints "FAIL rank R: ..." and
the exit status is 1; the end prints "rank R ok".
"""
import json
import os
import sys

import adaptshim

TORCH_IMPORTED_BY_ADAPTSHIM = "torch" in sys.modules

failures = 0
rank = 0


def expect(condition, message):
    global failures
    if not condition:
        print("FAIL rank %d: %s" % (rank, message), flush=True)
        failures += 1


def launched_replicas():
    """The replica count the launcher gave (mpirun's or torch's), or 1."""
    for name in ("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"):
        if name in os.environ:
            return int(os.environ[name])
    return 1


def initialize_torch_distributed():
    """A torch.distributed job's own set-up, as a trainer does it."""
    if "MASTER_ADDR" not in os.environ or "OMPI_COMM_WORLD_SIZE" in os.environ:
        return
    import datetime
    import torch.distributed
    # a replica that died must not leave the others waiting for long
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=90))


def load(checkpoint):
    """Reads the checkpoint (which restores the bound state); its text."""
    try:
        with open(checkpoint, "rb") as file:
            text = file.read()
    except FileNotFoundError:
        return None
    expect(len(text) > 0, "checkpoint %s is empty" % checkpoint)
    return text


def commit(checkpoint, text):
    """Rank 0 writes the checkpoint the snapshot is bound to."""
    adaptshim.synchronize_states()
    if rank == 0:
        with open(checkpoint + ".tmp", "wb") as file:
            file.write(text)
        os.rename(checkpoint + ".tmp", checkpoint)


def restart(checkpoint, next_replicas, text=None):
    """Checkpoints and leaves: the harness starts the next run."""
    commit(checkpoint, text or b"restart %d for %d replicas\n" % (
        adaptshim.num_restarts(), next_replicas))
    print("rank %d restart with %d replicas" % (rank, next_replicas), flush=True)
    adaptshim.finalize()
    os._exit(1 if failures else 0)   # no unwinding: the loops stay as checkpointed


def accumulator_and_loop(checkpoint):
    size = adaptshim.num_replicas()
    restarts = adaptshim.num_restarts()
    accum = adaptshim.Accumulator()
    loop = adaptshim.DataLoop(100, batch_size=10, shuffle=True)

    # accumulator_test
    if restarts == 0:
        accum["a"] += 15
    expect(len(accum) == 0, "accumulation mode reads as empty")
    with accum.synchronized():
        expect(accum["a"] == 15, "a == 15 (restart %d), not %r" % (restarts, accum.get("a")))
    if restarts == 0:
        accum["a"] -= 5
    if restarts >= 1:
        if restarts == 1:
            accum.update({"a": rank, "b": rank})
        expect(len(accum) == 0, "accumulation mode reads as empty")
        with accum.synchronized():
            expect(len(accum) == 2, "two keys, not %d" % len(accum))
            expect(accum["a"] == 16, "a == 16 (restart %d), not %r" % (restarts, accum.get("a")))
            expect(accum["b"] == 6, "b == 6 (restart %d), not %r" % (restarts, accum.get("b")))
    if restarts == 2:
        accum -= {"b": 5}
        accum.subtract(c=5)
        with accum.synchronized():
            expect(dict(accum) == {"a": 16, "b": -4, "c": -10}, "results %r" % dict(accum))
            accum["c"] = 7
            expect(accum["c"] == 7, "set c = 7")
            del accum["c"]
            expect(len(accum) == 2 and "c" not in accum, "remove c")
            try:
                del accum["c"]
                expect(False, "removing an absent key raises KeyError")
            except KeyError:
                pass
            accum.clear()
        with accum.synchronized():
            expect(len(accum) == 0, "cleared")
        try:
            accum["a"] = 1
            expect(False, "no assignment in accumulation mode")
        except TypeError:
            pass

    # test_dataloader_restarts
    expected_local = (10 + size - 1) // size
    index = -1
    batches = iter(loop)
    for batch in batches:
        index += 1
        if index == 0:
            try:
                iter(loop).__next__()
                expect(False, "a second iteration is refused")
            except adaptshim.AdaptshimError as error:
                expect("overlapping" in str(error), "overlapping iteration: %s" % error)
            try:
                adaptshim.Accumulator()
                expect(False, "no accumulator inside an iteration")
            except adaptshim.AdaptshimError as error:
                expect("may not be created" in str(error), "message: %s" % error)
        if restarts == 0 and index == 2:
            restart(checkpoint, 4)
        if restarts == 1 and index == 5:
            restart(checkpoint, 2)
        expect(len(batch) == expected_local,
               "batch %d: %d records, expected %d" % (index, len(batch), expected_local))
        expect(all(0 <= i < 100 for i in batch), "indices %r" % batch)
        expect(loop.current_local_bsz == expected_local, "local batch size")
        expect(loop.current_batch_size == expected_local * size, "global batch size")
    expect(index == 1, "the last run takes 2 batches, index == %d" % index)
    expect(loop.current_index is None, "no current index outside the iteration")


def epochs(checkpoint):
    restarts = adaptshim.num_restarts()
    expect(adaptshim.current_epoch() is None, "no epoch before the loop")
    first = 0 if restarts == 0 else 5
    expect(adaptshim.finished_epochs() == first,
           "finished %d, expected %d" % (adaptshim.finished_epochs(), first))
    expected = first
    for epoch in adaptshim.remaining_epochs_until(10):
        expect(epoch == expected, "epoch %d, expected %d" % (epoch, expected))
        expect(adaptshim.current_epoch() == epoch, "current epoch")
        expect(adaptshim.finished_epochs() == epoch, "finished == current")
        try:
            next(iter(adaptshim.remaining_epochs_until(10)))
            expect(False, "overlapping epoch loops are refused")
        except adaptshim.AdaptshimError as error:
            expect("overlapping" in str(error), "message: %s" % error)
        if restarts == 0 and epoch == 5:
            restart(checkpoint, launched_replicas())
        expected += 1
    expect(expected == 10, "ran up to epoch %d" % (expected - 1))
    expect(adaptshim.current_epoch() is None, "no epoch after the loop")


def model_and_optimizer(seed):
    import torch
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, optimizer


def flat_state(model, optimizer):
    """Every parameter and momentum buffer as a list of floats."""
    values = [v for p in model.parameters() for v in p.detach().flatten().tolist()]
    for state in optimizer.state_dict()["state"].values():
        values += state["momentum_buffer"].flatten().tolist()
    return values


def state(checkpoint):
    import torch
    restarts = adaptshim.num_restarts()
    model, optimizer = model_and_optimizer(seed=1 + restarts)
    adaptshim.register_state("model-and-optimizer", model, optimizer)
    text = load(checkpoint)
    if restarts == 0:
        expect(text is None, "no checkpoint before the first run")
        dataset = torch.utils.data.TensorDataset(torch.arange(10.0), torch.arange(10) * 2)
        seen = []
        for features, labels in adaptshim.AdaptiveDataLoader(dataset, batch_size=4):
            expect(torch.equal(labels, features.long() * 2), "collated pairs")
            seen += features.long().tolist()
        expect(seen == list(range(10)), "the dataset's items once, in order: %r" % seen)
        for step in range(3):
            optimizer.zero_grad()
            inputs = torch.arange(8.0 * (step + 1), 8.0 * (step + 2)).reshape(2, 4) / 10
            model(inputs).pow(2).sum().backward()
            optimizer.step()
        saved = flat_state(model, optimizer)
        restart(checkpoint, 1, json.dumps(saved).encode())
    expect(text is not None, "the checkpoint is there")
    saved = json.loads(text)
    restored = flat_state(model, optimizer)
    expect(restored == saved, "the model and optimizer come back as saved: %d values, %d "
           "differ" % (len(saved), sum(a != b for a, b in zip(saved, restored))))
    expect(len(restored) == 2 * (4 * 3 + 3 + 3 * 1 + 1), "parameters and momentum: %d values"
           % len(restored))


def world(checkpoint):
    """The replicas the launcher started, joined without any ADAPTDL_*
    variable: sums over every replica, each takes its share of a loop."""
    size = adaptshim.num_replicas()
    sums = adaptshim.Accumulator()
    loop = adaptshim.DataLoop(100, batch_size=10, shuffle=True)
    records = [i for batch in loop for i in batch]
    share = (100 + size - 1) // size
    expect(len(records) == share, "this replica got %d records, its share is %d"
           % (len(records), share))
    sums["ranks"] += rank + 1
    sums["records"] += len(records)
    with sums.synchronized():
        expect(sums["ranks"] == size * (size + 1) // 2, "ranks summed to %r" % sums["ranks"])
        expect(sums["records"] == share * size, "records summed to %r" % sums["records"])
    print("rank %d of %d summed" % (rank, size), flush=True)


def expect_error(kind, needle, call):
    """call() raises `kind` with `needle` in a one-line message."""
    try:
        call()
    except kind as error:
        text = str(error)
        expect(needle in text and "\n" not in text, "%s: %r" % (kind.__name__, text))
        return
    expect(False, "%s was not raised (%s)" % (kind.__name__, needle))


def alone(checkpoint):
    expect(not TORCH_IMPORTED_BY_ADAPTSHIM, "importing adaptshim imported torch")
    expect(adaptshim.num_replicas() == 1 and adaptshim.replica_rank() == 0, "one replica")
    accum = adaptshim.Accumulator({"best": 10})
    accum["count"] += 2
    accum.update(count=1)
    with accum.synchronized():
        expect(dict(accum) == {"best": 10, "count": 3}, "results %r" % dict(accum))
        expect_error(KeyError, 'no key "missing"', lambda: accum.update(missing=1))
        expect(accum.get("missing", -3) == -3, "get of a missing key is the default")
        with accum.synchronized():   # nested: the same results
            expect(accum["count"] == 3, "nested synchronized")
    expect(accum.get("count") is None and len(accum) == 0, "reads as empty outside")
    loop = adaptshim.DataLoop(100, batch_size=10)
    records = []
    for epoch in adaptshim.remaining_epochs_until(2):
        for batch in loop:
            records += batch
    expect(sorted(records) == sorted(list(range(100)) * 2),
           "two epochs of the 100 records, each once per epoch")
    letters = adaptshim.AdaptiveDataLoader("abcdefg", batch_size=3, collate_fn="".join)
    expect(list(letters) == ["abc", "def", "g"], "a sequence's batches through collate_fn")
    for batch in loop:   # broken off: the iteration is left
        break
    expect(loop.current_index is None, "no iteration after a break")

    # misuse: one line each, the library's own reason
    iteration = iter(loop)
    next(iteration)
    expect_error(adaptshim.AdaptshimError, "may not be created", adaptshim.Accumulator)
    expect_error(adaptshim.AdaptshimError, "overlapping", lambda: next(iter(loop)))
    iteration.close()
    expect_error(TypeError, "must be a str", lambda: accum.update({3: 1}))
    expect_error(TypeError, "takes updates only", lambda: accum.__setitem__("x", 1))
    expect_error(ValueError, "records must be an int", lambda: adaptshim.DataLoop(0, 1))
    expect_error(ValueError, "number of epochs", lambda: next(adaptshim.remaining_epochs_until(-1)))
    expect_error(adaptshim.AdaptshimError, "local batch bounds",
                 lambda: adaptshim.DataLoop(10, 4).autoscale_batch_size(8, (5, 8)))
    expect_error(TypeError, "state_dict", lambda: adaptshim.register_state("plain", object()))

    class Counter(adaptshim.State):
        def save(self, fileobj):
            fileobj.write(b"1")

        def load(self, fileobj):
            pass

    Counter("counter")
    expect_error(adaptshim.AdaptshimError, "registered already", lambda: Counter("counter"))
    adaptshim.synchronize_states()


def main():
    global rank
    if len(sys.argv) != 3:
        print("usage: coop_scenario.py accumulator_and_loop|epochs|state|world|alone "
              "CHECKPOINT",
              file=sys.stderr)
        return 2
    scenario, checkpoint = sys.argv[1], sys.argv[2]
    initialize_torch_distributed()
    rank = adaptshim.replica_rank()
    expect(adaptshim.num_replicas() == launched_replicas(),
           "the API says %d replicas, the launcher %d" % (adaptshim.num_replicas(),
                                                          launched_replicas()))
    if scenario not in ("state", "alone"):
        load(checkpoint)
    if scenario == "accumulator_and_loop":
        accumulator_and_loop(checkpoint)
    elif scenario == "epochs":
        epochs(checkpoint)
    elif scenario == "state":
        state(checkpoint)
    elif scenario == "world":
        world(checkpoint)
    elif scenario == "alone":
        alone(checkpoint)
    else:
        expect(False, "unknown scenario %s" % scenario)
    print("rank %d %s" % (rank, "failed" if failures else "ok"), flush=True)
    # a process group left to the interpreter's exit can abort the process
    # in gloo's threads ("terminate called without an active exception")
    if "torch" in sys.modules and sys.modules["torch"].distributed.is_initialized():
        sys.modules["torch"].distributed.barrier()
        sys.modules["torch"].distributed.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
