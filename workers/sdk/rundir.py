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
