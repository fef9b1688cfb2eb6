"""Text folding shared by the catalog, the gazetteer and the geocoder's ranking.

Users and models write names with or without accents, dashes, capitals or articles; these helpers
reduce them to a comparable form so that "Mapa Base de España – IGNBaseGris", "ign base gris" and
"A Coruña" / "Coruña" compare equal where they should.
"""

from __future__ import annotations

import re
import unicodedata

_CAMEL = re.compile(
    r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])"
)
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def fold(text: str) -> str:
    """Lower case without accents (ñ → n, ç → c, à → a)."""
    decomposed = unicodedata.normalize("NFKD", text or "")
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def words(text: str, *, split_camel: bool = False) -> list[str]:
    """Folded alphanumeric words; ``split_camel`` also splits ``IGNBaseGris`` → ign base gris."""
    if split_camel:
        text = _CAMEL.sub(" ", text or "")
    return _NON_ALNUM.sub(" ", fold(text)).split()


def compact(text: str) -> str:
    """Folded text with everything but letters and digits removed (``IGNBase-gris`` → ignbasegris)."""
    return _NON_ALNUM.sub("", fold(text))
