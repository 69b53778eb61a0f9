"""JSON Schema front end: schema → typed languages → IR or grammar rules (no regex text on the way).

Pipeline: `_loading` (JSON text → data), `_options` (the options and their manual),
`_closing` (objects closed for ``closed_objects=True``), `_resolver` (``$ref``), `_translator` + `_keywords` (schema → typed language, `_types`),
`_emitter` + `_numbers` + `_strings` (typed language → IR of JSON texts), `_rules` (the
grammar rules of recursive and shared values), `_outline` (values outlined into rules, the
last resort past max_states), `_grammar` (the translation as grammar
rules or IR); string contents are IR trees over code points (`_content`: ECMA patterns
`_ecma`, formats `_formats`) whose boolean operations run on automata
(`automata.char_dfa`). `_regex_text` prints a regular schema as a regex. Composing with a
vocabulary (`compile_json_schema`, the DFA/PDA policy) is in `automata_compile.pipeline`.
"""

from automata_compile.frontends.json_schema import _content as content
from automata_compile.frontends.json_schema import _strings as strings
from automata_compile.frontends.json_schema._bitset_events import (
    BitsetEvents,
    BitsetIneligible,
    BitsetSkip,
    events_in,
    shift_events,
)
from automata_compile.frontends.json_schema._emitter import SIZING_HINT, order_fallback_warning
from automata_compile.frontends.json_schema._grammar import (
    schema_grammar,
    schema_ir,
    translate_grammar,
    unrolled_options,
)
from automata_compile.frontends.json_schema._loading import load_schema
from automata_compile.frontends.json_schema._options import parse_options
from automata_compile.frontends.json_schema._outline import Outliner, grammar_pda
from automata_compile.frontends.json_schema._regex_text import json_schema_to_regex
from automata_compile.frontends.json_schema._resolver import _loc as pointer_fragment
from automata_compile.frontends.json_schema._rules import (
    OUTLINE_MIN_SIZE,
    ROOT,
    SHARE_MIN_SIZE,
    Rules,
    rule_calls,
)
from automata_compile.frontends.json_schema._rules import _rewrite as rewrite_calls
from automata_compile.frontends.json_schema._translator import _Options as SchemaOptions

__all__ = [
    "OUTLINE_MIN_SIZE",
    "Outliner",
    "ROOT",
    "SHARE_MIN_SIZE",
    "SIZING_HINT",
    "BitsetEvents",
    "BitsetIneligible",
    "BitsetSkip",
    "Rules",
    "SchemaOptions",
    "content",
    "grammar_pda",
    "json_schema_to_regex",
    "load_schema",
    "order_fallback_warning",
    "parse_options",
    "pointer_fragment",
    "rewrite_calls",
    "rule_calls",
    "schema_grammar",
    "schema_ir",
    "strings",
    "translate_grammar",
    "unrolled_options",
    "events_in",
    "shift_events",
]
