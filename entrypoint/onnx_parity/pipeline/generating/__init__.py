"""A generating model (`generate`) through the stages in its worker: the decoder-only and
encoder-decoder path (checked.py, the entry: `generation_checked`), a vision-language model's
three files (vl_generating.py, its failing vision or embedding call localised in
vl_localising.py), a failing decoding step localised (step_localising.py), and the bundles and
runtime loops (deploying.py, vl_deploying.py). Like one_model.py it decides nothing and builds
no finding.

May use: the stages' front doors (settings, models, export, verification, variants), the
vocabulary, and pipeline/job.py (the job, ledger and timer one_model.py hands it); never
one_model.py, which calls it.
"""
