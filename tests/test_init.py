"""`onnx-parity init` through the real CLI, on fresh folders: from a model and no configuration
to a passing check with one command, and every refusal before anything is overwritten."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import CliRun

CNN = '''\
import os
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.conv(x).mean(dim=(2, 3)))


def build():
    marker = os.environ.get("BUILT_IN_PID_FILE")
    if marker:
        with open(marker, "a") as handle:
            handle.write(f"{os.getpid()}\\n")
    return Net().eval()


def broken():
    raise ValueError("the config file is missing")
'''
# A tiny text model: token ids and a mask, by keyword as transformers models take them.
TEXT = '''\
import numpy as np
import torch


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 8)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1).to(hidden.dtype)
        return self.out(hidden.mean(dim=1))


def build():
    torch.manual_seed(0)
    return Encoder().eval()


def real_batch():
    ids = np.array([[5, 17, 42, 8, 0, 0], [3, 99, 12, 7, 64, 1]], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": torch.tensor((ids > 0).astype(np.int64))}
'''


def make_repo(root: Path, source: str = CNN, module: str = "net") -> Path:
    (root / "models").mkdir(parents=True)
    (root / "models" / f"{module}.py").write_text(source, encoding="utf-8")
    return root


def init(repo: Path, *args: str, env: dict[str, str] | None = None) -> CliRun:
    command = [sys.executable, "-m", "onnx_parity", "init", *args]
    done = subprocess.run(command, cwd=repo, env={**os.environ, **(env or {})}, text=True,
                          capture_output=True, timeout=600, check=False)
    out = repo / "onnx-parity-out"
    return CliRun(done.returncode, done.stdout, done.stderr, 0.0, out if out.is_dir() else None)


def config_of(repo: Path, name: str = "onnx-parity.toml") -> dict:
    return tomllib.loads((repo / name).read_text(encoding="utf-8"))


@pytest.mark.slow
def test_one_command_takes_a_repository_with_no_configuration_to_a_passing_check(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    pids = tmp_path / "pids"
    done = init(repo, "--factory", "models.net:build", "--input", "x=2x3x16x16",
                env={"BUILT_IN_PID_FILE": str(pids)})
    assert done.code == 0, done.stdout + done.stderr
    assert "1 of 1 models pass" in done.stdout
    assert "forward(x)" in done.stdout
    assert done.models()["net"]["passed"] is True
    [entry] = config_of(repo)["model"]
    assert entry == {"name": "net", "factory": "models.net:build",
                     "inputs": {"x": "samples/net/x.npy"}, "dynamic-axes": {"x": {"0": "batch"}}}
    samples = np.load(repo / "samples" / "net" / "x.npy", allow_pickle=False)
    assert samples.shape == (2, 3, 16, 16)
    assert samples.dtype == np.float32
    # Seeded: the same bytes on every run.
    again = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    assert np.array_equal(samples, again)
    assert "random inputs do not exercise the paths real data takes" in done.stderr.lower()
    assert "samples/net/x.npy" in done.stderr
    # Built in a worker (the factory ran once to probe, once to check), never in init itself.
    built = pids.read_text().split()
    assert len(built) == 2
    assert str(os.getpid()) not in built
    # The command line's check agrees with what init printed.
    check = subprocess.run([sys.executable, "-m", "onnx_parity", "check", "--jobs", "1"],
                           cwd=repo, capture_output=True, text=True, timeout=600, check=False)
    assert check.returncode == 0, check.stderr


@pytest.mark.slow
def test_real_samples_from_a_function_and_integer_inputs_bound_by_name(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", TEXT, module="text")
    done = init(repo, "--factory", "models.text:build", "--samples", "models.text:real_batch",
                "--name", "encoder", "--dynamic", "input_ids:0=batch",
                "--dynamic", "attention_mask:0=batch")
    assert done.code == 0, done.stdout + done.stderr
    assert "forward(input_ids, attention_mask=...)" in done.stdout
    assert "random" not in done.stderr.lower()
    [entry] = config_of(repo)["model"]
    assert entry["inputs"] == {"input_ids": "samples/encoder/input_ids.npy",
                               "attention_mask": "samples/encoder/attention_mask.npy"}
    ids = np.load(repo / "samples" / "encoder" / "input_ids.npy")
    assert ids.dtype == np.int64
    assert ids[1].tolist() == [3, 99, 12, 7, 64, 1]
    assert done.models()["encoder"]["passed"] is True


@pytest.mark.slow
def test_random_integer_inputs_stay_inside_their_range(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", TEXT, module="text")
    done = init(repo, "--factory", "models.text:build", "--input", "input_ids=4x6:int64:0-100",
                "--name", "enc")
    assert done.code == 0, done.stdout + done.stderr
    ids = np.load(repo / "samples" / "enc" / "input_ids.npy")
    assert ids.shape == (4, 6)
    assert ids.dtype == np.int64
    assert ids.min() >= 0
    assert ids.max() < 100


@pytest.mark.slow
def test_existing_entries_and_comments_are_kept_byte_for_byte(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert init(repo, "--factory", "models.net:build", "--input", "x=1x3x8x8",
                "--name", "first").code == 0
    # A hand-kept file: comments, CRLF line endings, no newline at the end.
    written = (repo / "onnx-parity.toml").read_text().replace("\n", "\r\n").rstrip()
    before = ("# Our models. Keep the tolerances tight.\r\natol = 1e-5   # the default\r\n"
              + written + "   # trailing comment").encode()
    (repo / "onnx-parity.toml").write_bytes(before)
    done = init(repo, "--factory", "models.net:build", "--input", "x=1x3x8x8", "--name", "cnn")
    assert done.code == 0, done.stdout + done.stderr
    after = (repo / "onnx-parity.toml").read_bytes()
    assert after.startswith(before + b"\r\n")
    added = after[len(before):]
    assert added.count(b"\n") == added.count(b"\r\n") > 3  # the file's own line endings
    assert [m["name"] for m in config_of(repo)["model"]] == ["first", "cnn"]
    assert list(done.models()) == ["cnn"]
    assert done.models()["cnn"]["passed"] is True


@pytest.mark.slow
def test_an_existing_model_name_or_sample_file_is_refused_without_force(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = init(repo, "--factory", "models.net:build", "--input", "x=1x3x8x8")
    assert first.code == 0, first.stderr
    config = (repo / "onnx-parity.toml").read_bytes()
    samples = (repo / "samples" / "net" / "x.npy").read_bytes()

    again = init(repo, "--factory", "models.net:build", "--input", "x=2x3x8x8")
    assert again.code == 2
    assert again.stdout == ""
    assert again.stderr.strip() == ('onnx-parity: model "net" is already in onnx-parity.toml. '
                                    "Fix: choose another --name, or pass --force to replace its "
                                    "entry and samples.")
    (repo / "onnx-parity.toml").write_bytes(config.replace(b'name = "net"', b'name = "other"'))
    taken = init(repo, "--factory", "models.net:build", "--input", "x=2x3x8x8")
    assert taken.code == 2
    assert "x.npy" in taken.stderr
    assert "--force" in taken.stderr
    assert (repo / "samples" / "net" / "x.npy").read_bytes() == samples


@pytest.mark.slow
def test_force_replaces_the_entry_and_its_samples_and_keeps_the_rest(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert init(repo, "--factory", "models.net:build", "--input", "x=1x3x8x8").code == 0
    assert init(repo, "--factory", "models.net:build", "--input", "x=1x3x8x8",
                "--name", "second").code == 0
    text = (repo / "onnx-parity.toml").read_text()
    (repo / "onnx-parity.toml").write_text("# mine: keep this line\n" + text)
    done = init(repo, "--factory", "models.net:build", "--input", "x=3x3x8x8", "--force")
    assert done.code == 0, done.stderr
    after = (repo / "onnx-parity.toml").read_text()
    assert after.startswith("# mine: keep this line\n")
    assert [m["name"] for m in config_of(repo)["model"]] == ["second", "net"]
    assert np.load(repo / "samples" / "net" / "x.npy").shape == (3, 3, 8, 8)


@pytest.mark.parametrize(("inputs", "expected"), [
    (["--input", "image=1x3x8x8"],
     'onnx-parity: models.net:build: forward takes (x); the input(s) "image" are not among its '
     "parameters. Fix: name each --input after a parameter of forward, e.g. --input "
     "x=1x3x224x224."),
], ids=["unknown input"])
def test_inputs_that_forward_does_not_take_are_refused_naming_its_parameters(
        tmp_path: Path, inputs: list[str], expected: str) -> None:
    repo = make_repo(tmp_path / "repo")
    done = init(repo, "--factory", "models.net:build", *inputs)
    assert done.code == 2
    assert done.stderr.strip() == expected
    assert not (repo / "onnx-parity.toml").exists()
    assert not (repo / "samples").exists()


def test_a_missing_required_input_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", TEXT, module="text")
    done = init(repo, "--factory", "models.text:build", "--input", "attention_mask=2x6:int64:0-2")
    assert done.code == 2
    assert ('forward takes (input_ids, attention_mask=...); no input is given for the required '
            'parameter(s) "input_ids"') in done.stderr
    assert not (repo / "onnx-parity.toml").exists()


def test_a_factory_that_raises_is_exit_2_at_its_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    done = init(repo, "--factory", "models.net:broken", "--input", "x=1x3x8x8")
    assert done.code == 2
    assert "Traceback" not in done.stderr
    assert 'factory "models.net:broken" raised at models/net.py:' in done.stderr
    assert "ValueError: the config file is missing" in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--input", "x"], '--input "x": no shape, and no --samples function'),
    (["--input", "x=1x3x0"], 'shape "1x3x0" is not sizes >= 1'),
    (["--input", "x=1x3:complex64"], 'dtype "complex64" is not one of float32'),
    (["--input", "ids=2x16:int64"], "an integer input needs its range LOW-HIGH"),
    (["--input", "ids=2x16:int64:9-3"], "the range 9-3 is empty"),
    (["--input", "x=1x3", "--dynamic", "x:2=batch"], 'input "x" has 2 axes'),
    (["--input", "x=1x3", "--dynamic", "y:0=batch"], '"y" is not one of the --input names'),
    (["--input", "x=1x3", "--name", "../up"], "cannot be used as a file name"),
    (["--input", "x=1x3", "--input", "x=1x4"], "--input names x more than once"),
    ([], "give each input of forward with --input"),
], ids=["no shape", "zero size", "dtype", "int without range", "empty range", "axis",
        "dynamic name", "model name", "repeated", "no input"])
def test_malformed_options_are_exit_2_before_any_worker(tmp_path: Path, args: list[str],
                                                        message: str) -> None:
    repo = make_repo(tmp_path / "repo")
    done = init(repo, "--factory", "models.net:build", *args)
    assert done.code == 2, done.stderr
    assert message in done.stderr, done.stderr
    assert done.stdout == ""  # refused before "building ... in a worker"


@pytest.mark.slow
def test_pyproject_with_a_tool_table_gets_the_entry(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    pyproject = '[project]\nname = "models"\n\n[tool.onnx-parity]\nbatch-sizes = [1, 2]\n'
    (repo / "pyproject.toml").write_text(pyproject)
    done = init(repo, "--factory", "models.net:build", "--input", "x=1x3x8x8")
    assert done.code == 0, done.stderr
    text = (repo / "pyproject.toml").read_text()
    assert text.startswith(pyproject)
    assert "[[tool.onnx-parity.model]]" in text
    assert not (repo / "onnx-parity.toml").exists()
    assert done.models()["net"]["batch_sizes"] == [1, 2]
