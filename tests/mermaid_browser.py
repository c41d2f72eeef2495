"""Render Mermaid blocks the way a reader's browser does: the `mermaid` package in Chromium.

The package comes from npm (pinned below) at test time: `npm pack` downloads it and only
`dist/mermaid.min.js` is kept, in `.ci-cache/mermaid/` at the repository root (gitignored).
Chromium runs headless on a local HTML page; when it is missing and we are root on Debian, it
is installed with apt-get (as .ci/container.sh installs podman). Without npm, the registry or
a browser the tests say so and fail: a silent skip would let a chart GitHub cannot draw land.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from npm_packages import npm_member

PACKAGE = "mermaid"
VERSION = "12.3.0"
MEMBER = "package/dist/mermaid.min.js"
CACHE = Path(__file__).resolve().parents[1] / ".ci-cache" / "mermaid"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BLOCK = re.compile(r"^```mermaid\n(.*?)^```$", re.DOTALL | re.MULTILINE)
# Each block is rendered on its own, and what the browser drew is written into #result as
# JSON: what a person would look at (the text), and what they would count (bars, a line).
SCRIPT = """
mermaid.initialize({startOnLoad: false});
(async () => {
  const results = [];
  for (const el of document.querySelectorAll('pre.mermaid')) {
    const result = {status: 'error', error: '', texts: [], bars: 0, lines: 0};
    try {
      await mermaid.run({nodes: [el]});
      result.status = 'rendered';
    } catch (e) {
      result.error = String((e && e.message) || e).slice(0, 500);
    }
    const svg = el.querySelector('svg');
    if (svg) {
      result.texts = Array.from(svg.querySelectorAll('text'), t => t.textContent);
      result.bars = svg.querySelectorAll('[class^="bar-plot"] rect').length;
      result.lines = svg.querySelectorAll('[class^="line-plot"] path').length;
    }
    results.push(result);
  }
  document.getElementById('result').textContent = JSON.stringify(results);
})();
"""


class BrowserUnavailable(Exception):
    """Chromium could not be had; the text says why and what to do."""


@dataclass(frozen=True)
class Rendered:
    """What the browser drew for one block."""

    status: str  # "rendered", or "error" when mermaid refused the block
    error: str  # mermaid's message
    texts: tuple[str, ...]  # every text of the drawn SVG (title, labels, ticks, errors)
    bars: int
    lines: int

    @property
    def shows_an_error(self) -> bool:
        return self.status != "rendered" or any("Syntax error" in text for text in self.texts)


def mermaid_blocks(markdown: str) -> list[str]:
    return BLOCK.findall(markdown)


def render(blocks: list[str], screenshot: Path | None = None) -> list[Rendered]:
    """Every block drawn in one page; with `screenshot`, a PNG of that page is written too."""
    script = mermaid_script()
    browser = chromium()
    with tempfile.TemporaryDirectory(prefix="onnx-parity-mermaid-") as folder:
        page = Path(folder) / "page.html"
        page.write_text(_page(blocks, script), encoding="utf-8")
        dom = _chromium(browser, Path(folder), ["--dump-dom", page.as_uri()])
        match = re.search(r'<pre id="result"[^>]*>(.*?)</pre>', dom, re.DOTALL)
        if match is None or not match.group(1).strip():
            raise AssertionError(f"the page did not finish drawing: {dom[-1500:]}")
        if screenshot is not None:
            height = 120 + 560 * len(blocks)
            _chromium(browser, Path(folder), [f"--screenshot={screenshot}",
                                              f"--window-size=900,{height}", page.as_uri()])
        return [Rendered(r["status"], r["error"], tuple(r["texts"]), r["bars"], r["lines"])
                for r in json.loads(html.unescape(match.group(1)))]


def _page(blocks: list[str], script: Path) -> str:
    charts = "\n".join(f'<pre class="mermaid">{html.escape(block)}</pre>' for block in blocks)
    return ('<!doctype html><html><head><meta charset="utf-8">'
            f'<script src="{script.as_uri()}"></script></head>'
            f'<body style="background: white; margin: 0">{charts}'
            f'<pre id="result" style="display: none"></pre><script>{SCRIPT}</script></body></html>')


def _chromium(browser: str, folder: Path, arguments: list[str]) -> str:
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={folder / 'profile'}",
               "--virtual-time-budget=15000", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{browser} exited {done.returncode}: {done.stderr[-1500:]}")
    return done.stdout


def chromium() -> str:
    """The browser's path; installed with apt-get when missing and we may."""
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BrowserUnavailable(
            "Chromium is not installed, so the Mermaid charts of the PR comment cannot be "
            "drawn as a reader's browser draws them. Install it (Debian: apt-get install "
            "chromium) and run the tests again.")
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if done.returncode != 0:
            raise BrowserUnavailable(f"`{' '.join(command)}` failed (exit {done.returncode}): "
                                     f"{(done.stderr or done.stdout)[-800:]}")
    return chromium()


def mermaid_script(cache: Path = CACHE) -> Path:
    """dist/mermaid.min.js of the pinned package, from the cache or freshly from npm."""
    script = cache / VERSION / "mermaid.min.js"
    if script.exists():
        return script
    content = npm_member(PACKAGE, VERSION, MEMBER, cache,
                         "the PR comment's Mermaid charts cannot be drawn as GitHub draws them")
    script.parent.mkdir(parents=True, exist_ok=True)
    partial = script.with_suffix(".partial")
    partial.write_bytes(content)
    partial.replace(script)  # atomic: a crash never leaves a truncated script behind
    return script
