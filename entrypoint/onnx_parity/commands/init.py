"""`onnx-parity init`: from a model and no configuration to a checked `[[model]]` entry.

In order: the options are checked (settings/init_request.py); the configuration to add to is
found and must load; nothing may be overwritten without --force; the model is built in a
worker, its forward read, its inputs checked against it and its samples made
(pipeline/new_model.py); the samples and the entry are written (publishing/init_files.py);
then the model is checked like any other and the check's exit code is the command's.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_parity.commands.check import CheckTarget, perform_check
from onnx_parity.commands.context import Context
from onnx_parity.commands.usage import UsageError
from onnx_parity.errors import ExitCode

if TYPE_CHECKING:  # numpy, tomlkit and the worker pool load only when init runs
    import numpy as np

    from onnx_parity.models import ProbeResult
    from onnx_parity.publishing import ConfigTarget
    from onnx_parity.settings import NewModel

RANDOM_WARNING = (
    "warning: the samples of \"{name}\" are seeded random data (numpy, seed 0). Random inputs "
    "do not exercise the paths real data takes (value-dependent branches, saturating "
    "activations, padding masks, the ranges of real images or token ids): a model can pass on "
    "them and still diverge on real inputs. Replace {files} with real, preprocessed inputs, or "
    "run init again with --samples module:function --force."
)

# Runs the check of one model of the configuration; returns the exit code.
CheckOne = Callable[[Path, str], int]


@dataclass(frozen=True)
class InitPlan:
    """What init adds, and where: the checked options."""

    model: NewModel
    repo: Path  # resolved
    config: Path | None  # --config (None: found in `repo`)
    force: bool


def init_command(args: argparse.Namespace, context: Context) -> int:
    from onnx_parity.settings import new_model, weights_option

    if not args.repo.is_dir():
        raise UsageError(f"--repo {args.repo}: no such folder. Fix: pass the repository root.")
    repo = args.repo.resolve()
    model = new_model(args.factory, args.input, args.dynamic, args.name, args.samples,
                      weights_option(repo, args.weights))

    def check(config: Path, name: str) -> int:
        done = perform_check(CheckTarget(repo, config, args.out, (name,), jobs=1),
                             context.stdout, context.environ)
        return ExitCode.PASSED if done.run.passed else ExitCode.FAILED

    return run_init(InitPlan(model, repo, args.config, args.force), context, check)


def run_init(plan: InitPlan, context: Context, check: CheckOne) -> int:
    """Probe, write, warn, check: the command's steps in order; returns the check's exit code."""
    from onnx_parity.publishing import config_target, existing_models, refuse_overwrites

    target = config_target(plan.repo, plan.config)
    names = existing_models(plan.repo, target)
    planned = [plan.repo / plan.model.sample_file(item.name) for item in plan.model.inputs]
    refuse_overwrites(target, plan.model.name, names, planned, plan.force)
    files = _probed_files(plan, target, context)
    context.stdout.write(f'added model "{plan.model.name}" to {target.label}; checking it:\n\n')
    context.stdout.flush()
    if plan.model.samples_function is None:
        shown = ", ".join(path.relative_to(plan.repo).as_posix() for path in files)
        context.stderr.write(RANDOM_WARNING.format(name=plan.model.name, files=shown) + "\n\n")
        context.stderr.flush()
    return check(target.path, plan.model.name)


def _probed_files(plan: InitPlan, target: ConfigTarget, context: Context) -> dict[Path, np.ndarray]:
    """The model built in a worker, then its samples and entry written; the files written."""
    from onnx_parity.publishing import refuse_overwrites, write_entry

    probed = _probe(plan, context)
    files = {plan.repo / plan.model.sample_file(name): array
             for name, array in probed.arrays.items()}
    refuse_overwrites(target, plan.model.name, (), list(files), plan.force)
    forward = ", ".join(p.name if p.required else f"{p.name}=..." for p in probed.parameters)
    context.stdout.write(f"forward({forward})\n")
    entry = _entry(plan.model, target.header, tuple(probed.arrays))
    write_entry(plan.repo, target, plan.model.name, entry, files)
    for path, array in files.items():
        shape = "x".join(map(str, array.shape))
        context.stdout.write(f"wrote {path.relative_to(plan.repo).as_posix()} "
                             f"({shape} {array.dtype})\n")
    return files


def _probe(plan: InitPlan, context: Context) -> ProbeResult:
    from onnx_parity.pipeline import probe_in_worker
    from onnx_parity.settings import InitError

    context.stdout.write(f'onnx-parity init: building "{plan.model.factory}" in a worker\n')
    context.stdout.flush()
    probed = probe_in_worker(plan.model, plan.repo, context.environ)
    if probed.problem is not None:
        raise InitError(probed.problem)
    return probed


def _entry(model: NewModel, header: str, names: tuple[str, ...]) -> str:
    from onnx_parity.settings import model_entry

    if model.samples_function is None:
        comment = ("Added by `onnx-parity init`. The samples are seeded random data: replace "
                   "them with real,\npreprocessed inputs (random inputs do not exercise the "
                   "paths real data takes).")
    else:
        comment = f"Added by `onnx-parity init`; samples from {model.samples_function}."
    values: list[tuple[str, object]] = [
        ("name", model.name),
        ("factory", model.factory),
        ("weights", model.weights),
        ("inputs", {name: model.sample_file(name) for name in names}),
        ("dynamic-axes", {name: {str(axis): label for axis, label in axes.items()}
                          for name, axes in model.axes_for(names).items()}),
    ]
    return model_entry(header, values, comment)
