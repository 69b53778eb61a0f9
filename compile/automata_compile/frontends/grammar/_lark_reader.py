"""Lark EBNF text → one regex IR per rule, where ``Terminal(j)`` means "call rule j".

The grammar text is read by the ``lark`` package itself (`lark.load_grammar`), so
the accepted syntax, ``%import common.X``, ``%ignore`` and the errors are lark's.
We take its rule trees *before* lark compiles them to BNF (that step turns
``x*`` into left-recursive helper rules) and translate them:

* a rule body becomes an IR tree (``Seq``/``Alt``/``Repeat``); a reference to rule
  ``j`` becomes ``Terminal(j)``, which `automata._byte_pda` reads as a call edge;
* a terminal (named, or a literal / range inside a rule) becomes the IR of its
  regex through the regex front end (`_extensions.expand` then `_regex.parse`), so
  regex extensions that build character automata work inside terminals;
* ``%ignore`` terminals may follow every terminal: each terminal occurrence is
  followed by ``IGNORED*`` (and the synthetic root rule starts with it). Putting
  the ignored text *after* terminals, never before, keeps it from ever competing
  with the end of a rule or the start of a nullable one;
* immediate left recursion ``a: a x | a y | b | c`` is rewritten to
  ``a: (b | c) (x | y)*`` (same language); other left recursion is refused later.

The language is scannerless: terminals match by their regexes, concatenated, with
no longest-match lexing between them (as lark's Earley parser with
``lexer="dynamic"``).
"""

from __future__ import annotations

from automata_compile._errors import (
    AutomataError,
    InvalidGrammarError,
    LeftRecursionError,
    UnsupportedGrammarError,
)
from automata_compile.automata import EMPTY, Alt, GrammarIR, Repeat, Seq, Terminal

ROOT = "<root>"


def read_grammar(text: str, vocab, *, start: str = "start") -> GrammarIR:
    """Parses lark grammar ``text`` and translates every rule reachable from ``start``.

    Raises:
      InvalidGrammarError: lark rejects the text, or ``start`` is not a rule.
      UnsupportedGrammarError: templates, ``%declare``d terminals, terminal labels inside
        terminals, a left-recursive rule without a base case.
      InvalidPatternError, UnsupportedPatternError: a terminal's regex (with its name).
    """
    try:
        from lark.exceptions import LarkError
        from lark.load_grammar import load_grammar
    except ImportError as e:  # pragma: no cover - lark is a compiler dependency
        raise ImportError("compile_grammar needs the 'lark' package: pip install lark") from e
    if not isinstance(text, str):
        raise InvalidGrammarError(f"expected the grammar as a str, got {type(text).__name__}")
    try:
        grammar, _ = load_grammar(text, "<grammar>", [], False)
    except LarkError as e:
        raise InvalidGrammarError(f"lark rejects the grammar: {e}") from None
    rule_trees = {}
    for name, params, tree, _options in grammar.rule_defs:
        name = str(name)
        if params:
            raise UnsupportedGrammarError(
                f"rule {name!r}: templates (rules with parameters) are not supported; "
                "write the instances out",
                rules=(name,),
            )
        rule_trees[name] = tree
    term_trees = {str(name): tree for name, (tree, _prio) in grammar.term_defs}
    if start not in rule_trees:
        raise InvalidGrammarError(
            f"the start rule {start!r} is not defined (rules: {', '.join(sorted(rule_trees))})"
        )
    reader = _Reader(rule_trees, term_trees, vocab)
    ignored = [reader.terminal_ir(n) for n in grammar.ignore]
    reader.ignored = Repeat(_alt(ignored), 0, None) if ignored else None
    reader.index[ROOT] = 0
    reader.order.append(ROOT)
    reader.bodies.append(None)
    root_call = Terminal(reader.rule_id(start))
    reader.bodies[0] = Seq((reader.ignored, root_call)) if reader.ignored else root_call
    i = 1
    while i < len(reader.order):  # rules are added as they are referenced
        name = reader.order[i]
        reader.bodies[i] = reader.rule_body(name)
        i += 1
    return GrammarIR(names=tuple(reader.order), bodies=tuple(reader.bodies))


