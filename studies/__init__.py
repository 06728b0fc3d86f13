"""studies: the harness built on the reference (sweeps, statistics, folders, reports, the mechanism studies); run its commands from the repo root as `python -m studies.<module>`."""
