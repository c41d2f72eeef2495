"""One file out of a pinned npm package, fetched with `npm pack` at test time.

The test helpers that need a JavaScript package (GitHub's OpenAPI description, mermaid) get it
here; nothing of it is committed, and each caches what it keeps under `.ci-cache/`. Without
npm or the registry the caller's tests fail with the reason: a silent skip would hide a drift.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path


class PackageUnavailable(Exception):
    """The package could not be had; the text says why and what to install."""


def npm_member(package: str, version: str, member: str, scratch: Path, needed_for: str) -> bytes:
    """`member` (e.g. `package/dist/x.js`) of `package@version`; `needed_for` ends the message."""
    npm = shutil.which("npm")
    if npm is None:
        raise PackageUnavailable(
            f"npm is not installed, so {package}@{version} cannot be fetched and {needed_for}. "
            "Install Node.js/npm (CI has it) and run the tests again.")
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        done = subprocess.run(
            [npm, "pack", f"{package}@{version}", "--pack-destination", folder,
             "--loglevel", "error"],
            capture_output=True, text=True, timeout=300, cwd=folder, check=False)
        tarballs = list(Path(folder).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise PackageUnavailable(
                f"`npm pack {package}@{version}` failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-800:]}. These tests need the npm "
                "registry; check the network or npm's registry configuration.")
        with tarfile.open(tarballs[0]) as archive:
            extracted = archive.extractfile(member)
            if extracted is None:
                raise PackageUnavailable(f"{tarballs[0].name} has no {member}")
            return extracted.read()
