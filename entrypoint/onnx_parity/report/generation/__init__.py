"""A generating model in the report: its row, drift per step and console line
(generation_table.py), its position thresholds (threshold_table.py, threshold_json.py), its
bundles and runtime loop (deployment_text.py, deployment_json.py), a vision-language model's
files checked (pipeline_json.py), its record in report.json (generation_json.py, with the typed
dicts of generation_shapes.py) and a variant's text scores (text_quality.py).

May use: the vocabulary (results, generation_results, findings) and each other; never the rest
of report/, which uses these (markdown.py, console_text.py, serialization.py, json_shapes.py).
"""
