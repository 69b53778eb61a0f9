"""`json_schema_to_regex`: a schema's IR printed as a Python `re` regex.

The options and what is refused ("the module docstring" below) are documented in `_options`.
"""

from __future__ import annotations

from automata_compile._errors import UnsupportedSchemaError
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._grammar import schema_ir
from automata_compile.frontends.json_schema._loading import load_schema
from automata_compile.frontends.json_schema._options import parse_options


def json_schema_to_regex(schema, **options) -> str:
    """Translates a JSON Schema (dict, bool or JSON text) into a Python `re` regex.

    The regex matches (with `re.fullmatch`) exactly the JSON texts, in the accepted
    surface syntax, of the instances valid under the schema. See the module docstring
    for the options and for what is refused. `compile_json_schema` does not go through
    this text: it compiles the schema's automaton directly and accepts every schema.

    Raises:
      InvalidSchemaError: the schema is malformed, contradictory or unsatisfiable.
      UnsupportedSchemaError: strict mode, and a keyword cannot be enforced exactly; or
        the schema needs grammar rules (schema-free values or recursive ``$ref``; pass
        ``recursion="unroll"`` to bound them instead); or the schema's language needs an
        automaton node (an intersection or complement of
        string languages: ``pattern`` with ``maxLength`` or ``format``, ``allOf`` of
        patterns, ``not``, ``propertyNames``; ``multipleOf``; counted ``contains``,
        ``minProperties``/``maxProperties``, objects in any property order), which has no
        regex spelling here.
    """
    schema = load_schema(schema)
    opts = parse_options(options)
    node = schema_ir(schema, opts)
    try:
        return sf.to_regex(node)
    except sf.NotPrintableError as e:
        hint = (
            '; objects in any property order need one: pass property_order="declared" for a regex'
            if opts.property_order in ("any", "strict_any")
            else ""
        )
        raise UnsupportedSchemaError(
            f"#: this schema compiles to an automaton but has no regular-expression spelling: {e} "
            f"(use compile_json_schema, which accepts it{hint})",
            keyword=None,
            pointer="",
        ) from None
