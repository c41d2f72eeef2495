"""A generating model (`generate`) as the files it ships as: the decoder families.

Owns the decoder-with-past layouts, one module per family over `base.py` (`dense.py`: a
transformers decoder; `flat_cache.py`: the user's own flat-cache decoder; `encoder_decoder.py`),
consulted in order by `registry.py`; the position thresholds of a config (`thresholds.py`) and
the text variants are scored on (`eval_tokens.py`). May use the rest of models/ and settings/;
vision_language/ builds on it, never the other way.
"""
