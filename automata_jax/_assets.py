"""The bundled assets: the demo's data files, tokenizer and random-weight model.

Shared by the extraction job (its defaults: ``--schema``, ``--input``, the prompts, ``--model
tiny``), `automata_jax.testing` (which re-exports these names for tests and notebooks) and the
README. The default Gemma-3 270M weights are found by `automata_jax.models.default_gguf_path`.

The default tokenizer is the real 32k SentencePiece model of Mistral 7B v1, bundled as
``automata_jax/data/tokenizer.model.v1`` (Apache-2.0, copied from the ``mistral-common``
package; licence and provenance in ``tokenizer.model.v1.LICENSE`` next to it).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_SEED",
    "data_path",
    "default_tokenizer_path",
    "default_vocabulary",
    "example_docs_path",
    "example_schema",
    "tiny_model",
]

DEFAULT_SEED = 0
_DATA = Path(__file__).resolve().parent / "data"


def data_path(name: str) -> Path:
    """A file bundled in ``automata_jax/data`` (``person.json``, ``docs.jsonl``, ``prompt.txt``,
    ``prompt_gemma.txt``, ``tokenizer.model.v1``).

    Raises:
      FileNotFoundError: no bundled file of that name.
    """
    path = _DATA / name
    if not path.is_file():
        available = ", ".join(sorted(p.name for p in _DATA.iterdir()))
        raise FileNotFoundError(f"no bundled data file {name!r} (available: {available})")
    return path


def example_schema() -> dict[str, Any]:
    """The bundled example JSON Schema (``person.json``): a person with bounded strings."""
    return json.loads(data_path("person.json").read_text(encoding="utf-8"))


def example_docs_path() -> Path:
    """The bundled example input (``docs.jsonl``: JSON lines with ``id`` and ``text``)."""
    return data_path("docs.jsonl")


def default_tokenizer_path() -> Path:
    """Path of the default tokenizer: the bundled SentencePiece ``tokenizer.model.v1`` (32k,
    Mistral 7B v1, Apache-2.0; see ``tokenizer.model.v1.LICENSE`` beside it)."""
    return data_path("tokenizer.model.v1")


@functools.lru_cache(maxsize=1)
def default_vocabulary():
    """The default tokenizer as an `automata_compile.Vocabulary` (32,000 ids, EOS 2, BOS 1).

    Cached: one instance per process.
    """
    from automata_compile import Vocabulary

    return Vocabulary.from_file(default_tokenizer_path())


def tiny_model(vocab_size: int | None = None, *, seed: int = DEFAULT_SEED):
    """The tiny random-weight Gemma-3 model (`Gemma3Config.tiny`, float32) and its params.

    The weights follow `Gemma3.init_params`'s recipe (matrices ~ N(0, 0.02^2), norm
    weights 0) but are drawn with NumPy's ``default_rng(seed)``: on a small CPU, jax's
    per-shape random kernels take about a second each to compile, NumPy takes
    milliseconds.

    Args:
      vocab_size: width of the logits; default: the default tokenizer's size (32,000).
      seed: same seed, same weights (on every machine).

    Returns:
      ``(model, params)``: a `automata_jax.models.Gemma3` and its parameter dict.
    """
    import jax
    import numpy as np

    from automata_jax.models import Gemma3, Gemma3Config

    if vocab_size is None:
        vocab_size = default_vocabulary().size
    model = Gemma3(Gemma3Config.tiny(vocab_size=vocab_size))
    rng = np.random.default_rng(seed)

    def init(shape):
        if len(shape) == 1:
            return np.zeros(shape, np.float32)
        return (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)

    shapes = model.param_shapes()
    leaves, treedef = jax.tree.flatten(shapes, is_leaf=lambda x: isinstance(x, tuple))
    params = jax.tree.unflatten(treedef, [jax.numpy.asarray(init(s)) for s in leaves])
    return model, params
