"""Helpers for a trainer that follows rubberband's trainer contract (docs/trainers.md): the
trial's variables, reporting metrics, the checkpoint directory, stopping on SIGTERM, and the
reuse loop (trainer.reuse: one process serves trial after trial). Standard library only."""
import json
import os
import signal
import sys

_stopping = False


def _on_term(signum, frame):
    global _stopping
    _stopping = True


class Trial:
    """One trial's variables, read from the environment as the runtime sets them
    (docs/trainers.md, "What every worker gets"). Trial() reads os.environ; Trial(env) a dict.

    Attributes:
        id (str): the trial's ID, RB_TRIAL_ID ("b0-t0007": bracket 0, trial 7).
        experiment (str): the spec's name, RB_EXPERIMENT.
        params (dict): the trial's hyperparameters, RB_PARAMS: the search space's names to the
            values sampled ({"lr": 0.01, "width": 128}).
        start_iter (int): the iteration the driver believes the checkpoint holds, RB_START_ITER
            (0 on a trial's first launch); trust the checkpoint over it.
        target_iter (int): the iteration to reach, RB_TARGET_ITER: train to it, report it,
            write the checkpoint, and return (exit 0).
        checkpoint_dir (str): RB_CHECKPOINT_DIR, the directory holding the restored checkpoint
            (empty at first); write the new one there (checkpoint_path, write_atomically).
        rank (int): this worker's rank in its gang, RANK (0 to world_size - 1): rank 0 reports.
        world_size (int): the gang's workers, WORLD_SIZE (1 unless the trial has several GPUs).
        stopping (bool, read-only): SIGTERM came (a spot notice, a migration, a cancel): write the
            checkpoint and return within 10 s.
    """

    def __init__(self, env=None):
        env = os.environ if env is None else env
        self.id = env.get("RB_TRIAL_ID", "")
        self.experiment = env.get("RB_EXPERIMENT", "")
        self.params = json.loads(env.get("RB_PARAMS", "{}") or "{}")
        self.start_iter = int(env.get("RB_START_ITER", "0") or 0)
        self.target_iter = int(env["RB_TARGET_ITER"])
        self.checkpoint_dir = env.get("RB_CHECKPOINT_DIR", "")
        self.rank = int(env.get("RANK", "0") or 0)
        self.world_size = int(env.get("WORLD_SIZE", "1") or 1)

    @property
    def stopping(self):
        """SIGTERM came (a spot notice, a migration, a cancel): write the checkpoint and return."""
        return _stopping

    def checkpoint_path(self, name):
        """A file in the checkpoint directory (made if missing): what was saved there is restored
        before the next launch of this trial, wherever it runs."""
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        return os.path.join(self.checkpoint_dir, name)


def report(iteration, **metrics):
    """Reports one iteration's metrics, as numbers by name (report(4, val_accuracy=0.91)):
    '@rb {"iter": 4, "val_accuracy": 0.91}' on stdout. Only rank 0's count: on other ranks it
    prints nothing. The spec's objective metric must be among them."""
    if int(os.environ.get("RANK", "0") or 0) != 0:
        return
    line = dict(metrics)
    line["iter"] = int(iteration)
    sys.stdout.write("@rb " + json.dumps(line) + "\n")
    sys.stdout.flush()


def write_atomically(path, data):
    """Writes bytes or text to path so that a crash leaves the old file or the new, never half."""
    mode = "wb" if isinstance(data, (bytes, bytearray)) else "w"
    tmp = path + ".tmp"
    with open(tmp, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def trials():
    """The trials this process serves, each a Trial: one, or with trainer.reuse (RB_REUSE=1) one
    after another, each next trial's variables read from stdin after the last one ended. After
    each trial it prints the '@rb-end 0' line the runtime waits for; it stops once SIGTERM came."""
    signal.signal(signal.SIGTERM, _on_term)
    while True:
        yield Trial()
        if os.environ.get("RB_REUSE") != "1" or _stopping:
            return
        sys.stdout.write("@rb-end 0\n")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line.strip():
            return
        os.environ.update(json.loads(line))
