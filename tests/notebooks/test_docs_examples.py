"""The examples of docs/ marked ``<!-- probado -->`` run as written, and the docs link what exists."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

from tests.notebooks.harness import CLEARED, REPO

DOCS = REPO / "docs"
MARKED = re.compile(r"<!-- probado -->\s*```python\n(.*?)```", re.S)


def marked_examples() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        for index, match in enumerate(MARKED.finditer(path.read_text(encoding="utf-8"))):
            found.append((path.name, index, match.group(1)))
    return found


def test_the_extending_guide_has_a_tested_example() -> None:
    assert any(name == "extending.md" for name, _, _ in marked_examples())


@pytest.mark.parametrize(
    ("doc", "index", "code"),
    [pytest.param(*example, id=f"{example[0]}-{example[1]}") for example in marked_examples()],
)
def test_marked_example_runs(
    doc: str, index: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key in CLEARED:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("IDEE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IDEE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{doc}[{index}]", "exec"), {"__name__": "__docs__"})
    printed = out.getvalue()
    for expected in re.findall(r"print\(.*\)\s+# (.+)", code):  # "# <what it prints>" comments
        assert expected.strip() in printed, (expected, printed)


def test_relative_links_in_the_docs_point_to_files_that_exist() -> None:
    for path in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.name}: {target}"


def test_configuration_doc_lists_every_setting() -> None:
    from pydantic import AliasChoices

    from idee_notebook_agent.config import Settings

    doc = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names = list(alias.choices) if isinstance(alias, AliasChoices) else [alias or name]
        for env in names:
            assert f"`{env}`" in doc, f"{env} ({name}) is not documented in docs/configuration.md"
