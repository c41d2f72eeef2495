"""`onnx-parity init`: from a model and no configuration to a checked `[[model]]` entry.

In order: the options are checked (settings/init_request.py); the configuration to add to is
found and must load; nothing may be overwritten without --force; the model is built in a
worker, its forward read, its inputs checked against it and its samples made
(pipeline/new_model.py); the samples and the entry are written (publishing/init_files.py);
then the model is checked like any other and the check's exit code is the command's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from onnx_parity.pipeline.new_model import probe_in_worker
from onnx_parity.publishing.init_files import (
    config_target,
    existing_models,
    refuse_overwrites,
    write_entry,
)
from onnx_parity.settings.config_entry import model_entry
from onnx_parity.settings.init_request import InitError, NewModel

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
class InitStreams:
    stdout: TextIO
    stderr: TextIO


def run_init(model: NewModel, repo: Path, config: Path | None, force: bool,
             environ: Mapping[str, str], check: CheckOne, streams: InitStreams) -> int:
    target = config_target(repo, config)
    names = existing_models(repo, target)
    planned = [repo / model.sample_file(item.name) for item in model.inputs]
    refuse_overwrites(target, model.name, names, planned, force)
    say = streams.stdout
    say.write(f'onnx-parity init: building "{model.factory}" in a worker\n')
    say.flush()
    probed = probe_in_worker(model, repo, environ)
    if probed.problem is not None:
        raise InitError(probed.problem)
    files = {repo / model.sample_file(name): array for name, array in probed.arrays.items()}
    refuse_overwrites(target, model.name, (), list(files), force)
    forward = ", ".join(p.name if p.required else f"{p.name}=..." for p in probed.parameters)
    say.write(f"forward({forward})\n")
    write_entry(repo, target, model.name, _entry(model, target.header, tuple(probed.arrays)),
                files)
    for path, array in files.items():
        shape = "x".join(map(str, array.shape))
        say.write(f"wrote {path.relative_to(repo).as_posix()} ({shape} {array.dtype})\n")
    say.write(f'added model "{model.name}" to {target.label}; checking it:\n\n')
    say.flush()
    if model.samples_function is None:
        shown = ", ".join(path.relative_to(repo).as_posix() for path in files)
        streams.stderr.write(RANDOM_WARNING.format(name=model.name, files=shown) + "\n\n")
        streams.stderr.flush()
    return check(target.path, model.name)


def _entry(model: NewModel, header: str, names: tuple[str, ...]) -> str:
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
