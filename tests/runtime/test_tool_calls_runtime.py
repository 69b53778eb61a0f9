"""Tool-call constraints on the device: sampled outputs of the tiny random model parse into
text plus valid calls of known tools, in batches mixed with JSON Schema and grammar rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_jax import ConstraintTables, testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tool_call_fixtures import DEVICE_TOOLS as TOOLS  # noqa: E402
from tool_call_fixtures import names as tool_names  # noqa: E402
from tool_call_fixtures import params as tool_params  # noqa: E402

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
# (format, options) of the tool-call rows; calls only, so that a random model calls
CONSTRAINTS = [
    ("hermes", {"allow_text": False, "parallel": True}),
    ("gemma", {"allow_text": False}),
    ("hermes", {"require_call": False}),  # free text: a random model rarely opens a call
]


@pytest.fixture(scope="module")
def setup():
    vocab = testing.default_vocabulary()
    model, params = testing.tiny_model(vocab.size)
    dfas = [ac.compile_tool_calls(TOOLS, vocab, format=f, **o) for f, o in CONSTRAINTS]
    dfas += [ac.compile_json_schema(SCHEMA, vocab), ac.compile_grammar("json", vocab)]
    tables = ConstraintTables.from_dfas(dfas, vocab_size=vocab.size)
    return vocab, model, params, tables


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_sampled_outputs_parse_into_valid_calls(setup, temperature):
    vocab, model, params, tables = setup
    ids = np.array([0, 0, 1, 1, 2, 3, 4, 0], np.int32)
    prompts, mask = aj.pad_prompts([[1, 200 + i] for i in range(len(ids))])
    out = aj.generate(
        model.apply_step, params, prompts, tables, ids, sampler=aj.Temperature(temperature),
        max_new_tokens=48, rng=jax.random.key(int(temperature * 10)), prompt_mask=mask,
        cache=model.init_cache,
    )  # fmt: skip
    assert not np.asarray(out.states.error).any()
    schemas = dict(zip(tool_names(TOOLS), map(tool_params, TOOLS), strict=True))
    calls = 0
    for b, k in enumerate(ids.tolist()):
        n = int(out.lengths[b])
        text = vocab.decode(np.asarray(out.tokens[b, :n]).tolist()).decode("utf-8", "replace")
        done = bool(out.accepted[b])
        if k < 3:
            fmt, opts = CONSTRAINTS[k]
            if not done:  # cut off by max_new_tokens: the calls completed so far
                end = ac.TOOL_CALL_FORMATS[fmt].end
                text = text[: text.rfind(end) + len(end)] if end in text else ""
            parts = ac.parse_tool_calls(text, fmt)
            got = [p for p in parts if isinstance(p, ac.ToolCall)]
            if done and not opts.get("allow_text", True):
                assert got and all(isinstance(p, ac.ToolCall) or not p.strip() for p in parts)
            for c in got:
                assert c.name in schemas, text
                jsonschema.validate(c.arguments, schemas[c.name])
            calls += len(got)
        elif not done:
            continue
        elif k == 3:
            jsonschema.validate(json.loads(text), SCHEMA)
        else:
            json.loads(text)
    assert calls >= 1
