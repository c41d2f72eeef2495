"""A vision-language model's vision or embedding call that localisation named no node for,
in its repro folder all the same: the whole file as the subgraph, the failing call's feed as
its inputs and the module's output there as the expected value, so `repro.py` reruns that file
alone on exactly that call (repro.py's folder, found by `file-call`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from onnx_parity.model_files import ModelFile
from onnx_parity.results import Repro
from onnx_parity.settings import ModelSpec
from onnx_parity.verification.cuts import CutRun
from onnx_parity.verification.localisation.repro import ReproCase, build_repro
from onnx_parity.verification.onnx_values import read_graph

WHOLE_FILE = "file-call"  # results.Repro.found_by of a whole file's folder


def file_repro(name: str, model: ModelFile, run: CutRun, spec: ModelSpec,
               repo: Path) -> Repro | None:
    """`<name>.repro` beside the file: its first output outside the tolerance at the call
    `run`, from the inputs the file was fed; None when every output passed there."""
    failing = [(index, row.output) for index, row in enumerate(run.rows) if not row.passed]
    if not failing or len(run.compared) != len(run.rows):
        return None
    index, output = failing[0]
    graph = read_graph(model)
    if output not in graph.outputs:  # the check names the outputs as the file does
        output = graph.outputs[index]
    inputs = [input_name for input_name in graph.inputs if input_name not in graph.constants]
    values = {input_name: np.asarray(run.cut.feed[input_name]) for input_name in inputs
              if input_name in run.cut.feed}
    case = ReproCase(name, model, graph, output, frozenset(values), values,
                     run.compared[index], run.cut.size, spec.runtime_optimization, WHOLE_FILE)
    return build_repro(case, spec, repo)
