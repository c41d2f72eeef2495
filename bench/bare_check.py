"""The bare hand-written check that onnx-parity is measured against.

What a careful engineer would write without onnx-parity: import torch and onnxruntime, build
each model from its factory and weights, export it once with the dynamo exporter (dynamic
batch as declared in onnx-parity.toml), run onnxruntime once on the committed sample at its
own batch size, and print the largest absolute difference. Nothing more: no second batch
size, no checker, no opset or axis review, no fallback exporter, no report.

    python bench/bare_check.py --repo examples/seed-failures --model small-cnn --model spectrum

It reads the models' factory, weights, inputs and dynamic axes from onnx-parity.toml so it
checks exactly what onnx-parity checks. Exit 0 when every difference is within the model's
atol (default 1e-5), 1 otherwise. Phase timings go to stdout as well, for the benchmark's
profile; they cost a few perf_counter calls.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse
import importlib
import sys
import tomllib
from pathlib import Path

import numpy as np
import onnxruntime
import torch

IMPORTED = time.perf_counter()
DEFAULT_ATOL = 1e-5


def build(entry: dict, repo: Path) -> torch.nn.Module:
    module_name, _, attribute = entry["factory"].partition(":")
    model = getattr(importlib.import_module(module_name), attribute)()
    if "weights" in entry:
        model.load_state_dict(torch.load(repo / entry["weights"], weights_only=True))
    return model.eval()


def export(model: torch.nn.Module, entry: dict, sample: torch.Tensor) -> bytes:
    (name,) = entry["inputs"]
    axes = entry.get("dynamic-axes", {}).get(name)
    shapes = {name: {int(axis): label for axis, label in axes.items()}} if axes else None
    program = torch.onnx.export(model, (sample,), dynamo=True, input_names=[name],
                                dynamic_shapes=shapes, verbose=False)
    assert program is not None  # the dynamo exporter always returns its program
    data: bytes = program.model_proto.SerializeToString()
    return data


def check(entry: dict, repo: Path) -> float:
    started = time.perf_counter()
    torch.manual_seed(0)
    model = build(entry, repo)
    (path,) = entry["inputs"].values()
    array = np.load(repo / path)
    sample = torch.from_numpy(array)
    model_bytes = export(model, entry, sample)
    exported = time.perf_counter()
    session = onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: array})
    with torch.no_grad():
        expected = model(sample).numpy()
    diff = float(np.max(np.abs(got - expected)))
    print(f"{entry['name']}: max abs diff {diff:.3g} at batch {array.shape[0]} "
          f"(build+export {exported - started:.2f} s, "
          f"onnxruntime+compare {time.perf_counter() - exported:.2f} s)", flush=True)
    return diff


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--model", action="append", required=True, metavar="NAME")
    parser.add_argument("--config", type=Path, default=None,
                        help="configuration file (default: onnx-parity.toml in --repo)")
    args = parser.parse_args()
    repo = args.repo.resolve()
    sys.path.insert(0, str(repo))
    config_path = args.config or repo / "onnx-parity.toml"
    config = tomllib.loads(config_path.read_text(encoding="utf-8"))
    entries = {entry["name"]: entry for entry in config["model"]}
    print(f"imports: {IMPORTED - STARTED:.2f} s", flush=True)
    worst = {name: check(entries[name], repo) for name in args.model}
    print(f"checked: {time.perf_counter() - STARTED:.2f} s since start, before interpreter exit",
          flush=True)
    failed = [name for name, diff in worst.items()
              if not diff <= entries[name].get("atol", DEFAULT_ATOL)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
