"""A brute-force prefix oracle for context-free languages over bytes, independent of the compiler.

The grammars are written here by hand as byte-level BNF (no left recursion). A
*configuration* is the set of sentential-form suffixes still to be matched after
the bytes read so far (leftmost derivations, all alternatives at once: an
Earley-style chart without positions). A byte step expands leftmost nonterminals
until a byte set heads each form and keeps the forms whose head admits the byte;
``p`` is a viable prefix iff the configuration after ``p`` is non-empty (every
nonterminal is productive), and ``p`` is in the language iff some remaining form
derives the empty string. Steps are memoized per (configuration, byte), and a whole
vocabulary is walked byte position by byte position with NumPy, one step per distinct
(configuration, byte) pair, so brute force over 262k tokens is cheap.
The grammars are left-factored so that the set of forms stays small (alternatives
sharing a prefix would otherwise multiply with the nesting depth).
"""

from __future__ import annotations

import numpy as np


def bset(*parts) -> frozenset:
    """A byte set from bytes literals (each byte) and (lo, hi) inclusive ranges."""
    out = set()
    for p in parts:
        if isinstance(p, tuple):
            out.update(range(p[0], p[1] + 1))
        else:
            out.update(p)
    return frozenset(out)


def lit(s: bytes) -> tuple:
    return tuple(frozenset([b]) for b in s)


class Oracle:
    """Args: ``rules``: name -> list of alternatives (tuples of names and byte sets)."""

    def __init__(self, rules: dict, start: str):
        self.rules = {k: [tuple(a) for a in v] for k, v in rules.items()}
        self.start = frozenset([(start,)])
        self.memo: dict = {}
        nullable: set = set()
        changed = True
        while changed:
            changed = False
            for name, alts in self.rules.items():
                if name not in nullable and any(
                    all(isinstance(s, str) and s in nullable for s in a) for a in alts
                ):
                    nullable.add(name)
                    changed = True
        self.nullable = nullable

    def step(self, config: frozenset, b: int) -> frozenset:
        key = (config, b)
        out = self.memo.get(key)
        if out is not None:
            return out
        new, seen, todo = set(), set(), list(config)
        while todo:
            f = todo.pop()
            if f in seen or not f:
                continue
            seen.add(f)
            head = f[0]
            if isinstance(head, frozenset):
                if b in head:
                    new.add(f[1:])
            else:
                for alt in self.rules[head]:
                    todo.append(alt + f[1:])
        out = self.memo[key] = frozenset(new)
        return out

    def feed(self, config: frozenset, data: bytes) -> frozenset:
        for b in data:
            if not config:
                break
            config = self.step(config, b)
        return config

    def accepts(self, config: frozenset) -> bool:
        return any(all(isinstance(s, str) and s in self.nullable for s in f) for f in config)

    def viable(self, data: bytes) -> bool:
        return bool(self.feed(self.start, data))

    def in_language(self, data: bytes) -> bool:
        return self.accepts(self.feed(self.start, data))

    def allowed_tokens(self, prefix: bytes, tokens: list) -> set:
        """Ids t with ``prefix + tokens[t]`` viable (tokens: bytes or None), by brute force."""
        return set(np.flatnonzero(self.allowed_mask(prefix, TokenBytes(tokens))).tolist())

    def allowed_mask(self, prefix: bytes, vocab: TokenBytes) -> np.ndarray:
        """Boolean mask of the token ids t with ``prefix + tokens[t]`` viable, by brute force over
        every token: byte position by byte position, all tokens still viable at once, one
        `step` per distinct (configuration, byte) pair of that position."""
        allowed = np.zeros(len(vocab.lengths), bool)
        base = self.feed(self.start, prefix)
        if not base:
            return allowed
        configs = [base]  # configuration by id, for this call
        ids = {base: 0}
        live = np.flatnonzero(vocab.lengths > 0)
        cid = np.zeros(len(live), np.int64)
        depth = 0
        while live.size:
            pairs = cid * 256 + vocab.flat[vocab.starts[live] + depth]
            keys, inverse = np.unique(pairs, return_inverse=True)
            stepped = []
            for key in keys.tolist():
                config = self.step(configs[key >> 8], key & 0xFF)
                if config and config not in ids:
                    ids[config] = len(configs)
                    configs.append(config)
                stepped.append(ids[config] if config else -1)
            cid = np.asarray(stepped, np.int64)[inverse.reshape(-1)]
            depth += 1
            viable = cid >= 0
            ended = vocab.lengths[live] == depth
            allowed[live[viable & ended]] = True
            keep = viable & ~ended
            live, cid = live[keep], cid[keep]
        return allowed


