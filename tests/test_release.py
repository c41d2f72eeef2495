"""The release flow: the release commit's action.yml names the pushed image, main's the
Dockerfile, and nothing else in action.yml changes (.ci/pin-action-image.py as the release
workflow runs it, a real subprocess on a copy of the real action.yml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
PIN = REPO_ROOT / ".ci" / "pin-action-image.py"
ACTION = REPO_ROOT / "action.yml"
RELEASE = REPO_ROOT / ".github" / "workflows" / "release.yml"
IMAGE = "ghcr.io/octo-org/onnx-parity:v1.2.3"


def pin(path: Path, reference: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PIN), str(path), reference], capture_output=True,
                          text=True, timeout=60, check=False)


def test_main_builds_the_dockerfile() -> None:
    assert yaml.safe_load(ACTION.read_text(encoding="utf-8"))["runs"] == {
        "using": "docker", "image": "Dockerfile"}


def test_the_release_commit_uses_the_image_and_changes_nothing_else(tmp_path: Path) -> None:
    released = tmp_path / "action.yml"
    released.write_bytes(ACTION.read_bytes())
    done = pin(released, IMAGE)
    assert done.returncode == 0, done.stderr
    before = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    after = yaml.safe_load(released.read_text(encoding="utf-8"))
    assert after["runs"] == {"using": "docker", "image": f"docker://{IMAGE}"}
    assert {k: v for k, v in after.items() if k != "runs"} == \
        {k: v for k, v in before.items() if k != "runs"}
    old, new = ACTION.read_text().splitlines(), released.read_text().splitlines()
    start = next(i for i, line in enumerate(old) if "# release:" in line)
    assert new[:start] == old[:start]  # every input and output, byte for byte
    assert new[start:] == [
        "  # Released: the image that .github/workflows/release.yml built, smoke-tested",
        "  # and pushed for this version (main builds the Dockerfile instead).",
        f"  image: docker://{IMAGE}"]


def test_pinning_twice_or_a_bad_reference_changes_nothing(tmp_path: Path) -> None:
    released = tmp_path / "action.yml"
    released.write_bytes(ACTION.read_bytes())
    assert pin(released, IMAGE).returncode == 0
    once = released.read_bytes()
    again = pin(released, "ghcr.io/octo-org/onnx-parity:v1.2.4")
    assert again.returncode == 2
    assert "found 0 (already pinned?)" in again.stderr
    assert released.read_bytes() == once
    fresh = tmp_path / "fresh.yml"
    fresh.write_bytes(ACTION.read_bytes())
    for bad in ("ghcr.io/octo-org/onnx-parity", "Dockerfile", "ghcr.io/x/y:v1 ; rm -rf /"):
        refused = pin(fresh, bad)
        assert refused.returncode == 2, bad
        assert "not an image reference" in refused.stderr, bad
    assert fresh.read_bytes() == ACTION.read_bytes()


@pytest.fixture(scope="module")
def release() -> dict:
    workflow = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    workflow["on"] = workflow.pop(True)  # PyYAML reads the key `on` as True
    return workflow


def test_the_release_workflow_pushes_then_pins_then_runs_the_released_action(release) -> None:
    assert set(release["on"]) == {"workflow_dispatch"}
    jobs = release["jobs"]
    assert jobs["release-commit"]["needs"] == "image"
    assert jobs["verify"]["needs"] == ["image", "release-commit"]
    assert jobs["image"]["permissions"] == {"contents": "read", "packages": "write"}
    assert jobs["release-commit"]["permissions"] == {"contents": "write"}
    assert release["permissions"] == {"contents": "read"}
    script = jobs["release-commit"]["steps"][1]["run"]
    assert 'python3 .ci/pin-action-image.py action.yml "$IMAGE:$TAG"' in script
    assert 'git push -f origin "refs/tags/$MAJOR"' in script
    steps = jobs["verify"]["steps"]
    assert steps[0]["with"]["ref"] == "${{ needs.image.outputs.tag }}"
    assert any(step.get("uses") == "./" for step in steps)
