"""The figures behind `max-perplexity-ratio`'s default: how far fp16, int8-dynamic and int4
(accuracy levels 4 and 0) move a generating model's perplexity on text, measured through the
real check (`eval-tokens`), on Llamas built from configs with seeded random weights.

    python bench/perplexity.py [--case tiny] [--case 25m] [--case 25m-peaked] [--json f.json]

Each case writes a temporary repository with the model, 4 left-padded prompts and two texts of
4 rows x 64 tokens: `own`, sampled from the fp32 model itself at temperature 1 (the text a
model predicts best, as natural text is for a trained model), and `random`, uniform token ids.
`onnx-parity check` runs once per text with two entries of the same model: `variants = ["fp16",
"int8-dynamic", "int4"]` (int4 at onnxruntime-genai's CPU defaults, accuracy level 4) and
`variants = ["int4"]` at `accuracy-level = 0` (`atol = 1e-3`: the peaked case's logits are
large, and its fp32 check must pass for variants to be built). Printed per case and text: fp32's
perplexity and each variant's ratio, top-1 agreement and greedy token agreement. A random-weight
model's distributions are nearly uniform (perplexity near the vocabulary), which hides
quantization; the `-peaked` case scales the initialisation (`initializer_range = 0.2`) so its
predictions are sharp, as a trained model's are.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROWS, TOKENS, PROMPT = 4, 64, 8
VARIANTS = ("fp16", "int8-dynamic", "int4")


@dataclass(frozen=True)
class Case:
    label: str
    config: str  # LlamaConfig's keyword arguments, as Python source
    vocab: int


CASES = {
    "tiny": Case("Llama, 2 layers, width 32, vocabulary 64 (the tests')",
                 "vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, "
                 "num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128", 64),
    "25m": Case("Llama, 6 layers, width 512, vocabulary 8,192: 25M parameters",
                "vocab_size=8192, hidden_size=512, intermediate_size=1376, num_hidden_layers=6, "
                "num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256, "
                "tie_word_embeddings=False", 8192),
    "25m-peaked": Case("the same 25M Llama, initializer_range 0.2 (sharp predictions)",
                       "vocab_size=8192, hidden_size=512, intermediate_size=1376, "
                       "num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4, "
                       "max_position_embeddings=256, tie_word_embeddings=False, "
                       "initializer_range=0.2", 8192),
}

MODEL = '''
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def llama():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig({config})).eval()
'''

CONFIG = '''batch-sizes = [4]
atol = 1e-3
[[model]]
name = "{name}"
factory = "models.bench:llama"
inputs = {{ input_ids = "samples/input_ids.npy", attention_mask = "samples/attention_mask.npy" }}
variants = {variants}
generate = {{ steps = 8 }}
eval-tokens = "samples/{text}.npy"
'''


def write_repo(root: Path, case: Case) -> Path:
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "bench.py").write_text(textwrap.dedent(MODEL.format(config=case.config)),
                                              encoding="utf-8")
    rng = np.random.default_rng(0)
    ids = rng.integers(3, case.vocab, (ROWS, PROMPT)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, :2] = 0
    ids[mask == 0] = 0
    np.save(repo / "samples" / "input_ids.npy", ids)
    np.save(repo / "samples" / "attention_mask.npy", mask)
    np.save(repo / "samples" / "random.npy", rng.integers(0, case.vocab, (ROWS, TOKENS)))
    np.save(repo / "samples" / "own.npy", sampled(repo, rng))
    for text in ("own", "random"):
        entries = [CONFIG.format(name="levels-4", variants=json.dumps(list(VARIANTS)), text=text),
                   CONFIG.format(name="level-0", variants='["int4"]', text=text).split(
                       "\n", 1)[1] + "[model.int4]\naccuracy-level = 0\n"]
        (repo / f"{text}.toml").write_text("".join(entries), encoding="utf-8")
    return repo


def sampled(repo: Path, rng: np.random.Generator) -> np.ndarray:
    """ROWS x TOKENS ids sampled from the fp32 model at temperature 1, from one random token."""
    import torch

    sys.path.insert(0, str(repo))
    from models.bench import llama  # type: ignore[import-not-found]  # written at bench time

    model = llama()
    torch.manual_seed(1)
    ids = torch.from_numpy(rng.integers(3, model.config.vocab_size, (ROWS, 1)))
    with torch.no_grad():
        out = model.generate(ids, do_sample=True, temperature=1.0, top_k=0,
                             max_new_tokens=TOKENS - 1, min_new_tokens=TOKENS - 1,
                             pad_token_id=0)
    sys.path.remove(str(repo))
    del sys.modules["models.bench"], sys.modules["models"]
    return out.numpy().astype(np.int64)


def measure(case: Case, text: str, repo: Path) -> list[dict[str, object]]:
    out = repo.parent / f"out-{text}"
    subprocess.run([sys.executable, "-m", "onnx_parity", "check", "--config", f"{text}.toml",
                    "--out", str(out), "--jobs", "1"], cwd=repo, check=False)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    rows = []
    for model in report["models"]:
        for variant in model["variants"]:
            score = variant.get("text") or {}
            level = variant["settings"].get("accuracy_level")
            shown = variant["name"] + ("" if level is None else f" (level {level})")
            rows.append({"case": case.label, "text": text, "variant": shown,
                         "fp32_perplexity": score.get("fp32_perplexity"),
                         "ratio": score.get("perplexity_ratio"),
                         "top1": score.get("top1_agreement"),
                         "tokens_agree": variant["comparisons"][0]["top1_agreement"]
                         if variant["comparisons"] else None})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for name in args.case or list(CASES):
        with tempfile.TemporaryDirectory() as folder:
            repo = write_repo(Path(folder), CASES[name])
            for text in ("own", "random"):
                rows += measure(CASES[name], text, repo)
    print("| Model | Text | Variant | fp32 perplexity | Ratio | Top-1 agreement | Greedy tokens |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        if row["ratio"] is None:  # not built: the fp32 check failed (report.json says why)
            print(f"| {row['case']} | {row['text']} | {row['variant']} | not built | | | |")
            continue
        print(f"| {row['case']} | {row['text']} | {row['variant']} | {row['fp32_perplexity']:.4g} "
              f"| {row['ratio']:.4f} | {row['top1']:.1%} | {row['tokens_agree']:.1%} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
