"""JSON Schemas shared by the bitset any-order tests, compile side (tests/compile/tokens) and
device side (tests/runtime): the same objects, unions and free-value schemas, and one generator
of nested object schemas."""

from __future__ import annotations

from hypothesis import strategies as st

BOOL = {"type": "boolean"}
INT9 = {"type": "integer", "minimum": 0, "maximum": 9}
INT99 = {"type": "integer", "minimum": 0, "maximum": 99}
ENUM = {"enum": ["x", "yy"]}
FREE = {}


def nested_object(value: dict) -> dict:
    """Three properties in any order (``a`` and ``ab`` share a prefix), one of them an object
    of its own; ``value`` is the integers' schema."""
    return {
        "type": "object",
        "properties": {
            "a": value,
            "ab": BOOL,
            "n": {
                "type": "object",
                "properties": {"x": BOOL, "y": value},
                "required": ["y"],
                "additionalProperties": False,
            },
        },
        "required": ["ab"],
        "additionalProperties": False,
    }


SIX_BOOLS = {
    "type": "object",
    "properties": {k: BOOL for k in "uvwxyz"},
    "required": ["z"],
    "additionalProperties": False,
}

# unions whose members close on different required sets: a disjunctive REQUIRE at ``}``
UNION_A = {"type": "object", "properties": {"a": BOOL, "b": BOOL}, "required": ["a"],
           "additionalProperties": False}  # fmt: skip
UNION_B = {"type": "object", "properties": {"a": BOOL, "z": BOOL}, "required": ["z"],
           "additionalProperties": False}  # fmt: skip
UNION_C = {"type": "object", "properties": {"a": INT99, "b": BOOL, "c": ENUM},
           "required": ["b", "c"], "additionalProperties": False}  # fmt: skip
DISJUNCTIVE = {
    "two_members": {"anyOf": [UNION_A, UNION_B]},
    "three_members_nested": {
        "type": "object",
        "properties": {
            "u": {"anyOf": [UNION_A, UNION_B, UNION_C]},
            "v": {"anyOf": [UNION_A, UNION_C]},
        },
        "required": ["u"],
        "additionalProperties": False,
    },
    "closing_two_at_once": {  # `}}`, `}]`: one token crosses two disjunctions
        "type": "array",
        "maxItems": 2,
        "items": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"o": {"anyOf": [UNION_A, UNION_B]}, "k": BOOL},
                    "required": ["k"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"o": {"anyOf": [UNION_A, UNION_B]}, "m": BOOL},
                    "required": ["o"],
                    "additionalProperties": False,
                },
            ]
        },
    },  # fmt: skip
}

# free values (grammar rules): `BitsetPDATables`
PDA_SCHEMAS = {
    "free_value": {
        "type": "object",
        "properties": {"a": FREE, "b": {"type": "integer"}},
        "required": ["a"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "n": {
                "type": "object",
                "properties": {"x": FREE, "y": INT99},
                "required": ["y"],
                "additionalProperties": False,
            },
            "z": FREE,
            "w": BOOL,
        },
        "required": ["n", "w"],
        "additionalProperties": False,
    },
    "union": {  # members closing on different required sets, with free values
        "anyOf": [
            {
                "type": "object",
                "properties": {"a": FREE, "b": BOOL},
                "required": ["a"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"a": BOOL, "z": FREE},
                "required": ["z"],
                "additionalProperties": False,
            },
        ]
    },
}

NAMES = ["a", "ab", "b", "ba", "c"]


def object_schemas(depth: int, leaves: list, extras: list, leaf_weight: int = 1):
    """Nested objects (2-4 of `NAMES` in any order, some required), arrays of them and unions
    of two, ``depth`` levels deep; ``leaves``: the values' schemas, ``extras``: the choices
    of ``additionalProperties``; ``leaf_weight``: how often a leaf is drawn below the top."""
    leaf = st.sampled_from(leaves)
    if depth == 0:
        return leaf
    inner = object_schemas(depth - 1, leaves, extras, leaf_weight)

    @st.composite
    def obj(draw):
        names = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=4, unique=True))
        props = {n: draw(st.one_of(leaf, inner)) for n in names}
        required = draw(st.lists(st.sampled_from(names), unique=True))
        extra = draw(st.sampled_from(extras))
        out = {"type": "object", "properties": props, "additionalProperties": extra}
        if required:
            out["required"] = required
        return out

    @st.composite
    def arr(draw):
        return {"type": "array", "items": draw(obj()), "maxItems": 2}

    union = st.builds(lambda a, b: {"anyOf": [a, b]}, obj(), obj())
    if depth < 2:
        return st.one_of(*[leaf] * leaf_weight, obj(), obj(), arr(), union)
    return st.one_of(obj(), obj(), obj(), union)
