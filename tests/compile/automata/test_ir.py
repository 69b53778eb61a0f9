"""The IR's own operations (`automata._ir`): `map_terminals`, the one rebuild that renumbers
rule calls (`json_schema._rules._rewrite`) and bitset events (`shift_events`)."""

from __future__ import annotations

from automata_compile.automata._ir import (
    NEVER,
    Alt,
    Automaton,
    Chars,
    Event,
    Repeat,
    Seq,
    Terminal,
    map_terminals,
)
from automata_compile.frontends.json_schema import _content as sf

A = Chars(((97, 97),))


def _tree():
    shared = Seq((A, Terminal(1)))
    machine = Automaton(edges=(((((98, 98),), 1), (Event(2), 1)), ()), start=0, finals={1})
    return shared, Alt((shared, Repeat(shared, 0, None), machine, Event(0)))


def test_every_terminal_is_mapped_inside_automata_too():
    _, tree = _tree()
    out = map_terminals(tree, lambda t: type(t)(t.index + 10), {})
    shared, star, machine, event = out.options
    assert shared == Seq((A, Terminal(11))) and star == Repeat(shared, 0, None)
    assert event == Event(10) and type(event) is Event
    assert machine.edges == (((((98, 98),), 1), (Event(12), 1)), ()) and machine.finals == {1}


def test_a_shared_subtree_is_rebuilt_once():
    calls = []

    def leaf(t):
        calls.append(t)
        return Terminal(t.index + 1)

    _, tree = _tree()
    out = map_terminals(tree, leaf, {})
    assert out.options[0] is out.options[1].item  # one rebuilt copy, shared as before
    assert calls.count(Terminal(1)) == 1


def test_simplifying_constructors_drop_what_the_leaf_empties():
    shared = Seq((A, Terminal(1)))
    tree = Alt((shared, Seq((Repeat(shared, 1, None), Terminal(2))), Event(0)))

    def leaf(t):
        return NEVER if t == Terminal(1) else t

    # the branches through the emptied terminal are gone (a star of it would be the empty
    # string; here it must repeat at least once)
    assert map_terminals(tree, leaf, {}, seq=sf.seq, alt=sf.alt, rep=sf.rep) == Event(0)
    plain = map_terminals(tree, leaf, {})  # the plain nodes keep the NEVER inside
    assert plain.options[0] == Seq((A, NEVER)) and plain.options[2] == Event(0)


def _copy(node):
    """A structurally equal tree of new node objects (no digest kept on any)."""
    if isinstance(node, Seq):
        return Seq(tuple(_copy(x) for x in node.items))
    if isinstance(node, Alt):
        return Alt(tuple(_copy(x) for x in node.options))
    if isinstance(node, Repeat):
        return Repeat(_copy(node.item), node.min, node.max)
    if isinstance(node, Automaton):
        edges = tuple(
            tuple((x if isinstance(x, tuple) else _copy(x), r) for x, r in out)
            for out in node.edges
        )
        return Automaton(edges=edges, start=node.start, finals=node.finals)
    return type(node)(*(getattr(node, f) for f in node.__dataclass_fields__))


def test_a_kept_fingerprint_is_not_digested_again(monkeypatch):
    """`fingerprint` keeps each node's digest on the node: a later call digests only the
    new nodes above a subtree met before (here the new root alone), and gives
    the digest a tree of new, structurally equal nodes gets from scratch."""
    from automata_compile.automata import _ir

    shared, tree = _tree()
    first = _ir.fingerprint(tree)
    digested = []
    digest = _ir._digest
    monkeypatch.setattr(_ir, "_digest", lambda x, memo: digested.append(x) or digest(x, memo))
    assert _ir.fingerprint(tree) == first and digested == []
    parent = Seq((tree, shared))
    got = _ir.fingerprint(parent)
    assert digested == [parent]
    digested.clear()
    copy = _copy(parent)  # (the shared subtree copied once per use)
    assert _ir.fingerprint(copy) == got and len(digested) == len(list(_ir.distinct_nodes([copy])))
    assert _ir.fingerprint(Seq((shared, tree))) != got  # the order of the items counts
