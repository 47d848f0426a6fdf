# Not a package to import: this directory goes on a CleanRL script's PYTHONPATH (see sitecustomize.py).
