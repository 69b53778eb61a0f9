"""``closed_objects=True``: a schema's objects that declare their properties and say nothing
of others accept only those, as if they said ``additionalProperties: false``.

JSON Schema allows every undeclared property unless told otherwise, so a validator-exact
language lets a model invent keys (a small model loops on them:
``{"name":"egg","price_per_egg":1,"price_per_egg_per_serving":1,...}``). Outlines and
XGrammar's strict mode close such objects; here they are closed only where that is a
**sound subset** of the schema's language (every accepted instance is valid under the
schema as written, so a validator of the original schema still passes it) and cannot
empty a valid object's language:

* an object is closed where it is reached only through positions whose instances must
  match it: ``properties``, ``patternProperties``, ``additionalProperties``, ``items``,
  ``prefixItems``, ``contains`` (without ``maxContains``), ``unevaluated*``, the members of an ``anyOf`` beside no
  object keywords, a lone ``allOf`` member, a ``$ref`` beside no object keywords. Under
  ``not``, ``if``, ``oneOf`` (a narrower branch can make an instance that matched two
  branches match one) or ``dependentSchemas``, nothing is closed, nor is a ``$ref``
  target also reached from there;
* it declares ``properties`` and no ``additionalProperties`` or ``unevaluatedProperties``,
  has no ``allOf``, ``anyOf``, ``oneOf``, ``if``, ``$ref`` or dependency keywords beside
  them (which could declare the other properties it needs), and requires only declared
  names (else closing it would accept nothing).

A schema with ``$dynamicRef``, ``$recursiveRef``, ``$anchor``/``$dynamicAnchor`` or an
embedded ``$id`` resource (references this walk does not resolve) is left as it is, with a
warning naming the keyword.
"""

from __future__ import annotations

import warnings

from automata_compile._errors import InvalidSchemaError
from automata_compile.frontends.json_schema._resolver import (
    _DEFAULT_BASE,
    _loc,
    _ptr_join,
    _Resolver,
)

# Positions whose instance must match the subschema (the subschema only narrows it).
_ONE = ("additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems")
_MAP = ("properties", "patternProperties")
# Positions where a narrower subschema can widen or change the language, or conjuncts that
# may declare properties the object needs.
_NEG_ONE = ("not", "if", "then", "else", "propertyNames", "contentSchema")
_NEG_MAP = ("dependentSchemas",)
_OBJECT_KEYS = (
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "required",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
)
_CONJUNCTS = ("allOf", "anyOf", "oneOf", "if", "then", "else", "$ref", "$dynamicRef")
_CONJUNCTS += ("$recursiveRef", "dependentSchemas", "dependencies", "dependentRequired")
_UNRESOLVED = ("$dynamicRef", "$recursiveRef", "$anchor", "$dynamicAnchor")


def close_objects(schema, warned: set | None = None):
    """``(schema', pointers)``: ``schema`` (parsed JSON data) with ``additionalProperties:
    false`` added to each object closed by the rules above, and their JSON pointers in
    document order; ``schema`` itself where none is. ``warned``: the keywords already warned
    about in this compile (one warning each)."""
    if not isinstance(schema, dict):
        return schema, ()
    try:
        unresolved = _unresolved(schema)
        if unresolved is not None:
            raise _Unfollowed(*unresolved)
        resolver = _Resolver(schema)
        closable, opened = set(), set()
        todo, seen = [(schema, "", True)], set()
        while todo:
            node, ptr, ok = todo.pop()
            if not isinstance(node, dict) or (id(node), ok) in seen:
                continue
            seen.add((id(node), ok))
            (closable if ok else opened).add(id(node))
            todo.extend(_children(resolver, node, ptr, ok))
    except _Unfollowed as e:
        keyword, ptr = e.args
        if warned is None or ("closed_objects", ptr) not in warned:
            if warned is not None:
                warned.add(("closed_objects", ptr))
            warnings.warn(
                f"closed_objects: {keyword!r} at {_loc(ptr)} is a reference this option does "
                "not follow, so no object of the schema is closed (undeclared properties "
                "stay allowed where the schema allows them)",
                stacklevel=3,
            )
        return schema, ()
    out, closed = _copy(schema, closable - opened)
    if not closed:
        return schema, ()
    return out, tuple(sorted(closed, key=_pointer_order))


class _Unfollowed(Exception):
    """A reference keyword (and its pointer) that the walk does not resolve."""