def _alt(options):
    return options[0] if len(options) == 1 else Alt(tuple(options))


class _Reader:
    def __init__(self, rule_trees, term_trees, vocab):
        self.rule_trees = rule_trees
        self.term_trees = term_trees
        self.vocab = vocab
        self.index: dict[str, int] = {}
        self.order: list[str] = []
        self.bodies: list = []
        self.term_cache: dict[str, object] = {}
        self.ignored = None

    def rule_id(self, name: str) -> int:
        j = self.index.get(name)
        if j is None:
            j = self.index[name] = len(self.order)
            self.order.append(name)
            self.bodies.append(None)
        return j

    # -- rules --------------------------------------------------------------------------------

    def rule_body(self, name: str):
        tree = self.rule_trees[name]
        alts = [_unalias(a) for a in (tree.children if tree.data == "expansions" else [tree])]
        recursive, base = [], []
        for a in alts:
            items = a.children if a.data == "expansion" else [a]
            if items and _is_call(items[0], name):
                recursive.append(items[1:])
            else:
                base.append(a)
        if not recursive:
            return self.node(tree, name)
        if not base:
            raise LeftRecursionError(
                f"rule {name!r} is left-recursive with no alternative that does not start with "
                f"{name!r} (it derives no finite string)",
                rules=(name,),
            )
        head = _alt([self.node(a, name) for a in base])
        tails = [Seq(tuple(self.node(x, name) for x in rest)) for rest in recursive]
        return Seq((head, Repeat(_alt(tails), 0, None)))

    def node(self, tree, rule: str):
        from lark import Token, Tree
        from lark.grammar import NonTerminal
        from lark.grammar import Terminal as LarkTerminal

        if isinstance(tree, NonTerminal):
            if tree.name not in self.rule_trees:
                raise InvalidGrammarError(f"rule {rule!r} uses undefined rule {tree.name!r}")
            return Terminal(self.rule_id(tree.name))
        if isinstance(tree, LarkTerminal):
            return self.with_ignored(self.terminal_ir(tree.name))
        if not isinstance(tree, Tree):  # pragma: no cover - lark produces nothing else
            raise UnsupportedGrammarError(f"rule {rule!r}: unexpected grammar item {tree!r}")
        kind, kids = tree.data, tree.children
        if kind == "expansions":
            return _alt([self.node(k, rule) for k in kids])
        if kind == "expansion":
            items = [self.node(k, rule) for k in kids]
            return items[0] if len(items) == 1 else Seq(tuple(items))
        if kind == "alias":
            return self.node(kids[0], rule)
        if kind == "value":
            return self.node(kids[0], rule)
        if kind == "maybe":
            return Repeat(self.node(kids[0], rule), 0, 1)
        if kind == "expr":
            inner = self.node(kids[0], rule)
            op = str(kids[1])
            if op == "~":
                lo = int(kids[2])
                hi = int(kids[3]) if len(kids) > 3 else lo
                if hi < lo:
                    raise InvalidGrammarError(f"rule {rule!r}: bad range ~{lo}..{hi}")
                return Repeat(inner, lo, hi)
            return {"*": Repeat(inner, 0, None), "+": Repeat(inner, 1, None)}.get(
                op, Repeat(inner, 0, 1)
            )
        if kind in ("literal", "range"):
            regex = _term_regex(tree, self.term_trees, ())
            return self.with_ignored(self.regex_ir(regex, f"literal {_raw(tree)} in rule {rule!r}"))
        if kind == "template_usage":
            raise UnsupportedGrammarError(
                f"rule {rule!r}: templates are not supported", rules=(rule,)
            )
        if isinstance(tree, Token):  # pragma: no cover
            raise UnsupportedGrammarError(f"rule {rule!r}: unexpected token {tree!r}")
        raise UnsupportedGrammarError(f"rule {rule!r}: unsupported grammar construct {kind!r}")

    def with_ignored(self, ir):
        return Seq((ir, self.ignored)) if self.ignored is not None else ir

    # -- terminals ----------------------------------------------------------------------------

    def terminal_ir(self, name: str):
        ir = self.term_cache.get(name)
        if ir is None:
            tree = self.term_trees.get(name)
            if tree is None:
                raise UnsupportedGrammarError(
                    f"terminal {name!r} has no definition (%declare'd terminals come from a "
                    "custom lexer and cannot be compiled); define it with a pattern"
                )
            regex = _term_regex(tree, self.term_trees, (name,))
            ir = self.term_cache[name] = self.regex_ir(regex, f"terminal {name!r}")
        return ir

    def regex_ir(self, regex: str, where: str):
        from automata_compile.frontends import expand_extensions, parse_regex

        try:
            expanded = expand_extensions(regex, self.vocab)
            if expanded.predicates:
                raise UnsupportedGrammarError(
                    f"{where}: terminal labels ({', '.join(expanded.terminal_names)}) are not "
                    "supported inside grammars yet; use them in compile_regex"
                )
            ir = parse_regex(expanded.pattern, expanded.placeholders)
        except UnsupportedGrammarError:
            raise
        except AutomataError as e:
            raise type(e)(f"{where}: {e}") from None
        if ir == EMPTY:
            raise InvalidGrammarError(f"{where} matches only the empty string")
        return ir


