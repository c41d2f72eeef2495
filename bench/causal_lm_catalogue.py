"""Every causal-LM architecture transformers 5.23 lists (`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`,
189), built tiny from its own config class with seeded random weights, nothing downloaded: the
catalogue the generation check is measured against (tests/test_causal_lm_catalogue.py runs it
through the real CLI; `python bench/causal_lm_catalogue.py` times it).

A tiny config is the class's defaults with its sizes shrunk where the class has the field:
width 64, 2 layers, vocabulary 500, 4 heads of 16 (2 key/value heads, MLA's one per head), at
most 4 experts with 2 per token; a vision, audio or VQ sub-config at width 32 and one layer. A
hybrid whose default pattern mixes layer kinds gets one layer of each, in the order it first
uses them (two layers of Qwen3.5's pattern would both be linear, and its cache would hold no
attention). What the class cannot take from these rules is in OVERRIDES, one line per model.
An architecture is in the catalogue when PyTorch itself builds it so and generates 6 tokens
from a left-padded batch (`probe`): 179 of 189 here. The 10 others fail in PyTorch, before
any export: they are listed by `probe` with PyTorch's own error.

    python bench/causal_lm_catalogue.py [--jobs 2] [--json f.json]   # run and time the catalogue
    python bench/causal_lm_catalogue.py --probe [KIND ...]           # which kinds PyTorch builds
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

TEXT = dict(hidden_size=64, d_model=64, n_embd=64, num_hidden_layers=2, n_layer=2, num_layers=2,
            decoder_layers=2, encoder_layers=2, vocab_size=500, num_attention_heads=4, n_head=4,
            decoder_attention_heads=4, encoder_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, decoder_ffn_dim=128, encoder_ffn_dim=128, ffn_dim=128,
            n_inner=128, head_dim=16, moe_intermediate_size=32, shared_expert_intermediate_size=32,
            kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)
SIDE = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            depth=1, num_heads=2, embed_dim=32)  # vision, audio, VQ and patcher sub-configs
AT_MOST = dict(n_routed_experts=4, num_experts=4, num_local_experts=4, num_experts_per_tok=2,
               n_shared_experts=1, first_k_dense_replace=1)
UNSET_EXPERTS = ("num_experts_per_tok", "n_routed_experts")  # None by default in some classes
TOKENS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
VOCABULARY = 500
STEPS = 6

MAMBA = dict(mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16, mamba_chunk_size=16)
QWEN4_TEXT = dict(layer_types=["linear_attention", "indexed_attention"], indexer_n_heads=2,
                  indexer_kv_heads=1, indexer_head_dim=16, linear_key_head_dim=16,
                  linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                  indexer_budget=16, indexer_compress_ratio=4)
OVERRIDES: dict[str, dict[str, Any]] = {
    "bamba": dict(attn_layer_indices=[1], **MAMBA),
    "granitemoehybrid": dict(layer_types=["mamba", "attention"], **MAMBA),
    "jamba": dict(attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                  expert_layer_offset=1, use_mamba_kernels=False),
    "recurrent_gemma": dict(block_types=["recurrent", "attention"], attention_window_size=16),
    # Zamba ties its shared transformer across hybrid layers: two of them to tie.
    "zamba": dict(layers_block_type=["mamba", "hybrid", "hybrid"], num_hidden_layers=3,
                  use_mamba_kernels=False),
    "zamba2": dict(layers_block_type=["mamba", "hybrid"], use_mamba_kernels=False,
                   n_mamba_heads=8),
    "lfm2_moe": dict(layer_types=["conv", "full_attention"], num_dense_layers=1),
    "qwen4_exp": dict(text_config=QWEN4_TEXT),
    "qwen4_exp_text": QWEN4_TEXT,
    "dots1": dict(n_shared_experts=1, first_k_dense_replace=1),
    "dots3_note": dict(text_config=dict(num_key_value_heads=4)),
    "dots3_note_text": dict(num_key_value_heads=4),
    "xlstm": dict(num_heads=4, qk_dim_factor=1.0),
    "xmod": dict(default_language="en_XX"),
    "reformer": dict(is_decoder=True, attn_layers=["local", "lsh"], axial_pos_shape=[8, 8],
                     axial_pos_embds_dim=[32, 32], num_hashes=1),
    "moshi": dict(audio_vocab_size=64, num_codebooks=2),
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]], window_size=16),
    "mamba2": dict(num_heads=8, n_groups=1, chunk_size=16),
    "dbrx": dict(d_model=64, n_heads=4, n_layers=2,
                 attn_config=dict(kv_n_heads=2, rope_theta=1e4, clip_qkv=8.0),
                 ffn_config=dict(ffn_hidden_size=128, moe_num_experts=4, moe_top_k=2)),
    # Gemma 3 is checked as a vision-language pipeline: SigLIP's default 224-pixel tower is
    # pooled to mm_tokens_per_image, and its image tokens sit past a vocabulary of 500.
    "gemma3": dict(vision_config=dict(model_type="siglip_vision_model", hidden_size=32,
                                      intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, image_size=32, patch_size=8),
                   mm_tokens_per_image=4, image_token_index=497, boi_token_index=498,
                   eoi_token_index=499),
    "gemma3n_text": dict(layer_types=["sliding_attention", "full_attention"],
                         num_kv_shared_layers=0, hidden_size_per_layer_input=16,
                         vocab_size_per_layer_input=VOCABULARY),
}


def _fields(cls: type) -> dict[str, Any]:
    return {field.name: field.default for field in dataclasses.fields(cls)}


def _shrunk(cls: type, sizes: dict[str, Any]) -> dict[str, Any]:
    """The sizes `cls` has fields for, its experts capped and its special tokens inside the
    vocabulary; each concrete sub-config shrunk the same way."""
    known = _fields(cls)
    values: dict[str, Any] = {key: value for key, value in sizes.items() if key in known}
    for key, most in AT_MOST.items():
        default = known.get(key)
        if isinstance(default, int) and not isinstance(default, bool):
            values[key] = min(default, most)
        elif key in known and default is None and key in UNSET_EXPERTS:
            values[key] = most
    values.update({key: 1 for key in ("n_group", "topk_group") if key in known})
    for key in TOKENS:
        default = known.get(key)
        if isinstance(default, int) and default >= VOCABULARY:
            values[key] = {"bos_token_id": 1, "eos_token_id": 2}.get(key, 0)
        elif isinstance(default, list) and any(isinstance(t, int) and t >= VOCABULARY
                                               for t in default):
            values[key] = 2
    for name, sub in (getattr(cls, "sub_configs", None) or {}).items():
        if sub.__name__ != "AutoConfig" and name in known:
            side = any(word in name for word in ("vision", "audio", "vq", "patcher"))
            values[name] = _shrunk(sub, SIDE if side else sizes)
    return values


def _layer_kinds(cls: type) -> dict[str, Any]:
    """One layer of each kind the default config's `layer_types` mixes, in first-use order."""
    try:
        pattern = getattr(cls(), "layer_types", None)
    except Exception:  # a class whose defaults do not validate: its sizes decide alone
        return {}
    if not isinstance(pattern, list) or "layer_types" not in _fields(cls):
        return {}
    kinds = list(dict.fromkeys(pattern))
    return {"layer_types": kinds, "num_hidden_layers": len(kinds)} if len(kinds) > 1 else {}


