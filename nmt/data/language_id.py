"""Which language a text is in: the off-target rate of a multilingual model's translations.

A model asked for French that writes English (or copies its German input) is off target, a
failure BLEU shows only as a low score; Zhang et al. (2020) count the share of outputs a language
identifier does not read as the target language. The identifier is any callable from texts to
language keys, so a test (or another identifier) can stand in for the default, `langid`
(Lui & Baldwin 2012; `pip install -e ".[lang]"`), which ships its model and is restricted here
to the model's own languages, so that it only chooses among the languages the model knows.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Optional, Sequence

from nmt.errors import NmtError

Identifier = Callable[[list[str]], list[str]]  # texts -> a language key each


@functools.lru_cache(maxsize=1)
def _langid_model() -> Any:
    """langid's full classifier, parsed once per process: parsing its model (bz2 and pickle)
    costs 2-3 s of CPU, more than identifying a test set."""
    from langid import langid

    return langid.LanguageIdentifier.from_modelstring(langid.model)


class LangidIdentifier:
    """langid.py's classifier over `languages` only (its own instance: langid's module-level
    one is left as it is)."""

    def __init__(self, languages: Sequence[str]) -> None:
        try:
            full = _langid_model()
        except ImportError:
            raise NmtError('the off-target rate needs langid: pip install -e ".[lang]"') from None
        self.identifier = copy.deepcopy(full)  # set_languages changes the instance it is given
        known = set(self.identifier.nb_classes)
        unknown = [lang for lang in languages if lang not in known]
        if unknown:
            raise NmtError(
                f"langid does not know {', '.join(unknown)}; it knows ISO 639-1 codes such as "
                f"de, en, fr"
            )
        self.identifier.set_languages(list(languages))
        self.name = f"langid over {', '.join(sorted(languages))}"

    def __call__(self, texts: list[str]) -> list[str]:
        return [self.identifier.classify(t)[0] for t in texts]


def default_identifier(languages: Sequence[str]) -> tuple[Optional[Identifier], str]:
    """(langid over `languages`, its name), or (None, why not): not installed, or a language
    it does not know (a made-up one)."""
    try:
        ident = LangidIdentifier(languages)
    except NmtError as e:
        return None, str(e)
    return ident, ident.name


def off_target(hyps: list[str], tgt_lang: str, identify: Optional[Identifier], name: str) -> dict:
    """scores.json's `off_target`: the share of non-blank outputs the identifier does not read
    as `tgt_lang`, over `n` of them; `share` None (and `name` saying why) without one."""
    texts = [h for h in hyps if h.strip()]
    if identify is None:
        return {"share": None, "n": len(texts), "identifier": None, "why": name}
    langs = identify(texts) if texts else []
    off = sum(lang != tgt_lang for lang in langs)
    return {
        "share": off / len(texts) if texts else 0.0,
        "n": len(texts),
        "identifier": name,
        "target": tgt_lang,
    }


def describe_off_target(record: dict) -> str:
    """The printed line of an off-target record."""
    if record["share"] is None:
        return f"off-target: not measured ({record['why']})"
    return (
        f"off-target: {100 * record['share']:.1f}% of {record['n']} translations not read as "
        f"{record['target']} ({record['identifier']})"
    )
