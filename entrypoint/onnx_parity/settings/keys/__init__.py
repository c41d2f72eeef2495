"""The checks of the configuration keys, one module per topic: those the top level may set too
(checks.py), the `[[model]]`-only ones (model_keys.py), `forward-kwargs` (call_keys.py),
`batch-axis` and the dimension labels of `dynamic-axes` (axis_keys.py, read by
dimension_names.py), `transformers` and `export-command` (model_sources.py), `generate`
(generation_keys.py, its `bundle` and `runtime` in deployment_keys.py), `env`
(environment.py), `int4`, `eval-tokens` and `max-perplexity-ratio` (variant_keys.py).

May use: the vocabulary and settings' own values.py, paths.py, declaration.py and
source_folders.py; never schema.py or loading.py, which declare the keys with these checks.
"""
