"""Captions and question-answer pairs per clip: the rules every writer and reader applies.

The released ``vqa_and_captioning.json`` is a list of ``{video_id, caption, qa_pairs:
[{Q, A}]}`` (MicroG-4M paper, section 3). The rules, shared by the drafting stage, the
annotation page and the export:

* at most :data:`MAX_PAIRS` (6) pairs per clip;
* at most one unanswerable pair; its answer is exactly :data:`UNANSWERABLE`
  ("Not mentioned"); an answer that only looks like it ("not mentioned.") is refused;
* questions (and, for drafts, answers) about sound, intent or other cues that a viewer
  cannot see get a warning (:func:`warnings_for`); drafts drop them, people decide;
* text is kept on one line (runs of white space become one space), no empty Q or A,
  no question twice, nothing that cannot go into a UTF-8 file (a lone surrogate, a
  control character other than tab and newline: microg4m.common.text).

:data:`WARNINGS` holds the patterns as plain regular expressions that JavaScript reads
too, so the page warns about exactly what the drafting stage drops.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from pathlib import Path

from microg4m.common.text import text_problem

MAX_PAIRS = 6
UNANSWERABLE = "Not mentioned"
MAX_CAPTION_CHARS = 4000
MAX_TEXT_CHARS = 500

# category -> pattern (case-insensitive, word-bounded; the same syntax in Python and JS)
WARNINGS = {
    "sound": r"\b(?:sounds?|hears?|heard|hearing|listen(?:s|ed|ing)?|noises?|noisy|loud(?:ly)?|quiet(?:ly)?|"
             r"audio|audible|music(?:al)?|songs?|sing(?:s|ing)?|sang|voices?|says?|said|saying|tells?|told|"
             r"whisper(?:s|ed|ing)?|shout(?:s|ed|ing)?|beeps?|ringing|hum(?:s|ming)?|accent|pronounc\w*)\b",
    "intent": r"\b(?:intend(?:s|ed|ing)?|intentions?|intent|wants?|wanted|wish(?:es|ed)?|hop(?:e|es|ed|ing)|"
              r"plans? to|planning|trying to|tries to|tried to|feels?|feeling|felt|thinks?|thinking|thought|"
              r"believes?|motives?|motivat\w*|purpose|decid(?:e|es|ed)|prefers?|likes? to|enjoys?)\b",
    "not visible": r"\b(?:smells?|smelled|tastes?|tasted|odou?rs?|scents?|temperature|off[- ]camera|off[- ]screen|"
                   r"before the (?:video|clip)|after the (?:video|clip))\b",
}
_WARNING_RE = {k: re.compile(v, re.IGNORECASE) for k, v in WARNINGS.items()}

WH_WORDS = ("what", "who", "whom", "whose", "where", "when", "why", "how", "which")
YES_NO_WORDS = ("is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had",
                "will", "would", "should", "may", "might")
QUESTION_TYPES = (*WH_WORDS, "yes/no", "other")
# the statistics files of the VQA export (microg4m.vqa.export), named here for the rule
EXPORT_STAT_FILES = ("vqa_overall.csv", "vqa_qa_per_clip.csv", "vqa_caption_words.csv", "vqa_question_types.csv",
                     "vqa_word_frequency.csv", "vqa_statistics.png")


class VQAError(ValueError):
    """A caption or QA pair that breaks the rules; the message says which and why."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def warnings_for(text: str) -> list[str]:
    """The warning categories a question (or answer) touches, e.g. ``["sound"]``."""
    return [k for k, rx in _WARNING_RE.items() if rx.search(text)]


def looks_unanswerable(answer: str) -> bool:
    """``answer`` is "Not mentioned" up to case, spaces and a final full stop."""
    return re.fullmatch(r"not mentioned\.?", one_line(answer).lower()) is not None


def question_type(question: str) -> str:
    """The Wh-form of a question (its first Wh-word within the first three words), else
    ``yes/no`` for a question that opens with an auxiliary verb, else ``other``."""
    words = re.findall(r"[a-z]+", question.lower())
    for w in words[:3]:
        if w in WH_WORDS:
            return w
    return "yes/no" if words and words[0] in YES_NO_WORDS else "other"


