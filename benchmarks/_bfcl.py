"""BFCL (Berkeley Function Calling Leaderboard) data for the benchmarks: cases, schemas, scoring.

The `bfcl-eval` package ships the questions, function documents and possible answers
(`bfcl_eval/data/`). Install it without its dependencies (`pip install --no-deps bfcl-eval`):
they are the API clients of the models BFCL evaluates (torch, openai, anthropic, ...), and the
benchmarks only read its data files and run its AST checker.

- `load_cases(category)` reads one category (``"simple_python"``, ``"multiple"``, ...).
- `parameters_schema(fn)` converts BFCL's parameter dialect (``"dict"``, ``"float"``,
  ``"tuple"``, ``"any"``, Java/JavaScript type names) to JSON Schema.
- `check(case, calls)` scores calls with BFCL's own `ast_checker`, unchanged. It is imported with
  one shim: `bfcl_eval.constants.model_config` (which imports every API client) is replaced by a
  mapping whose models keep dotted function names (``underscore_to_dot=False``), the only thing
  the checker reads from it. So a call is judged exactly as BFCL judges a Python model that
  writes the function's own name.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

# BFCL's dialect -> JSON Schema types. Java / JavaScript names appear in the java / javascript
# categories; "any" (and the one empty type) constrain nothing.
_TYPES = {
    "dict": "object",
    "HashMap": "object",
    "float": "number",
    "double": "number",
    "integer": "integer",
    "long": "integer",
    "string": "string",
    "String": "string",
    "char": "string",
    "boolean": "boolean",
    "Boolean": "boolean",
    "array": "array",
    "Array": "array",
    "ArrayList": "array",
    "tuple": "array",
}
_FREE_TYPES = {"any", ""}
# Keywords kept as they are. "description" and "default" are annotations (a default is not a
# constraint); "optional" is BFCL's own and redundant with "required".
_KEPT = ("enum", "minimum", "maximum", "minItems", "maxItems")


class BfclDataError(ValueError):
    """The BFCL data is missing or not in the shape this module reads."""


def data_dir() -> Path:
    """The folder of BFCL's data files, found without importing the package."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BfclDataError(
            "the BFCL data is not installed: pip install --no-deps bfcl-eval "
            "(its dependencies are API clients the benchmarks do not use)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@dataclasses.dataclass(frozen=True)
class Case:
    """One BFCL question.

    Attributes:
      id: BFCL's id, e.g. ``"simple_python_0"``.
      category: e.g. ``"simple_python"``.
      messages: the first turn's chat messages (``role``, ``content``).
      functions: BFCL function documents (``name``, ``description``, ``parameters``).
      ground_truth: BFCL's possible answers: a list of ``{name: {param: [allowed values]}}``.
    """

    id: str
    category: str
    messages: tuple[dict[str, str], ...]
    functions: tuple[dict[str, Any], ...]
    ground_truth: tuple[dict[str, Any], ...]

    @property
    def question(self) -> str:
        """The user's text of the first turn."""
        return "\n".join(m["content"] for m in self.messages if m.get("role") == "user")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        raise BfclDataError(f"{path}: no such BFCL data file") from None
    except json.JSONDecodeError as e:
        raise BfclDataError(f"{path}: line {e.lineno} is not JSON ({e.msg})") from None


def load_cases(category: str, *, limit: int | None = None, version: str = "v4") -> list[Case]:
    """The cases of one category with their possible answers, in BFCL's order."""
    root = data_dir()
    name = f"BFCL_{version}_{category}.json"
    questions = _jsonl(root / name)
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(root / "possible_answer" / name)}
    cases = []
    for q in questions[:limit]:
        if q["id"] not in answers:
            raise BfclDataError(f"{name}: {q['id']} has no possible answer")
        cases.append(
            Case(
                id=q["id"],
                category=category,
                messages=tuple(q["question"][0]),
                functions=tuple(q["function"]),
                ground_truth=tuple(answers[q["id"]]),
            )
        )
    return cases


def parameters_schema(fn: dict[str, Any], *, closed: bool = True) -> dict[str, Any]:
    """JSON Schema of one function's arguments object.

    Args:
      fn: a BFCL function document.
      closed: objects accept only their declared properties (BFCL's checker rejects others).
    """
    try:
        return _schema(fn["parameters"], closed, f"{fn['name']}.parameters")
    except KeyError as e:
        raise BfclDataError(f"function {fn.get('name', '?')!r}: no {e.args[0]!r}") from None


def _schema(node: dict[str, Any], closed: bool, where: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise BfclDataError(f"{where}: expected an object, got {node!r}")
    kind = node.get("type", "")
    out: dict[str, Any] = {}
    if kind not in _FREE_TYPES:
        if kind not in _TYPES:
            raise BfclDataError(f"{where}: unknown BFCL type {kind!r}")
        out["type"] = _TYPES[kind]
    for key in _KEPT:
        if key in node:
            out[key] = node[key]
    if "properties" in node:
        out["properties"] = {
            k: _schema(v, closed, f"{where}.{k}") for k, v in node["properties"].items()
        }
        if node.get("required"):
            out["required"] = list(node["required"])
        if closed:
            out["additionalProperties"] = False
    if "items" in node:
        out["items"] = _schema(node["items"], closed, f"{where}[]")
    return out


def call_schema(functions, *, closed: bool = True) -> dict[str, Any]:
    """JSON Schema of one call ``{"name": ..., "arguments": {...}}`` to one of ``functions``."""
    branches = [
        {
            "type": "object",
            "properties": {
                "name": {"const": fn["name"]},
                "arguments": parameters_schema(fn, closed=closed),
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for fn in functions
    ]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


@functools.cache
def _checker():
    shim = types.ModuleType("bfcl_eval.constants.model_config")

    class _Models(dict):
        def __missing__(self, name):
            return types.SimpleNamespace(underscore_to_dot=False)

    shim.MODEL_CONFIG_MAPPING = _Models()
    saved = sys.modules.get(shim.__name__)
    sys.modules[shim.__name__] = shim
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    finally:
        if saved is None:
            del sys.modules[shim.__name__]
        else:
            sys.modules[shim.__name__] = saved
    return ast_checker, Language.PYTHON


def check(case: Case, calls: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """BFCL's verdict on ``calls`` (a list of ``{name: {param: value}}``) for ``case``.

    Returns BFCL's result dict: ``valid`` (bool), ``error`` (list of str), ``error_type``.
    """
    ast_checker, python = _checker()
    return ast_checker(
        list(case.functions),
        calls,
        list(case.ground_truth),
        python,
        case.category,
        "automata_jax",
    )
