"""The intent rules are data: they load, validate with clear errors, and can be extended in YAML."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.errors import ConfigurationError
from idee_notebook_agent.llm.offline import OfflinePlanner
from idee_notebook_agent.llm.planner.rules import ACTIONS, load_folders, load_planner_data
from idee_notebook_agent.resources import data_path
from idee_notebook_agent.toolbox.skills import load_skills
from tests.fakes.planner_world import World, drive

GOOD = """
intents:
  - id: teleport
    action: goto
    priority: 99
    anchors: ["teletranspórtame a", "beam me to"]
    slot: place
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_rules_cover_every_action() -> None:
    data = load_planner_data()
    assert {r.action for r in data.rules} == set(ACTIONS)
    assert [r.priority for r in data.rules] == sorted(
        (r.priority for r in data.rules), reverse=True
    )
    assert all(r.anchors for r in data.rules)


def test_intent_files_are_not_taken_for_skills() -> None:
    intents = sorted((data_path("skills") / "intents").glob("*.yaml"))
    assert len(intents) >= 5
    skills = load_skills([data_path("skills")])
    assert skills and all("intents" not in Path(s.origin).parts for s in skills)


async def test_a_new_phrasing_needs_only_yaml(tmp_path: Path) -> None:
    write(tmp_path / "intents", "mine.yaml", GOOD)
    planner = OfflinePlanner(Settings(_env_file=None, skills_dirs=str(tmp_path)))
    turn = await drive(planner, "teletranspórtame a Soria", World())
    assert [(c.name, c.args.get("q")) for c in turn.calls][:1] == [("geocodePlace", "Soria")]
    plain = await drive(OfflinePlanner(), "teletranspórtame a Soria", World())
    assert plain.calls == []


def test_rule_files_are_reloaded_when_they_change(tmp_path: Path) -> None:
    folder = tmp_path / "intents"
    write(folder, "mine.yaml", GOOD)
    first = load_planner_data([folder])
    write(folder, "mine.yaml", GOOD.replace("priority: 99", "priority: 98"))
    os.utime(folder / "mine.yaml", (1, 1))
    second = load_planner_data([folder])
    assert first.rules[0].priority == 99 and second.rules[0].priority == 98


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("intents:\n  - id: x\n    action: fly\n    anchors: [a]\n", "acción 'fly' desconocida"),
        ("intents:\n  - id: x\n    action: goto\n    anchors: [on, off]\n", "comillas"),
        ("intents:\n  - id: x\n    action: goto\n    anchors: [$nope]\n", "'$nope' desconocido"),
        (
            "intents:\n  - id: x\n    action: goto\n    anchors: []\n",
            "'anchors' no puede estar vacío",
        ),
        (
            "intents:\n  - id: x\n    action: goto\n    slot: weird\n    anchors: [a]\n",
            "slot 'weird'",
        ),
        ("intents:\n  - action: goto\n    anchors: [a]\n", "necesita 'id'"),
        ("vocabulary: {a: [x]}\n", "falta la clave 'intents:'"),
        ("intents: [\n", "No se pudo leer"),
        ("intents:\n  - id: x\n    action: goto\n    anchors: ['¿?']\n", "sin letras"),
    ],
)
def test_bad_rule_files_fail_with_the_file_and_the_reason(
    tmp_path: Path, text: str, needle: str
) -> None:
    write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigurationError) as info:
        load_folders([tmp_path])
    assert needle in str(info.value)
    assert "bad.yaml" in str(info.value)


def test_duplicate_rule_ids_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD)
    write(tmp_path, "b.yaml", GOOD)
    with pytest.raises(ConfigurationError, match="teleport' repetida"):
        load_folders([tmp_path])


def test_every_layer_alias_names_a_catalog_entry() -> None:
    catalog = pytest.importorskip("idee_notebook_agent.services.catalog")
    aliases = load_planner_data().get("layers.aliases")
    missing = [target for target in aliases if catalog.get_catalog().get(target) is None]
    assert missing == []
