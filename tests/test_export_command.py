"""`export-command`: the repository's own export script writes the ONNX file the check takes,
through the real CLI on fresh repositories: a file exported from the model the factory builds
passes, one exported from other weights fails on parity, and a script that fails, writes
nothing or names the inputs otherwise is an export-error quoting its last lines."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import run_cli
from onnx_parity.settings import command_arguments, load_settings
from onnx_parity.settings.values import ConfigError

MODEL = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def build():
    return Net()
'''

SCRIPT = '''
"""The repository's own export: what `python scripts/export_onnx.py --out m.onnx` writes."""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from models.net import build  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--input-name", default="x")
parser.add_argument("--fail", action="store_true")
parser.add_argument("--nothing", action="store_true")
parser.add_argument("--dynamo", action="store_true")
args = parser.parse_args()
print(f"exporting with seed {args.seed}")
if args.fail:
    print("loading the release weights")
    raise SystemExit("export failed: the release weights are not in this checkout")
if args.nothing:
    sys.exit(0)
torch.manual_seed(args.seed)  # onnx-parity seeds the factory's model with 0
model = build().eval()
torch.onnx.export(model, (torch.randn(2, 4),), args.out, dynamo=args.dynamo,
                  input_names=[args.input_name], output_names=["y"],
                  dynamic_axes={args.input_name: {0: "batch"}, "y": {0: "batch"}})
