"""The planner on its phrasing sets: every tuned phrasing must pass; the held-out set is measured.

tests/planner/data/phrasings.yaml was used to write the rules; heldout.yaml was not (its accuracy
is printed and must stay above a floor). Run ``pytest -s tests/planner/test_phrasings.py`` to see it.
"""

from __future__ import annotations

import pytest

from tests.planner.cases import accuracy, evaluate, load_cases, report

TUNED = load_cases("phrasings.yaml")
HELDOUT = load_cases("heldout.yaml")
HELDOUT_FLOOR = 0.9


def test_there_are_at_least_80_tuned_phrasings_in_both_languages() -> None:
    assert len(TUNED) >= 80
    english = [c for c in TUNED if any(w in c["text"].lower().split() for w in ("the", "to", "me"))]
    assert len(english) >= 10
    multi = [c for c in TUNED if len({name for name, _ in c["calls"]}) >= 3]
    assert len(multi) >= 5


@pytest.mark.parametrize("case", TUNED, ids=[c["text"][:50] for c in TUNED])
def test_tuned_phrasing_gives_the_expected_calls(case: dict) -> None:
    outcome = evaluate([case])[0]
    assert outcome.ok, report([outcome])


def test_heldout_accuracy_stays_above_the_floor() -> None:
    outcomes = evaluate(HELDOUT)
    value = accuracy(outcomes)
    print(f"\nheld-out accuracy: {value:.1%} ({sum(o.ok for o in outcomes)}/{len(outcomes)})")
    print(report(outcomes))
    assert value >= HELDOUT_FLOOR, report(outcomes)
