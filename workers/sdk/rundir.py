"""Where a worker puts its files in the run directory (its cwd): one set of names
for every worker and for the daemon (daemon/home.py imports them), so `mosaic eval`,
`run:NAME` checkpoint references and the docs find the same places.
"""
CHECKPOINT_DIR = "checkpoints"    # models the worker saves; it announces each with checkpoint_saved
TENSORBOARD_DIR = "tensorboard"   # the library's own TensorBoard files, if it writes any
# Beside a checkpoint: what it was trained with (env, algo, agents, policy ...),
# read before loading it, so a mismatch is refused by name instead of by a shape error.
CHECKPOINT_META = "mosaic_checkpoint.json"
# A recorded offline dataset (workers/sdk/dataset.py): Tianshou's ReplayBuffer HDF5, and what it holds.
DATASET_FILE = "dataset.hdf5"
DATASET_META = "dataset.json"


class CheckpointSchedule:
    """When a worker that trains in whole units (iterations, epochs, chunks) saves: after
    every ``every``-th unit on the way (0: never on the way), and once more at the end unless
    the last unit was just saved -- so a run always ends with a checkpoint and never saves
    the same state twice. A resumed run counts from its checkpoint's unit (``start``): one
    that had nothing left to train saves nothing new."""

    def __init__(self, every: int, start: int = 0):
        self.every = every
        self.start = start
        self.last_saved: int | None = None

    def due(self, done: int, finished: bool) -> bool:
        """After ``done`` units: save on the way now? (``finished``: this was the last unit)"""
        return bool(self.every) and done % self.every == 0 and not finished

    def saved(self, done: int) -> None:
        self.last_saved = done

    def final_due(self, done: int) -> bool:
        """At the end, after ``done`` units: save the final state?"""
        return self.last_saved != done and done > self.start
