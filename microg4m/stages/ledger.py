"""The ledger: every source and every clip, its status per stage and the reason.

Nothing is silently skipped: sources = downloaded + failed, clips = kept + rejected.
A failed source carries its reason class and the advice (download_errors.py); the
sources' provenance (every download record) goes to ``provenance.tsv`` beside it.
"""

from __future__ import annotations

import os

import pandas as pd

from microg4m.formats import download_errors
from microg4m.common.atomic import write_tsv
from microg4m.formats.records import read_records
from microg4m.formats.manifest import read_manifest
from microg4m.formats.records import records_frame
from microg4m.formats.tracks import read_tracks

from microg4m.formats.quality import COLUMNS as QUALITY_COLUMNS
from microg4m.formats.quality import read_quality

# the clip's quality scores (quality/{unit}.tsv) follow, empty on source rows and for clips
# trim dropped
SCORES = QUALITY_COLUMNS[1:]
COLUMNS = ["level", "source_id", "clip_id", "download", "trim", "filter", "track", "status", "reason",
           "reason_class", "advice", *SCORES]


def _read_tsv(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def build(downloads, trims, manifests, decisions, tracks, order: list[str] | None = None,
          quality=None) -> pd.DataFrame:
    """One row per source, then one per clip (trimmed or dropped); per job unit inputs.
    ``order``: the sources table's order of the source ids (units need not follow it:
    ``sources_per_job: auto`` packs them by work); default: the units' order.
    ``quality``: the units' quality tables (their scores fill the clip rows)."""
    rows = []
    scores = {}
    for path in quality or ():
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)  # as written
        read_quality(path)  # checked
        scores.update(table.set_index("clip_id")[SCORES].to_dict("index"))
    for dl, tr, mf, dc, tk in zip(downloads, trims, manifests, decisions, tracks):
        trim = _read_tsv(tr).set_index("source_id")
        clips = read_manifest(mf)
        dec = _read_tsv(dc).set_index("clip_id")
        persons = read_tracks(tk).groupby("video_id")["person_id"].nunique()
        for rec in read_records(dl):
            src = rec["source_id"]
            ok = rec["status"] == "ok"
            st = trim.loc[src]
            cls = None if ok else _reason_class(rec.get("reason_class"), rec["reason"])
            rows.append({"level": "source", "source_id": src, "clip_id": "", "download": rec["status"],
                         "trim": f"{st['status']} ({st['clips']} clips)", "filter": "", "track": "",
                         "status": "downloaded" if ok else "failed",
                         "reason": (st["reason"] if ok else rec["reason"]) or "",
                         "reason_class": cls.name if cls else "", "advice": cls.advice if cls else ""})
            for clip in clips[clips.source_id == src].to_dict("records"):
                cid = clip["clip_id"]
                row = {"level": "clip", "source_id": src, "clip_id": cid, "download": rec["status"],
                       "trim": clip["status"], "filter": "", "track": ""}
                if clip["status"] != "ok":
                    row.update(status="rejected", reason=f"trim: {clip['reason']}")
                elif cid in dec.index:
                    row["filter"] = dec.loc[cid, "reason"]
                    if dec.loc[cid, "keep"] == "1":
                        n = int(persons.get(cid, 0))
                        row["track"] = str(n)
                        row.update(status="kept", reason="" if n else "no person recorded by the tracker")
                    else:
                        row.update(status="rejected", reason=f"filter: {dec.loc[cid, 'reason']}")
                else:
                    row.update(status="rejected", reason="filter: no decision")
                row.update(scores.get(cid, {}))
                rows.append(row)
    return in_table_order(pd.DataFrame(rows, columns=COLUMNS).fillna(""), order)


def in_table_order(df: pd.DataFrame, order: list[str] | None) -> pd.DataFrame:
    """``df``'s rows by the position of their ``source_id`` in ``order`` (stable: a source's
    rows keep theirs); unchanged without ``order``."""
    if order is None:
        return df
    position = {sid: i for i, sid in enumerate(order)}
    key = df["source_id"].map(lambda sid: position.get(sid, len(position)))
    return df.iloc[key.argsort(kind="stable")].reset_index(drop=True)


def _reason_class(name, reason) -> download_errors.ReasonClass:
    """The record's class; a record written before classes were kept is classified now."""
    return download_errors.BY_NAME.get(name or "") or download_errors.classify(reason)



def funnel_counts(ledger: pd.DataFrame) -> pd.DataFrame:
    """Counts from sources to persons, and the rejection reasons."""
    src = ledger[ledger.level == "source"]
    clips = ledger[ledger.level == "clip"]
    kept = clips[clips.status == "kept"]
    persons = pd.to_numeric(kept["track"], errors="coerce").fillna(0).astype(int).sum()
    counts = [("sources", len(src)), ("downloaded", int((src.status == "downloaded").sum())),
              ("failed", int((src.status == "failed").sum())), ("clips", len(clips)),
              ("kept", len(kept)), ("rejected", int((clips.status == "rejected").sum())),
              ("persons", int(persons))]
    failed = src[src.status == "failed"]
    classes = [_reason_class(c if isinstance(c, str) else "", r).name
               for c, r in zip(failed.get("reason_class", [""] * len(failed)), failed["reason"])]
    for name, n in sorted(pd.Series(classes, dtype=str).value_counts().items()):
        counts.append((f"failed: {name}", int(n)))
    reasons = clips[clips.status == "rejected"]["reason"].str.replace(r" \(.*\)$", "", regex=True)
    reasons = reasons.str.replace(r"^trim: \d+ decoded frames.*", "trim: wrong frame count", regex=True)
    for reason, n in sorted(reasons.value_counts().items()):
        counts.append((f"rejected: {reason}", int(n)))
    return pd.DataFrame(counts, columns=["step", "count"])


def run(*, downloads, trims, manifests, decisions, tracks, ledger: str | os.PathLike,
        funnel: str | os.PathLike | None = None, funnel_plot: str | os.PathLike | None = None,
        provenance: str | os.PathLike | None = None, order: list[str] | None = None,
        quality=None) -> pd.DataFrame:
    """Write the ledger (and the provenance table, the funnel and its plot), sources in
    ``order`` (the sources table's); ``quality``: the units' quality tables."""
    df = build(downloads, trims, manifests, decisions, tracks, order, quality)
    write_tsv(ledger, df)
    if provenance is not None:
        write_tsv(provenance, in_table_order(records_frame(downloads), order))
    counts = funnel_counts(df)
    if funnel is not None:
        write_tsv(funnel, counts)
    if funnel_plot is not None:
        plot_funnel(counts, funnel_plot)
    return df


def plot_funnel(counts: pd.DataFrame, out: str | os.PathLike) -> None:
    """Horizontal bars: sources -> downloaded -> clips -> kept -> persons, then rejections."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from microg4m.common.atomic import atomic_path

    fig, ax = plt.subplots(figsize=(7, 0.4 * len(counts) + 1))
    colors = ["#c0392b" if s.startswith(("rejected", "failed")) else "#2e86c1" for s in counts["step"]]
    ax.barh(counts["step"][::-1], counts["count"][::-1], color=colors[::-1])
    for y, v in enumerate(counts["count"][::-1]):
        ax.text(v, y, f" {v}", va="center")
    ax.set_xlabel("count")
    ax.set_title("microg4m funnel")
    fig.tight_layout()
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
