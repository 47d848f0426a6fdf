"""The worker SDK: what every worker process and descriptor is written against (docs/workers/README.md)."""
