"""The app's screens: runs, run detail, new run, compare, workers, and the modals."""
