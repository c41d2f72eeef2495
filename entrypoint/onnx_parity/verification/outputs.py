"""Outputs compared: their names, the rows of one batch size merged, and the findings they give.

Codes built here: `shape-mismatch` (output count, names or shapes), `dtype-mismatch`,
`parity-mismatch` and `nan-or-inf` (also the note for NaN/Inf inside the samples), and the
`output-layout` note (a complex or Python-number output compared in the exporter's layout).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

import numpy as np

from onnx_parity.export import ModelFacts
from onnx_parity.findings import CATALOGUE, Finding, Severity
from onnx_parity.models import OutputKind, Reference
from onnx_parity.results import OutputComparison
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.compare import Mask
from onnx_parity.verification.tracer_causes import CAUSE, explained_fix, value_warnings


def sample_notes(notes: Iterable[str]) -> list[Finding]:
    """NaN or Inf committed in the samples: compared position by position, noted."""
    return [
        Finding("nan-or-inf", f"samples: {note}; compared by the NaN rule (NaN only where "
                "PyTorch has NaN, each infinity only where PyTorch has the same).",
                severity=Severity.NOTE)
        for note in notes
    ]


def variant_nonfinite(variant: str, output: str, batch_size: int, count: int) -> Finding:
    """A deployment variant gives NaN or Inf where PyTorch's fp32 output is finite."""
    return Finding("nan-or-inf", f'{variant}: output "{output}" at batch {batch_size} holds '
                   f"{count} NaN or Inf value(s) where PyTorch's fp32 output is finite",
                   details={"variant": variant, "output": output, "batch_size": batch_size})


def own_nonfinite(output: str, steps: list[int], counts: tuple[int, int]) -> Finding:
    """PyTorch itself computes NaN or Inf in a generating model's `output` at `steps` and
    onnxruntime the same: the file is faithful, but a token picked among them compares nothing."""
    nan, inf = counts
    return Finding(
        "nan-or-inf", f'output "{output}": PyTorch itself computes {nan} NaN and {inf} '
        f"infinite value(s) at generation step {steps[0]} ({len(steps)} of the steps hold "
        "some), and onnxruntime the same values: the file is faithful to the model, but the "
        "greedy tokens picked among NaN or infinite logits say nothing",
        severity=Severity.WARNING, details={"output": output, "step": steps[0]},
        fix="The model's own numbers overflow or divide by zero (PyTorch computes them without "
            "any export): find the layer that first produces them (its weights, a log or a "
            "division at 0, the range of float16) and fix the model.")


def output_names(spec: ModelSpec, reference: Reference,
                 onnx_names: tuple[str, ...]) -> tuple[str, ...]:
    """The configured names, else the places in forward's returned structure, else ONNX's."""
    if spec.outputs:
        return spec.outputs
    if reference.names == (None,):
        return ("output",)  # forward returned one tensor
    names = tuple(name for name in reference.names if name)
    if len(names) == len(reference.names) and len(set(names)) == len(names):
        return names
    return onnx_names


def output_masks(spec: ModelSpec, feed: Mapping[str, np.ndarray]) -> dict[str, Mask]:
    """`compare-mask`: output -> where it is compared, the mask input's axes laid along the
    output's axes of the same `dynamic-axes` name. An output whose mask has an unnamed axis
    longer than 1 gets none (every element compared: a mask never hides what it cannot place)."""
    masks: dict[str, Mask] = {}
    for output, name in spec.compare_mask.items():
        if name not in feed:
            continue
        labels = spec.dynamic_axes.get(name, {})
        along = {label: axis for axis, label in spec.dynamic_axes.get(output, {}).items()}
        values = feed[name]
        unnamed = tuple(axis for axis in range(values.ndim) if axis not in labels)
        if any(values.shape[axis] != 1 for axis in unnamed) or any(
                labels[axis] not in along for axis in range(values.ndim) if axis in labels):
            continue
        axes = tuple(along[labels[axis]] for axis in range(values.ndim) if axis in labels)
        masks[output] = Mask(name, values.squeeze(axis=unnamed), axes)
    return masks


