#!/usr/bin/python3
"""Optuna anchor of rubberband's search benchmark.

Runs Optuna's TPESampler(seed=s) with a HyperbandPruner(min_resource, max_resource,
reduction_factor) on one multi-fidelity benchmark loss (branin, hartmann6, curves or digits), sequentially,
until the iterations trained over all trials reach --budget-iters, for seeds 0..N-1, and writes each
seed's regret trajectory as JSON:

    {"objective": ..., "optimum": ..., "sampler": "optuna-tpe+hyperband",
     "runs": [{"seed": s, "trajectory": [[iters_spent, regret], ...], "iters": ..., "trials": ...}]}

A point is appended after a report whenever the regret or the largest iteration reached changes.
regret = Final(incumbent) - optimum, where the incumbent is the trial whose report at the largest
iteration any trial has reached so far is lowest (ties: the first).

The benchmarks mirror trial/builtin/objective/objective.go exactly (formulas, spaces, constants, optimum,
fidelity z = iter/max_iter clamped to [0, 1]); only curves' noise draws differ: a standard normal
fixed by (configuration, iter), from numpy's PCG64 seeded by a hash, not Go's generator. digits, a
network really trained, is not mirrored: `rubberband search-bench objective digits` (--evaluator)
trains it exactly as rubberband's runs do and answers each report.

With a benchmark of two objectives (zdt1, curves-latency), Optuna's pruners refusing several
objectives, it runs its multi-objective TPESampler and NSGAIISampler (seeded, defaults), every
trial trained to --max-iters until the budget is spent, and writes each run's trajectory of
[iters_spent, hypervolume regret] (the true front's hypervolume minus that of the front of the
trials' reports, measured by their noise-free losses) under "runs", each run naming its sampler.

Needs Debian's python3-optuna (apt-get install python3-optuna), hence /usr/bin/python3.

    /usr/bin/python3 scripts/optuna_bench.py --objective curves --min-iters 1 --max-iters 27 \\
        --eta 3 --budget-iters 3000 --seeds 20 --out /tmp/optuna-curves.json
"""

import argparse
import hashlib
import json
import math
import statistics
import subprocess
import sys
import time

import numpy as np
import optuna
from optuna.trial import TrialState


def fidelity(it, max_iter):
    if max_iter <= 0:
        return 1.0
    return min(max(it / max_iter, 0.0), 1.0)


class Param:
    def __init__(self, name, typ, lo=None, hi=None, values=None, when=None):
        self.name, self.type, self.min, self.max = name, typ, lo, hi
        self.values = values
        self.when = when or {}  # {other param: [allowed values]}

    def active(self, cfg):
        return all(cfg.get(k) in vs for k, vs in self.when.items())

    def suggest(self, trial):
        if self.type == "uniform":
            return trial.suggest_float(self.name, self.min, self.max)
        if self.type == "loguniform":
            return trial.suggest_float(self.name, self.min, self.max, log=True)
        if self.type == "int":
            return trial.suggest_int(self.name, self.min, self.max)
        if self.type == "choice":
            return trial.suggest_categorical(self.name, self.values)
        raise ValueError(self.type)

    def random(self, rng):
        if self.type == "uniform":
            return float(rng.uniform(self.min, self.max))
        if self.type == "loguniform":
            return float(math.exp(rng.uniform(math.log(self.min), math.log(self.max))))
        if self.type == "int":
            return int(rng.integers(self.min, self.max + 1))
        return self.values[int(rng.integers(len(self.values)))]


class Objective:
    def __init__(self, name, space, optimum, value, final, opt_point):
        self.name, self.space, self.optimum = name, space, optimum
        self.value, self.final, self.opt_point = value, final, opt_point

    def suggest(self, trial):
        """Suggests the parameters in order, conditional ones only when active."""
        cfg = {}
        for p in self.space:
            if p.active(cfg):
                cfg[p.name] = p.suggest(trial)
        return cfg

    def random(self, rng):
        cfg = {}
        for p in self.space:
            if p.active(cfg):
                cfg[p.name] = p.random(rng)
        return cfg


