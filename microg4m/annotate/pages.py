"""One page of a clip list: what ``/api/state``, ``/api/adjudication`` and
``/api/text-adjudication`` answer.

At the paper's scale an annotator's queue holds about a thousand clips, at ten times it ten
thousand, and an adjudicator's list every assigned clip; sent whole, the list alone was
megabytes per request and its p95 grew with the clips. A list is kept between requests as a
:class:`Listing` (each entry's JSON text, in order) and a request gets one page of
:data:`PAGE` entries, with ``page``, ``pages``, ``listed`` and ``page_size`` in the answer.

Query parameters (all optional):

* ``page=N``: the N-th page (1-based; past the last: the last). Not a whole number ≥ 1: 400.
* ``around=<clip>``: the page that holds that clip (the page opens on the clip being
  labelled; a filter always keeps it, so it does not vanish from the list once labelled).
* a filter: ``todo=1`` (the annotator's clips not done) or ``status=<status>``
  (adjudication: ``disagree``, ``resolved``, ...; ``all``: no filter).

Without ``page`` or ``around``, the page opens on the first clip still to do (the first not
done, the first that disagrees)."""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field

from .errors import Refused

PAGE = 200  # entries per page: a few kB of JSON, and a list the browser draws at once


@dataclass
class Listing:
    """A clip list kept between requests: ``ids`` in order, each entry's JSON text, and each
    entry's flag (done: bool for an annotator's queue; the status for adjudication)."""

    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    flags: list = field(default_factory=list)
    _at: dict[str, int] | None = None

    def where(self, clip: str) -> int | None:
        """The clip's position in the list (None: not listed)."""
        if self._at is None:
            self._at = {c: i for i, c in enumerate(self.ids)}
        return self._at.get(clip)

    def set(self, i: int, text: str, flag) -> None:
        """Entry ``i`` made again in place (its clip and position unchanged)."""
        self.texts[i], self.flags[i] = text, flag


def _whole(value: str, name: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise Refused(400, f"{name} must be a whole number from 1, got {value!r}")
    return int(value)


def page(listing: Listing, args, keep=None, start=None) -> tuple[str, dict]:
    """(the JSON array of the page's entries, {page, pages, listed, page_size}).

    ``args``: the request's query (page, around); ``keep``: the flag of the entries listed
    (None: every entry); ``start``: the flag of the entry the list opens on without page or
    around (None: the first page). Flags are compared, not passed to a function: a list of
    47,590 entries is filtered in a few milliseconds."""
    around = listing.where(args.get("around", ""))
    if keep is None:
        rows = range(len(listing.ids))
    else:
        rows = [i for i, f in enumerate(listing.flags) if f == keep]
        if around is not None and listing.flags[around] != keep:
            insort(rows, around)  # the clip open stays listed
    pages = max(1, -(-len(rows) // PAGE))
    if "page" in args:
        n = min(_whole(args["page"], "page"), pages)
    elif around is not None:
        n = 1 + (around if keep is None else bisect_left(rows, around)) // PAGE
    else:
        first = 0
        if start is not None:
            at = next((i for i, f in enumerate(listing.flags) if f == start), None)
            first = 0 if at is None else (at if keep is None else bisect_left(rows, at))
        n = 1 + first // PAGE
    shown = rows[(n - 1) * PAGE:n * PAGE]
    text = "[" + ",".join([listing.texts[i] for i in shown]) + "]"
    return text, {"page": n, "pages": pages, "listed": len(rows), "page_size": PAGE}


def todo_page(listing: Listing, args) -> tuple[str, dict]:
    """An annotator's queue: ``todo=1`` keeps the clips not done; opens on the first not done."""
    todo = args.get("todo", "") in ("1", "true")
    return page(listing, args, keep=False if todo else None, start=False)


def status_page(listing: Listing, args, first: str = "disagree") -> tuple[str, dict]:
    """An adjudication list: ``status=<s>`` keeps the clips with that status (``all``: every
    clip); opens on the first whose status is ``first``."""
    status = args.get("status", "all")
    return page(listing, args, keep=None if status == "all" else status, start=first)