@dataclasses.dataclass(frozen=True)
class Relaid:
    """An output compared in the layout the exporter gave its kind (compare.as_exported)."""

    output: str  # its name in the report
    onnx_output: str  # the ONNX model's name for it
    kind: OutputKind  # "complex" or "number"
    torch_dtype: str  # PyTorch's dtype (complex64) or the Python number's ("int64": an int)
    onnx_dtype: str


def layout_notes(relaid: Iterable[Relaid]) -> list[Finding]:
    """One note per output compared in the exporter's layout, from the first cut that did."""
    first: dict[str, Relaid] = {}
    for r in relaid:
        first.setdefault(r.output, r)
    return [_layout_note(r) for r in first.values()]


# The dtype a Python number has in PyTorch's outputs (models/reference.py) -> its type.
_PYTHON_TYPE = {"int64": "int", "float64": "float", "bool": "bool"}


def _layout_note(r: Relaid) -> Finding:
    if r.kind == "complex":
        text = (f'output "{r.output}" is a {r.torch_dtype} tensor in PyTorch; the ONNX output '
                f'"{r.onnx_output}" holds it as {r.onnx_dtype} with a last axis of 2 (real, '
                "imaginary), so it was compared with `torch.view_as_real` of PyTorch's value")
    else:
        python = _PYTHON_TYPE.get(r.torch_dtype, r.torch_dtype)
        text = (f'output "{r.output}" is a Python {python} in PyTorch; the ONNX output '
                f'"{r.onnx_output}" holds it in a one-element tensor ({r.onnx_dtype}), so it '
                "was compared as a 0-d value")
    return Finding("output-layout", text, details={"output": r.output})


def count_mismatch(size: int, torch_count: int, onnx_names: tuple[str, ...]) -> Finding:
    """One per cut; the cuts and batch sizes that repeat it merge into one (repeats.py)."""
    return Finding(
        "shape-mismatch",
        f"at batch {size} PyTorch returned {torch_count} tensor(s) and Python number(s) but "
        f"the ONNX model has {len(onnx_names)} output(s) {list(onnx_names)}",
        fix="Return a flat tuple of tensors from forward: the exporters drop None and "
            "other values that are neither tensors nor numbers, so the two sides count the "
            "outputs differently.",
        details={"batch_size": size},
    )


def layout_mismatch(missing: list[str], onnx_names: tuple[str, ...]) -> Finding:
    """A generating model's file lacks outputs of the decoder-with-past layout (`generate`)."""
    return Finding(
        "shape-mismatch",
        f"the exported decoder has no output(s) {missing}, which a decoding step feeds back or "
        f"reads (its outputs: {list(onnx_names)})",
        fix="Export the decoder with past in optimum's layout: outputs `logits`, then "
            "`present.N.key` / `present.N.value` for every layer N (docs/generation.md).")


def unknown_axis_name(name: str, facts: ModelFacts, key: str = "dynamic-axes") -> Finding:
    return Finding(
        "shape-mismatch",
        f'`{key}` names "{name}", but the exported model has inputs '
        f"{sorted(facts.inputs)} and outputs {sorted(facts.outputs)}",
        fix=f"Name the outputs with `outputs = [...]`, or correct the name in `{key}`.",
    )


def merge_cuts(rows: list[OutputComparison]) -> list[OutputComparison]:
    """The cuts of one batch size as one row per output: worst figures, counts summed."""
    merged: list[OutputComparison] = []
    for output in dict.fromkeys(row.output for row in rows):
        same = [row for row in rows if row.output == output]
        worst = next((row for row in same if not row.passed), same[0])
        atols = [row.smallest_passing_atol for row in same]
        known_atols = [atol for atol in atols if atol is not None]
        merged.append(dataclasses.replace(
            worst,
            max_abs_diff=_max_known(row.max_abs_diff for row in same),
            max_rel_diff=_max_known(row.max_rel_diff for row in same),
            mismatched=sum(row.mismatched for row in same),
            total=sum(row.total for row in same),
            smallest_passing_atol=max(known_atols) if len(known_atols) == len(atols) else None,
            passed=all(row.passed for row in same),
            tolerance_share=_max_known(row.tolerance_share for row in same),
            left_out=sum(row.left_out for row in same),
        ))
    return merged