# branin: the multi-fidelity Branin of Kandasamy et al. (2017).
def _branin_f(x1, x2, z):
    b = 5.1 / (4 * math.pi * math.pi) - 0.01 * (1 - z)
    c = 5 / math.pi - 0.1 * (1 - z)
    t = 1 / (8 * math.pi) + 0.05 * (1 - z)
    d = x2 - b * x1 * x1 + c * x1 - 6
    return d * d + 10 * (1 - t) * math.cos(x1) + 10


def branin():
    return Objective(
        "branin",
        [Param("x1", "uniform", -5.0, 10.0), Param("x2", "uniform", 0.0, 15.0)],
        0.397887357729738,
        lambda c, it, mx: _branin_f(c["x1"], c["x2"], fidelity(it, mx)),
        lambda c: _branin_f(c["x1"], c["x2"], 1.0),
        {"x1": math.pi, "x2": 2.275},
    )


# hartmann6: the multi-fidelity Hartmann-6 of Kandasamy et al. (2017).
HARTMANN_A = [
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
]
HARTMANN_P = [
    [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
    [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
    [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
    [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
]
HARTMANN_ALPHA = [1.0, 1.2, 3.0, 3.2]


def _hartmann_f(c, z):
    s = 0.0
    for i in range(4):
        inner = 0.0
        for j in range(6):
            d = c["x%d" % (j + 1)] - HARTMANN_P[i][j]
            inner += HARTMANN_A[i][j] * d * d
        s += (HARTMANN_ALPHA[i] - 0.1 * (1 - z)) * math.exp(-inner)
    return -s


def hartmann6():
    opt = [0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]
    return Objective(
        "hartmann6",
        [Param("x%d" % i, "uniform", 0.0, 1.0) for i in range(1, 7)],
        -3.32236801141551,
        lambda c, it, mx: _hartmann_f(c, fidelity(it, mx)),
        lambda c: _hartmann_f(c, 1.0),
        {"x%d" % (i + 1): v for i, v in enumerate(opt)},
    )


# curves: a noisy learning curve with interacting and conditional hyperparameters.
def _speed(c):
    return 8 * min(1.0, math.pow(c["lr"] / 0.01, 0.3))  # slow rates converge slowly


def _asymptote(c):
    lr, batch, dropout, layers = c["lr"], c["batch"], c["dropout"], c["layers"]
    best = 0.1 * math.sqrt(batch / 128)  # sgd's best learning rate
    loss = 0.05
    if c["optimizer"] == "adam":
        best = 0.001 * math.sqrt(batch / 128)
        b1 = c["beta1"]
        loss += 0.04 + 2 * (b1 - 0.9) * (b1 - 0.9)
    else:
        m = c["momentum"]
        loss += 0.6 * (m - 0.9) * (m - 0.9)
    d = math.log10(lr) - math.log10(best)
    loss += 0.08 * d * d
    loss += 1.5 * (dropout - 0.1 * layers) * (dropout - 0.1 * layers)
    loss += 0.01 * (layers - 4) * (layers - 4)
    return loss


def _curve(c, z):
    return _asymptote(c) + 2.45 * math.exp(-_speed(c) * z)


def noise_of(c, it):
    """A standard normal draw fixed by the configuration and the iteration."""
    key = "".join("%s=%r;" % (k, c[k]) for k in sorted(c))
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return float(np.random.Generator(np.random.PCG64([seed, it])).standard_normal())


def _curves_value(c, it, mx):
    z = fidelity(it, mx)
    return _curve(c, z) + (0.005 + 0.025 * (1 - z)) * noise_of(c, it)


def curves():
    return Objective(
        "curves",
        [
            Param("optimizer", "choice", values=["sgd", "adam"]),
            Param("momentum", "uniform", 0.0, 0.99, when={"optimizer": ["sgd"]}),
            Param("beta1", "uniform", 0.5, 0.999, when={"optimizer": ["adam"]}),
            Param("lr", "loguniform", 1e-5, 1.0),
            Param("batch", "int", 16, 512),
            Param("dropout", "uniform", 0.0, 0.8),
            Param("layers", "int", 1, 8),
        ],
        0.05 + 2.45 * math.exp(-8),
        _curves_value,
        lambda c: _curve(c, 1.0),
        {"optimizer": "sgd", "momentum": 0.9, "batch": 256, "lr": 0.1 * math.sqrt(256 / 128),
         "dropout": 0.4, "layers": 4},
    )


class Evaluator:
    """`rubberband search-bench objective NAME`: the Go benchmark, one JSON line a request."""

    def __init__(self, binary, name):
        self.binary, self.name, self.proc = binary, name, None

    def restart(self):
        """A fresh process: a trained benchmark keeps every network it trained until it exits."""
        self.close()
        self.proc = subprocess.Popen([self.binary, "search-bench", "objective", self.name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, req):
        if self.proc is None:
            self.restart()
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("%s search-bench objective %s ended" % (self.binary, self.name))
        rep = json.loads(line)
        if rep.get("error"):
            raise RuntimeError("%s: %s" % (self.name, rep["error"]))
        return rep["value"]

    def value(self, c, it, mx):
        return self.ask({"params": c, "iter": it, "max_iter": mx})

    def final(self, c):
        return self.ask({"params": c, "final": True})

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc = None


# digits: the built-in MLP on the UCI digits, trained for real by rubberband's Go code (an
# iteration an epoch; regret is the validation loss, the optimum unknown and taken as 0). Its
# space mirrors trial/builtin/objective/digits.go.
def digits(evaluator):
    o = Objective(
        "digits",
        [
            Param("lr", "loguniform", 1e-3, 1.0),
            Param("momentum", "uniform", 0.0, 0.99),
            Param("hidden", "choice", values=[16, 32, 64]),
            Param("l2", "loguniform", 1e-6, 1e-1),
            Param("batch", "choice", values=[32, 64, 128]),
        ],
        0.0,
        evaluator.value,
        evaluator.final,
        None,
    )
    o.evaluator = evaluator
    return o


# Benchmarks of several objectives (all minimised), mirroring trial/builtin/objective/multi.go.
# A front is measured by its hypervolume from the reference point; its regret is the true front's
# hypervolume minus its own.
class Multi(Objective):
    def __init__(self, name, space, metrics, losses, finals, reference, max_hv, opt_point):
        super().__init__(name, space, 0.0, lambda c, it, mx: losses(c, it, mx)[0],
                         lambda c: finals(c)[0], opt_point)
        self.metrics, self.losses, self.finals = metrics, losses, finals
        self.reference, self.max_hv = reference, max_hv

    def regret(self, finals):
        return self.max_hv - hypervolume2(finals, self.reference)


def hypervolume2(points, ref):
    """The area the two-objective points dominate up to ref (pareto.Hypervolume's sweep)."""
    inside = sorted(p for p in points if p[0] < ref[0] and p[1] < ref[1])
    area, lowest = 0.0, ref[1]
    for f1, f2 in inside:
        if f2 < lowest:
            area += (ref[0] - f1) * (lowest - f2)
            lowest = f2
    return area


def dominates(a, b):
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def _zdt1_f(c, z):
    shift = 0.2 * (1 - z)
    g = 1 + 9 * sum(abs(c["x%d" % i] - shift) for i in range(2, 7)) / 5
    f1 = c["x1"]
    return [f1, g * (1 - math.sqrt(f1 / g))]


# zdt1: ZDT1 on six variables with a fidelity (x2..x6 measured from 0.2(1-z)), reference (11, 11).
def zdt1():
    return Multi(
        "zdt1",
        [Param("x%d" % i, "uniform", 0.0, 1.0) for i in range(1, 7)],
        ["f1", "f2"],
        lambda c, it, mx: _zdt1_f(c, fidelity(it, mx)),
        lambda c: _zdt1_f(c, 1.0),
        [11.0, 11.0],
        121 - 1.0 / 3,
        {"x1": 0.25, "x2": 0.0, "x3": 0.0, "x4": 0.0, "x5": 0.0, "x6": 0.0},
    )


# curves-latency: curves' loss against the latency of the model's depth, 1 + layers ms, from (1, 10).
def curves_latency():
    c = curves()
    lowest = c.optimum
    ref = [1.0, 10.0]
    front = [[lowest + 0.01 * (l - 4) ** 2, 1.0 + l] for l in (1, 2, 3, 4)]
    return Multi(
        "curves-latency",
        c.space,
        ["loss", "latency_ms"],
        lambda cfg, it, mx: [c.value(cfg, it, mx), 1.0 + cfg["layers"]],
        lambda cfg: [c.final(cfg), 1.0 + cfg["layers"]],
        ref,
        hypervolume2(front, ref),
        c.opt_point,
    )


MULTI = {"zdt1": zdt1, "curves-latency": curves_latency}
MULTI_SAMPLERS = {
    "optuna-motpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "optuna-nsga2": lambda seed: optuna.samplers.NSGAIISampler(seed=seed),
}

OBJECTIVES = {"branin": branin, "hartmann6": hartmann6, "curves": curves}
EVALUATED = {"digits": digits}


def self_check():
    for make in OBJECTIVES.values():
        o = make()
        got = o.final(o.opt_point)
        assert abs(got - o.optimum) <= 1e-5, (o.name, got, o.optimum)
        # Value at full fidelity is Final (plus noise for curves, at most a few 0.005 sigmas).
        assert abs(o.value(o.opt_point, 27, 27) - got) <= 0.05, o.name
        assert o.value(o.opt_point, 5, 27) == o.value(o.opt_point, 5, 27), o.name
    # The true fronts reach their hypervolume: zdt1's sampled densely, curves-latency's four points.
    z = zdt1()
    dense = [z.finals({"x1": i / 4000, "x2": 0, "x3": 0, "x4": 0, "x5": 0, "x6": 0}) for i in range(4001)]
    assert 0 <= z.regret(dense) < 1e-3, z.regret(dense)
    c = curves_latency()
    best = [c.finals(dict(c.opt_point, layers=l, dropout=0.1 * l)) for l in (1, 2, 3, 4)]
    assert abs(c.regret(best)) < 1e-9, c.regret(best)


def run_seed(obj, seed, min_iters, max_iters, eta, budget):
    sampler = optuna.samplers.TPESampler(seed=seed)
    pruner = optuna.pruners.HyperbandPruner(
        min_resource=min_iters, max_resource=max_iters, reduction_factor=eta)
    study = optuna.create_study(direction="minimize", sampler=sampler, pruner=pruner)

    spent = 0
    top_iter = 0  # the largest iteration any trial has reported
    best_val = math.inf  # the lowest report at top_iter
    best_cfg = None
    regret = None
    traj = []
    trials = 0
    while spent < budget:
        trial = study.ask()
        trials += 1
        cfg = obj.suggest(trial)
        state, last = TrialState.COMPLETE, None
        for it in range(1, max_iters + 1):
            if spent >= budget:
                state = TrialState.PRUNED  # cut short by the budget
                break
            v = obj.value(cfg, it, max_iters)
            spent += 1
            last = v
            trial.report(v, it)
            changed_top = False
            if it > top_iter:
                top_iter, best_val, best_cfg, changed_top = it, v, cfg, True
            elif it == top_iter and v < best_val:
                best_val, best_cfg = v, cfg
            r = obj.final(best_cfg) - obj.optimum
            if changed_top or r != regret:
                regret = r
                traj.append([spent, r])
            if trial.should_prune():
                state = TrialState.PRUNED
                break
        if state == TrialState.COMPLETE:
            study.tell(trial, last)
        else:
            study.tell(trial, state=TrialState.PRUNED)
    return {"seed": seed, "trajectory": traj, "iters": spent, "trials": trials}


def run_seed_multi(obj, sampler_name, seed, max_iters, budget):
    """Optuna's multi-objective sampler, every trial trained to max_iters (its pruners refuse
    several objectives), until the budget is spent. After each trial, the regret of the front of
    the trials' reported losses, measured by their noise-free losses."""
    study = optuna.create_study(directions=["minimize"] * len(obj.metrics),
                                sampler=MULTI_SAMPLERS[sampler_name](seed))
    spent, trials, traj = 0, 0, []
    front = []  # (reported losses, final losses) of the non-dominated trials
    while spent < budget:
        trial = study.ask()
        trials += 1
        cfg = obj.suggest(trial)
        iters = min(max_iters, budget - spent)
        spent += iters
        if iters < max_iters:  # cut short by the budget: no result
            study.tell(trial, state=TrialState.FAIL)
            break
        losses = obj.losses(cfg, max_iters, max_iters)
        study.tell(trial, losses)
        if not any(dominates(f[0], losses) for f in front):
            front = [f for f in front if not dominates(losses, f[0])]
            front.append((losses, obj.finals(cfg)))
        traj.append([spent, obj.regret([f[1] for f in front])])
    return {"seed": seed, "sampler": sampler_name, "trajectory": traj, "iters": spent, "trials": trials}


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objective", required=True, choices=sorted(list(OBJECTIVES) + list(EVALUATED) + list(MULTI)))
    ap.add_argument("--min-iters", type=int, default=1)
    ap.add_argument("--max-iters", type=int, default=27)
    ap.add_argument("--eta", type=int, default=3)
    ap.add_argument("--budget-iters", type=int, required=True)
    ap.add_argument("--seeds", type=int, default=1, help="runs seeds 0..N-1 (from --first-seed)")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="the first seed: halves of a long benchmark run side by side, their runs merged")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--evaluator", default="bin/rubberband",
                    help="the rubberband binary, which computes digits (search-bench objective)")
    a = ap.parse_args()

    self_check()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if a.objective in MULTI:
        return main_multi(a, MULTI[a.objective]())
    if a.objective in EVALUATED:
        obj = EVALUATED[a.objective](Evaluator(a.evaluator, a.objective))
    else:
        obj = OBJECTIVES[a.objective]()
        rng = np.random.default_rng(12345)
        rand_regrets = [obj.final(obj.random(rng)) - obj.optimum for _ in range(2000)]
        print("%s: random configuration regret median %.4g" %
              (obj.name, statistics.median(rand_regrets)), file=sys.stderr)

    runs, finals = [], []
    t_all = time.time()
    for s in range(a.first_seed, a.first_seed + a.seeds):
        t0 = time.time()
        if hasattr(obj, "evaluator"):
            obj.evaluator.restart()
        run = run_seed(obj, s, a.min_iters, a.max_iters, a.eta, a.budget_iters)
        final = run["trajectory"][-1][1] if run["trajectory"] else math.nan
        finals.append(final)
        runs.append(run)
        print("%s seed %d: %d trials, %d iters, final regret %.6g (%.1fs)" %
              (obj.name, s, run["trials"], run["iters"], final, time.time() - t0), file=sys.stderr)

    if hasattr(obj, "evaluator"):
        obj.evaluator.close()
    out = {"objective": obj.name, "optimum": obj.optimum, "sampler": "optuna-tpe+hyperband",
           "min_iters": a.min_iters, "max_iters": a.max_iters, "eta": a.eta,
           "budget_iters": a.budget_iters, "runs": runs}
    with open(a.out, "w") as f:
        json.dump(out, f)
    q1, med, q3 = quartiles(finals)
    print("%s optuna-tpe+hyperband: %d seeds, budget %d iters: final regret median %.6g "
          "(quartiles %.6g, %.6g), %.1fs" % (obj.name, len(finals), a.budget_iters, med, q1, q3,
                                              time.time() - t_all), file=sys.stderr)


def main_multi(a, obj):
    """Each of Optuna's multi-objective samplers over the seeds, into one file."""
    runs = []
    t_all = time.time()
    for name in MULTI_SAMPLERS:
        finals = []
        for s in range(a.first_seed, a.first_seed + a.seeds):
            t0 = time.time()
            run = run_seed_multi(obj, name, s, a.max_iters, a.budget_iters)
            final = run["trajectory"][-1][1] if run["trajectory"] else math.nan
            finals.append(final)
            runs.append(run)
            print("%s %s seed %d: %d trials, %d iters, final hypervolume regret %.6g (%.1fs)" %
                  (obj.name, name, s, run["trials"], run["iters"], final, time.time() - t0), file=sys.stderr)
        q1, med, q3 = quartiles(finals)
        print("%s %s: %d seeds, budget %d iters: final hypervolume regret median %.6g (quartiles %.6g, %.6g)" %
              (obj.name, name, len(finals), a.budget_iters, med, q1, q3), file=sys.stderr)
    out = {"objective": obj.name, "optimum": obj.max_hv, "sampler": "optuna", "measure": "hypervolume regret",
           "min_iters": a.min_iters, "max_iters": a.max_iters, "eta": a.eta,
           "budget_iters": a.budget_iters, "runs": runs}
    with open(a.out, "w") as f:
        json.dump(out, f)
    print("%s: %.1fs" % (obj.name, time.time() - t_all), file=sys.stderr)


if __name__ == "__main__":
    main()
