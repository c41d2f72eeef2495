"""The texts of a failing model's `<name>.repro/` folder: `repro.py` and `REPORT.md`.

Pure functions of the run's results. repro.py needs only numpy and onnxruntime (no torch, no
onnx, no onnx-parity, no repository): it runs `subgraph.onnx` on `inputs.npz` at the level the
divergence was measured at, prints the max abs diff against `expected.npz` and the tolerance
(the tool's rule: an element passes when |actual - expected| <= atol + rtol * |expected|, NaN
against NaN and equal infinities count as equal), and exits 1 when an element is outside.
REPORT.md is a bug report ready to paste: the versions, the exporter and opset, the operator
and the user's line, expected against actual with the figures, and how to run repro.py. A
generating model's failing step adds its own part to both (step_repro_text.py): repro.py then
also runs the whole decoder file on that step's inputs.
"""

from __future__ import annotations

from onnx_parity.generation_results import StepRepro
from onnx_parity.report.repro.step_repro_text import (
    figure,
    step_files,
    step_how,
    step_report,
    step_script,
    step_sentence,
    step_title,
)
from onnx_parity.results import ModelResult, Repro

GRAPH_LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
                "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
FOUND_BY = {
    "localisation": "per-node localisation (every intermediate value compared with PyTorch's)",
    "bisection": "bisection over the graph's order (each prefix's output against PyTorch's "
                 "value at that point)",
    "optimizer-bisection": "bisection over the graph's order (each prefix at the configured "
                           "optimization level against the same prefix with graph "
                           "optimizations disabled)",
    "generation-step": "the generation check alone (no node was named)",
    "file-call": "the file's own check at that call (no node was named, so the subgraph is "
                 "the whole file)",
}
# What a vision-language model's other files compute (models/vision_language/).
VISION_LANGUAGE_FILES = {"image_features": "vision", "inputs_embeds": "embedding"}
REFERENCE = {"pytorch": "PyTorch's value",
             "optimizations-disabled": "onnxruntime's value with graph optimizations disabled"}
HEAD = '''"""{doc}

Needs only numpy and onnxruntime: python repro.py (exit 1: outside the tolerance)."""
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
ATOL, RTOL = {atol!r}, {rtol!r}  # passes when |actual - expected| <= ATOL + RTOL * |expected|


def outside(name, want, got):
    want, got = want.astype(np.float64), got.astype(np.float64)
    with np.errstate(all="ignore"):
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        diff = np.where(same, 0.0, np.nan_to_num(np.abs(got - want), nan=np.inf))
        allowed = ATOL + RTOL * np.abs(np.where(np.isfinite(want), want, 0.0))
    worst, bad = int(diff.argmax()), int(np.count_nonzero(diff > allowed))
    print(f"{{name}}: max abs diff {{diff.flat[worst]:.6e}} (expected {{want.flat[worst]:.9g}}, "
          f"actual {{got.flat[worst]:.9g}}); tolerance {{ATOL:g}} + {{RTOL:g}} * |expected| = "
          f"{{allowed.flat[worst]:.3e}} there; {{bad}} of {{diff.size}} elements outside")
    return bad


def session(path, level):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


bad = 0
'''
SUBGRAPH = '''sub = session(HERE / "subgraph.onnx", ort.GraphOptimizationLevel.{level})
inputs, expected = np.load(HERE / "inputs.npz"), np.load(HERE / "expected.npz")
feed = {{item.name: inputs[f"arr_{{k}}"] for k, item in enumerate(sub.get_inputs())}}
for k, actual in enumerate(sub.run(None, feed)):
    bad += outside(sub.get_outputs()[k].name, expected[f"arr_{{k}}"], actual)
'''
TAIL = "sys.exit(1 if bad else 0)\n"


