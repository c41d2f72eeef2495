"""Where a failing model's numbers start to differ: PyTorch's intermediate values against the
graph's (torch_values.py, the core's onnx_values.py), the divergence rule (divergence.py), the
user's line of a node (the core's node_sources.py, call_sites.py), the sentence that says it
(divergence_text.py), the parity finding moved there (localised_findings.py), the repro folders
(repro.py, file_repro.py) and the bisection when per-node values cannot say (reduce.py). The
entry is localise.py (`localise`, asked with `request.Localisation`). It may use verification's
core only; the core never uses it. Imports nothing itself.
"""
