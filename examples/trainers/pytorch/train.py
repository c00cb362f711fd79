#!/usr/bin/env python3
"""A PyTorch DDP trainer that follows rubberband's trainer contract, for real GPU clusters.

rubberband launches one worker per GPU with PyTorch's own variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), so torch.distributed initialises from the environment unchanged. The
trial's hyperparameters are RB_PARAMS (JSON); train from the checkpoint in RB_CHECKPOINT_DIR to
RB_TARGET_ITER (one iteration = one epoch here); rank 0 prints '@rb {json}' after each epoch and
writes the checkpoint; exit 0 at the target. On SIGTERM (migration, spot interruption) save and
exit within the grace period.

Not run by rubberband's tests (no GPU and no PyTorch image on the build machines); the Go trainer
in examples/trainers/mlp exercises the same contract, data parallelism included.
"""
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torchvision
import torchvision.transforms as T
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def main():
    signal.signal(signal.SIGTERM, on_term)
    params = json.loads(os.environ.get("RB_PARAMS", "{}"))
    target = int(os.environ["RB_TARGET_ITER"])
    ckdir = os.environ["RB_CHECKPOINT_DIR"]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))

    use_cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local}" if use_cuda else "cpu")
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")  # env:// from RANK, MASTER_ADDR, ...

    model = torchvision.models.resnet18(num_classes=10).to(device)
    if world > 1:
        model = DDP(model, device_ids=[local] if use_cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=float(params.get("lr", 0.1)),
                          momentum=float(params.get("momentum", 0.9)), weight_decay=float(params.get("l2", 5e-4)))
    start = 0
    path = os.path.join(ckdir, "model.pt")
    if os.path.exists(path):  # restored by rubberband: continue where the trial left off
        state = torch.load(path, map_location=device)
        (model.module if world > 1 else model).load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["iter"]

    data = os.environ.get("DATA_DIR", "/data")
    tf = T.Compose([T.ToTensor(), T.Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))])
    train = torchvision.datasets.CIFAR10(data, train=True, download=False, transform=tf)
    val = torchvision.datasets.CIFAR10(data, train=False, download=False, transform=tf)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank) if world > 1 else None
    loader = DataLoader(train, batch_size=int(params.get("batch", 128)), sampler=sampler, shuffle=sampler is None, num_workers=2)

    it = start
    while it < target and not stop:
        it += 1
        if sampler is not None:
            sampler.set_epoch(it)
        model.train()
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
            opt.step()
        if rank == 0:
            model.eval()
            right = total = 0
            with torch.no_grad():
                for x, y in DataLoader(val, batch_size=512):
                    right += (model(x.to(device)).argmax(1).cpu() == y).sum().item()
                    total += len(y)
            print("@rb " + json.dumps({"iter": it, "val_accuracy": right / total}), flush=True)

    if rank == 0:
        os.makedirs(ckdir, exist_ok=True)
        tmp = path + ".tmp"
        torch.save({"iter": it, "model": (model.module if world > 1 else model).state_dict(), "opt": opt.state_dict()}, tmp)
        os.replace(tmp, path)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
