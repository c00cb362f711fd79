"""rubberband for Python: a client of `rubberband server` for notebooks, and the trainer helpers.

    from rubberband import Client
    c = Client("https://rubberband.example:8443", token)   # or RUBBERBAND_SERVER, RUBBERBAND_TOKEN
    run = c.submit("examples/quickstart.yaml")              # a path, or the spec as a dict
    run.follow()                                            # progress until it ends
    run.trials()                                            # a pandas DataFrame when pandas is installed
    run.best()

    from rubberband import trainer                          # in a trainer
    for t in trainer.trials():                              # one trial, or many with trainer.reuse
        for it in range(t.start_iter + 1, t.target_iter + 1):
            ...
            trainer.report(it, val_accuracy=acc)
            if t.stopping: break                            # SIGTERM: checkpoint and leave

Standard library only.
"""
from .client import Client, Run, ServerError, Refused
from . import trainer

__all__ = ["Client", "Run", "ServerError", "Refused", "trainer"]