def repro_section(model: ModelResult) -> list[str]:
    """The failing model section's lines on its repro folder: what it holds, how to get it."""
    repro = model.repro
    if repro is None:
        return []
    folder = f"`{model.name}.repro/`"
    step = _included(repro.step)
    then = step_sentence(repro.step) if repro.step else ""
    if repro.omitted and step is None:
        return ["", f"**Repro:** {folder} holds only `REPORT.md`: {repro.omitted}.{then}"]
    if repro.omitted and step is not None:
        return ["", f"**Repro:** {folder} holds no subgraph: {repro.omitted}. It holds "
                f"{step_files(step)}, `repro.py` and `REPORT.md`, a bug report ready to paste. "
                f"{_download(model.name)} with `{step.model}` beside the folder, as the artifact "
                f"holds them, and only numpy and onnxruntime installed ({figure(step)}: exits "
                f"{int(step.reproduces)})."]
    inputs = ", ".join(f"`{name}`" for name in repro.inputs) or "the graph's inputs"
    verdict = (f"max abs diff {_e(repro.max_abs_diff)}, outside the tolerance: exits 1"
               if repro.reproduces else
               f"max abs diff {_e(repro.max_abs_diff)}, inside the tolerance on its own: exits 0")
    return ["", f"**Repro:** {folder} holds `subgraph.onnx` ({repro.nodes} node(s) computing "
            f"`{repro.value}` from {inputs}), `inputs.npz` and `expected.npz` ({_samples(repro)}), "
            f"`repro.py` and `REPORT.md`, a bug report ready to paste. {_download(model.name)} "
            f"with only numpy and onnxruntime installed ({verdict}).{then}"]


def _download(name: str) -> str:
    return (f"Download the workflow run's artifact (the output folder), then run "
            f"`python {name}.repro/repro.py`")


def _included(step: StepRepro | None) -> StepRepro | None:
    """The failing step, when its files are in the folder."""
    return step if step is not None and step.omitted is None else None


def repro_script(model: ModelResult, repro: Repro) -> str:
    """repro.py, numpy and onnxruntime only: the subgraph on its inputs (about 40 lines), and
    a generating model's failing step through the whole decoder file."""
    doc = f"{model.name}: `{_op(repro)}` at {_where(repro)} against {REFERENCE[repro.reference]}."
    step = _included(repro.step)
    if repro.omitted is not None and step is not None:
        doc = f"{model.name}: {step_title(step)} against PyTorch's outputs."
    parts = [HEAD.format(doc=doc.replace('"', "'"), atol=repro.atol, rtol=repro.rtol)]
    if repro.omitted is None:
        parts.append(SUBGRAPH.format(level=GRAPH_LEVELS[repro.optimization]))
    if step is not None:
        parts.append(step_script(step, GRAPH_LEVELS[step.optimization]))
    return "".join([*parts, TAIL])


def repro_report(model: ModelResult, repro: Repro, versions: dict[str, str]) -> str:
    """REPORT.md: a bug report ready to paste into an issue."""
    step = repro.step
    what = ([*_what(model, repro), "", *_figures(repro)] if step is None or repro.omitted is None
            else _stepless(model, repro, step))
    lines = [f"# {_title(repro)}", "", *what, "", *([*step_report(step), ""] if step else []),
             "## Versions", "", *_versions(model, repro, versions), "", *_how(model, repro)]
    return "\n".join(lines) + "\n"


def _title(repro: Repro) -> str:
    figure = f": max abs diff {_e(repro.max_abs_diff)}" if repro.max_abs_diff is not None else ""
    if repro.omitted and repro.step is not None:
        return f"onnxruntime differs from PyTorch at {step_title(repro.step)}{figure}"
    if repro.reference == "optimizations-disabled":
        return (f"onnxruntime's graph optimizations change the result of `{_op(repro)}` "
                f"({_where(repro)}){figure}")
    return f"onnxruntime differs from PyTorch at `{_op(repro)}` ({_where(repro)}){figure}"


def _stepless(model: ModelResult, repro: Repro, step: StepRepro) -> list[str]:
    """What a folder without a subgraph holds: the failing step alone."""
    return [f"The model `{model.name}`, exported with {model.exporter} at opset {model.opset}, "
            f"differs from PyTorch at {step_title(step)}, first in `{repro.value}`. This "
            f"folder holds no subgraph: {repro.omitted}."]


