"""Python dataclasses -> regex, in two output formats, and `parse` back to instances.

``format="json"``: a JSON object with the dataclass's fields (``json.dumps(asdict(x))``),
translated through the dataclass's JSON Schema (`dataclass_schema`) by
`json_schema_to_regex`, so it accepts what that accepts (whitespace options, key order =
field order: ``property_order="declared"`` unless passed, fields with defaults may be
omitted, no other keys).

``format="call"``: a constructor call with keyword arguments in field order, values as
Python literals: ``Person(name="Ada", age=36, tags=["x"], home=Address(city="Oslo"))``.
Fields with defaults may be omitted. Separators are ``", "`` or ``","``; no space around
``=``. Strings are **double-quoted** Python literals: any character raw except ``"``,
``\\`` and control characters U+0000-U+001F; escapes ``\\\\ \\" \\' \\n \\r \\t \\a \\b \\f \\v``,
``\\xHH``, ``\\uHHHH`` (no surrogates) and ``\\UHHHHHHHH`` (at most U+10FFFF); hex digits of
either case; so ``json.dumps(s, ensure_ascii=False)`` is always a valid spelling. (``Literal``/``Enum``
strings accept the raw spelling and, for characters that need one, an escape.) ``True``/``False``/``None``; ints ``-?(0|[1-9][0-9]*)``; floats
in JSON number syntax; lists ``[a, b]``; tuples ``()``, ``(a,)``, ``(a, b)``; dicts
``{"k": v}``; enums as their values.

Supported field types: ``bool``, ``int``, ``float``, ``str``, ``None``, nested dataclasses
(recursion unrolled to ``max_recursion_depth``), ``Optional[X]``/``X | None``/``Union``,
``list[T]``, ``tuple[A, B]``, ``tuple[T, ...]``, ``dict[str, T]``, ``Literal[...]``, ``Enum``
subclasses, ``Annotated[X, ...]``, and (json format only) ``typing.Any``.

Example:
  >>> import dataclasses, re
  >>> from automata_compile import dataclass_to_regex, parse
  >>> @dataclasses.dataclass
  ... class Person:
  ...     name: str
  ...     age: int = 0
  >>> rx = dataclass_to_regex(Person, format="call")
  >>> bool(re.fullmatch(rx, 'Person(name="Ada", age=36)')), bool(re.fullmatch(rx, 'Person(age=36)'))
  (True, False)
  >>> parse(Person, 'Person(name="Ada", age=36)')
  Person(name='Ada', age=36)
"""

from automata_compile.frontends.dataclass._language import dataclass_ir, dataclass_to_regex
from automata_compile.frontends.dataclass._parse import parse
from automata_compile.frontends.dataclass._schema import dataclass_schema

__all__ = ["dataclass_ir", "dataclass_schema", "dataclass_to_regex", "parse"]