def _children(resolver: _Resolver, node: dict, ptr: str, ok: bool):
    """The subschemas of ``node`` (at ``ptr``) with whether each may be closed."""
    objecty = any(k in node for k in _OBJECT_KEYS)
    for k in _ONE:
        if k in node:
            yield node[k], f"{ptr}/{k}", ok
    for k in _MAP:
        if isinstance(node.get(k), dict):
            for name, sub in node[k].items():
                yield sub, _ptr_join(ptr, k, name), ok
    items = node.get("items")
    if isinstance(items, list):  # draft 2019-09 and before: a tuple
        for i, sub in enumerate(items):
            yield sub, f"{ptr}/items/{i}", ok
    elif items is not None:
        yield items, f"{ptr}/items", ok
    for i, sub in enumerate(_list(node, "prefixItems")):
        yield sub, f"{ptr}/prefixItems/{i}", ok
    if "contains" in node:  # fewer matches can pass maxContains: open there
        yield node["contains"], f"{ptr}/contains", ok and "maxContains" not in node
    others = [k for k in _CONJUNCTS if k in node]
    union_ok = ok and not objecty and others == ["anyOf"]
    for i, sub in enumerate(_list(node, "anyOf")):
        yield sub, f"{ptr}/anyOf/{i}", union_ok
    all_of = _list(node, "allOf")
    lone_ok = ok and not objecty and others == ["allOf"] and len(all_of) == 1
    for i, sub in enumerate(all_of):
        yield sub, f"{ptr}/allOf/{i}", lone_ok
    for i, sub in enumerate(_list(node, "oneOf")):
        yield sub, f"{ptr}/oneOf/{i}", False
    for k in _NEG_ONE:
        if k in node:
            yield node[k], f"{ptr}/{k}", False
    for k in (*_NEG_MAP, "dependencies"):
        if isinstance(node.get(k), dict):
            for name, sub in node[k].items():
                yield sub, _ptr_join(ptr, k, name), False
    ref = node.get("$ref")
    if isinstance(ref, str):
        try:  # the translator's own resolution (a local ref: `_unresolved` let no other by)
            target, _, at = resolver.resolve(ref, _DEFAULT_BASE, _ptr_join(ptr, "$ref"))
        except InvalidSchemaError:
            raise _Unfollowed("$ref", _ptr_join(ptr, "$ref")) from None
        yield target, at, ok and not objecty and others == ["$ref"]


def _closes(node: dict) -> bool:
    """Whether closing ``node`` (reached only where it may be) is the rules' choice."""
    props = node.get("properties")
    if not isinstance(props, dict) or "additionalProperties" in node:
        return False
    if "unevaluatedProperties" in node or any(k in node for k in _CONJUNCTS):
        return False
    required = node.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        return False
    mn = node.get("minProperties", 0)
    return not (isinstance(mn, int) and mn > len(props) and "patternProperties" not in node)


def _copy(schema, chosen: set):
    """A copy of ``schema`` with ``additionalProperties: false`` on each node of ``chosen``
    that `_closes`, and the pointers of those (keys keep their order: declared property
    order is the schema's)."""
    closed = []

    def copy(x, ptr: str):
        if isinstance(x, dict):
            out = {k: copy(v, _ptr_join(ptr, k)) for k, v in x.items()}
            if id(x) in chosen and _closes(x):
                out["additionalProperties"] = False
                closed.append(ptr)
            return out
        if isinstance(x, list):
            return [copy(v, f"{ptr}/{i}") for i, v in enumerate(x)]
        return x

    return copy(schema, ""), closed


def _unresolved(schema) -> tuple[str, str] | None:
    """The first keyword (and its pointer) that makes references resolve other than by a
    JSON pointer into this document, or None."""
    todo = [(schema, "")]
    while todo:
        node, ptr = todo.pop()
        if isinstance(node, dict):
            for k in _UNRESOLVED:
                if k in node:
                    return k, f"{ptr}/{k}"
            for key in ("$id", "id"):  # an embedded resource (draft 4: "id")
                if ptr and isinstance(node.get(key), str) and not node[key].startswith("#"):
                    return key, f"{ptr}/{key}"
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                return "$ref", f"{ptr}/$ref"
            for k, v in node.items():
                if k not in ("enum", "const", "default", "examples"):  # data, not schemas
                    todo.append((v, _ptr_join(ptr, k)))
        elif isinstance(node, list):
            todo.extend((v, f"{ptr}/{i}") for i, v in enumerate(node))
    return None


def _list(node: dict, key: str) -> list:
    value = node.get(key)
    return value if isinstance(value, list) else []


def _pointer_order(ptr: str):
    return ptr.split("/")
