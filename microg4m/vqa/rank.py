"""From a model's candidate QA pairs to the six a person reviews: parse, refine, rank, pick.

The paper's refinement step drops candidates that rely on sound, latent intent or other
non-visual cues and ranks the rest for consistency, fluency, relevance and information.
Here each of the four is a score in [0, 1] computed from the text alone (no second model):

* **consistency**: the answer is grounded in the caption: the share of the answer's
  content words (stop words removed, light stemming) that the caption contains. For the
  unanswerable pair ("Not mentioned") it is 1 when the question asks about something the
  caption does not contain (some content word of the question is absent), else 0: if the
  caption has every word of the question, the answer is probably there.
* **fluency**: the share of five checks passed: the question starts with a capital and
  ends with "?", has 4-25 words, opens with a Wh-word or an auxiliary verb (a real
  question form), and the answer has at most 30 words.
* **relevance**: the question is about this clip: the share of its content words that the
  caption contains (for the unanswerable pair: 1 when it shares at least one, i.e. it
  asks about the clip's subject, else 0).
* **information**: the answer adds something: its content words that the question does
  not already contain, 4 or more = 1 (the unanswerable pair: 0.5).

The score is the mean of the four. Pairs are then picked greedily, best first, with a
diversity penalty so that the six cover different dimensions (maximal marginal
relevance): a candidate's score minus 0.1 for every picked question of the same Wh-form
and minus 0.3 times its highest word overlap (Jaccard) with a picked question. At most
one unanswerable pair is kept; ties go to the model's order. Every candidate is returned
with its scores and why it was kept or dropped, so a reviewer can see the ranking.
"""

from __future__ import annotations

import json
import re

from microg4m.vqa.rules import MAX_PAIRS, MAX_TEXT_CHARS, UNANSWERABLE, content_words, looks_unanswerable, one_line, question_type, warnings_for, words

SAME_TYPE_PENALTY = 0.1
OVERLAP_PENALTY = 0.3
_UNANSWERABLE_PHRASES = re.compile(
    r"^(?:(?:it is |it's |this is )?not (?:mentioned|stated|specified|shown|visible|described)(?: in the "
    r"(?:caption|video|clip|description))?|unknown|unanswerable|(?:it )?cannot be (?:determined|answered)|"
    r"the (?:caption|description) does not (?:say|mention|specify))\.?$", re.IGNORECASE)


class MalformedReply(ValueError):
    """The model's reply is not a list of QA pairs."""


def parse_candidates(text: str) -> list[dict]:
    """Candidate pairs ``[{"Q", "A"}]`` from a reply: a JSON array of objects with Q and A
    (or question/answer), possibly inside a Markdown code fence or a ``{"qa_pairs": [...]}``
    object. :class:`MalformedReply` when there is no such array."""
    if not isinstance(text, str) or not text.strip():
        raise MalformedReply("empty reply")
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fence:
        body = fence.group(1)
    data = None
    for start, end in (("[", "]"), ("{", "}")):
        i, j = body.find(start), body.rfind(end)
        if i >= 0 and j > i:
            try:
                data = json.loads(body[i:j + 1])
                break
            except json.JSONDecodeError:
                continue
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise MalformedReply(f"no JSON array of QA pairs in the reply: {one_line(text)[:120]!r}")
    out = []
    for item in data:
        if not isinstance(item, dict):
            continue
        keys = {k.lower(): v for k, v in item.items() if isinstance(k, str)}
        q = keys.get("q", keys.get("question"))
        a = keys.get("a", keys.get("answer"))
        if isinstance(q, str) and isinstance(a, str):
            out.append({"Q": q, "A": a})
    if not out:
        raise MalformedReply(f"the reply's JSON has no objects with Q and A: {one_line(text)[:120]!r}")
    return out


def _stem(w: str) -> str:
    for suffix in ("ing", "ed", "es", "ly", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    return w


def _stems(text: str) -> set[str]:
    return {_stem(w) for w in content_words(text)}


def scores(q: str, a: str, caption: str) -> dict[str, float]:
    cap, qs, as_ = _stems(caption), _stems(q), _stems(a)
    unanswerable = a == UNANSWERABLE
    qtype = question_type(q)
    if unanswerable:
        consistency = 1.0 if qs - cap else 0.0
        relevance = 1.0 if qs & cap else 0.0
        information = 0.5
    else:
        consistency = len(as_ & cap) / len(as_) if as_ else (1.0 if qtype == "yes/no" else 0.5)
        relevance = len(qs & cap) / len(qs) if qs else 0.0
        information = min(1.0, len(as_ - qs) / 4)
    checks = [q[:1].isupper(), q.endswith("?"), 4 <= len(words(q)) <= 25, qtype != "other", len(words(a)) <= 30]
    fluency = sum(checks) / len(checks)
    parts = {"consistency": consistency, "fluency": fluency, "relevance": relevance, "information": information}
    parts = {k: round(v, 4) for k, v in parts.items()}
    parts["score"] = round(sum(parts.values()) / 4, 4)
    return parts


def _jaccard(x: set, y: set) -> float:
    return len(x & y) / len(x | y) if x | y else 0.0


def refine(candidates: list[dict], caption: str, *, keep: int = MAX_PAIRS, unanswerable: bool = True
           ) -> tuple[list[dict], list[dict]]:
    """``(kept pairs, every candidate with its scores and status)``; see the module docstring."""
    keep = min(keep, MAX_PAIRS)
    log, pool, seen = [], [], set()
    for i, c in enumerate(candidates):
        q, a = one_line(str(c.get("Q", ""))), one_line(str(c.get("A", "")))
        if looks_unanswerable(a) or _UNANSWERABLE_PHRASES.match(a):
            a = UNANSWERABLE
        entry = {"Q": q, "A": a}
        why = None
        if not q or not a:
            why = "empty question or answer"
        elif len(q) > MAX_TEXT_CHARS or len(a) > MAX_TEXT_CHARS:
            why = f"longer than {MAX_TEXT_CHARS} characters"
        elif w := warnings_for(q if a == UNANSWERABLE else f"{q} {a}"):
            why = f"about {' / '.join(w)} (not visible)"
        elif q.lower() in seen:
            why = "repeats an earlier question"
        elif a == UNANSWERABLE and not unanswerable:
            why = "unanswerable questions are turned off"
        if why is None:
            entry.update(scores(q, a, caption))
            seen.add(q.lower())
            pool.append((i, entry))
        else:
            entry.update(status="dropped", reason=why)
        log.append(entry)

    picked: list[dict] = []
    picked_stems: list[set] = []
    while pool and len(picked) < keep:
        def value(item):
            _, e = item
            same = sum(question_type(p["Q"]) == question_type(e["Q"]) for p in picked)
            overlap = max((_jaccard(_stems(e["Q"]), s) for s in picked_stems), default=0.0)
            return e["score"] - SAME_TYPE_PENALTY * same - OVERLAP_PENALTY * overlap

        best = max(pool, key=lambda item: (value(item), -item[0]))
        pool.remove(best)
        e = best[1]
        if e["A"] == UNANSWERABLE and any(p["A"] == UNANSWERABLE for p in picked):
            e.update(status="dropped", reason="a better unanswerable question was kept")
            continue
        e.update(status="kept", rank=len(picked) + 1, reason="")
        picked.append(e)
        picked_stems.append(_stems(e["Q"]))
    for _, e in pool:
        e.update(status="dropped", reason=f"ranked below the {len(picked)} kept")
    return [{"Q": p["Q"], "A": p["A"]} for p in picked], log
