"""Before any model runs: the fork policy, paths kept inside the workspace, the requirements.

`pull_request_target` with a fork head stops here (exit 2) unless the workflow opted in: that
event carries a write token and secrets, and the check runs the pull request's code. The
`requirements` are installed under constraints that keep torch and onnxruntime in place.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from onnx_parity.errors import UserError
from onnx_parity.models import (
    companion_pins,
    installed_version,
    missing_release_note,
)
from onnx_parity.publishing.github.commands import Annotation
from onnx_parity.publishing.github.inputs import InputError
from onnx_parity.publishing.github.session import Session

# The stack the engine was built and tested with: `requirements` may add packages, never move these.
PINNED_PACKAGES = ("torch", "onnx", "onnxruntime", "onnxscript", "numpy", "protobuf")
PIP_TAIL_LINES = 20

FORK_REFUSAL = (
    "Refusing to run: this is a pull_request_target event for pull request #{number}, whose "
    "head comes from the fork {head}. pull_request_target runs with a token that can write to "
    "{base} and with its secrets, and checking a pull request means importing and running its "
    "Python code: any fork author could take the token. No model was run and no requirement "
    "was installed. The safe set-up uses two workflows: one on `pull_request` (read-only token) "
    "runs onnx-parity with `comment: false` and uploads the output folder as an artifact; one "
    "on `workflow_run` downloads it and runs onnx-parity with `comment-from-report: "
    "<path>/report.json`, which posts the comment without running any model (see the README, "
    "\"Pull requests from forks\"). If you trust every fork author with write access, set "
    "`run-fork-code-with-write-token: true`."
)


class ForkPolicyError(UserError):
    """Fork code would run with a write token."""

    title = "fork pull request"


class RequirementsError(UserError):
    """The `requirements` input cannot be installed."""

    title = "requirements"


def refuse_fork_code(session: Session) -> None:
    pr, event = session.event.pull_request, session.event
    if event.name != "pull_request_target" or pr is None or not pr.is_fork:
        return
    if not session.inputs.run_fork_code_with_write_token:
        raise ForkPolicyError(FORK_REFUSAL.format(
            number=pr.number, head=pr.head_repository or "(a deleted fork)",
            base=pr.base_repository))
    session.commands.annotate(Annotation(
        "warning", f"Running the code of fork {pr.head_repository or '(deleted)'} with a write "
        "token because run-fork-code-with-write-token is true.", title="onnx-parity: fork code"))


def inside(root: Path, raw: str, name: str) -> Path:
    """`raw` resolved against `root`, refused (naming input `name`) if it leads outside."""
    path = (root / raw).resolve()
    if not path.is_relative_to(root.resolve()):
        raise InputError(
            f'input "{name}" is "{raw}", which resolves to {path}, outside {root}. Give a path '
            "inside the repository, relative to its root.")
    return path


def install_requirements(session: Session, requirements: Path, workdir: Path) -> None:
    if not requirements.is_file():
        raise RequirementsError(
            f'input "requirements": {requirements} does not exist. Commit the file or fix the '
            "path (it is relative to working-directory).")
    with constraints_file(session.environ) as constraints:
        command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
                   "--no-input", "-r", str(requirements), "-c", str(constraints),
                   *torch_index_options(session.environ)]
        result = subprocess.run(command, cwd=workdir, env=dict(session.environ), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    with session.commands.group(f"onnx-parity: pip install -r {requirements.name}"):
        session.commands.untrusted_text(result.stdout)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.strip().splitlines()[-PIP_TAIL_LINES:])
        raise RequirementsError(
            f'input "requirements": pip could not install {requirements.name} (exit code '
            f"{result.returncode}). torch, onnx, onnxruntime, onnxscript, numpy and protobuf "
            f"are held at the versions in the image{_companions_held()}; remove or loosen a "
            f"requirement that asks for other versions."
            f"{missing_release_note(result.stdout, installed_version('torch'))} "
            f"pip's last lines:\n{tail}")


@contextlib.contextmanager
def constraints_file(environ: Mapping[str, str]) -> Iterator[Path]:
    """$ONNX_PARITY_CONSTRAINTS (else the installed versions of PINNED_PACKAGES), plus the
    builds of torchvision (and torchaudio, where one exists) that pair with the installed
    torch: a CPU torch gets their CPU builds, never the CUDA ones the public index serves."""
    given = environ.get("ONNX_PARITY_CONSTRAINTS", "")
    base = Path(given).read_text(encoding="utf-8") if given else installed_constraints()
    pins = companion_pins(installed_version("torch"))
    with tempfile.TemporaryDirectory(prefix="onnx-parity-") as folder:
        path = Path(folder) / "constraints.txt"
        path.write_text(base.rstrip("\n") + "\n" + "".join(f"{pin}\n" for pin in pins),
                        encoding="utf-8")
        yield path


def torch_index_options(environ: Mapping[str, str]) -> list[str]:
    """The index torch's CPU builds came from ($ONNX_PARITY_TORCH_INDEX_URL, set in the image),
    so torchvision's matching CPU build can be found; nothing when it is not set."""
    index = environ.get("ONNX_PARITY_TORCH_INDEX_URL", "")
    return ["--extra-index-url", index] if index else []


def _companions_held() -> str:
    pins = companion_pins(installed_version("torch"))
    return f", and {', '.join(pins)} (the builds that pair with that torch)" if pins else ""


def installed_constraints() -> str:
    versions = {name: installed_version(name) for name in PINNED_PACKAGES}
    return "".join(f"{name}=={version}\n" for name, version in versions.items() if version)
