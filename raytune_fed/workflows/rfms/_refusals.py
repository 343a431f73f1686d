"""What a grid's sites refused, and no silent empty result.

* :func:`refusals_json` - a result row's ``refusals`` column: per site, the refusal codes of the
  curator queries it refused and the final losses it withheld, for that row's method;
* :func:`owner_must_act` - a spent budget or an evaluation already given ends the cell with
  what the site's owner must change (their fixed refusal texts alone do not say);
* :func:`check_answered` - called where a grid finishes: a grid whose sites refused every
  curator query, or withheld every final loss, learnt nothing (every hypervolume is 0), and
  ends with :class:`EmptyResultError` naming the sites and the codes instead of exiting 0;
* :func:`refusal_note` - the same facts for the report page.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from raytune_fed.errors import QueryRefusedError
from raytune_fed.grid import GridIncompleteError

_OWNER_ACTS = {
    "budget": "its owner must raise [budget] answers (and [curator] query_budget, [budget] per_analyst or the "
              "analyst's [analysts.<name>] answers where set) in its policy and start `site serve` again; "
              "`raytune-fed site plan` with this grid's options prints what the grid needs",
    "sealed": "an earlier attempt at this unit (a failed or repeated run of this grid) already spent this site's "
              "final evaluation; its owner must allow more ([lockbox] max_answers, or [schedule] approved with "
              "finals_per_unit: `raytune-fed site plan` prints them) or start the site afresh with a new ledger, "
              "then the grid can run again",
}
_MEANING = {
    "guard": "'guard' is the site's differencing guard ([guard] k of its policy refuses a model that puts fewer "
             "than k of its rows in a class, or is fewer than k rows from a model it answered): its owner can "
             "lower k (`raytune-fed site init --guard-k`)",
}


class EmptyResultError(GridIncompleteError):
    """Every cell finished, but the sites answered nothing the methods could be compared on.

    ``frame`` holds the stored rows (written to ``results.parquet`` as usual), so a caller can
    still write the report page, which says the same.
    """

    def __init__(self, message: str, frame: Any) -> None:
        super().__init__(message, ())
        self.frame = frame


def refusals_json(refused: Mapping[tuple[str, str], int], withheld: Iterable[str]) -> str:
    """``{"queries": {site: {code: n}}, "withheld_finals": {site: n}}`` as a row stores it."""
    queries: dict[str, dict[str, int]] = {}
    for (site, code), n in sorted(refused.items()):
        queries.setdefault(site, {})[code] = int(n)
    return json.dumps({"queries": queries, "withheld_finals": dict(sorted(Counter(withheld).items()))},
                      sort_keys=True)


@contextmanager
def owner_must_act() -> Iterator[None]:
    """Re-raise a site's ``budget`` or ``sealed`` refusal with what its owner must change."""
    try:
        yield
    except QueryRefusedError as exc:
        code = getattr(exc, "code", None)
        if code not in _OWNER_ACTS:
            raise
        error = type(exc)(f"{exc}; {_OWNER_ACTS[code]}")
        error.code = code
        raise error from None


def _parse(value: Any) -> dict[str, Any]:
    if not isinstance(value, str):  # a row stored before the column existed
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _totals(frame: Any) -> tuple[Counter, Counter, int, int, int, int]:
    """(site, code) -> refused queries, site -> withheld finals; queries asked, refused; models, withheld."""
    queries: Counter = Counter()
    finals: Counter = Counter()
    asked = refused = models = withheld = 0
    for row in frame.to_dict("records"):
        parsed = _parse(row.get("refusals"))
        for site, codes in (parsed.get("queries") or {}).items():
            for code, n in codes.items():
                queries[(site, code)] += n
                refused += n
        for site, n in (parsed.get("withheld_finals") or {}).items():
            finals[site] += n
        n_queries = row.get("n_curator_queries")
        if isinstance(n_queries, (int, float)) and not (isinstance(n_queries, float) and math.isnan(n_queries)):
            asked += int(n_queries) * len(row.get("curators") if row.get("curators") is not None else ())
        models += int(row.get("n_selected") or 0)
        withheld += int(row.get("n_withheld_finals") or 0)
    return queries, finals, asked, refused, models, withheld


def _by_site(counts: Counter, codes: bool) -> str:
    if codes:
        return ", ".join(f"{site} {code} {n}" for (site, code), n in sorted(counts.items()))
    return ", ".join(f"{site} guard {n}" for site, n in sorted(counts.items()))


def _advice(queries: Counter, finals: Counter) -> str:
    codes = {code for _, code in queries} | ({"guard"} if finals else set())
    return "; ".join(_MEANING[c] for c in sorted(codes) if c in _MEANING)


def check_answered(frame: Any) -> None:
    """Raise :class:`EmptyResultError` if the sites refused every curator query or withheld every final loss."""
    if frame is None or len(frame) == 0 or "refusals" not in frame.columns:
        return
    queries, finals, asked, refused, models, withheld = _totals(frame)
    parts = []
    if asked and refused >= asked:
        parts.append(f"refused every one of the {asked} curator queries ({_by_site(queries, True)})")
    if models and withheld >= models:
        parts.append(f"withheld the final losses of every one of the {models} selected models "
                     f"({_by_site(finals, False)})")
    if not parts:
        return
    advice = _advice(queries, finals)
    raise EmptyResultError(
        f"the grid learnt nothing: the sites {' and '.join(parts)}, so every hypervolume is 0; the rows are "
        f"kept, and the refusals are the sites' own policies{': ' + advice if advice else ''}. The finals these units "
        f"spent are gone: a new attempt needs each owner to allow more finals or a new ledger", frame)


def refusal_note(frame: Any) -> str | None:
    """A paragraph for the report page on what the sites refused (None: they refused nothing)."""
    if frame is None or "refusals" not in frame.columns:
        return None
    queries, finals, asked, refused, models, withheld = _totals(frame)
    if not refused and not withheld:
        return None
    try:
        check_answered(frame)
        verdict = ""
    except EmptyResultError:
        verdict = (" The sites answered nothing the methods can be compared on: every hypervolume on this page "
                   "is 0 because of these refusals, not because of the methods.")
    text = (f"The sites refused {refused} of {asked} curator queries"
            f"{' (' + _by_site(queries, True) + ')' if queries else ''} and withheld the final losses of {withheld} "
            f"of {models} selected models{' (' + _by_site(finals, False) + ')' if finals else ''}.{verdict}")
    advice = _advice(queries, finals)
    return text + (f" {advice[0].upper()}{advice[1:]}." if advice else "") + (
        " The settings' guard_k is the guard of sites the grid simulates; sites reached through a sites file "
        "apply their owners' [guard] k.")
