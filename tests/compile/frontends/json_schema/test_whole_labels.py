"""Any-order labels kept whole (`_emitter._whole`): a label the counting construction copies
once per set is one node, so the byte DFA built to size it is spliced for each copy.

Oracle: the labels as they were (``_emitter.WHOLE_LABELS = False``, the former path): the
same byte DFA or byte PDA arrays and the same warnings, on generated objects whose other
properties, pattern properties and values hold free JSON (rule calls: labels that stay
as they are, not minimal character automata).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automata_compile.automata import _byte_dfa
from automata_compile.automata._ir import Automaton, Seq
from automata_compile.frontends.json_schema import _emitter

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from byte_language_oracle import (  # noqa: E402
    assert_same,
    byte_arrays,
    fresh_memos,
    nested_objects,
)

VALUES = [{"type": "integer"}, {"type": "boolean"}, {"type": "string", "maxLength": 2}, {}]


def _extras(draw, schema) -> None:
    extra = draw(st.integers(0, 3))
    if extra == 1:
        schema["additionalProperties"] = False
    elif extra == 2:
        schema["patternProperties"] = {"^x": draw(st.sampled_from(VALUES))}
    elif extra == 3:
        schema["additionalProperties"] = {"type": "array"}
    if draw(st.booleans()):
        schema["minProperties"] = draw(st.integers(0, 2))


def schemas():
    return nested_objects(depth=1, names="abcd", values=VALUES, tail=_extras)


def _language(schema, whole: bool, mp):
    """The byte DFA (or byte PDA arrays) and the warnings, with empty memos."""
    mp.setattr(_emitter, "WHOLE_LABELS", whole)
    fresh_memos(mp)
    return byte_arrays(schema, {"property_order": "any"})


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas())
def test_whole_labels_build_the_same_automaton_and_warnings(schema):
    with pytest.MonkeyPatch.context() as mp:
        old, old_warnings = _language(schema, False, mp)
        new, new_warnings = _language(schema, True, mp)
    assert_same(old, new)
    assert old_warnings == new_warnings


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
