"""Shared test fixtures: paths to the real tokenizers and their vocabularies (session-scoped).

Fixtures that need a file that is absent skip the test with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# /work/shared/tokenizers sits next to the repository checkout (see its README.md).
SHARED_TOKENIZERS = REPO_ROOT.parent / "shared" / "tokenizers"


def shared_tokenizer_path(name: str) -> Path:
    """``<shared>/tokenizers/<name>/tokenizer.json``, or skip the test if it is absent."""
    path = SHARED_TOKENIZERS / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"real tokenizer {path} not present (needs the shared/tokenizers folder)")
    return path


def mistral_common_data_path(file_name: str) -> Path:
    """A tokenizer file shipped in mistral-common's ``data/`` folder, or skip the test."""
    try:
        import mistral_common
    except ImportError:
        pytest.skip("mistral-common is not installed (pip install mistral-common)")
    path = Path(mistral_common.__file__).parent / "data" / file_name
    if not path.is_file():
        pytest.skip(f"{path} not present in this mistral-common version")
    return path


@pytest.fixture(scope="session")
def gemma3_tokenizer_path() -> Path:
    return shared_tokenizer_path("gemma3")


@pytest.fixture(scope="session")
def llama3_tokenizer_path() -> Path:
    return shared_tokenizer_path("llama3")


@pytest.fixture(scope="session")
def mistral_sp_path() -> Path:
    return mistral_common_data_path("tokenizer.model.v1")


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