class TokenBytes:
    """A vocabulary's token byte strings (bytes or None) packed into one array, built once per
    vocabulary for `Oracle.allowed_mask`."""

    def __init__(self, tokens: list):
        self.lengths = np.array([len(t) if t else 0 for t in tokens], np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.flat = np.frombuffer(b"".join(t for t in tokens if t), np.uint8)


WS = bset(b" \t\n\r")
DIGIT = bset((0x30, 0x39))
HEX = bset((0x30, 0x39), (0x41, 0x46), (0x61, 0x66))
CONT = bset((0x80, 0xBF))


def json_oracle() -> Oracle:
    """RFC 8259 JSON text, over UTF-8 bytes (no surrogates, shortest forms only)."""
    r = {
        "json": [("ws", "value", "ws")],
        "ws": [(), (WS, "ws")],
        "value": [("object",), ("array",), ("string",), ("number",),
                  lit(b"true"), lit(b"false"), lit(b"null")],
        "object": [(*lit(b"{"), "ws", "objbody")],
        "objbody": [lit(b"}"), ("string", "ws", *lit(b":"), "ws", "value", "ws", "moremembers",
                                *lit(b"}"))],
        "members": [("member", "moremembers")],
        "moremembers": [(), (*lit(b","), "members")],
        "member": [("ws", "string", "ws", *lit(b":"), "ws", "value", "ws")],
        "array": [(*lit(b"["), "ws", "arrbody")],
        "arrbody": [lit(b"]"), ("value", "ws", "moreelements", *lit(b"]"))],
        "elements": [("ws", "value", "ws", "moreelements")],
        "moreelements": [(), (*lit(b","), "elements")],
        "string": [(*lit(b'"'), "chars", *lit(b'"'))],
        "chars": [(), ("char", "chars")],
        "char": [
            (bset((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)),),
            (bset((0xC2, 0xDF)), CONT),
            (bset(b"\xe0"), bset((0xA0, 0xBF)), CONT),
            (bset((0xE1, 0xEC), (0xEE, 0xEF)), CONT, CONT),
            (bset(b"\xed"), bset((0x80, 0x9F)), CONT),
            (bset(b"\xf0"), bset((0x90, 0xBF)), CONT, CONT),
            (bset((0xF1, 0xF3)), CONT, CONT, CONT),
            (bset(b"\xf4"), bset((0x80, 0x8F)), CONT, CONT),
            (*lit(b"\\"), bset(b'"\\/bfnrt')),
            (*lit(b"\\u"), HEX, HEX, HEX, HEX),
        ],
        "number": [("minus", "int", "frac", "exp")],
        "minus": [(), lit(b"-")],
        "int": [lit(b"0"), (bset((0x31, 0x39)), "digits0")],
        "digits0": [(), (DIGIT, "digits0")],
        "digits1": [(DIGIT, "digits0")],
        "frac": [(), (*lit(b"."), "digits1")],
        "exp": [(), (bset(b"eE"), "sign", "digits1")],
        "sign": [(), (bset(b"+-"),)],
    }  # fmt: skip
    return Oracle(r, "json")


def arithmetic_oracle() -> Oracle:
    """The built-in arithmetic grammar, written right-recursively over bytes."""
    ws = bset(b" \t\f\r\n")
    alpha = bset((0x41, 0x5A), (0x61, 0x7A), b"_")
    r = {
        "start": [("ws", "sum")],
        "ws": [(), (ws, "ws")],
        "sum": [("product", "sumtail")],
        "sumtail": [(), (bset(b"+-"), "ws", "product", "sumtail")],
        "product": [("power", "prodtail")],
        "prodtail": [(), (bset(b"*/%"), "ws", "power", "prodtail")],
        "power": [("unary", "powtail")],
        "powtail": [(), (*lit(b"^"), "ws", "power")],
        "unary": [(*lit(b"-"), "ws", "unary"), ("atom",)],
        "atom": [
            ("number", "ws"),
            ("name", "ws", "call"),
            (*lit(b"("), "ws", "sum", *lit(b")"), "ws"),
        ],
        "call": [(), (*lit(b"("), "ws", "optargs", *lit(b")"), "ws")],
        "optargs": [(), ("args",)],
        "args": [("sum", "moreargs")],
        "moreargs": [(), (*lit(b","), "ws", "args")],
        "name": [(alpha, "namerest")],
        "namerest": [(), (alpha | DIGIT, "namerest")],
        "number": [("digits", "frac", "exp")],
        "digits": [(DIGIT, "digits0")],
        "digits0": [(), (DIGIT, "digits0")],
        "frac": [(), (*lit(b"."), "digits")],
        "exp": [(), (bset(b"eE"), "sign", "digits")],
        "sign": [(), (bset(b"+-"),)],
    }
    return Oracle(r, "start")