def config_values(kind: str) -> dict[str, Any]:
    """The keyword arguments of `kind`'s tiny config."""
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[kind]
    values = _shrunk(cls, TEXT)
    text = (getattr(cls, "sub_configs", None) or {}).get("text_config")
    if text is not None and "text_config" in values:
        values["text_config"].update(_layer_kinds(text))
    values.update(_layer_kinds(cls))
    if "kv_lora_rank" in _fields(cls):  # MLA: one key/value head per query head
        values["num_key_value_heads"] = values.get("num_attention_heads", 4)
    if "rotary_dim" in _fields(cls):  # rotary over half a head of 16
        values["rotary_dim"] = 8
    for key, value in OVERRIDES.get(kind, {}).items():
        if isinstance(value, dict) and isinstance(values.get(key), dict):
            values[key] = {**values[key], **value}
        else:
            values[key] = value
    return values


def build(kind: str) -> Any:
    """`kind`'s causal LM from its tiny config, seeded, in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    config = AutoConfig.for_model(kind, **config_values(kind))
    return AutoModelForCausalLM.from_config(config).eval()


def kinds() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def prompts() -> dict[str, np.ndarray]:
    """4 prompts of up to 6 tokens, rows 1 and 2 left-padded by 2 and 3."""
    ids = np.random.default_rng(0).integers(3, VOCABULARY, (4, 6)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, :2] = 0
    mask[2, :3] = 0
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask}


def generates(kind: str) -> str | None:
    """None when PyTorch builds `kind` tiny and generates STEPS tokens; else its error."""
    import torch

    try:
        model = build(kind)
        sample = {name: torch.from_numpy(array) for name, array in prompts().items()}
        with torch.no_grad():
            model.generate(**sample, max_new_tokens=STEPS, do_sample=False, pad_token_id=0)
    except Exception as error:  # PyTorch's own failure: the kind is not in the catalogue
        return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
    return None


def probe(names: Iterable[str], jobs: int = 2,
          memory_kb: int = 12_000_000) -> dict[str, str | None]:
    """`generates` for each kind, in `jobs` interpreters that each take every `jobs`-th kind,
    under a memory limit (Fuyu's default patching asks for more than 11 GB: under the limit
    its allocation fails as an error of its own, not the machine). An interpreter that dies
    takes its kind with it (said as its exit) and the next one carries on."""
    found: dict[str, str | None] = {}
    queues = [list(names)[index::jobs] for index in range(jobs)]
    running = [_prober(queue, memory_kb) for queue in queues if queue]
    while running:
        queue, process = running.pop(0)
        out, _ = process.communicate(timeout=1800)
        for line in out.splitlines():
            if line.startswith("["):
                kind, error = json.loads(line)
                found[kind] = error
        left = [kind for kind in queue if kind not in found]
        if left:
            found[left[0]] = f"the interpreter exited with {process.returncode}"
            if left[1:]:
                running.append(_prober(left[1:], memory_kb))
    return {kind: found[kind] for kind in names if kind in found}


def _prober(queue: list[str], memory_kb: int) -> tuple[list[str], subprocess.Popen[str]]:
    script = ("import json,sys,warnings; warnings.filterwarnings('ignore'); "
              "import causal_lm_catalogue as c\n"
              "for kind in sys.argv[1:]: print(json.dumps([kind, c.generates(kind)]), flush=True)")
    command = f'ulimit -v {memory_kb}; exec "$0" -c "$1" "${{@:2}}"'
    here = str(Path(__file__).resolve().parent)
    return queue, subprocess.Popen(
        ["bash", "-c", command, sys.executable, script, *queue], cwd=here, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def function_name(kind: str) -> str:
    return re.sub(r"\W", "_", kind)


def write_repo(root: Path, names: Iterable[str]) -> Path:
    """`root/repo`: models/catalogue.py (this file's builder, copied) with one factory per
    kind, the prompts, and one `[[model]]` per kind declared as a user declares a decoder."""
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    source = Path(__file__).read_text(encoding="utf-8")
    factories = "".join(f"\n\ndef {function_name(kind)}() -> Any:\n    return build({kind!r})\n"
                        for kind in names)
    (repo / "models" / "catalogue.py").write_text(source + factories, encoding="utf-8")
    for name, array in prompts().items():
        np.save(repo / "samples" / f"{name}.npy", array)
    config = "".join(
        f'[[model]]\nname = "{kind}"\nfactory = "models.catalogue:{function_name(kind)}"\n'
        'inputs = { input_ids = "samples/input_ids.npy", '
        'attention_mask = "samples/attention_mask.npy" }\n'
        f"generate = {{ steps = {STEPS} }}\n\n" for kind in names)
    (repo / "onnx-parity.toml").write_text(config, encoding="utf-8")
    return repo


def per_model_seconds(report: dict[str, Any]) -> dict[str, float]:
    return {model["name"]: float(model["seconds"]) for model in report["models"]
            if isinstance(model.get("seconds"), int | float)}


def summary(report: dict[str, Any], dense: str = "llama") -> dict[str, Any]:
    """Pass count, the median seconds per model (each worker's wall time) and the dense
    decoder's, from one run's report.json."""
    seconds = per_model_seconds(report)
    passed = sum(bool(model["passed"]) for model in report["models"])
    return {"models": len(report["models"]), "passed": passed,
            "median_seconds": statistics.median(seconds.values()),
            "dense": dense, "dense_seconds": seconds.get(dense)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe", nargs="*", metavar="KIND")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.probe is not None:
        for kind, error in probe(args.probe or kinds(), args.jobs).items():
            print(kind, "builds and generates" if error is None else error)
        return 0
    built = [kind for kind, error in probe(kinds(), args.jobs).items() if error is None]
    with tempfile.TemporaryDirectory() as folder:
        repo = write_repo(Path(folder), built)
        out = Path(folder) / "out"
        subprocess.run([sys.executable, "-m", "onnx_parity", "check", "--jobs", str(args.jobs),
                        "--out", str(out)], cwd=repo, check=False, stdout=subprocess.DEVNULL)
        figures = summary(json.loads((out / "report.json").read_text(encoding="utf-8")))
    print(f"{figures['passed']} of {figures['models']} pass; median {figures['median_seconds']:.1f}"
          f" s per model, {figures['dense']} {figures['dense_seconds']:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
