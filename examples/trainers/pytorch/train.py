#!/usr/bin/env python3
"""A PyTorch DDP trainer that follows rubberband's trainer contract: an MLP on the UCI digits.

The same script runs on CPU (gloo) on one machine and on a GPU cluster (NCCL, one GPU per worker),
unchanged. rubberband launches one worker per GPU with PyTorch's own variables (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so torch.distributed initialises from the environment
(env://). The contract, as this script keeps it:

- hyperparameters come as JSON in RB_PARAMS: lr, momentum, l2, hidden, layers, batch (per worker);
- train from the checkpoint in RB_CHECKPOINT_DIR (model.pt: weights, optimizer, the iteration
  reached; empty at a trial's first launch) to RB_TARGET_ITER, one iteration being one epoch of
  the training set, shared among the workers by a DistributedSampler;
- rank 0 prints '@rb {"iter": N, "val_accuracy": ...}' after each iteration and writes the
  checkpoint atomically (a temporary file, fsync, rename) before exiting 0;
- on SIGTERM (migration, spot interruption) every rank stops at the end of the current iteration
  (the ranks agree on it, so none is left waiting in a collective), rank 0 saves, all exit 0; an
  iteration must therefore take well under the 10 s grace period. A SIGTERM during start-up
  (imports, rendezvous, restore) is held until training starts, then stops it at once.

The data is the repository's trial/builtin/digits/digits.csv.gz, found beside this script
(../data) or at $RB_DIGITS: nothing is downloaded. CPU threads per worker: $OMP_NUM_THREADS, else
1 (two workers on a two-core machine do not oversubscribe it). Device: CUDA when torch sees a GPU
(rubberband gives each worker its own, in CUDA_VISIBLE_DEVICES), else CPU; RB_DEVICE=cpu forces
the CPU. Every rank that sees the checkpoint loads it; rank 0's iteration is the one all follow.

`make test-torch` runs it through `rubberband run` on the local backend, two workers a trial in
the last stage (e2e/torch_test.go); the spec is examples/trainers/pytorch/job.yaml.
"""
import csv
import gzip
import json
import os
import random
import signal
import sys
import time

# SIGTERM is held back in every thread until training starts, and then reaches the main thread
# alone, where Python runs its handler: a system call it interrupts in one of torch's threads
# (gloo's I/O, the rendezvous store's client) fails there ("Interrupted system call", seen in the
# rendezvous). Threads inherit the mask of the thread that starts them: this precedes torch.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("RB_DIGITS") or os.path.join(HERE, "..", "..", "..", "trial", "builtin", "digits", "digits.csv.gz")
VAL = 360  # held-out images, as the Go and Python trainers hold them out
stop = False


def on_term(signum, frame):
    global stop
    stop = True


def log(msg):
    print(f"[rank {os.environ.get('RANK', '0')}] {msg}", file=sys.stderr, flush=True)


def load(device):
    with gzip.open(DATA, "rt") as f:
        rows = [list(map(int, r)) for r in csv.reader(f)]
    random.Random(42).shuffle(rows)
    x = torch.tensor([r[:64] for r in rows], dtype=torch.float32) / 16.0
    y = torch.tensor([r[64] for r in rows], dtype=torch.long)
    return (x[VAL:].to(device), y[VAL:].to(device)), (x[:VAL].to(device), y[:VAL].to(device))


def mlp(hidden, layers):
    mods, width = [], 64
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*mods, nn.Linear(width, 10))


def atomic_save(state, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    params = json.loads(os.environ.get("RB_PARAMS") or "{}")
    target = int(os.environ["RB_TARGET_ITER"])
    ckdir = os.environ["RB_CHECKPOINT_DIR"]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 1))

    cuda = torch.cuda.is_available() and os.environ.get("RB_DEVICE", "") != "cpu"
    if cuda:  # rubberband gives each worker its own GPU (CUDA_VISIBLE_DEVICES): device 0 then
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    backend = "nccl" if cuda else "gloo"
    if world > 1:
        dist.init_process_group(backend, init_method="env://")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    log(f"world size {world}, local rank {local}, device {device}, backend {backend if world > 1 else 'none'}, "
        f"{torch.get_num_threads()} thread(s), torch {torch.__version__}")

    torch.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    hidden, layers = int(params.get("hidden", 128)), int(params.get("layers", 2))
    batch = int(params.get("batch", 64))
    model = mlp(hidden, layers).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=float(params.get("lr", 0.05)),
                          momentum=float(params.get("momentum", 0.9)), weight_decay=float(params.get("l2", 0.0)))
    start, path = 0, os.path.join(ckdir, "model.pt")
    if os.path.exists(path):  # restored by rubberband: continue where the trial left off
        t0 = time.perf_counter()
        state = torch.load(path, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["iter"])
        log(f"resumed from iteration {start} ({os.path.getsize(path)} bytes, restored in {1e3 * (time.perf_counter() - t0):.1f} ms)")
    else:
        log("no checkpoint: starting from iteration 0")
    if world > 1:  # rank 0's checkpoint decides where every rank starts
        at = torch.tensor([start], device=device)
        dist.broadcast(at, 0)
        start = int(at.item())
    net = DDP(model, device_ids=[device.index] if cuda else None) if world > 1 else model

    (xt, yt), (xv, yv) = load(device)
    sampler = DistributedSampler(range(len(yt)), num_replicas=world, rank=rank, shuffle=True, seed=0)

    def agreed_stop():  # every rank leaves the loop at the same iteration, or a collective hangs
        if world == 1:
            return stop
        flag = torch.tensor([1 if stop else 0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    # From here SIGTERM (one that came during start-up too) asks every rank to stop at the end of
    # the iteration, and rank 0 to save. SA_RESTART: a system call it interrupts is resumed.
    signal.signal(signal.SIGTERM, on_term)
    signal.siginterrupt(signal.SIGTERM, False)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    it = start
    while it < target and not agreed_stop():
        sampler.set_epoch(it)
        idx = torch.tensor(list(sampler), device=device)
        net.train()
        t0, total = time.perf_counter(), 0.0
        for b in range(0, len(idx), batch):
            i = idx[b:b + batch]
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(net(xt[i]), yt[i])
            loss.backward()
            opt.step()
            total += loss.item() * len(i)
        it += 1
        if rank == 0:
            model.eval()
            with torch.no_grad():
                out = model(xv)
                acc = (out.argmax(1) == yv).float().mean().item()
                vloss = nn.functional.cross_entropy(out, yv).item()
            print("@rb " + json.dumps({"iter": it, "val_accuracy": acc, "val_loss": vloss, "train_loss": total / len(idx),
                                       "epoch_seconds": round(time.perf_counter() - t0, 4)}), flush=True)

    if rank == 0:
        os.makedirs(ckdir, exist_ok=True)
        t0 = time.perf_counter()
        atomic_save({"iter": it, "model": model.state_dict(), "opt": opt.state_dict(), "params": params}, path)
        log(f"saved the checkpoint at iteration {it} in {1e3 * (time.perf_counter() - t0):.1f} ms"
            + (" (stopped by SIGTERM)" if it < target else ""))
    if world > 1:
        dist.barrier()  # the checkpoint is written before any rank exits 0
    # Leave without tearing torch down: with gloo, freeing DDP's reducer (here, or when main
    # returns) can deadlock, its process group joining a worker thread that waits for the GIL the
    # main thread holds (torch 1.13, about one two-worker run in thirty here). All is written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
