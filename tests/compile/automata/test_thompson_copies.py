"""A subtree met again in one Thompson NFA is copied from its first fragment
(`_thompson.Builder.build`, `_Fragment`).

Oracle: the same construction building every subtree again (``_thompson.COPIES = False``,
the former path): the same NFA, state for state (edges, epsilon edges, their order), so the
same subset construction, budgets and tables; and the same error past the NFA's state
budget. Trees are generated with the same node objects at several places, composite
automata (IR labels: built in place or as pieces, which depend on their context) among
them.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automata_compile import StateBudgetExceededError
from automata_compile.automata import _byte_dfa, _char_dfa, _fsa, _thompson
from automata_compile.automata._ir import Alt, Automaton, Chars, Repeat, Seq, Terminal

LEAVES = [Chars(((c, c),)) for c in b"ab,"] + [
    Chars(((97, 122),)),
    Chars(((0xE9, 0x2FFF),)),  # multi-byte: suffix states
    Chars(((0x20, 0x21), (0x23, 0x10FFFF))),
]


@st.composite
def trees(draw, depth: int = 3, terminals: bool = True):
    """A tree whose subtrees recur as the same objects (drawn from ``pool``)."""
    pool: list = list(LEAVES) + ([Terminal(0), Terminal(1)] if terminals else [])

    def node(d):
        if d == 0 or draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(pool))
        kind = draw(st.integers(0, 4))
        kids = [node(d - 1) for _ in range(draw(st.integers(1, 3)))]
        if kind == 0:
            out = Seq(tuple(kids))
        elif kind == 1:
            out = Alt(tuple(kids)) if len(kids) > 1 else Seq(tuple(kids))
        elif kind == 2:
            lo = draw(st.integers(0, 2))
            out = Repeat(kids[0], lo, draw(st.sampled_from([None, lo, lo + 1, lo + 2])))
        elif kind == 3:  # a composite automaton (IR labels)
            a, b = kids[0], kids[-1]
            out = Automaton(edges=(((a, 1),), ((b, 2), (a, 1)), ()), start=0, finals=frozenset({2}))
        else:  # a character automaton
            letters, digits, comma = ((97, 99),), ((48, 57), (0xE9, 0xE9)), ((44, 44),)
            edges = (((letters, 1),), ((digits, 1), (comma, 0)))
            out = Automaton(edges=edges, start=0, finals=frozenset({1}))
        pool.append(out)  # met again further on: the same object
        return out

    return Seq((node(depth), node(depth), *draw(st.lists(st.sampled_from(pool), max_size=3))))


def _byte_nfa(node, copies: bool, mp, max_nfa: int | None = None):
    mp.setattr(_thompson, "COPIES", copies)
    mp.setattr(_byte_dfa, "_PIECES", {})  # (a piece kept by the other run would be spliced)
    nfa = _fsa.NFA(_fsa.Budget("the tree's byte DFA", 100_000, 10**8), max_nfa or 10**6)
    s, e = nfa.state(), nfa.state()
    _byte_dfa._Bytes(nfa).build(node, s, e)
    return nfa.edges, nfa.eps


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(node=trees(), piece_min=st.sampled_from([2, 30, _byte_dfa.PIECE_MIN_STATES]))
def test_copies_make_the_same_byte_nfa(node, piece_min):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_byte_dfa, "PIECE_MIN_STATES", piece_min)  # small: pieces deleted, spliced
        assert _byte_nfa(node, True, mp) == _byte_nfa(node, False, mp)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(node=trees(terminals=False))
def test_copies_make_the_same_character_nfa(node):
    part = _char_dfa.Partition(sorted(_char_dfa.char_sets(node, set())))
    out = []
    for copies in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_thompson, "COPIES", copies)
            nfa = _fsa.NFA(_fsa.Budget("the tree", 100_000, 10**8), 10**6)
            s, e = nfa.state(), nfa.state()
            _char_dfa._Atoms(nfa, part).build(node, s, e)
            out.append((nfa.edges, nfa.eps))
    assert out[0] == out[1]


def test_a_copy_is_made_and_charged_to_the_nfa_budget(monkeypatch):
    """The repeated subtree is copied (fewer builds), and a copy past the NFA's states
    raises what the builds raise."""
    item = Alt((Chars(((0x20, 0x10FFFF),)), Seq((Chars(((92, 92),)), Chars(((110, 110),))))))
    node = Repeat(item, 40, 40)
    built = []
    real = _thompson.Builder._build

    def counting(self, n, s, e):
        if n is item:
            built.append(n)
        return real(self, n, s, e)

    monkeypatch.setattr(_thompson.Builder, "_build", counting)
    with pytest.MonkeyPatch.context() as mp:
        new = _byte_nfa(node, True, mp)
        assert len(built) == 1
        old = _byte_nfa(node, False, mp)
        assert len(built) == 41 and new == old
        limit = len(new[0]) - 5
        errors = []
        for copies in (True, False):
            with pytest.raises(StateBudgetExceededError) as e:
                _byte_nfa(node, copies, mp, max_nfa=limit)
            errors.append(str(e.value))
        assert errors[0] == errors[1] and f"more than {limit} NFA states" in errors[0]


def test_a_piece_deleted_is_not_copied_from(monkeypatch):
    """A composite automaton built inside a repeat becomes a piece: its fragment is deleted
    and its states' ids reused; a subtree built within it and met again afterwards is built,
    not copied from the deleted rows (`Builder.forget`)."""
    a = Alt((Chars(((0xE9, 0x2FFF),)), Seq((Chars(((97, 97),)), Chars(((98, 122),))))))
    x = Automaton(edges=(((a, 1),), ((a, 2), (LEAVES[2], 0)), ()), start=0, finals=frozenset({2}))
    node = Seq((Repeat(x, 1, 2), Chars(((44, 44),)), a, Repeat(a, 2, 2)))
    monkeypatch.setattr(_byte_dfa, "PIECE_MIN_STATES", 2)
    with pytest.MonkeyPatch.context() as mp:
        assert _byte_nfa(node, True, mp) == _byte_nfa(node, False, mp)
