"""A divergence inside a torch container is named at the user's line that calls it, for both
exporters (issue 27, section 2).

One CLI run checks one repository of five models: a 40-block nn.Sequential of LayerNorm,
Linear and GELU (weights scaled up so rounding grows) called as `self.blocks(...)` from the
user's forward, exported by TorchScript and by dynamo; the same call in a function that is the
forward under another name (dynamo's graph keeps only frames named `forward`), by both; and the
container returned bare by a factory, which no frame of the repository calls.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fixture_repo.harness import CliRun, line_of, run_cli, write_model_repo

pytestmark = pytest.mark.slow

MODELS = '''
import torch
from torch import nn


def layers(width):
    return [nn.LayerNorm(width), nn.Linear(width, width), nn.GELU()]


def scaled(stack):
    with torch.no_grad():
        for module in stack:
            if isinstance(module, nn.Linear):
                module.weight.mul_(30.0)
    return stack


class DeepStack(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp = nn.Linear(16, 64)
        self.blocks = scaled(nn.Sequential(*[m for _ in range(40) for m in layers(64)]))

    def forward(self, features):
        hidden = self.blocks(self.inp(features))
        return hidden.sum(-1, keepdim=True)


def run_blocks(self, features):
    states = self.blocks(self.inp(features))
    return states.sum(-1, keepdim=True)


class Aliased(DeepStack):
    """Its forward is a function of another name, whose frames dynamo's graph leaves out."""

    forward = run_blocks


def bare_stack():
    torch.manual_seed(0)
    return scaled(nn.Sequential(nn.Linear(16, 64), *[m for _ in range(40) for m in layers(64)]))
'''

CALL = "hidden = self.blocks(self.inp(features))"
ALIASED_CALL = "states = self.blocks(self.inp(features))"


def entry(name: str, factory: str, exporter: str) -> str:
    return (f'[[model]]\nname = "{name}"\nfactory = "models.deep:{factory}"\n'
            'inputs = { features = "samples/features.npy" }\n'
            'dynamic-axes = { features = { 0 = "batch" } }\n'
            f'atol = 1e-6\nrtol = 0.0\nexporter = "{exporter}"\n')


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    root = tmp_path_factory.mktemp("containers")
    features = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    config = "batch-sizes = [4]\n" + "".join(
        entry(*model) for model in (("ts", "DeepStack", "torchscript"),
                                    ("dynamo", "DeepStack", "dynamo"),
                                    ("bare-ts", "bare_stack", "torchscript"),
                                    ("aliased-ts", "Aliased", "torchscript"),
                                    ("aliased-dynamo", "Aliased", "dynamo")))
    repo = write_model_repo(root, ("deep", MODELS), {"features": features}, config)
    done = run_cli("check", "--jobs", "1", cwd=repo, out=root / "out")
    assert done.code == 1, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def call_line(run: CliRun) -> int:
    return line_of(run.folder.parent / "repo" / "models" / "deep.py", CALL)


@pytest.fixture(scope="module")
def aliased_line(run: CliRun) -> int:
    return line_of(run.folder.parent / "repo" / "models" / "deep.py", ALIASED_CALL)


def parity(run: CliRun, model: str) -> dict:
    [finding] = [f for f in run.models()[model]["findings"] if f["code"] == "parity-mismatch"]
    return finding


def test_torchscript_names_the_line_that_calls_the_container(run: CliRun, call_line: int) -> None:
    finding = parity(run, "ts")
    first = finding["details"]["first_divergence"]
    assert (finding["file"], finding["line"]) == ("models/deep.py", call_line)
    assert (first["file"], first["line"], first["source"]) == ("models/deep.py", call_line, CALL)
    assert first["module"].startswith("blocks.")
    assert first["op"] in ("LayerNorm", "Linear", "GELU")
    # The module's own forward is torch's: kept beside the user's line, not instead of it.
    assert first["library_frame"].startswith("site-packages/torch/nn/modules/")
    assert (f"Diverges first at `models/deep.py:{call_line}` in `{first['module']}` "
            f"(`{first['op']}`)") in finding["message"]
    assert f"`models/deep.py:{call_line}`" in finding["fix"]


def test_the_repro_folder_and_the_reports_name_that_line(run: CliRun, call_line: int) -> None:
    place = f"models/deep.py:{call_line}"
    report = (run.folder / "ts.repro" / "REPORT.md").read_text(encoding="utf-8")
    assert report.splitlines()[0].startswith("# onnxruntime differs from PyTorch at ")
    assert f"(`{place}`): max abs diff" in report.splitlines()[0]
    assert f"The user's code of these nodes: `{place}`." in report
    assert (run.models()["ts"]["repro"]["file"], run.models()["ts"]["repro"]["line"]) == (
        "models/deep.py", call_line)
    assert f"`parity-mismatch` at `{place}`" in (run.folder / "report.md").read_text(
        encoding="utf-8")
    sarif = json.loads((run.folder / "report.sarif").read_text(encoding="utf-8"))
    located = {(r["properties"]["model"],
                r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                r["locations"][0]["physicalLocation"]["region"]["startLine"])
               for r in sarif["runs"][0]["results"]
               if r["ruleId"] == "parity-mismatch" and r.get("locations")}
    assert ("ts", "models/deep.py", call_line) in located


def test_dynamo_names_the_same_line_by_the_same_rule(run: CliRun, call_line: int) -> None:
    first = parity(run, "dynamo")["details"]["first_divergence"]
    assert (first["file"], first["line"]) == ("models/deep.py", call_line)
    assert first["module"].startswith("blocks.")
    assert first["op"].startswith("aten.")
    assert first["library_frame"].startswith("site-packages/torch/nn/")


@pytest.mark.parametrize("model", ["aliased-ts", "aliased-dynamo"])
def test_a_call_outside_any_forward_is_named_by_both_exporters(run: CliRun, aliased_line: int,
                                                               model: str) -> None:
    # dynamo's own frames for these nodes are torch's alone: its module's callers place them.
    finding = parity(run, model)
    first = finding["details"]["first_divergence"]
    assert (finding["file"], finding["line"]) == ("models/deep.py", aliased_line)
    assert (first["source"], first["module"][:7]) == (ALIASED_CALL, "blocks.")
    assert first["library_frame"].startswith("site-packages/torch/nn/")
    assert f"Diverges first at `models/deep.py:{aliased_line}`" in finding["message"]


def test_a_container_no_user_line_calls_is_named_by_its_module_path_alone(run: CliRun) -> None:
    finding = parity(run, "bare-ts")
    first = finding["details"]["first_divergence"]
    assert "file" not in finding  # no annotation: the finding names no line
    assert (first["file"], first["line"], first["source"]) == (None, None, None)
    assert first["module"].isdigit()  # a child of the bare nn.Sequential: "1", "4", ...
    assert (f"Diverges first at node `{first['node']}` in `{first['module']}` "
            f"(`{first['op']}`)") in finding["message"]
    assert first["library_frame"].startswith("site-packages/torch/nn/modules/")
    report = (run.folder / "bare-ts.repro" / "REPORT.md").read_text(encoding="utf-8")
    assert "models/deep.py" not in report
    assert "The user's code of these nodes" not in report
