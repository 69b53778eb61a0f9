"""The string-matching automaton of one word (Knuth-Morris-Pratt), over any alphabet.

Front ends use it for "text until a stop string" (`frontends._ext_automata.text_until`, over
code points) and for free text that ends at a tool-call trigger (`frontends.tool_calls`,
over bytes).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["kmp_moves"]


def kmp_moves(word: Sequence[int]) -> list[dict[int, int]]:
    """The KMP automaton of ``word``'s symbols, state ``j`` = the longest suffix of what was
    read that is a prefix of ``word`` has length ``j``.

    Returns:
      For each state ``j < len(word)``, its edges that go anywhere but state 0, as
      ``{symbol: next state}`` (every other symbol goes to state 0; state ``len(word)``,
      the word found, is left to the caller). Each state's edges are those of its failure
      state plus the forward edge, so the construction costs O(number of edges).

    Example:
      >>> kmp_moves(b"aab")
      [{97: 1}, {97: 2}, {97: 2, 98: 3}]
    """
    m = len(word)
    fail = [0] * (m + 1)  # fail[j] = longest proper border of word[:j]
    k = 0
    for j in range(1, m):
        while k and word[j] != word[k]:
            k = fail[k]
        if word[j] == word[k]:
            k += 1
        fail[j + 1] = k
    moves: list[dict[int, int]] = []
    for j in range(m):
        d = dict(moves[fail[j]]) if j else {}
        d[word[j]] = j + 1
        moves.append(d)
    return moves
