#!/usr/bin/env python3
"""Point a release's action.yml at its prebuilt image instead of the Dockerfile.

    python3 .ci/pin-action-image.py action.yml ghcr.io/OWNER/onnx-parity:v1.2.3

On main, action.yml says `image: Dockerfile` (GitHub builds the image on every run). The
release workflow (.github/workflows/release.yml) builds, smoke-tests and pushes the image, then
runs this on the release commit so that `uses: OWNER/onnx-parity@v1.2.3` (and `@v1`) pulls
that image and never builds torch on the user's runner. Only the marked block changes; every
other byte of the file stays. Exits 2, changing nothing, when the block is not there exactly
once or the reference is not a registry image with a tag or digest.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The block on main: the marker comment line(s) and the line after them.
BLOCK = re.compile(
    r"^(?P<indent>[ ]+)# release: .*\n(?:(?P=indent)#.*\n)*(?P=indent)image: Dockerfile\n",
    re.MULTILINE,
)
REFERENCE = re.compile(
    r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(@sha256:[0-9a-f]{64})?"
)


def pinned(text: str, reference: str) -> str:
    if not REFERENCE.fullmatch(reference) or not (":" in reference.split("/")[-1]
                                                  or "@" in reference):
        raise ValueError(f"{reference!r} is not an image reference with a tag or digest, e.g. "
                         "ghcr.io/owner/onnx-parity:v1.2.3")
    found = list(BLOCK.finditer(text))
    if len(found) != 1:
        raise ValueError(f"expected one `# release:` comment block ending in `image: Dockerfile`, "
                         f"found {len(found)} (already pinned?)")
    indent = found[0].group("indent")
    block = (f"{indent}# Released: the image that .github/workflows/release.yml built, smoke-tested\n"
             f"{indent}# and pushed for this version (main builds the Dockerfile instead).\n"
             f"{indent}image: docker://{reference}\n")
    return text[: found[0].start()] + block + text[found[0].end():]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    path, reference = Path(argv[0]), argv[1]
    try:
        text = pinned(path.read_text(encoding="utf-8"), reference)
    except (OSError, ValueError) as error:
        print(f"pin-action-image: {path}: {error}", file=sys.stderr)
        return 2
    path.write_text(text, encoding="utf-8")
    print(f"pin-action-image: {path} now uses docker://{reference}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
