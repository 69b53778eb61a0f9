"""Any-order labels kept whole (`_emitter._whole`): a label the counting construction copies
once per set is one node, so the byte DFA built to size it is spliced for each copy.

Oracle: the labels as they were (``_emitter.WHOLE_LABELS = False``, the former path): the
same byte DFA or byte PDA arrays and the same warnings, on generated objects whose other
properties, pattern properties and values hold free JSON (rule calls: labels that stay
as they are, not minimal character automata).
"""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automata_compile import EmptyLanguageError
from automata_compile.automata import _byte_dfa
from automata_compile.automata._ir import Automaton, Seq
from automata_compile.frontends.json_schema import _emitter, parse_options
from automata_compile.pipeline._json_schema import byte_language

VALUES = [{"type": "integer"}, {"type": "boolean"}, {"type": "string", "maxLength": 2}, {}]


@st.composite
def schemas(draw, depth: int = 1):
    names = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True))
    props = {}
    for n in names:
        if depth and draw(st.integers(0, 2)) == 0:
            inner = draw(schemas(depth - 1))
            props[n] = {"type": "array", "items": inner} if draw(st.booleans()) else inner
        else:
            props[n] = draw(st.sampled_from(VALUES))
    out = {"type": "object", "properties": props}
    if draw(st.booleans()):
        out["required"] = [n for n in names if draw(st.booleans())]
    extra = draw(st.integers(0, 3))
    if extra == 1:
        out["additionalProperties"] = False
    elif extra == 2:
        out["patternProperties"] = {"^x": draw(st.sampled_from(VALUES))}
    elif extra == 3:
        out["additionalProperties"] = {"type": "array"}
    if draw(st.booleans()):
        out["minProperties"] = draw(st.integers(0, 2))
    return out


def _language(schema, whole: bool, mp):
    """The byte DFA (or byte PDA arrays) and the warnings, with empty memos."""
    mp.setattr(_emitter, "WHOLE_LABELS", whole)
    mp.setattr(_byte_dfa, "_CACHE", collections.OrderedDict())
    mp.setattr(_byte_dfa, "_cache_bytes", 0)
    mp.setattr(_byte_dfa, "_PIECES", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ir, pda = byte_language(schema, parse_options({"property_order": "any"}))
        if pda is not None:
            out = ("pda", pda.rule_of, pda.starts, pda.shift, pda.ends, pda.kind, pda.arg, pda.ret)
        else:
            try:
                d = _byte_dfa.build_byte_dfa(ir, what="the schema")
                out = ("dfa", d.trans, d.accepting, d.start)
            except EmptyLanguageError:
                out = ("empty",)
    return out, [f"{type(w.message).__name__}: {w.message}" for w in caught]


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas())
def test_whole_labels_build_the_same_automaton_and_warnings(schema):
    with pytest.MonkeyPatch.context() as mp:
        old, old_warnings = _language(schema, False, mp)
        new, new_warnings = _language(schema, True, mp)
    assert old[0] == new[0] and old_warnings == new_warnings
    for x, y in zip(old[1:], new[1:], strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_label_is_one_node_spliced_per_copy():
    seq = Seq((_emitter.sf.char(","), _emitter.sf.char("a")))
    whole = _emitter._whole(seq)
    assert type(whole) is Automaton and whole.edges[0] == ((seq, 1),)
    assert _emitter.sf.seq(_emitter.sf.char("{"), whole).items[1] is whole  # not flattened
    assert _emitter._whole(whole) is whole and _emitter._whole(_emitter.NEVER) is _emitter.NEVER
    # its byte DFA, once built (a hit too), is the piece its copies splice
    first = _byte_dfa.cached_byte_dfa(whole)
    again = _emitter._whole(seq)
    assert _byte_dfa.cached_byte_dfa(again) is first and _byte_dfa._piece(again) is not None
