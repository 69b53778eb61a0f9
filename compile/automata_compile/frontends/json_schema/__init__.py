"""JSON Schema front end: schema → typed languages → IR (no regex text on the way).

Pipeline: `_resolver` (``$ref``), `_translator` + `_keywords` (schema → typed language,
`_types`), `_emitter` + `_numbers` + `_strings` (typed language → IR of JSON texts);
string contents are IR trees over code points (`_content`: ECMA patterns `_ecma`,
formats `_formats`) whose boolean operations run on automata (`automata._char_dfa`).
`_api` has the entry points and documents the options.
"""

from automata_compile.frontends.json_schema._api import (
    compile_json_schema,
    json_schema_to_regex,
    schema_ir,
)

__all__ = ["compile_json_schema", "json_schema_to_regex", "schema_ir"]
