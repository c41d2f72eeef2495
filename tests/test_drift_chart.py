"""The drift chart of a localised failure: a Mermaid block GitHub draws in the PR comment.

The blocks are drawn by the `mermaid` package from npm in headless Chromium (mermaid_browser.py),
as a reader's browser draws them; the screenshot is read pixel by pixel.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from mermaid_browser import mermaid_blocks, render
from onnx_parity.report.drift_chart import FIRST_MARK, MAX_BARS, drift_chart
from onnx_parity.report.markdown import FINDINGS, render_markdown
from onnx_parity.report.serialization import run_from_json
from onnx_parity.results import Divergence, NodeCheck

EXPECTED = Path(__file__).parent / "expected"
BAR_FILL = (236, 236, 255)  # mermaid's default theme: #ECECFF


@pytest.mark.slow
def test_the_example_comment_draws_the_drift_of_spectral_head_in_a_browser(
        tmp_path: Path) -> None:
    comment = (EXPECTED / "seed-failures.full.md").read_text(encoding="utf-8")
    section = comment[comment.index("<b>spectral-head</b>"):]
    blocks = mermaid_blocks(comment)
    assert len(blocks) == 1, "only the localised failure (spectral-head) gets a chart"
    assert mermaid_blocks(section[:section.index("</details>")]) == blocks
    caption = next(line for line in section.splitlines() if "Drift along the graph" in line)
    assert "log10(atol) = -6.70" in caption  # the example's atol is 2e-07
    assert "`_fft_r2c` at `models/spectral.py:22`" in caption

    screenshot = tmp_path / "chart.png"
    (drawn,) = render(blocks, screenshot)

    assert not drawn.shows_an_error, drawn.error or drawn.texts
    assert drawn.bars == 6
    assert drawn.lines == 1
    assert "spectral-head: drift along the graph" in drawn.texts
    assert f"{FIRST_MARK} 3 _fft_r2c" in drawn.texts
    pixels = Counter(Image.open(screenshot).convert("RGB").get_flattened_data())
    total = sum(pixels.values())
    assert pixels[BAR_FILL] > 10_000, "the bars are not on the screenshot"
    assert total - pixels[(255, 255, 255)] > total // 50, "the screenshot is nearly blank"


def test_a_block_mermaid_cannot_parse_is_seen_as_an_error() -> None:
    (drawn,) = render(['xychart-beta\n    title "broken\n    x-axis [a, b\n'])

    assert drawn.shows_an_error
    assert drawn.bars == 0


def test_a_long_graph_is_drawn_in_at_most_forty_bars_with_the_first_marked() -> None:
    nodes = [_node(index, 0.0 if index < 16 else 1e-9 * (1 + index % 7))  # 2 bars exact
             for index in range(300)]
    nodes[150] = _node(150, 3e-4, first=True)
    nodes[200] = replace(_node(200, math.inf), op='aten.weird"op[0]\n.default')
    nodes[299] = _node(299, None)  # a value that could not be compared: no bar
    lines = drift_chart("long-model", _divergence(tuple(nodes), atol=1e-5))
    block = "\n".join(lines)

    (drawn,) = render(mermaid_blocks(block + "\n"))

    assert not drawn.shows_an_error, drawn.error or drawn.texts
    assert drawn.bars == math.ceil(299 / 8) <= MAX_BARS  # 8 values a bar
    assert f"{FIRST_MARK} 145-152" in drawn.texts
    caption = lines[1]
    assert "8 consecutive values (the largest of them; 299 compared" in caption
    assert "A value equal to PyTorch's is drawn at -10" in caption
    assert "An infinite or NaN difference is drawn at -2" in caption  # log10(3e-4) -> -3, +1


def test_labels_keep_only_characters_mermaid_reads_as_text() -> None:
    nodes = (_node(0, 0.0), replace(_node(1, 2e-3, first=True), op='aten.we"ird]op.default'))

    block = "\n".join(drift_chart("m", _divergence(nodes, atol=1e-5)))

    assert f'"{FIRST_MARK} 2 weirdop"' in block
    assert "bar [-6, -2.70]" in block  # exact at the floor; log10(2e-3)
    assert "line [-5.00, -5.00]" in block


def test_no_line_without_an_absolute_tolerance_and_no_chart_for_one_value() -> None:
    two = (_node(0, 1e-3), _node(1, 1e-2, first=True))

    zero_atol = drift_chart("m", _divergence(two, atol=0.0))

    assert zero_atol
    assert not any(line.startswith("    line") for line in zero_atol)
    assert "log10(atol)" not in zero_atol[1]
    assert drift_chart("m", _divergence(two[:1], atol=1e-5)) == []


def test_a_shortened_comment_leaves_the_chart_out() -> None:
    text = (EXPECTED / "seed-failures.report.json").read_text(encoding="utf-8")
    run = run_from_json(json.loads(text))

    assert "```mermaid" in render_markdown(run)
    assert "```mermaid" not in render_markdown(run, detail=FINDINGS)


def _node(index: int, diff: float | None, first: bool = False) -> NodeCheck:
    return NodeCheck(node=f"value_{index}", op="aten.add.Tensor", module=None,
                     file="models/long.py", line=10 + index, max_abs_diff=diff,
                     max_rel_diff=diff, inside=diff is not None and diff < 1e-5, first=first)


def _divergence(nodes: tuple[NodeCheck, ...], atol: float) -> Divergence:
    return Divergence(exporter="dynamo", output="logits", batch_size=1,
                      input_shapes={"x": (1, 8)}, optimization="disabled", atol=atol, rtol=0.0,
                      nodes=nodes, nodes_skipped=0, seconds=0.01)
