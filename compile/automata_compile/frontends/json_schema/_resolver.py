"""``$ref`` resolution: schema resources, anchors and JSON pointers of one document."""

from __future__ import annotations

import urllib.parse
from typing import Any

from automata_compile._errors import InvalidSchemaError


class _Refuse(Exception):
    """Internal: a construct that cannot be expressed exactly (becomes a refusal)."""

    def __init__(self, keyword: str, reason: str):
        self.keyword = keyword
        self.reason = reason
        super().__init__(reason)


_DEFAULT_BASE = "https://automata-jax.invalid/schema.json"
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = (
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "items",
    "contentSchema",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def _loc(ptr: str) -> str:
    """A JSON pointer as shown in messages: as a URI fragment (``#`` is the root)."""
    return "#" + ptr


def _ptr_join(ptr: str, *tokens) -> str:
    for t in tokens:
        ptr += "/" + str(t).replace("~", "~0").replace("/", "~1")
    return ptr


def _join_uri(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return base.split("#", 1)[0] + ref
    if urllib.parse.urlsplit(ref).scheme:
        return ref
    return urllib.parse.urljoin(base, ref)


class _Resolver:
    def __init__(self, root):
        self.root = root
        self.resources: dict[str, tuple[Any, str]] = {}
        self.anchors: dict[str, tuple[Any, str, str]] = {}
        self.dynamic_anchors: dict[str, tuple[Any, str, str]] = {}
        self.resources[_DEFAULT_BASE] = (root, "")
        self._walk(root, _DEFAULT_BASE, "")

    def _walk(self, node, base: str, ptr: str):
        if not isinstance(node, dict):
            return
        sid = node.get("$id")
        if isinstance(sid, str) and not sid.startswith("#"):
            base = _join_uri(base, sid).split("#", 1)[0]
            self.resources[base] = (node, ptr)
        for key in ("$anchor", "$dynamicAnchor"):
            a = node.get(key)
            if isinstance(a, str):
                self.anchors[base + "#" + a] = (node, ptr, base)
                if key == "$dynamicAnchor":
                    self.dynamic_anchors[base + "#" + a] = (node, ptr, base)
        for key in _SCHEMA_MAPS:
            sub = node.get(key)
            if isinstance(sub, dict):
                for k, v in sub.items():
                    self._walk(v, base, _ptr_join(ptr, key, k))
        for key in _SCHEMA_ONE:
            sub = node.get(key)
            if isinstance(sub, dict):
                self._walk(sub, base, _ptr_join(ptr, key))
        for key in _SCHEMA_LISTS:
            sub = node.get(key)
            if isinstance(sub, list):
                for i, v in enumerate(sub):
                    self._walk(v, base, _ptr_join(ptr, key, i))
        dep = node.get("dependencies")
        if isinstance(dep, dict):
            for k, v in dep.items():
                self._walk(v, base, _ptr_join(ptr, "dependencies", k))

    def resolve(self, ref: str, base: str, where: str):
        """Returns (schema, base URI, JSON pointer) of a reference."""
        uri = _join_uri(base, ref)
        doc, _, frag = uri.partition("#")
        frag = urllib.parse.unquote(frag)
        if doc not in self.resources:
            raise _Refuse(
                "$ref",
                f"the remote reference {ref!r} (to {doc!r}) cannot be fetched; only references inside the schema are supported",
            )
        node, ptr = self.resources[doc]
        if frag == "" or frag.startswith("/"):
            cur_base = doc
            for tok in frag.split("/")[1:] if frag else []:
                tok = tok.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and tok in node:
                    node = node[tok]
                elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
                    node = node[int(tok)]
                else:
                    raise InvalidSchemaError(
                        f"{_loc(where)}: $ref {ref!r} does not resolve (no {tok!r} at {_loc(ptr)})",
                        pointer=where,
                    )
                ptr = _ptr_join(ptr, tok)
                if (
                    isinstance(node, dict)
                    and isinstance(node.get("$id"), str)
                    and not node["$id"].startswith("#")
                ):
                    cur_base = _join_uri(cur_base, node["$id"]).split("#", 1)[0]
            return node, cur_base, ptr
        hit = self.anchors.get(doc + "#" + frag)
        if hit is None:
            raise InvalidSchemaError(
                f"{_loc(where)}: $ref {ref!r} does not resolve (no anchor {frag!r})", pointer=where
            )
        return hit[0], hit[2], hit[1]
