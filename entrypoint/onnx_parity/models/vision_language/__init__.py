"""A vision-language model (`generate` with a vision config and an image token) as the pipeline
it ships as: vision, embedding and decoder files.

Owns the `Family` Protocol and the pipeline's contract (`base.py`), what the families share
(`parts.py`), the three files' specs and samples (`files.py`), one module per architecture
(`qwen2.py`, `llava.py`, `idefics3.py`, `gemma3.py`) and their registry (`registry.py`). May use
the rest of models/, generating/ (the decoder's cache) and settings/.
"""
