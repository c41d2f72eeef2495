"""The texts of a failing model's `<name>.repro/` folder: its `repro.py` and `REPORT.md`
(repro_text.py), with a generating model's failing step in them (step_repro_text.py). Their
record in report.json is report/repro_json.py's, beside the other JSON.

May use: the vocabulary (results, generation_results) and each other; never the rest of
report/, which uses these (markdown.py and the front door).
"""
