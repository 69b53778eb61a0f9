"""`compile_tool_calls`: tools + vocabulary → `TokenDFA` with the PDA block."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np

from automata_compile.automata import CALL, SHIFT, limits
from automata_compile.frontends.tool_calls import (
    tool_calls_layout,
    tool_calls_spec,
    tool_unit,
    unit_variant,
)
from automata_compile.tokens import (
    PdaRoot,
    PdaUnit,
    UnitNotCacheable,
    token_pda,
    token_pda_units,
)


def compile_tool_calls(
    tools,
    vocab,
    *,
    format="hermes",
    parallel: bool = False,
    require_call: bool = False,
    tool: str | None = None,
    allow_text: bool = True,
    timeout_s: float | None = None,
    **schema_options,
):
    """Compiles "free text, with calls of these tools where the model opens one" for a
    vocabulary: a `TokenDFA` with the PDA block (batched with any other constraint) and
    state blocks: the frame's fixed states, the names' trie (split by first name byte) and
    each tool have their own token classes, so the table grows with the sum of the tools'
    classes, not their product (`TokenDFA.dense` gives the one-table form).

    The language: free text (any bytes) in which the format's trigger appears only to
    open a call; after the trigger, a call of one of ``tools`` whose arguments are valid
    for that tool's parameters schema (the name selects the schema: dispatch), then the
    end tag, then free text again; EOS wherever the text may end. The trigger is matched
    on bytes, so a token that holds part of it, or the trigger and the start of the call,
    is allowed exactly when the whole output can still be valid.

    Args:
      tools: tool definitions: ``{"type": "function", "function": {"name", "parameters"}}``
        (OpenAI), ``{"name", "parameters"}`` or ``{"name", "inputSchema"}`` (MCP) dicts; the
        parameters are a JSON Schema of an object.
      vocab: an `automata_compile.Vocabulary` that spells every byte with one token.
      format: ``"hermes"`` (``<tool_call>`` + JSON), ``"gemma"`` (````tool_code`` + Python
        call) or a `ToolCallFormat`; see `automata_compile.TOOL_CALL_FORMATS`.
      parallel: allow several calls (each its own trigger ... end block); else at most one,
        and the trigger may not appear in the text after it.
      require_call: the output must contain a call (``tool_choice="required"``).
      tool: only this tool may be called (``tool_choice={"function": {"name": ...}}``).
      allow_text: free text around the calls; ``False``: the output is call blocks only
        (the trigger first; with ``parallel``, one optional newline between blocks), at
        least one, as vLLM's ``tool_choice="required"`` does.
      timeout_s: optional wall-clock limit (`CompileTimeoutError`).
      **schema_options: options of `compile_json_schema` for the parameters schemas;
        ``property_order`` defaults to ``"declared"`` here (the order models write, and a
        far smaller automaton than any order) and ``closed_objects`` to True (no arguments
        the tool does not declare where its schema is silent on others; a sound subset).

    Each tool compiles once per (schema, format, options) and is kept in a cache (the
    walks of its rules over a vocabulary are cached by the PDA composer, and its finished
    table block by `tokens.token_pda_units`), so a request repeating known tools pays for
    the root (names, trigger; its walk is kept for the last few tool lists) and for
    copying the tools' blocks into its tables.

    Raises:
      InvalidToolError: a malformed tool list (names, repeated names, non-object schemas),
        or ``tool`` names no tool.
      InvalidSchemaError, UnsupportedSchemaError: a parameters schema (as in
        `compile_json_schema`; the message names the tool).
      GrammarConflictError: a custom format whose parts collide with the calls.
    """
    fmt, tools, opts, spec = tool_calls_spec(
        tools,
        format=format,
        parallel=parallel,
        require_call=require_call,
        tool=tool,
        allow_text=allow_text,
        **schema_options,
    )
    flags = dict(parallel=parallel, require_call=require_call, allow_text=allow_text)
    with limits(timeout_s, "the tool calls"):
        pda, lay = tool_calls_layout(fmt, tools, opts, **flags)
        head = [dataclasses.asdict(fmt), flags, repr(opts.key()), unit_variant()]
        head = json.dumps(head, sort_keys=True)
        units = [
            PdaUnit(
                lo=lay.unit_lo[k],
                n=lay.unit_states[k],
                rules=(lay.rule_lo[k], lay.rule_lo[k] + lay.unit_rules[k]),
                key=hashlib.sha256(
                    json.dumps([head, t.name, t.parameters], sort_keys=True).encode()
                ).hexdigest(),
            )
            for k, t in enumerate(tools)
        ]
        try:
            return token_pda_units(
                pda,
                vocab,
                spec_kind="tool_calls",
                spec=spec,
                fixed=PdaRoot(lay.q0, lay.trie_lo, lay.trie_hi),
                units=units,
                root_block=_root_blocks(lay),
            )
        except UnitNotCacheable:  # a unit's rows reach the names' trie (never seen)
            block = _tool_blocks(pda, tools, fmt, opts)
            return token_pda(pda, vocab, spec_kind="tool_calls", spec=spec, block=block)


def _root_blocks(lay) -> np.ndarray:
    """The root's blocks: 0 for its fixed states (free text, trigger, envelope, end tag),
    and the names' trie split by the names' first byte (each part reads only the tokens
    that spell its names), so no block's classes depend on every name."""
    block = np.zeros(lay.q0, np.int64)
    first = np.asarray(lay.trie_first, np.int64)
    block[lay.trie_lo : lay.trie_hi] = 1 + first
    return block