def _differs(model: ModelResult, repro: Repro) -> str:
    """Which file differs: the model's, or a vision-language model's vision or embedding file
    (named by what it computes; its exporter may not be the decoder's)."""
    part = VISION_LANGUAGE_FILES.get(repro.value) if repro.found_by == "file-call" else None
    if part is not None:
        return (f"The {part} file of the model `{model.name}` (`{model.name}.{part}.onnx`), "
                "rerun alone at the call its check failed on, differs from PyTorch.")
    return (f"The model `{model.name}`, exported with {model.exporter} at opset {model.opset}, "
            "differs from PyTorch.")


def _what(model: ModelResult, repro: Repro) -> list[str]:
    inputs = ", ".join(f"`{name}`" for name in repro.inputs) or "the graph's inputs"
    lines = [
        f"{_differs(model, repro)} The place was found by {FOUND_BY[repro.found_by]}.", "",
        f"`subgraph.onnx` holds the {repro.nodes} node(s) of the exported graph that compute "
        f"`{repro.value}` (`{_op(repro)}`) from {inputs}, with the weights they use. "
        f"`inputs.npz` holds those values as the full model computed them in onnxruntime for "
        f"{_samples(repro)} (`arr_0`, `arr_1`, ... in that order); `expected.npz` holds "
        f"{REFERENCE[repro.reference]} of `{repro.value}` for the same samples.",
    ]
    if repro.lines:
        lines += ["", "The user's code of these nodes: "
                  + ", ".join(f"`{line}`" for line in repro.lines) + "."]
    return lines


def _figures(repro: Repro) -> list[str]:
    if repro.omitted:
        return ["## Not included", "", f"The subgraph or its inputs are not in this folder: "
                f"{repro.omitted}. The figures of the full model are in the run's report."]
    verdict = ("outside the tolerance: it reproduces" if repro.reproduces
               else "inside the tolerance: it does not reproduce on its own")
    return [
        "## Expected against actual", "",
        "| | |", "|---|---|",
        f"| Max abs diff | {_e(repro.max_abs_diff)} ({verdict}) |",
        f"| Tolerance | atol {repro.atol:g} + rtol {repro.rtol:g} × \\|expected\\| |",
        f"| onnxruntime graph optimization | {repro.optimization} "
        f"(`{GRAPH_LEVELS[repro.optimization]}`) |",
        f"| Samples | {repro.samples} of the failing batch of {repro.batch_size} |",
    ]


def _versions(model: ModelResult, repro: Repro, versions: dict[str, str]) -> list[str]:
    rows = ["| | |", "|---|---|"]
    for name in ("torch", "onnx", "onnxruntime", "onnxscript", "numpy", "python",
                 "onnx-parity"):
        if name in versions:
            rows.append(f"| {name} | {versions[name]} |")
    rows += [f"| platform | {repro.platform or 'unknown'} |",
             f"| exporter | {model.exporter}, opset {model.opset} |"]
    return rows


def _how(model: ModelResult, repro: Repro) -> list[str]:
    step = _included(repro.step)
    if repro.omitted and step is None:
        return []
    lines = ["## Reproduce", "", "In an environment with only numpy and onnxruntime "
             "(no torch, no repository):", "", "```", f"python {model.name}.repro/repro.py",
             "```"]
    if repro.omitted is None:
        lines += ["", "It prints the max abs diff against `expected.npz` and the tolerance, "
                  "and exits 1 when an element is outside it."]
    return lines + (step_how(step) if step is not None else [])


def _samples(repro: Repro) -> str:
    if repro.samples < repro.batch_size:
        return f"one sample of the failing batch of {repro.batch_size} (cut to fit the folder)"
    return f"the failing batch of {repro.batch_size}"


def _op(repro: Repro) -> str:
    return (repro.op or "?").removesuffix(".default")


def _where(repro: Repro) -> str:
    return f"`{repro.file}:{repro.line}`" if repro.file else f"node output `{repro.value}`"


def _e(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2e}"
