"""A mixture-of-experts variant's router against the fp32 file's: how many top-k sets change.

Quantizing the router (`mlp.gate`, a plain MatMul both quantizers reach) or the layers before
it moves tokens to other experts, which the logits show only through what those experts
compute. Both files are run on the prompts' pass (every prompt token, its empty past), each
router's `TopK` indices exposed as an output of a scratch copy of the file (the shipped files
are not changed; the copy shares their external data), and each (token, router) choice is
compared as a set: the variants table's "Router top-k changed" column and report.json's
`routing` say how many changed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from onnx_parity.generation_results import RoutingChange
from onnx_parity.model_files import ModelFile
from onnx_parity.models import implementations
from onnx_parity.settings import ModelSpec
from onnx_parity.verification import Decoders, OnnxDecoder, open_session, run_session


def routing_change(fp32: ModelFile, variant: ModelFile, decoders: Decoders,
                   prompts: dict[str, np.ndarray], spec: ModelSpec) -> RoutingChange | None:
    """How many (token, router) top-k sets the variant changed, or None for a decoder without
    transformers' experts (its file is not read again: a dense model's variants
    pay nothing) or with no plain prompt pass (an encoder-decoder, a VLM)."""
    if (decoders.encoder is not None or decoders.pipeline is not None
            or not implementations(decoders.module)):
        return None
    ids, mask = (np.asarray(prompts[name]).astype(np.int64)
                 for name in ("input_ids", "attention_mask"))
    fp32_choices = _choices(fp32.path, decoders, (ids, mask), spec)
    if not fp32_choices:
        return None
    variant_choices = _choices(variant.path, decoders, (ids, mask), spec)
    kept = mask.reshape(-1) > 0
    changed = total = 0
    for name, chosen in fp32_choices.items():
        other = variant_choices.get(name)
        if other is None or other.shape != chosen.shape:
            continue  # the variant's graph holds no such router: nothing to compare it with
        rows = kept if len(chosen) == kept.size else np.ones(len(chosen), dtype=bool)
        same = (np.sort(chosen, -1) == np.sort(other, -1)).all(-1)[rows]
        changed, total = changed + int((~same).sum()), total + int(same.size)
    return RoutingChange(changed, total, len(fp32_choices)) if total else None


def _choices(path: Path, decoders: Decoders, prompt: tuple[np.ndarray, np.ndarray],
             spec: ModelSpec) -> dict[str, np.ndarray]:
    """Each TopK node's indices at the prompt pass, by the node's name, (tokens, k)."""
    scratch = path.with_name(f".{path.stem}.routing.onnx")
    outputs = _exposed(path, scratch)
    if not outputs:
        return {}
    try:
        session = open_session(scratch, spec.runtime_optimization, decoders.threads)
        step = OnnxDecoder(session, decoders.shape, decoders.dtype)
        step.step(*prompt)  # builds the prompt pass's feed (its positions, the empty past)
        feed = {name: step.feed[name] for name in session.input_names if name in step.feed}
        values = dict(zip(session.output_names, run_session(session, feed), strict=True))
    finally:
        scratch.unlink(missing_ok=True)
    return {node: values[output].reshape(-1, values[output].shape[-1])
            for node, output in outputs.items()}


def _exposed(path: Path, scratch: Path) -> dict[str, str]:
    """A copy of the file at `scratch`, every TopK's indices a graph output; node -> output."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)  # the data stays where it is
    graph = model.graph
    outputs = {node.name or node.output[1]: node.output[1] for node in graph.node
               if node.op_type == "TopK" and len(node.output) > 1}
    present = {output.name for output in graph.output}
    graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT64, None)
                        for name in outputs.values() if name not in present)
    if outputs:
        onnx.save(model, str(scratch))
    return outputs