def _tool_blocks(pda, tools, fmt, opts) -> np.ndarray:
    """The block of each state: k for tool k's unit (its rules follow the root's in `link`'s
    order; the units come from their cache) and for the root's states from which only tool
    k's call can be reached (the end of its name, once no other name shares it); 0 for the
    rest of the frame (free text, trigger, envelope, shared name prefixes, end tag)."""
    rules = [len(tool_unit(t, fmt, opts).names) for t in tools]
    rule_block = np.repeat(np.arange(len(tools) + 1), [1, *rules])
    assert rule_block.shape[0] == len(pda.names)
    block = rule_block[pda.rule_of]
    root = np.flatnonzero(pda.rule_of == 0)
    return _split_names(pda, root, block, rule_block)


def _split_names(pda, root: np.ndarray, block: np.ndarray, rule_block) -> np.ndarray:
    """``block`` with each root state that reaches exactly one tool's call (through the
    root's shifts) moved to that tool's block. Any partition gives the same automaton;
    this one keeps the frame's rows (as wide as every name's split of the vocabulary) to
    the shared states."""
    in_root = np.zeros(pda.num_states, bool)
    in_root[root] = True
    kind, arg, shift = pda.kind[root], pda.arg[root], pda.shift[root]
    preds: dict[int, list[int]] = {}
    for s, t in zip(*np.nonzero((shift >= 0) & (kind == SHIFT)), strict=True):
        target = int(shift[s, t])
        if in_root[target]:
            preds.setdefault(target, []).append(int(root[s]))
    calls: dict[int, set] = {}  # tool block -> the root states that call it
    for s, t in zip(*np.nonzero(kind == CALL), strict=True):
        calls.setdefault(int(rule_block[int(arg[s, t])]), set()).add(int(root[s]))
    first: dict[int, int] = {}
    many: set[int] = set()
    for tool, states in sorted(calls.items()):
        stack = list(states)
        seen = set()
        while stack:  # backwards over the root's shifts; each state expands at most twice
            s = stack.pop()
            if s in seen or s in many:
                continue
            seen.add(s)
            if first.setdefault(s, tool) != tool:
                many.add(s)
            stack.extend(preds.get(s, ()))
    out = block.copy()
    for s, tool in first.items():
        if s not in many:
            out[s] = tool
    return out
