"""`env`: environment variables for the model's code, set before the zygote imports anything.

The end-to-end tests install a tiny package outside the repository (a folder on PYTHONPATH
with its dist-info, so it is an installed distribution the way pipeline/preimports.py decides
what the zygote imports once) that reads its variables when it is imported, and run the real
CLI on a fresh repository that uses it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import run_cli
from onnx_parity.credentials import SECRET_VARIABLES
from onnx_parity.pipeline.all_models import worker_environment
from onnx_parity.pipeline.cache.fingerprint import environment
from onnx_parity.pipeline.preimports import installed_imports
from onnx_parity.settings import load_settings, resolved_env
from onnx_parity.settings.keys.environment import TOOL_VARIABLES
from onnx_parity.settings.values import ConfigError

MODEL = '''
import os

import torch
import envreader  # an installed package: the zygote imports it before any worker forks


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x) * envreader.SCALE


def build():
    (envreader.FOLDER / "built.txt").write_text(str(os.getpid()))
    return Scaled()
'''

PACKAGE = '''
import os
from pathlib import Path

# Read once, at import time, as ultralytics reads YOLO_OFFLINE and matplotlib MPLCONFIGDIR.
SCALE = float(os.environ["ENVREADER_SCALE"])
FOLDER = Path(os.environ["ENVREADER_DIR"])
FOLDER.mkdir(parents=True, exist_ok=True)
(FOLDER / "imported.txt").write_text(f"{SCALE} {os.getpid()}\\n")
'''

CONFIG = '''{top}
[[model]]
name = "scaled"
factory = "models.net:build"
inputs = {{ x = "samples/x.npy" }}
dynamic-axes = {{ x = {{ 0 = "batch" }} }}
'''


def write_repo(root: Path, top: str) -> Path:
    repo = root / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "samples").mkdir()
    (repo / "models" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "models" / "net.py").write_text(textwrap.dedent(MODEL), encoding="utf-8")
    np.save(repo / "samples" / "x.npy",
            np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))
    (repo / "onnx-parity.toml").write_text(CONFIG.format(top=top), encoding="utf-8")
    return repo


def install_package(root: Path) -> Path:
    """`envreader` as an installed distribution, in a folder outside the repository."""
    site = root / "site"
    (site / "envreader").mkdir(parents=True)
    (site / "envreader" / "__init__.py").write_text(PACKAGE, encoding="utf-8")
    info = site / "envreader-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: envreader\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "top_level.txt").write_text("envreader\n", encoding="utf-8")
    (info / "RECORD").write_text("envreader/__init__.py,,\n", encoding="utf-8")
    return site


def cli_env(site: Path) -> dict[str, str]:
    import os

    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


ENV = 'env = { ENVREADER_SCALE = "2.5", ENVREADER_DIR = ".cache/envreader" }'


@pytest.mark.slow
def test_an_installed_package_reads_env_when_the_zygote_imports_it(tmp_path: Path) -> None:
    site = install_package(tmp_path)
    repo = write_repo(tmp_path, ENV)
    run = run_cli("check", cwd=repo, out=tmp_path / "out", env=cli_env(site))
    assert run.code == 0, run.stdout + run.stderr
    report = run.report()
    assert report["env"] == ["ENVREADER_DIR", "ENVREADER_SCALE"]  # names, never values
    assert "2.5" not in (tmp_path / "out" / "report.json").read_text(encoding="utf-8")
    # The relative value is a path from the repository root, though the zygote runs elsewhere.
    scale, imported_by = (repo / ".cache" / "envreader" / "imported.txt").read_text().split()
    assert float(scale) == 2.5
    # Imported once, before the fork, by the zygote: not by the worker that built the model.
    built_by = (repo / ".cache" / "envreader" / "built.txt").read_text().strip()
    assert imported_by != built_by
    assert report["models"][0]["passed"]


@pytest.mark.slow
def test_without_env_the_package_fails_to_import_as_the_models_load_error(
        tmp_path: Path) -> None:
    site = install_package(tmp_path)
    repo = write_repo(tmp_path, "")
    run = run_cli("check", cwd=repo, out=tmp_path / "out", env=cli_env(site))
    assert run.code == 1, run.stdout + run.stderr
    [finding] = run.models()["scaled"]["findings"]
    assert finding["code"] == "load-error"
    assert "ENVREADER_SCALE" in finding["message"]


def test_the_preimport_of_the_package_is_planned(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The package is pre-imported in the zygote (so only `env` can reach its import)."""
    site = install_package(tmp_path)
    repo = write_repo(tmp_path, ENV)
    monkeypatch.syspath_prepend(str(site))
    settings = load_settings(repo)
    assert "envreader" in installed_imports(settings.models, repo)


def test_env_is_set_for_the_zygote_and_resolved_from_the_repository(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, ENV)
    settings = load_settings(repo)
    assert settings.env == {"ENVREADER_SCALE": "2.5", "ENVREADER_DIR": ".cache/envreader"}
    env = worker_environment({"GITHUB_TOKEN": "t", "HOME": "/h"},
                             resolved_env(settings.env, settings.repo))
    assert env["ENVREADER_DIR"] == str(repo.resolve() / ".cache" / "envreader")
    assert env["ENVREADER_SCALE"] == "2.5"
    assert "GITHUB_TOKEN" not in env
    # What the tool sets itself is among the names `env` refuses.
    assert {name for name in env if name not in ("HOME", "ENVREADER_DIR", "ENVREADER_SCALE")} \
        <= set(TOOL_VARIABLES)


def test_env_is_part_of_the_fingerprint_as_written() -> None:
    plain = environment()
    assert "env" not in plain  # runs without `env` keep their keys
    one, other = environment({"A": "1"}), environment({"A": "2"})
    assert one["env"] == {"A": "1"}
    assert one != other


def refused(tmp_path: Path, top: str, model_extra: str = "") -> str:
    repo = write_repo(tmp_path, top)
    if model_extra:
        path = repo / "onnx-parity.toml"
        path.write_text(path.read_text(encoding="utf-8") + model_extra, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_settings(repo)
    return str(raised.value)


@pytest.mark.parametrize("name", [*SECRET_VARIABLES, *TOOL_VARIABLES])
def test_a_credential_or_a_variable_the_tool_sets_is_refused(tmp_path: Path, name: str) -> None:
    message = refused(tmp_path, f'env = {{ "{name}" = "x" }}')
    assert 'onnx-parity.toml: key "env"' in message
    assert f"{name} cannot be set here" in message
    assert f"Remove {name} from `env`" in message


def test_bad_names_values_and_places_are_refused(tmp_path: Path) -> None:
    assert "is not an environment variable name" in refused(tmp_path / "a", 'env = { "A-B" = "1" }')
    assert 'expected a string (environment values are text), e.g. N = "1"' in refused(
        tmp_path / "b", "env = { N = 1 }")
    assert "leads outside the repository" in refused(tmp_path / "c", 'env = { D = "../x" }')
    assert "expected a table of variable name -> string" in refused(tmp_path / "d", 'env = "A=1"')
    message = refused(tmp_path / "e", "", 'env = { A = "1" }\n')
    assert 'model "scaled": key "env": only the top level sets this key' in message


def test_the_cli_stops_with_exit_2_naming_the_variable(tmp_path: Path) -> None:
    repo = write_repo(tmp_path, 'env = { GITHUB_TOKEN = "ghp_x", OMP_NUM_THREADS = "8" }')
    run = run_cli("check", cwd=repo)
    assert run.code == 2
    assert 'onnx-parity.toml: key "env": GITHUB_TOKEN cannot be set here: it is a credential' \
        in run.stdout + run.stderr
