"""Regenerate the expected markdown files from the committed report.json fixtures.

    python tests/expected/regenerate.py                 # rewrite every *.md here
    python tests/expected/regenerate.py --check         # exit 1 if any would change
    python tests/expected/regenerate.py --from-example  # first run the bundled example, keep
                                                        # its report.json as the fixture and
                                                        # its console verdict in README.md

Review the diff before committing: these files ARE the product's comment, byte for byte.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from onnx_parity.report.markdown import render_markdown
from onnx_parity.report.serialization import run_from_json

HERE = Path(__file__).parent
EXAMPLE = HERE.parent.parent / "examples" / "seed-failures"
README = HERE.parent.parent / "README.md"
# The console's verdict table opens with its header row; the README shows it from there on.
CONSOLE_HEADER = "      model "
FOOTER = "onnx-parity expected-file footer"
SOURCE_BASE = "https://github.com/octo-org/models/blob/0123456789abcdef0123456789abcdef01234567"
VARIANTS = {"full": 2, "findings": 1, "table": 0}


def expected_files() -> dict[Path, str]:
    rendered: dict[Path, str] = {}
    for fixture in sorted(HERE.glob("*.report.json")):
        run = run_from_json(json.loads(fixture.read_text(encoding="utf-8")))
        stem = fixture.name.removesuffix(".report.json")
        for variant, detail in VARIANTS.items():
            text = render_markdown(run, source_base=SOURCE_BASE, detail=detail, footer=FOOTER)
            rendered[HERE / f"{stem}.{variant}.md"] = text
        rendered[HERE / f"{stem}.local.md"] = render_markdown(run, footer=FOOTER)
    return rendered


def refresh_from_example() -> None:
    """Run the example through the real CLI as the README's first command does (default output
    folder, beside the repository) and keep its report.json (exit 1 is its verdict) and the
    verdict it prints."""
    with tempfile.TemporaryDirectory(prefix="onnx-parity-example-") as folder:
        repo = Path(folder) / "seed-failures"
        shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns("__pycache__"))
        out = Path(folder) / "onnx-parity-out"
        command = [sys.executable, "-m", "onnx_parity", "check", "--repo", str(repo)]
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
        if done.returncode != 1 or not (out / "report.json").is_file():
            raise SystemExit(f"the example exited {done.returncode} (its verdict is 1, with "
                             f"report.json):\n{done.stderr}")
        shutil.copyfile(out / "report.json", HERE / "seed-failures.report.json")
        README.write_text(with_console_block(README.read_text(encoding="utf-8"), done.stdout),
                          encoding="utf-8")


def console_verdict(stdout: str) -> list[str]:
    """What the console prints after its progress lines: the verdict table and what follows."""
    lines = stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(CONSOLE_HEADER)]
    if not starts:
        raise SystemExit(f"no verdict table in the example's output:\n{stdout}")
    return lines[starts[-1]:]


def readme_console_block(readme: str) -> tuple[int, int]:
    """The line span of the README's fenced block that shows the console's verdict."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(CONSOLE_HEADER)), None)
    if start is None or lines[start - 1] != "```":
        raise SystemExit("README.md: no fenced block opening with the verdict table's header")
    return start, lines.index("```", start)


def with_console_block(readme: str, stdout: str) -> str:
    start, end = readme_console_block(readme)
    lines = readme.splitlines()
    return "\n".join(lines[:start] + console_verdict(stdout) + lines[end:]) + "\n"


def main(argv: list[str]) -> int:
    if "--from-example" in argv:
        refresh_from_example()
    stale = [path for path, text in expected_files().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for path in stale:
            print(f"stale: {path.name}")
        return 1 if stale else 0
    for path, text in expected_files().items():
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(expected_files())} files ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
