"""Tiny offline chat models: `model_name_or_path: tiny` in a training config (CPU smoke runs), and the
tests' policies and served judges. `build_tiny_model` writes a random-weight model with a tokenizer
trained on the spot, optionally fine-tuned for seconds to write an output format (`format_tuning`)."""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {".models": ("build_tiny_model", "train_tiny_tokenizer")})
