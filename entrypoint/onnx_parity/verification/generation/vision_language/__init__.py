"""A vision-language model's pipeline (vision file per image, embedding file, decoder) as the
two sides of the generation check (decoding.py), its vision and embedding files at each
resolution against the model's own code (files.py), its position thresholds (thresholds.py) and
its prompts with images in onnxruntime-genai's loop (runtime.py). It may use generation/ (its
decoding steps, thresholds and genai loop), verification's core and localisation/; the rest of
generation/ uses only its decoding sides. Imports nothing itself.
"""