def check_pairs(pairs) -> list[dict]:
    """Validated QA pairs ``[{"Q", "A"}]`` (text on one line); :class:`VQAError` otherwise."""
    if not isinstance(pairs, list):
        raise VQAError(f"qa_pairs must be a list, got {type(pairs).__name__}")
    if len(pairs) > MAX_PAIRS:
        raise VQAError(f"{len(pairs)} QA pairs: at most {MAX_PAIRS} per clip")
    out, seen = [], {}
    for i, pair in enumerate(pairs, 1):
        if not isinstance(pair, dict) or set(pair) != {"Q", "A"}:
            got = sorted(pair) if isinstance(pair, dict) else type(pair).__name__
            raise VQAError(f"pair {i}: expected an object with exactly the keys Q and A, got {got}")
        q, a = pair["Q"], pair["A"]
        for key, value in (("Q", q), ("A", a)):
            if not isinstance(value, str) or not value.strip():
                raise VQAError(f"pair {i}: {key} must be a non-empty string")
            if problem := text_problem(value):
                raise VQAError(f"pair {i}: {key} holds {problem}")
            if len(one_line(value)) > MAX_TEXT_CHARS:
                raise VQAError(f"pair {i}: {key} is {len(one_line(value))} characters long (at most {MAX_TEXT_CHARS})")
        q, a = one_line(q), one_line(a)
        if looks_unanswerable(a) and a != UNANSWERABLE:
            raise VQAError(f"pair {i}: an unanswerable pair's answer is exactly {UNANSWERABLE!r}, got {a!r}")
        key = q.lower()
        if key in seen:
            raise VQAError(f"pair {i} repeats the question of pair {seen[key]}")
        seen[key] = i
        out.append({"Q": q, "A": a})
    n_unanswerable = sum(p["A"] == UNANSWERABLE for p in out)
    if n_unanswerable > 1:
        raise VQAError(f"{n_unanswerable} unanswerable pairs (answer {UNANSWERABLE!r}): at most one per clip")
    return out


def check_caption(caption) -> str:
    if not isinstance(caption, str):
        raise VQAError(f"caption must be a string, got {type(caption).__name__}")
    if problem := text_problem(caption):
        raise VQAError(f"caption holds {problem}")
    text = one_line(caption)
    if len(text) > MAX_CAPTION_CHARS:
        raise VQAError(f"caption is {len(text)} characters long (at most {MAX_CAPTION_CHARS})")
    return text


def pair_warnings(pairs: list[dict]) -> list[dict]:
    """Per pair (1-based ``pair``) the warning categories of its question."""
    return [{"pair": i, "warnings": w} for i, p in enumerate(pairs, 1) if (w := warnings_for(p["Q"]))]


# ---------------------------------------------------------------- words (statistics)

STOPWORDS = frozenset("""
a an the and or but nor of in on at to from by with without for as into onto over under
above below between through during before after while about against among upon than then
is are was were be been being am has have had do does did will would can could should may
might must shall it its it's this that these those there here he she they them his her their
him hers theirs we us our you your i me my mine who whom whose which what when where why how
not no so such too very also just only both each every all any some more most other another
own same up down out off again further once s t one two
""".split())


def words(text: str) -> list[str]:
    """Lower-case words of a text (letters, digits, inner apostrophes and hyphens)."""
    return re.findall(r"[a-z0-9]+(?:['’-][a-z0-9]+)*", text.lower())


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS and not w.isdigit()]


def word_counts(texts) -> Counter:
    c: Counter = Counter()
    for t in texts:
        c.update(content_words(t))
    return c


# ---------------------------------------------------------------- the reviews file

def check_entry(entry) -> dict:
    """A reviewed entry of the reviews file, checked: ``caption, qa_pairs, reviewed`` and the
    bookkeeping ``reviewer, updated, draft``; :class:`VQAError` otherwise."""
    if not isinstance(entry, dict):
        raise VQAError(f"expected an object, got {type(entry).__name__}")
    missing = {"caption", "qa_pairs", "reviewed"} - set(entry)
    if missing:
        raise VQAError(f"missing {', '.join(sorted(missing))}")
    if not isinstance(entry["reviewed"], bool):
        raise VQAError(f"reviewed must be true or false, got {entry['reviewed']!r}")
    caption = check_caption(entry["caption"])
    if entry["reviewed"] and not caption:
        raise VQAError("marked reviewed without a caption")
    return {"caption": caption, "qa_pairs": check_pairs(entry["qa_pairs"]), "reviewed": entry["reviewed"],
            "reviewer": entry.get("reviewer"), "updated": entry.get("updated"), "draft": entry.get("draft")}


def read_reviews_doc(path) -> dict:
    """A reviews file ``{"version": 1, "clips": {id: entry}}`` (``{"clips": {}}`` when there is
    none). A file that is not such JSON raises :class:`VQAError` naming it."""
    path = Path(path)
    if not path.is_file():
        return {"clips": {}}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise VQAError(f"{path}: not readable JSON ({exc}); fix it by hand") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("clips"), dict):
        raise VQAError(f'{path}: expected {{"clips": {{clip_id: entry}}}}; fix it by hand')
    return doc


def read_reviews(path) -> dict[str, dict]:
    """Clip id -> raw entry (check each with :func:`check_entry`)."""
    return read_reviews_doc(path)["clips"]


def read_drafts(paths) -> dict[str, dict]:
    """Clip id -> draft record, over draft files (unreadable files are skipped)."""
    out = {}
    for path in sorted(map(str, paths)):
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
            for rec in doc.get("clips", []):
                if isinstance(rec, dict) and isinstance(rec.get("video_id"), str):
                    out[rec["video_id"]] = rec
        except (OSError, ValueError, AttributeError) as exc:
            logging.getLogger(__name__).warning("%s: unreadable drafts (%s)", path, exc)
    return out
