# Not a package to import: this directory goes on PYTHONPATH of the XuanCe worker (see sitecustomize.py).
