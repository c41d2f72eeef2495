"""The texts of a generating model's failing step in its `<name>.repro/` folder (results.Repro
.step): repro.py's part that runs the whole decoder file on `step_inputs.npz`, REPORT.md's
section, and the comment's sentence. Pure functions of the run's results.

repro.py finds the decoder file beside the folder, as the output folder (the run's artifact)
holds them, runs it at the level the check ran it, and compares each output PyTorch gave at
that step with the tool's rule on the positions the check compared (`compared` in
`step_expected.npz`: the attention mask's positions, along the logits' sequence axis or a
present's total_sequence axis; an output it does not fit is compared whole, as the check does).
"""

from __future__ import annotations

from onnx_parity.generation_results import StepRepro

STEP = '''# Generation step {step} (past length {past}): the whole decoder file on its inputs there.
DECODER = HERE.parent / "{model}"  # beside this folder, as the run's output folder holds it
if not DECODER.is_file():
    print(f"{{DECODER}} is not there: put {{DECODER.name}} beside {{HERE.name}}/ to run it")
    sys.exit(2)
decoder = session(DECODER, ort.GraphOptimizationLevel.{level})
feed, want = np.load(HERE / "step_inputs.npz"), np.load(HERE / "step_expected.npz")
names = [item.name for item in decoder.get_outputs()]
ran = decoder.run(None, {{item.name: feed[item.name] for item in decoder.get_inputs()}})
got = dict(zip(names, ran))
for name in (name for name in want.files if name in got):  # `compared`: (batch, total_sequence)
    axis, value = (1 if name == "logits" else 2), got[name]
    if value.ndim == 4 and want[name].shape[axis] < value.shape[axis]:  # a sliding window's
        value = value[:, :, -want[name].shape[axis]:]  # cache in PyTorch: its last positions
    kept = want["compared"][:, -value.shape[axis]:]
    shape = [len(kept)] + [kept.shape[1] if a == axis else 1 for a in range(1, value.ndim)]
    keep = (np.broadcast_to(kept.reshape(shape), value.shape) if kept.shape[1] == value.shape[axis]
            else np.ones(value.shape, dtype=bool))  # the check compares such an output whole
    bad += outside(f"step {step} {{name}}", want[name][keep], value[keep])
'''


def step_script(step: StepRepro, level: str) -> str:
    """repro.py's part for the failing step (its head defines `outside`, `session`, `bad`)."""
    return STEP.format(step=step.step, past=step.past_length, model=step.model, level=level)


def step_title(step: StepRepro) -> str:
    return f"{_at(step)} of `{step.model}`"


def _at(step: StepRepro) -> str:
    return f"generation step {step.step} (past length {step.past_length})"


def step_sentence(step: StepRepro) -> str:
    """The comment's sentence on the step's files, after what the folder's subgraph holds."""
    if step.omitted:
        return f" The failing {_at(step)} is not included: {step.omitted}."
    return (f" It also holds {step_files(step)}: `repro.py` runs `{step.model}` on them when "
            f"it sits beside the folder, as in the artifact ({figure(step)}).")


def step_files(step: StepRepro) -> str:
    return (f"`step_inputs.npz`, the decoder file's whole feed at generation step {step.step} "
            f"with a past of {step.past_length}, and `step_expected.npz`, PyTorch's outputs "
            f"there ({_rows(step)})")


def figure(step: StepRepro) -> str:
    where = "outside" if step.reproduces else "inside"
    return f"max abs diff {_e(step.max_abs_diff)}, {where} the tolerance"


def step_report(step: StepRepro) -> list[str]:
    """REPORT.md's section on the failing step."""
    lines = ["## The failing generation step", ""]
    if step.omitted:
        return [*lines, f"The inputs of {step_title(step)} are not in this folder: "
                f"{step.omitted}. The figures of every step are in the run's report."]
    inputs = ", ".join(f"`{name}`" for name in step.inputs)
    outputs = ", ".join(f"`{name}`" for name in step.outputs)
    return [
        *lines,
        f"`step_inputs.npz` holds the whole feed of the decoder file `{step.model}` at "
        f"{_at(step)}, keyed by its input names ({inputs}), as onnxruntime was fed them "
        "(the past is onnxruntime's own presents of the step before), for "
        f"{_rows(step)}. `step_expected.npz` holds PyTorch's outputs at that step ({outputs}) "
        "and `compared`: 1 where the check compared a position (padded positions and rows "
        "stopped at the end-of-sequence token are left out).", "",
        "| | |", "|---|---|",
        f"| Max abs diff (whole decoder file) | {_e(step.max_abs_diff)} ({_verdict(step)}) |",
        f"| Step | {step.step} (past length {step.past_length}; step 0 is the prompt pass) |",
        f"| onnxruntime graph optimization | {step.optimization} |",
    ]


def step_how(step: StepRepro) -> list[str]:
    """REPORT.md's lines on running the step."""
    if step.omitted:
        return []
    return ["", f"With `{step.model}` beside the folder (as the run's output folder holds "
            f"them; its `.onnx.data` too when it has one), repro.py runs {step_title(step)} on "
            "`step_inputs.npz` and compares each output with `step_expected.npz` where the "
            "check compared it; without the file it says where to put it and exits 2."]


def _rows(step: StepRepro) -> str:
    rows = ", ".join(map(str, step.rows))
    if len(step.rows) < step.batch_size:
        return (f"prompt row {rows}, the failing row of its batch of {step.batch_size} (cut to "
                "fit the folder)")
    return f"prompt rows {rows}, the failing batch"


def _verdict(step: StepRepro) -> str:
    return ("outside the tolerance: it reproduces" if step.reproduces
            else "inside the tolerance when run again")


def _e(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2e}"
