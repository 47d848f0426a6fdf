"""The tests' private servers on this machine (Slurm, Ray, sshd, an LLM endpoint) and what they share
(tests/plugins/base.py: free ports, dying with the test process, starting, waiting on and stopping
a set of daemons)."""
