#!/usr/bin/python3
"""torch_linear_ddp.py - an unmodified PyTorch trainer whose gradient noise
is known: linear regression y = w*.x + e, x uniform on [-1, 1]^DIM,
e ~ N(0, NOISE^2), a bias-free nn.Linear trained with SGD on the mean
squared error.  At the optimum each sample's gradient is -2 e x, so the
trace of its covariance is 4 NOISE^2 DIM / 3.

    torch_linear_ddp.py --batch-size B --lr LR --steps S
                        [--dim 8] [--seed 1] [--start-at-optimum]
                        [--own-hook] [--sleep SECONDS] [--step-log PATH]
                        [--checkpoint PATH --checkpoint-every N [--restore-optimizer]]

With WORLD_SIZE > 1 (and MASTER_ADDR, MASTER_PORT, RANK set, as a launcher
sets them) it trains a DistributedDataParallel model over gloo, each
replica drawing its own samples; otherwise one plain model.  --own-hook
registers a hook of the trainer's own on the DDP model (PyTorch's
allreduce_hook, counted: "own hook calls N" at the end).  At exit an
atexit handler prints "atexit handler ran" without flushing.  Output:
"batch_size B lr LR" at start, "resumed at step S" after loading
--checkpoint, "params HASH" (a SHA-256 of the parameters' bytes), "max_abs_weight W" and
"final step S" at the end; --step-log gets "step S" after every optimizer
step (flushed), so that a test can follow the steps.  A checkpoint is
torch.save'd to PATH.tmp and renamed onto PATH every N steps, with the
optimizer's state; --restore-optimizer loads that too (its learning rate
with it), as many training scripts do.
"""
import argparse
import atexit
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist

from trainer_common import replace_checkpoint

NOISE = 0.1


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start-at-optimum", action="store_true")
    parser.add_argument("--own-hook", action="store_true")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--step-log")
    parser.add_argument("--checkpoint")
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--restore-optimizer", action="store_true")
    return parser.parse_args()


def parameters_hash(model):
    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def main():
    arguments = parse_arguments()
    # written at exit without a flush: present only when the interpreter
    # exits as it normally does (buffers flushed, atexit handlers run)
    atexit.register(lambda: print("atexit handler ran"))
    own_hook_calls = [0]
    print(f"batch_size {arguments.batch_size} lr {arguments.lr}", flush=True)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(arguments.seed)
    true_weights = torch.rand(arguments.dim) * 2 - 1
    model = torch.nn.Linear(arguments.dim, 1, bias=False)
    with torch.no_grad():
        model.weight.copy_(true_weights.unsqueeze(0) if arguments.start_at_optimum
                           else torch.zeros(1, arguments.dim))
    trained = model
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        trained = torch.nn.parallel.DistributedDataParallel(model)
        if arguments.own_hook:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            def counting_allreduce_hook(state, bucket):
                own_hook_calls[0] += 1
                return default_hooks.allreduce_hook(state, bucket)

            trained.register_comm_hook(None, counting_allreduce_hook)
    optimizer = torch.optim.SGD(trained.parameters(), lr=arguments.lr)
    step = 0
    if arguments.checkpoint and os.path.exists(arguments.checkpoint):
        state = torch.load(arguments.checkpoint)
        model.load_state_dict(state["model"])
        if arguments.restore_optimizer:
            optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        print(f"resumed at step {step}", flush=True)
    samples = torch.Generator().manual_seed(arguments.seed * 1000 + rank * 7919 + step)
    step_log = open(arguments.step_log, "a") if arguments.step_log else None
    while step < arguments.steps:
        x = torch.rand(arguments.batch_size, arguments.dim, generator=samples) * 2 - 1
        noise = torch.randn(arguments.batch_size, generator=samples) * NOISE
        y = (x @ true_weights + noise).unsqueeze(1)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(trained(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        if step_log:
            step_log.write(f"step {step}\n")
            step_log.flush()
        if arguments.checkpoint and rank == 0 and step % arguments.checkpoint_every == 0:
            temp = arguments.checkpoint + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "step": step}, temp)
            replace_checkpoint(temp, arguments.checkpoint, step)
        if arguments.sleep > 0:
            time.sleep(arguments.sleep)
    if arguments.own_hook:
        print(f"own hook calls {own_hook_calls[0]}", flush=True)
    print(f"params {parameters_hash(model)}", flush=True)
    print(f"max_abs_weight {model.weight.detach().abs().max().item()}", flush=True)
    print(f"final step {step}", flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
