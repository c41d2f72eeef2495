"""Repositories as their owners lay them out: the factory's package in `src/` (found from the
build configuration, never installed), in a folder named by `python-path`, or installed by the
action's `requirements` (`-e .`); and factories that open files relative to the root.

Each test writes a fresh repository into tmp_path and runs the real command line on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from fixture_repo.harness import CliRun, run_cli
from onnx_parity.settings import found_source_folders, load_settings

NETS = '''\
import json
import os

import torch

import acme


def build():
    # The repository's own package is imported fresh in each worker, never in the zygote.
    if acme.IMPORTED_IN != os.getpid():
        raise RuntimeError("acme was imported before the worker forked")
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2).eval()


def configured():
    with open("configs/m.json", encoding="utf-8") as file:  # relative to the repository root
        width = json.load(file)["width"]
    torch.manual_seed(0)
    return torch.nn.Linear(4, width).eval()


def unconfigured():
    with open("configs/missing.json", encoding="utf-8") as file:
        json.load(file)
'''
PACKAGE_INIT = "import os\n\nIMPORTED_IN = os.getpid()\n"
MODEL = '''
[[{table}model]]
name = "{name}"
factory = "{factory}"
inputs = {{ input = "samples/x.npy" }}
dynamic-axes = {{ input = {{ 0 = "batch" }} }}
exporter = "torchscript"
'''
PROJECT = '[project]\nname = "acme"\nversion = "0.1.0"\n'
LAYOUTS = {
    "setuptools": ('[build-system]\nrequires = ["setuptools>=64"]\n'
                   'build-backend = "setuptools.build_meta"\n\n' + PROJECT
                   + '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'),
    "hatch": PROJECT + '\n[tool.hatch.build.targets.wheel]\npackages = ["src/acme"]\n',
    "poetry": ('[tool.poetry]\nname = "acme"\nversion = "0.1.0"\n'
               'packages = [{ include = "acme", from = "src" }]\n'),
}


def write_repo(repo: Path, pyproject: str, *models: tuple[str, str], folder: str = "src",
               extra: str = "") -> Path:
    """`acme` in `folder`, samples, and a [tool.onnx-parity] table of `models` (name, factory)."""
    package = repo / folder / "acme"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(PACKAGE_INIT, encoding="utf-8")
    (package / "nets.py").write_text(NETS, encoding="utf-8")
    (repo / "samples").mkdir()
    rng = np.random.default_rng(0)
    np.save(repo / "samples" / "x.npy", rng.standard_normal((4, 4)).astype(np.float32))
    table = "".join(MODEL.format(table="tool.onnx-parity.", name=name, factory=factory)
                    for name, factory in models)
    (repo / "pyproject.toml").write_text(
        pyproject + "\n[tool.onnx-parity]\n" + extra + table, encoding="utf-8")
    return repo


def check(repo: Path, out: Path, *extra: str) -> CliRun:
    return run_cli("check", "--jobs", "1", *extra, cwd=repo, out=out)


def finding(run: CliRun, model: str) -> dict:
    [found] = [f for f in run.models()[model]["findings"] if f["code"] == "load-error"]
    return found


# -- the folders, read from the build configuration -------------------------------------------


@pytest.mark.parametrize("layout", [
    *LAYOUTS.values(),
    '[tool.setuptools]\npackage-dir = {"" = "src"}\n',
    '[tool.pdm.build]\npackage-dir = "src"\n',
    '[tool.hatch.build.targets.wheel]\nsources = ["src"]\n',
    "",  # no build configuration: src/ holds the factory's top-level package
], ids=[*LAYOUTS, "package-dir", "pdm", "hatch-sources", "src-folder"])
def test_the_build_configuration_names_the_src_folder(tmp_path, layout):
    repo = write_repo(tmp_path, layout, ("m", "acme.nets:build"))
    [spec] = load_settings(repo).models
    assert spec.python_path.folders == (repo.resolve() / "src",)
    assert spec.python_path.origin != ""


def test_setup_cfg_is_read_never_run(tmp_path):
    (tmp_path / "lib" / "acme").mkdir(parents=True)
    (tmp_path / "setup.py").write_text("raise SystemExit('setup.py must not run')\n")
    (tmp_path / "setup.cfg").write_text("[options]\npackage_dir =\n    =lib\n", encoding="utf-8")
    found = found_source_folders(tmp_path.resolve(), "acme.nets:build")
    assert found.folders == (tmp_path.resolve() / "lib",)
    assert found.origin == "setup.cfg [options] package_dir"


def test_a_build_folder_outside_the_repository_is_never_taken(tmp_path):
    repo = tmp_path / "repo"
    (tmp_path / "elsewhere").mkdir()
    repo.mkdir()
    (repo / "pyproject.toml").write_text(
        '[tool.setuptools.packages.find]\nwhere = ["../elsewhere", "missing"]\n', encoding="utf-8")
    assert found_source_folders(repo.resolve(), "acme.nets:build").folders == ()


def test_python_path_must_stay_inside_the_repository(tmp_path):
    from onnx_parity.settings import ConfigError

    repo = write_repo(tmp_path, "", ("m", "acme.nets:build"), extra='python-path = ["../lib"]\n')
    with pytest.raises(ConfigError, match=r'key "python-path": path "\.\./lib" leads outside'):
        load_settings(repo)


# -- through the command line -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_src_package_that_is_not_installed_passes(tmp_path, layout):
    repo = write_repo(tmp_path / "repo", LAYOUTS[layout], ("m", "acme.nets:build"))
    done = check(repo, tmp_path / "out")
    assert done.code == 0, done.stdout + done.stderr
    assert done.models()["m"]["findings"] == []


@pytest.mark.slow
def test_a_change_to_a_module_under_src_runs_the_model_again(tmp_path):
    repo = write_repo(tmp_path / "repo", LAYOUTS["setuptools"], ("m", "acme.nets:build"))
    cache = tmp_path / "cache"
    first = check(repo, tmp_path / "out1", "--cache", str(cache))
    assert first.code == 0, first.stdout + first.stderr
    entries = "".join(path.read_text(encoding="utf-8") for path in cache.rglob("entry.json"))
    assert "src/acme/nets.py" in entries
    assert "] m: cached" in check(repo, tmp_path / "out2", "--cache", str(cache)).stdout
    nets = repo / "src" / "acme" / "nets.py"
    nets.write_text(nets.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    third = check(repo, tmp_path / "out3", "--cache", str(cache))
    assert third.code == 0, third.stdout + third.stderr
    assert "] m: cached" not in third.stdout


@pytest.mark.slow
def test_python_path_names_another_folder_and_a_missing_module_names_where_it_looked(tmp_path):
    repo = write_repo(tmp_path / "repo", "", ("m", "acme.nets:build"), ("lost", "nowhere:build"),
                      folder="lib", extra='python-path = ["lib"]\n')
    done = check(repo, tmp_path / "out")
    assert done.code == 1, done.stdout + done.stderr
    assert done.models()["m"]["findings"] == []
    lost = finding(done, "lost")
    assert lost["message"] == (
        'factory "nowhere:build": module "nowhere" was not found; looked in the repository '
        'root and lib/ (named by pyproject.toml [tool.onnx-parity]: key "python-path").')
    assert "`python-path`" in lost["fix"]
    assert "Fix:" not in lost["message"]


@pytest.mark.slow
def test_without_a_source_folder_the_message_says_only_the_root_was_searched(tmp_path):
    repo = write_repo(tmp_path / "repo", "", ("lost", "acme.nets:build"), folder="code")
    done = check(repo, tmp_path / "out")
    lost = finding(done, "lost")
    assert "looked in the repository root only (no build file names a source folder" in (
        lost["message"])
    assert 'python-path = ["lib"]' in lost["fix"]


@pytest.mark.slow
def test_factories_run_with_the_repository_root_as_working_directory(tmp_path):
    repo = write_repo(tmp_path / "repo", LAYOUTS["setuptools"], ("configured", "acme.nets:configured"),
                      ("unconfigured", "acme.nets:unconfigured"))
    (repo / "configs").mkdir()
    (repo / "configs" / "m.json").write_text(json.dumps({"width": 3}), encoding="utf-8")
    before = sorted(path.relative_to(repo) for path in repo.rglob("*")
                    if "__pycache__" not in path.parts)
    done = check(repo, tmp_path / "out")
    assert done.code == 1, done.stdout + done.stderr
    assert done.models()["configured"]["findings"] == []
    missing = finding(done, "unconfigured")
    assert '"configs/missing.json" does not exist (opened relative to the working directory, ' \
           "the repository root)" in missing["message"]
    assert missing["file"] == "src/acme/nets.py"
    assert missing["fix"].startswith('Commit "configs/missing.json" at that path')
    assert "python -c" not in missing["fix"]
    after = sorted(path.relative_to(repo) for path in repo.rglob("*")
                   if "__pycache__" not in path.parts)
    assert after == before  # the worker wrote nothing of its own into the repository


# -- the action's requirements: `-e .` under the pinned constraints ---------------------------


def throwaway_venv(folder: Path) -> Path:
    """A venv that sees the project's packages (torch, onnx-parity, pip, setuptools) through a
    .pth file, so whatever pip installs lands in it and never in the project's venv."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                              "'purelib'))"], check=True, capture_output=True, text=True)
    Path(purelib.stdout.strip(), "project.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n", encoding="utf-8")
    return python


