"""Fixtures of the fast-forward and speculative decoding tests (tests/decoding_fixtures.py):
the fake model's parameters and the requesting module's ``PATTERNS`` compiled over the toy
vocabulary. A module with a model or vocabulary of its own defines its own fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import automata_compile as ac

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from decoding_fixtures import MODEL, VOCAB  # noqa: E402


@pytest.fixture(scope="module")
def params():
    """The parameters of `decoding_fixtures.MODEL`."""
    return MODEL.init_params()


@pytest.fixture(scope="module")
def dfas(request):
    """The module's ``PATTERNS``, compiled over `decoding_fixtures.VOCAB`."""
    return [ac.compile_regex(p, VOCAB) for p in request.module.PATTERNS]