print(f"wrote {args.out}")
'''

CONFIG = '''
[[model]]
name = "net"
factory = "models.net:build"
inputs = {{ x = "samples/x.npy" }}
outputs = ["y"]
dynamic-axes = {{ x = {{ 0 = "batch" }}, y = {{ 0 = "batch" }} }}
export-command = "python scripts/export_onnx.py --out {{onnx}} {options}"
'''


def write_repo(root: Path, options: str = "") -> Path:
    repo = root / "repo"
    for folder in ("models", "scripts", "samples"):
        (repo / folder).mkdir(parents=True)
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "net.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    (repo / "scripts" / "export_onnx.py").write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    np.save(repo / "samples" / "x.npy",
            np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(CONFIG.format(options=options), encoding="utf-8")
    return repo


def checked(tmp_path: Path, options: str = "") -> dict:
    run = run_cli("check", cwd=write_repo(tmp_path, options), out=tmp_path / "out")
    assert run.code in (0, 1), run.stdout + run.stderr
    return run.models()["net"]


COMMAND = "python scripts/export_onnx.py --out {onnx}"


@pytest.mark.slow
def test_the_commands_file_is_checked_and_passes(tmp_path: Path) -> None:
    model = checked(tmp_path)
    assert model["passed"], model["findings"]
    assert model["exporter"] == COMMAND  # as written
    assert [(a["exporter"], a["succeeded"]) for a in model["attempts"]] == [(COMMAND, True)]
    assert model["max_abs_diff"] < 1e-5
    assert {c["batch_size"] for c in model["comparisons"]} == {1, 4}
    onnx_file = tmp_path / "out" / "net.onnx"
    assert onnx_file.is_file()
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert f"| {COMMAND} |" in report


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["", " --dynamo"])
def test_a_file_from_other_weights_fails_on_parity(tmp_path: Path, exporter: str) -> None:
    model = checked(tmp_path, f"--seed 1{exporter}")
    assert not model["passed"]
    codes = {f["code"] for f in model["findings"] if f["severity"] == "error"}
    assert codes == {"parity-mismatch"}  # localising without a dynamo program never crashes
    if not exporter:  # TorchScript's node names still locate the drift in the module
        assert model["divergence"]["exporter"] == f"{COMMAND} --seed 1"
        assert model["divergence"]["nodes"][0]["module"] == "fc"
    else:  # a dynamo file without its program: said, not guessed
        assert "the file comes from `export-command`" in model["findings"][0]["message"]


@pytest.mark.slow
def test_a_command_that_fails_is_an_export_error_quoting_its_last_lines(tmp_path: Path) -> None:
    model = checked(tmp_path, "--fail")
    [finding] = model["findings"]
    assert finding["code"] == "export-error"
    assert finding["message"].startswith(f"{COMMAND} --fail failed: it exited with status 1; "
                                         "its last output: exporting with seed 0 | loading the "
                                         "release weights | export failed: the release weights")
    assert "Run the command from the repository root" in finding["fix"]
    assert model["exporter"] is None
    assert [(a["exporter"], a["succeeded"]) for a in model["attempts"]] == [
        (f"{COMMAND} --fail", False)]


@pytest.mark.slow
@pytest.mark.parametrize(("options", "expected"), [
    ("--nothing", "it exited with status 0 but wrote no ONNX file at {onnx}"),
    ("--input-name input", 'its file takes the inputs ["input"], the configuration names ["x"]'),
])
def test_no_file_or_other_input_names_is_an_export_error(tmp_path: Path, options: str,
                                                         expected: str) -> None:
    [finding] = checked(tmp_path, options)["findings"]
    assert finding["code"] == "export-error"
    assert expected in finding["message"]


def test_the_placeholder_becomes_one_argument_however_the_path_is_spelt() -> None:
    assert command_arguments("python 'my script.py' --out={onnx}", Path("/w d/m.onnx")) == [
        "python", "my script.py", "--out=/w d/m.onnx"]


@pytest.mark.parametrize(("line", "expected"), [
    ('export-command = "python export.py"', "does not say where to write the ONNX file"),
    ('export-command = "python \'export.py {onnx}"', "cannot be split into arguments"),
    ('export-command = ""', "an empty string is not a command line"),
    ('export-command = "python e.py {onnx}"\nexporter = "dynamo"', "sets `exporter` too"),
])
def test_a_bad_command_is_exit_2(tmp_path: Path, line: str, expected: str) -> None:
    repo = write_repo(tmp_path)
    config = repo / "onnx-parity.toml"
    text = config.read_text(encoding="utf-8").replace(
        'export-command = "python scripts/export_onnx.py --out {onnx} "', line)
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=expected):
        load_settings(repo)


def request_for(names: tuple[str, ...] = ("x",)):
    from onnx_parity.export.exporters import ExportRequest

    return ExportRequest(module=None, args=(), input_names=names, output_names=("y",),
                         dynamic_axes={}, opset=18)


def test_a_command_past_its_deadline_is_stopped_and_quoted(tmp_path: Path) -> None:
    import time

    from onnx_parity.export.command import command_export

    script = "import time; print('warming up', flush=True); time.sleep(60)"
    began = time.monotonic()
    exported, [failure] = command_export(f'python -c "{script}" {{onnx}}', request_for(),
                                         tmp_path / "m.onnx", time.monotonic() + 2)
    assert exported is None
    assert time.monotonic() - began < 20
    assert failure.kind == "export-error"
    assert failure.message.startswith("it ran past the 2 s left of the model's `timeout-seconds` "
                                      "and was stopped; its last output: warming up")
    assert "raise `timeout-seconds`" in (failure.fix or "")


def test_a_program_that_does_not_exist_is_an_export_error(tmp_path: Path) -> None:
    from onnx_parity.export.command import command_export

    exported, [failure] = command_export("no-such-exporter-program {onnx}", request_for(),
                                         tmp_path / "m.onnx", None)
    assert exported is None
    assert failure.message.startswith("it could not be started: no-such-exporter-program: No "
                                      "such file or directory")


def test_the_script_a_command_names_is_in_the_cache_fingerprint(tmp_path: Path) -> None:
    from onnx_parity.pipeline.cache.fingerprint import command_files, environment, fingerprint_key

    repo = write_repo(tmp_path).resolve()
    script = repo / "scripts" / "export_onnx.py"
    (repo / "scripts" / "__init__.py").write_text("", encoding="utf-8")
    assert command_files(COMMAND, repo) == [script]
    assert command_files("python -m scripts.export_onnx --out {onnx}", repo) == [script]
    [spec] = load_settings(repo).models
    before = fingerprint_key(spec, repo, environment())
    script.write_text(script.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    assert fingerprint_key(spec, repo, environment()) != before
