"""Each finding code's severity, meaning, standard fix and policy: the catalogue.

The single place they live, so the report, the PR comment, the annotations and the cache
always say the same thing. findings.py owns this module and re-exports `CATALOGUE`; it imports
nothing of findings.py.
"""

from __future__ import annotations

from onnx_parity.finding_codes import Code, CodeInfo, Severity

CATALOGUE: dict[Code, CodeInfo] = {
    "parity-mismatch": CodeInfo(
        Severity.ERROR,
        "onnxruntime's outputs differ from PyTorch's beyond the tolerance",
        "Look for an operator whose ONNX decomposition differs (the report names the output "
        "and batch size); if the drift is acceptable, raise `atol`/`rtol` for this model to the "
        "smallest passing atol shown.",
        localised=True,
    ),
    "frozen-dimension": CodeInfo(
        Severity.ERROR,
        "a dimension meant to vary is fixed in the exported model",
        "Declare the axis in `dynamic-axes` and remove hard-coded sizes from forward "
        "(e.g. `x.view(1, -1)` -> `x.flatten(1)` or `x.view(x.shape[0], -1)`).",
        explains_mismatch=True,
    ),
    "data-dependent-branch": CodeInfo(
        Severity.ERROR,
        "a Python branch on tensor values: the exported model implements one branch only",
        "Rewrite the branch as tensor ops (`torch.where(cond, a, b)`) or `torch.cond`; if the "
        "branch is constant for deployed inputs, explain it in `[[model.allow-warnings]]`.",
        explains_mismatch=True,
    ),
    "tracer-warning": CodeInfo(
        Severity.ERROR,
        "the TorchScript tracer treated a value as a constant",
        "Remove the Python value conversion at the line shown (`.item()`, `int(t)`, `len(t)`), "
        "or explain it in `[[model.allow-warnings]]` with a reason.",
    ),
    "unsupported-operator": CodeInfo(
        Severity.ERROR,
        "the exporter has no ONNX translation for an operator",
        "Try the other exporter (`exporter = \"dynamo\"` handles e.g. `aten::fft_rfft`), a newer "
        "`opset`, or rewrite the operation with supported ops.",
    ),
    "exporter-fallback": CodeInfo(
        Severity.NOTE,
        "the first exporter failed and the next one in the list was used",
        "Pin `exporter` to the one that works to make the choice explicit, or fix the first "
        "exporter's error shown.",
    ),
    "opset-mismatch": CodeInfo(
        Severity.ERROR,
        "the exported model's opset is not the one asked for",
        "Set `opset` to the version the exporter actually produces (shown), or use the other "
        "exporter; dynamo raises opsets below 18 to 18.",
    ),
    "onnx-checker": CodeInfo(
        Severity.ERROR,
        "onnx.checker rejects the exported model",
        "The exporter produced an invalid model; try another `opset` (dynamo at 17 emits "
        "attributes 17 does not know) or the other exporter.",
    ),
    "shape-mismatch": CodeInfo(
        Severity.ERROR,
        "outputs differ in count, names or shape between PyTorch and onnxruntime",
        "Check `outputs` in the configuration and the model's return value; a changed shape at "
        "another batch size usually means a frozen dimension.",
    ),
    "dtype-mismatch": CodeInfo(
        Severity.ERROR,
        "an output's dtype differs between PyTorch and onnxruntime",
        "Cast explicitly in forward (`.float()`, `.long()`) so both sides agree, or export at an "
        "opset that supports the dtype.",
    ),
    "nan-or-inf": CodeInfo(
        Severity.ERROR,
        "NaN or Inf on one side where the other side has another value (a finite number, the "
        "opposite infinity, or NaN against Inf)",
        "Look for a division, log or sqrt whose ONNX form differs at the edge of its domain; "
        "clamp the input. NaN in samples is noted and compared position by position.",
        localised=True,
    ),
    "training-mode": CodeInfo(
        Severity.NOTE,
        "the factory returned a model in training mode; it was switched to eval()",
        "Return `model.eval()` from the factory so exports elsewhere get eval semantics too "
        "(dynamo keeps an active Dropout otherwise).",
    ),
    "golden-mismatch": CodeInfo(
        Severity.ERROR,
        "onnxruntime's output differs from a committed golden output",
        "The committed `output_K.pb` no longer matches: regenerate it if the change is intended, "
        "otherwise find what changed the model's numbers.",
    ),
    "load-error": CodeInfo(
        Severity.ERROR,
        "the model or its samples could not be loaded",
        "Fix the factory, weights or sample file named in the message.",
        cached=False,
    ),
    "export-error": CodeInfo(
        Severity.ERROR,
        "every configured exporter failed",
        "Read the exporter's message; try the other exporter or another opset.",
    ),
    "runtime-error": CodeInfo(
        Severity.ERROR,
        "PyTorch or onnxruntime failed to run the model on the samples",
        "Read the runtime's message; it names the node and the shapes involved.",
    ),
    "crash": CodeInfo(
        Severity.ERROR,
        "the model's worker process died (a native crash: segfault or abort)",
        "Read the worker's last log lines, kept as this finding's `evidence` in report.json "
        "(the whole log is `NAME.log` in the output folder): they show the step that crashed. "
        "Run `onnx-parity check --model NAME --jobs 1` locally to reproduce it alone.",
        cached=False,
    ),
    "timeout": CodeInfo(
        Severity.ERROR,
        "the model did not finish within `timeout-seconds`",
        "Raise `timeout-seconds` for this model, or use smaller samples or fewer batch sizes.",
        cached=False,
    ),
    "variant-degraded": CodeInfo(
        Severity.ERROR,
        "a deployment variant (int8, fp16, int4) misses `min-sqnr-db`, `min-top1-agreement` "
        "or `max-perplexity-ratio`",
        "Look at the tensors named as losing the most: keep that layer in float (e.g. exclude "
        "its nodes from quantization), calibrate `int8-static` on more real samples or with "
        "`calibration = \"entropy\"`/`\"percentile\"`, or rescale the outlier channel; "
        "if the loss is acceptable, lower the threshold.",
    ),
    "fp16-overflow": CodeInfo(
        Severity.ERROR,
        "an fp32 activation on the samples is outside float16's range (|x| > 65504)",
        "Scale the activation down at the line shown (normalise the input, move a large "
        "constant factor after a reduction) or keep that part of the graph in float32.",
    ),
    "int4-token-difference": CodeInfo(
        Severity.NOTE,
        "an int4 variant's greedy token differs from PyTorch fp32's; decoded again at "
        "MatMulNBits `accuracy_level` 0, the cause is named: the 4-bit weights or the kernel's "
        "int8 activations",
        "When the int8 activations chose it (level 0 agrees), set `accuracy-level = 0` in "
        "`[model.int4]` for fp32 activations (slower on CPU) if the token matters; when the "
        "4-bit weights did, try `block-size = 16` or `symmetric = false`, keep the layer in "
        "float, or accept it while `max-perplexity-ratio` and `min-top1-agreement` hold.",
    ),
    "variant-error": CodeInfo(
        Severity.ERROR,
        "a deployment variant could not be built or run (the fp32 verdict stands)",
        "Read onnxruntime's message: an operator without an int8 or fp16 kernel, or a "
        "calibration that failed; drop that variant from `variants` or change the operator.",
    ),
    "out-of-memory": CodeInfo(
        Severity.ERROR,
        "the model's worker went past `memory-limit-mb`",
        "Raise `memory-limit-mb` for this model, or use smaller samples or batch sizes.",
        cached=False,
    ),
    "optimizer-drift": CodeInfo(
        Severity.ERROR,
        "the outputs match PyTorch with onnxruntime's graph optimizations disabled, but not at "
        "the configured `runtime-optimization`: the drift comes from onnxruntime's rewrites",
        "Set the graph optimization level the finding names in the deployment "
        "(`SessionOptions.graph_optimization_level`) and as `runtime-optimization`, or accept "
        "the drift with the tolerance shown.",
    ),
    "shape-not-checked": CodeInfo(
        Severity.NOTE,
        "a length of a declared dynamic axis was skipped: PyTorch itself cannot run the model "
        "at it",
        "Set `axis-sizes` to sizes forward accepts (and the samples can give), e.g. "
        "`axis-sizes = { input_ids = { 1 = [8, 16] } }`.",
    ),
    "positional-binding": CodeInfo(
        Severity.NOTE,
        "no name in `inputs` is a parameter of forward: the samples were bound by position, "
        "in the order the configuration lists them",
        "Nothing to do if the order is right; name the inputs after forward's parameters to "
        "bind them by name.",
    ),
    "drift-regression": CodeInfo(
        Severity.WARNING,
        "the model still passes, but its max abs diff grew more than `drift-warning-ratio` "
        "times over the baseline (and above atol / 10)",
        "Find what this change did to the model or its export (the comparison table names the "
        "output and batch size); if the new figure is expected, raise `drift-warning-ratio` "
        "for this model.",
    ),
    "output-layout": CodeInfo(
        Severity.NOTE,
        "an output PyTorch returns as a complex tensor or a Python number was compared in the "
        "layout the exporter gave it: (real, imaginary) pairs on a last axis of 2, or a 0-d "
        "tensor",
        "Nothing to do if the code that runs the ONNX model reads the output that way "
        "(`torch.view_as_complex` or `x[..., 0] + 1j * x[..., 1]` for a complex output, "
        "`.item()` for a number).",
    ),
    "shape-assumption": CodeInfo(
        Severity.ERROR,
        "the export assumed something of a declared dynamic dimension (a multiple, a bound, a "
        "constant shape) that the ONNX file does not check; an error when a length that breaks "
        "the assumption ran and failed there",
        "Make forward handle every length (pad unconditionally, or `torch.cond`), or declare "
        "the constraint: set `axis-sizes` to lengths that satisfy it and document the "
        "requirement for the code that runs the ONNX model.",
        explains_mismatch=True,
    ),
    "length-mismatch": CodeInfo(
        Severity.ERROR,
        "a declared axis the exported model keeps symbolic fails in onnxruntime, or gives other "
        "outputs than PyTorch, at a length other than the export's: the graph computes for the "
        "export's length only",
        "Find where forward (or the library code the evidence quotes) reads the length as a "
        "Python number (a window or padding size, `range(x.shape[1])`, `int(x.size(1))`) and "
        "compute it with tensor ops; if the model is only meant for some lengths, list them in "
        "`axis-sizes`.",
        explains_mismatch=True,
    ),
    "nondeterministic-model": CodeInfo(
        Severity.ERROR,
        "PyTorch itself gives other outputs when forward runs twice on the same batch (random "
        "values drawn inside forward): no parity can be claimed for those outputs",
        "Take the noise as an input of forward (a tensor the caller samples), or sample it "
        "outside forward; seeding does not help, since the exported random operators do not "
        "follow PyTorch's generator.",
        explains_mismatch=True,
    ),
    "runtime-unsupported": CodeInfo(
        Severity.ERROR,
        "onnxruntime's provider has no kernel for an operator at the dtype the model computes "
        "in (onnxruntime's CPU provider runs bfloat16 `Cast` and `Concat` only), so the model "
        "cannot run there",
        'Set `dtype = "float32"` to check the model in float32 on the CPU (the factory\'s '
        'model and its float samples are cast before export), with `variants = ["fp16"]` to '
        "check half precision too; or check it where onnxruntime's provider has the kernel.",
    ),
    "bundle-error": CodeInfo(
        Severity.ERROR,
        "a runtime's bundle folder (`bundle`) could not be written: onnxruntime-genai's model "
        "builder failed, or the model is not a decoder-only transformers model",
        "Read the reason in the message; the decoder file's own check is unaffected. Remove the "
        "runtime from `bundle` for a model it does not support.",
    ),
    "generation-mismatch": CodeInfo(
        Severity.ERROR,
        "greedy decoding picks another token in onnxruntime than in PyTorch (`generate`); "
        "when PyTorch's top-2 margin there is below the tolerance it is a near-tie, a warning",
        "Look at the step named: a mismatch from the first one-token step on usually means a "
        "position, mask or cache length computed as a Python number during export (baked by "
        "TorchScript) or a branch only the one-token step takes; compare the per-step logit "
        "drift in the report. A near-tie is numeric noise deciding between two equal tokens.",
    ),
    "position-threshold": CodeInfo(
        Severity.ERROR,
        "a generating model differs from PyTorch across a position threshold its config names "
        "(`original_max_position_embeddings` of LongRoPE, `max_position_embeddings` of dynamic "
        "NTK, `sliding_window`, `attention_chunk_size`), checked by decoding steps just below, "
        "at and just past it from a built past (`generate`); or its cached loop differs from "
        "the model's own full forward over the same prefix past a threshold where the model's "
        "generation recomputes its cache (Phi-3's LongRoPE), as every runtime feeding presents "
        "back does",
        "The file computes as at the export's length where PyTorch switches: compute both "
        "branches in the graph (torch.where over the length, as transformers 5's LongRoPE "
        "does), or cap the deployed context at the threshold (`max-context`); where the cached "
        "loop is the defect, run the whole prefix through the file again once the context "
        "passes the threshold, as transformers' generate does. The finding names the fix "
        "measured for its case.",
    ),
    "detection-mismatch": CodeInfo(
        Severity.ERROR,
        "a detector's detections differ between PyTorch and onnxruntime (`[model.detections]`): "
        "one side has a detection no score cut-off, NMS or `max-det` near-tie explains, or a "
        "matched pair's box is outside `box-atol` or its score outside `atol`",
        "Run the named image at the named size: a count that differs by many, or boxes offset "
        "by more than float noise, comes from the graph (a resize scale or an anchor grid "
        "computed for the export's size, an operator exported at an opset that changes it); "
        "fix the model code that computes it, not the tolerance.",
    ),
    "detection-near-threshold": CodeInfo(
        Severity.WARNING,
        "a detector's two sides differ by detections a threshold's near-tie explains: a score "
        "within the image's measured score noise of `score-threshold`, an IoU within the measured "
        "noise of `nms-iou`, an overlapping box of a tied score NMS visited in the other order, a "
        "rank at the `max-det` cut, or a box suppressed because of such a near-tie (a cascade); "
        "every other detection matched",
        "Nothing to fix in the export: float noise decided one side of a threshold. If a "
        "deployment must reproduce PyTorch's detections exactly, keep the threshold off the "
        "values the model produces (e.g. compare IoU in the same precision on both sides).",
    ),
    "expert-coverage": CodeInfo(
        Severity.WARNING,
        "a mixture-of-experts decoder's router sent no token of the compared steps to some "
        "expert, so that expert's weights were never compared (`generate`)",
        "Give prompts that reach every expert: more prompts or longer ones (each token goes "
        "to its top-k experts at every layer), or `eval-tokens` rows of real text; the finding "
        "names the layers and the experts left out.",
    ),
    "expert-dispatch-loop": CodeInfo(
        Severity.ERROR,
        "a mixture-of-experts layer dispatches its experts by a Python loop over the experts a "
        "batch hit (transformers' `eager` experts, or a loop of your own): the export computes "
        "only the experts its export batch hit",
        "Dispatch the experts data-independently, every expert in the graph: transformers' "
        "`batched_mm` (`model.set_experts_implementation(\"batched_mm\")`), or your own "
        "experts decorated with `@use_experts_implementation`; the finding names the loop's "
        "line.",
        explains_mismatch=True,
    ),
}
