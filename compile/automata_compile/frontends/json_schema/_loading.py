"""Loading a schema: JSON data or JSON text → parsed JSON data (a dict or a bool)."""

from __future__ import annotations

import json

from automata_compile._errors import InvalidSchemaError


def load_schema(schema):
    """``schema`` (JSON data, or JSON text as str/bytes) as parsed JSON data.

    Raises:
      InvalidSchemaError: not JSON data, not valid JSON text, or not an object / a boolean.
    """
    if not isinstance(schema, (str, bytes, bytearray)):
        try:
            json.dumps(schema)
        except (TypeError, ValueError) as e:
            raise InvalidSchemaError(f"#: the schema is not JSON data: {e}", pointer="") from None
    if isinstance(schema, (str, bytes, bytearray)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise InvalidSchemaError(f"#: the schema is not valid JSON: {e}", pointer="") from None
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchemaError(
            f"#: a JSON Schema must be an object or a boolean, got {type(schema).__name__}",
            pointer="",
        )
    return schema