def _unalias(tree):
    return tree.children[0] if getattr(tree, "data", None) == "alias" else tree


def _is_call(item, name: str) -> bool:
    from lark.grammar import NonTerminal

    while getattr(item, "data", None) == "value":
        item = item.children[0]
    return isinstance(item, NonTerminal) and item.name == name


def _raw(tree) -> str:
    return " .. ".join(str(c) for c in tree.children)


def _term_regex(tree, term_trees, seen: tuple) -> str:
    """A terminal's tree (lark EBNF over literals, ranges and other terminals) → regex text."""
    import re

    from lark import Token
    from lark.load_grammar import _literal_to_pattern, eval_escaping

    if isinstance(tree, Token):
        if tree.type in ("STRING", "REGEXP"):
            return "(?:" + _literal_to_pattern(tree).to_regexp() + ")"
        if tree.type == "TERMINAL" or tree.value in term_trees:
            if tree.value in seen:
                raise InvalidGrammarError(f"terminal {tree.value!r} refers to itself")
            return (
                "(?:" + _term_regex(term_trees[tree.value], term_trees, (*seen, tree.value)) + ")"
            )
        raise UnsupportedGrammarError(f"terminal {seen[-1] if seen else ''!r}: unexpected {tree!r}")
    from lark.grammar import Terminal as LarkTerminal

    if isinstance(tree, LarkTerminal):
        return _term_regex(Token("TERMINAL", tree.name), term_trees, seen)
    kind, kids = tree.data, tree.children
    if kind == "expansions":
        return "(?:" + "|".join(_term_regex(k, term_trees, seen) for k in kids) + ")"
    if kind == "expansion":
        return "".join(_term_regex(k, term_trees, seen) for k in kids)
    if kind in ("value", "literal", "pattern"):
        return _term_regex(kids[0], term_trees, seen)
    if kind == "maybe":
        return "(?:" + _term_regex(kids[0], term_trees, seen) + ")?"
    if kind == "range":
        lo, hi = (eval_escaping(str(k)[1:-1]) for k in kids)
        return f"[{re.escape(lo)}-{re.escape(hi)}]"
    if kind == "expr":
        inner = "(?:" + _term_regex(kids[0], term_trees, seen) + ")"
        op = str(kids[1])
        if op == "~":
            lo = int(kids[2])
            hi = int(kids[3]) if len(kids) > 3 else lo
            return f"{inner}{{{lo},{hi}}}"
        return inner + op
    raise UnsupportedGrammarError(
        f"terminal {seen[-1] if seen else ''!r}: unsupported construct {kind!r}"
    )
