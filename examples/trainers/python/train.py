#!/usr/bin/env python3
"""A rubberband trainer in plain Python (standard library only): softmax regression on the UCI
digits, trained with SGD. It follows the trainer contract: read RB_* from the environment, train
from the checkpoint's iteration to RB_TARGET_ITER, print '@rb {json}' after each iteration, write
the checkpoint into RB_CHECKPOINT_DIR, exit 0. Hyperparameters: lr, l2 (others are ignored).

With trainer.reuse (RB_REUSE=1) one process serves trial after trial: after each it prints
'@rb-end CODE' and reads the next trial's variables from stdin as one JSON line, so the data is
loaded once per process, not once per launch. The contract's plumbing (the variables, '@rb'
lines, SIGTERM, the reuse loop, atomic checkpoint writes) is the rubberband package's
(python/rubberband/trainer.py), found beside this repository's python/ or installed with
`pip install ./python`."""
import csv
import gzip
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
from rubberband import trainer  # noqa: E402

# The data: beside this script (copied out of the repository with it), or where the repository
# keeps it.
DATA = next((p for p in (os.path.join(HERE, "digits.csv.gz"),
                         os.path.join(HERE, "..", "..", "..", "trial", "builtin", "digits", "digits.csv.gz"))
             if os.path.exists(p)), None)


def load():
    if DATA is None:
        sys.exit("digits.csv.gz is neither beside %s nor in the repository it came from: copy "
                 "trial/builtin/digits/digits.csv.gz of the repository beside it" % __file__)
    with gzip.open(DATA, "rt") as f:
        rows = [list(map(int, r)) for r in csv.reader(f)]
    random.Random(42).shuffle(rows)
    data = [([v / 16 for v in r[:64]] + [1.0], r[64]) for r in rows]
    return data[360:], data[:360]


def scores(w, x):
    s = [sum(wi * xi for wi, xi in zip(row, x)) for row in w]
    top = max(s)
    e = [math.exp(v - top) for v in s]
    z = sum(e)
    return [v / z for v in e]


def train_one(t, train, val):
    lr, l2 = float(t.params.get("lr", 0.1)), float(t.params.get("l2", 0.0))
    path = t.checkpoint_path("weights.json")
    if os.path.exists(path):
        with open(path) as f:
            state = json.load(f)
    else:
        state = {"iter": 0, "w": [[0.0] * 65 for _ in range(10)]}
    w = state["w"]
    it = state["iter"]
    while it < t.target_iter and not t.stopping:
        it += 1
        order = list(range(len(train)))
        random.Random(it).shuffle(order)
        for i in order:
            x, y = train[i]
            p = scores(w, x)
            for c in range(10):
                g = p[c] - (1.0 if c == y else 0.0)
                row = w[c]
                for j in range(65):
                    row[j] -= lr * (g * x[j] + l2 * row[j])
        right = sum(1 for x, y in val if max(range(10), key=lambda c: scores(w, x)[c]) == y)
        trainer.report(it, val_accuracy=right / len(val))
    if t.rank == 0:
        trainer.write_atomically(path, json.dumps({"iter": it, "w": w}))


def main():
    train, val = load()
    for t in trainer.trials():
        train_one(t, train, val)
    return 0


if __name__ == "__main__":
    sys.exit(main())
