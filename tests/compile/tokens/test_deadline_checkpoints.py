"""The token-level tables' deadline checkpoints added for issue 20, item 3 (every compile
ends by its deadline): the PDA composition's table assembly (`_pda_compose._tables`,
seconds on dependabot with no check) checks the deadline per walk part."""

from __future__ import annotations

import pytest

import automata_compile as ac
from automata_compile._errors import CompileTimeoutError
from automata_compile.automata import _fsa
from automata_compile.tokens import _pda_compose


@pytest.fixture(scope="module")
def vocab():
    return ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )


def test_pda_tables_check_the_deadline(vocab, monkeypatch):
    """The deadline passes as the tables are entered: they raise before their sparse
    entries, not after the whole assembly."""
    tables, sparse, calls, entered = _pda_compose._tables, _pda_compose._sparse, [], []

    def expire_then_tables(*args, **kwargs):
        entered.append(1)
        monkeypatch.setattr(_fsa.time, "monotonic", lambda: float("inf"))
        return tables(*args, **kwargs)

    def spy(parts):  # the classes read the sparse entries too, before the tables
        if entered:
            calls.append(1)
        return sparse(parts)

    monkeypatch.setattr(_pda_compose, "_tables", expire_then_tables)
    monkeypatch.setattr(_pda_compose, "_sparse", spy)
    with pytest.raises(CompileTimeoutError, match="composition of the grammar"):
        ac.compile_grammar('start: "[" start? "]"', vocab, timeout_s=3600)
    assert entered and not calls
