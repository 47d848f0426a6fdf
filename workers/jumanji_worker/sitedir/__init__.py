# Not a package to import: this directory goes on PYTHONPATH of Jumanji's own training loop (see sitecustomize.py).
