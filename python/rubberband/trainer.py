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
    """One trial's variables, read from the environment as the runtime sets them."""

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
    """Reports one iteration's metrics (rank 0's count): '@rb {"iter": N, ...}' on stdout."""
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
