"""A generating model checked the way it generates: greedy decoding on both sides with PyTorch's
steps recorded first (checked.py, the entry: `check_generation`), the position thresholds
crossed at long pasts (thresholds.py, threshold_past.py), the file's cached loop against the
model's own full forward over the same prefix (full_prefix.py), onnxruntime-genai's own loop
(genai_runtime.py), an encoder-decoder's encoder (encoder_decoding.py), a vision-language
model's pipeline (vision_language/), and a failing step's repro folder (step_repro.py). It may
use verification's core and localisation/; neither uses it. Imports nothing itself: the stage's
front door (verification/__init__.pyi) names what other stages take from here.
"""