def _max_known(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def comparison_findings(comparisons: list[OutputComparison], nonfinite: set[str],
                        spec: ModelSpec, drifted: frozenset[str] = frozenset(),
                        explained: list[Finding] | None = None) -> list[Finding]:
    """`drifted` outputs have an optimizer-drift instead; `explained` are the model's other
    findings, of which a baked branch, a frozen dimension or a TracerWarning of a value the
    trace kept constant explains a mismatch."""
    cause = _cause(explained or [])
    findings: list[Finding] = []
    for output in dict.fromkeys(c.output for c in comparisons):
        rows = [c for c in comparisons if c.output == output]
        findings += _output_findings(output, rows, output in nonfinite, spec,
                                     parity=output not in drifted, cause=cause)
    return findings


def _output_findings(output: str, rows: list[OutputComparison], nonfinite: bool,
                     spec: ModelSpec, parity: bool = True,
                     cause: Cause | None = None) -> list[Finding]:
    findings: list[Finding] = []
    shapes = [c for c in rows if c.torch_shape != c.onnx_shape]
    if shapes:
        findings.append(shape_finding(output, shapes))
    dtypes = [c for c in rows if c.torch_dtype != c.onnx_dtype]
    if dtypes:
        c = dtypes[0]
        findings.append(Finding("dtype-mismatch", f'output "{output}": PyTorch {c.torch_dtype}, '
                                f"onnxruntime {c.onnx_dtype}"))
    failing = [c for c in rows if not c.passed and c.torch_shape == c.onnx_shape]
    if failing and (parity or nonfinite):
        findings.append(_parity_finding(output, failing, nonfinite, spec, cause))
    return findings


def shape_finding(output: str, rows: list[OutputComparison]) -> Finding:
    """One finding for every batch size the output's shapes differ at: 'PyTorch [B, 10],
    onnxruntime [1, 10] at batches 4, 8' when each side's shapes follow one pattern."""
    batches = [c.batch_size for c in rows]
    torch_side = _pattern([c.torch_shape for c in rows], batches)
    onnx_side = _pattern([c.onnx_shape for c in rows], batches)
    if torch_side is not None and onnx_side is not None:
        text = f"PyTorch {_shown(torch_side)}, onnxruntime {_shown(onnx_side)} {_at(batches)}"
        if "B" in (*torch_side, *onnx_side):
            text += " (B: the batch size)"
    else:
        groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = {}
        for c in rows:
            groups.setdefault((c.torch_shape, c.onnx_shape), []).append(c.batch_size)
        text = "; ".join(f"PyTorch {list(t)}, onnxruntime {list(o)} {_at(sizes)}"
                         for (t, o), sizes in groups.items())
    return Finding("shape-mismatch", f'output "{output}": {text}',
                   fix=_shape_fix(torch_side, onnx_side, len(rows)),
                   details={"output": output, "batches": batches})


def _pattern(shapes: list[tuple[int, ...]], batches: list[int]) -> tuple[str, ...] | None:
    """Each axis as its one size, or "B" where it is the batch size at every batch; None when
    the shapes follow no such pattern."""
    if len({len(shape) for shape in shapes}) != 1:
        return None
    axes: list[str] = []
    for values in zip(*shapes, strict=True):
        if len(set(values)) == 1:
            axes.append(str(values[0]))
        elif list(values) == batches:
            axes.append("B")
        else:
            return None
    return tuple(axes)


def _shape_fix(torch_side: tuple[str, ...] | None, onnx_side: tuple[str, ...] | None,
               batch_count: int) -> str | None:
    """The fix the shapes point to; None (the catalogue's) when they point to nothing."""
    if torch_side is None or onnx_side is None or batch_count < 2:
        return None
    fixed = next((axis for axis, (t, o) in enumerate(zip(torch_side, onnx_side, strict=False))
                  if t == "B" and o != "B"), None)
    if fixed is not None:
        return (f"The exported graph fixes axis {fixed} of this output at {onnx_side[fixed]} "
                "while PyTorch's follows the batch size: remove hard-coded sizes and sizes read "
                "as Python numbers from forward (`int(x.shape[0])`; `x.view(1, -1)` -> "
                "`x.flatten(1)`), and declare the inputs' batch axis in `dynamic-axes` if it "
                "is not.")
    return ("The shapes differ the same way at every batch size, so the batch is not the "
            "cause: check that `outputs` lists the names in the order forward returns its "
            "tensors, and compare forward's return value with the exported model's outputs.")


def _shown(pattern: tuple[str, ...]) -> str:
    return "[" + ", ".join(pattern) + "]"


def _at(batches: list[int]) -> str:
    return (f"at batch {batches[0]}" if len(batches) == 1
            else "at batches " + ", ".join(str(size) for size in batches))


@dataclasses.dataclass(frozen=True)
class Cause:
    """What explains a mismatch: the code recorded as `explained_by`, and the fix."""

    code: str
    fix: str


def _cause(findings: list[Finding]) -> Cause | None:
    """The first finding that explains a mismatch by itself; else the TracerWarnings of values
    the trace kept constant (also where that first finding is explained by them)."""
    first = next((f for f in findings if CATALOGUE[f.code].explains_mismatch), None)
    warnings = value_warnings(findings)
    if warnings and (first is None or first.details.get("explained_by") == CAUSE):
        return Cause(CAUSE, explained_fix(warnings, "The mismatch"))
    return Cause(first.code, _explained_fix(first)) if first else None


def _parity_finding(output: str, failing: list[OutputComparison], nonfinite: bool,
                    spec: ModelSpec, cause: Cause | None) -> Finding:
    parts = [describe(c, spec, tolerance=cause is None) for c in failing]
    return Finding("nan-or-inf" if nonfinite else "parity-mismatch",
                   f'output "{output}" ' + "; ".join(parts),
                   fix=cause.fix if cause else None,
                   details={"batches": [c.batch_size for c in failing], "output": output,
                            **({"explained_by": cause.code} if cause else {})})


_CAUSES = {"data-dependent-branch": "the Python branch on tensor values",
           "shape-assumption": "what the export assumed of a declared dimension",
           "length-mismatch": "the length the graph computes for",
           "nondeterministic-model": "the random values drawn inside forward"}


def _explained_fix(cause: Finding) -> str:
    where = f" at {cause.file}:{cause.line}" if cause.file else ""
    what = _CAUSES.get(cause.code, "the frozen dimension")
    return (f"The mismatch follows from {what}{where} (`{cause.code}` above): fix that first. "
            "Do not raise the tolerance: no atol makes an export that computes one branch or "
            "one size right for the others.")


def describe(c: OutputComparison, spec: ModelSpec, tolerance: bool = True) -> str:
    """The figures of one failing row; `tolerance` adds the smallest atol that would pass
    (left out when a baked branch or frozen size explains the mismatch)."""
    needed = ("no atol passes (NaN/Inf or an exact dtype where values differ)"
              if c.smallest_passing_atol is None
              else f"smallest passing atol {c.smallest_passing_atol:.3g}")
    return (f"at batch {c.batch_size}: max abs diff {_g(c.max_abs_diff)} > atol {spec.atol:g} "
            f"(rtol {spec.rtol:g}); {c.mismatched} of {c.total} elements "
            f"({c.mismatched_percent:.1f}%) outside" + (f"; {needed}" if tolerance else "")
            + left_out_text(c))


def left_out_text(c: OutputComparison) -> str:
    """'; 12 elements left out where attention_mask is 0 (compare-mask)', or nothing."""
    if not c.left_out:
        return ""
    why = "padding" if "step" in c.dimensions else "compare-mask"  # generation: padding
    return f"; {c.left_out} element(s) left out where {c.left_out_by} is 0 ({why})"


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"
