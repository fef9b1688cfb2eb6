"""Binder installs exactly the package set of the project's runtime extras (``.[all]``)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def project_packages(extras: set[str]) -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {Requirement(r).name.lower() for r in meta["dependencies"]}
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in map(Requirement, meta["optional-dependencies"][extra]):
            if req.name == meta["name"]:
                pending.extend(req.extras)
            else:
                names.add(req.name.lower())
    return names


def binder_packages() -> set[str]:
    names: set[str] = set()
    for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"(?:-e\s+)?\.(?:\[(?P<extras>[\w,\s-]+)\])?", line)
        if match:
            extras = {e.strip() for e in (match.group("extras") or "").split(",") if e.strip()}
            names |= project_packages(extras)
        else:
            names.add(Requirement(line).name.lower())
    return names


def test_binder_requirements_match_the_all_extra():
    assert binder_packages() == project_packages({"all"})


def test_binder_python_and_postbuild_are_valid():
    assert re.fullmatch(r"python-3\.1[0-3]\n?", (ROOT / "binder" / "runtime.txt").read_text())
    postbuild = ROOT / "binder" / "postBuild"
    assert postbuild.stat().st_mode & 0o111, "postBuild must be executable"
    assert postbuild.read_text().startswith("#!/usr/bin/env bash")
