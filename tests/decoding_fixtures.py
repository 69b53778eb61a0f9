"""The toy vocabulary and fake model that the fast-forward and speculative decoding tests
share (tests/runtime/test_fast_forward.py, test_speculative.py; their fixtures are in
tests/runtime/conftest.py), and the byte vocabulary and recursive schema of their
JSON-schema tests."""

from __future__ import annotations

import automata_compile as ac
from automata_jax.testing import FakeModel

# tokens: 0='a', 1='b', 2='ab', 3=EOS, 4=pad, 5='c', 6='abc', 7 unused
EOS, PAD, V = 3, 4, 8
VOCAB = ac.Vocabulary.from_bytes(
    [b"a", b"b", b"ab", None, None, b"c", b"abc", None], eos_ids=[EOS], special_ids=[EOS, PAD, 7]
)
MODEL = FakeModel(vocab_size=V)


def byte_vocab(extra: list[bytes]) -> ac.Vocabulary:
    """Every single byte, then the pieces ``extra``, then EOS and one more special token."""
    pieces = [bytes([c]) for c in range(256)] + extra
    return ac.Vocabulary.from_bytes(pieces + [None, None], eos_ids=[len(pieces)],
                                    special_ids=[len(pieces), len(pieces) + 1])  # fmt: skip


def tree_schema() -> dict:
    """A recursive schema (a fresh copy): a short name and at most two children like it."""
    return {
        "type": "object",
        "properties": {"n": {"type": "string", "maxLength": 4},
                       "k": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}},
        "required": ["n", "k"],
        "additionalProperties": False,
    }  # fmt: skip
