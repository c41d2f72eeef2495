"""How many threads each worker's torch and onnxruntime may use: the cores shared by the jobs.

Every library keeps one thread per core by default, so two workers on two cores ran four
threads each and every export took about three times as long (measured: four small models,
`--jobs 2` 14.7 s against `--jobs 1` 15.6 s). Each worker gets `max(1, cores // jobs)`.
"""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def thread_budget(jobs: int, available: int | None = None) -> int:
    """Threads per worker when `jobs` workers share the cores."""
    return max(1, (available or cores()) // max(1, jobs))


def use_torch_threads(threads: int) -> str:
    """Set torch's intra- and inter-op pools in this (forked) worker; says what took effect.

    The inter-op count can only be set before inter-op work starts. The zygote's warm-up runs
    single-threaded and starts no pool, so in a worker forked from it both calls take effect
    (measured with torch 2.13: 2/2 before, 1/1 after, and a parallel matmul still runs).
    """
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError as error:  # inter-op work already ran in this process
        return f"torch threads: intra-op {threads}, inter-op kept ({error})"
    return f"torch threads: intra-op {threads}, inter-op {threads}"
