"""mistral-common tekken JSON as vocabulary parts (read by `Vocabulary.from_tekken`).

Base64 ``token_bytes``, offset by the number of special tokens, laid out exactly as
mistral-common's ``Tekkenizer`` does: ids ``[0, num_special)`` are special (the file's
``special_tokens`` list, or mistral-common's default list for older files, padded with
``<SPECIAL_i>`` fillers); id ``num_special + r`` is vocab rank ``r``.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from automata_compile._errors import VocabularyError
from automata_compile.tokens._vocab_files import Encoder, TokenBytes, VocabParts

__all__ = ["tekken_parts"]

# mistral-common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS: the special tokens of tekken files that
# predate the "special_tokens" list (version <= v7), in rank order.
_TEKKEN_DEFAULT_SPECIALS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)


def tekken_parts(obj: dict, path: Path) -> VocabParts:
    """The parts of a parsed tekken file.

    Raises:
      VocabularyError: malformed file (ranks, counts, base64), or a file newer than v7
        without a ``special_tokens`` list.
    """
    try:
        config = obj["config"]
        num_special = int(config["default_num_special_tokens"])
        vocab_size = int(config["default_vocab_size"])
        entries = obj["vocab"]
        listed = obj.get("special_tokens")
        if listed is None:
            version = str(config.get("version", "v1"))
            if not re.fullmatch(r"v\d+", version) or int(version[1:]) > 7:
                raise VocabularyError(
                    f"{path}: tekken {version} file without a 'special_tokens' list"
                )
            names = list(_TEKKEN_DEFAULT_SPECIALS)
        else:
            ranked = sorted(listed, key=lambda t: int(t["rank"]))
            if [int(t["rank"]) for t in ranked] != list(range(len(ranked))):
                raise VocabularyError(
                    f"{path}: tekken special token ranks are not 0..{len(ranked) - 1}"
                )
            names = [t["token_str"] for t in ranked]
        if len(names) > num_special or len(set(names)) != len(names):
            raise VocabularyError(
                f"{path}: {len(names)} special tokens for {num_special} special ids"
            )
        names += [f"<SPECIAL_{i}>" for i in range(len(names), num_special)]
        inner = vocab_size - num_special
        if not 0 <= inner <= len(entries):
            raise VocabularyError(
                f"{path}: default_vocab_size {vocab_size} needs {inner} vocab entries, file has {len(entries)}"
            )
        tokens: list[TokenBytes] = [None] * num_special
        b64 = base64.b64decode
        for r in range(inner):
            e = entries[r]
            if e["rank"] != r:
                raise VocabularyError(f"{path}: vocab entry {r} has rank {e['rank']}")
            tokens.append(b64(e["token_bytes"], validate=True))
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        if isinstance(e, VocabularyError):
            raise
        raise VocabularyError(f"{path}: malformed tekken file ({type(e).__name__}: {e})") from e
    special = {nm: i for i, nm in enumerate(names)}
    eos = [special["</s>"]] if "</s>" in special else []
    bos = special.get("<s>")
    str_path = str(path)

    def loader() -> Encoder:
        try:
            from mistral_common.tokens.tokenizers.tekken import Tekkenizer
        except ImportError as e:
            raise ImportError(
                "Encoding with a tekken vocabulary needs mistral-common: pip install mistral-common"
            ) from e
        tok = Tekkenizer.from_file(str_path)
        return lambda text: tok.encode(text, bos=False, eos=False)

    return VocabParts(tokens, special, eos, bos, path.name, loader)