@pytest.mark.slow
def test_requirements_install_the_repositorys_own_package_and_the_check_passes(tmp_path):
    from fake_github import FakeGitHub, Token
    from test_action_flow import TOKEN, pr_env

    python = throwaway_venv(tmp_path / "venv")
    with FakeGitHub({TOKEN: Token.installation()}) as github:
        env = pr_env(tmp_path, github, requirements="requirements.txt", fail_on="error")
        repo = write_repo(Path(env["GITHUB_WORKSPACE"]), LAYOUTS["setuptools"],
                          ("m", "acme.nets:build"))
        (repo / "requirements.txt").write_text("-e .\n", encoding="utf-8")
        process_env = {k: v for k, v in os.environ.items()
                       if not k.startswith(("GITHUB_", "INPUT_", "PIP_"))}
        # Offline: the build backend and every pin come from the packages already there.
        process_env |= env | {"GITHUB_TOKEN": TOKEN, "PIP_NO_INDEX": "1",
                              "PIP_NO_BUILD_ISOLATION": "0"}
        done = subprocess.run([str(python), "-m", "onnx_parity", "action"], env=process_env,
                              cwd=repo, capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "::group::onnx-parity: pip install -r requirements.txt" in done.stdout
    assert "Successfully installed acme-0.1.0" in done.stdout
    installed = subprocess.run([str(python), "-m", "pip", "show", "acme"], capture_output=True,
                               text=True, check=False)
    assert "Editable project location" in installed.stdout
    not_ours = subprocess.run([sys.executable, "-m", "pip", "show", "acme"], capture_output=True,
                              text=True, check=False)
    assert not_ours.returncode != 0  # the project's own venv is untouched
    report = json.loads((repo / "onnx-parity-out" / "report.json").read_text(encoding="utf-8"))
    [model] = report["models"]
    assert model["findings"] == []  # acme.IMPORTED_IN is the worker's pid: not pre-imported
