"""`compile_dataclass`: a dataclass + vocabulary → `TokenDFA` (its IR through `compile_ir`)."""

from __future__ import annotations

import json

from automata_compile.frontends.dataclass import dataclass_ir, dataclass_schema
from automata_compile.pipeline._regex import compile_ir


def compile_dataclass(
    cls,
    vocab,
    format: str = "json",
    *,
    max_states: int | None = None,
    timeout_s: float | None = None,
    **options,
):
    """Compiles a dataclass's instance language (see `dataclass_to_regex`) to a `TokenDFA`;
    the IR goes to the byte automaton directly. ``max_states`` and ``timeout_s`` are the
    compile budgets of `compile_regex`."""
    node = dataclass_ir(cls, format, options)
    spec = {"class": f"{cls.__module__}.{cls.__qualname__}", "format": format}
    if format == "json":
        spec["schema"] = dataclass_schema(cls)
    return compile_ir(
        node,
        vocab,
        max_states=max_states,
        spec_kind="dataclass",
        spec=json.dumps(spec),
        what=f"dataclass {cls.__qualname__}",
        timeout_s=timeout_s,
    )
