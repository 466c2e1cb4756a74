"""The ledger accounts for every source and every clip, with a status per stage and the reason.

The real-run checks reuse the bad-inputs run of tests/test_bad_inputs.py (run once per
pytest session): 22 sources in units of several sources, half of them failing in different ways,
clips dropped by trim, rejected by the filter and kept. ``funnel_counts`` is also
tested alone on hand-made ledgers.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys

import pandas as pd
import pytest

from microg4m.stages import ledger as lg
from microg4m.formats.records import RECORD_COLUMNS, read_records
from microg4m.formats.sources import load_sources
from test_bad_inputs import bad_inputs_run


def tsv(path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def concat(paths) -> pd.DataFrame:
    return pd.concat([tsv(p) for p in sorted(paths)], ignore_index=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return bad_inputs_run(tmp_path_factory)


@pytest.fixture(scope="module")
def ledger(run):
    return tsv(run / "results" / "ledger.tsv")


def test_columns_and_one_row_per_source_and_clip(ledger):
    assert list(ledger.columns) == lg.COLUMNS
    assert set(ledger.level) == {"source", "clip"}
    assert not ledger[ledger.level == "source"].source_id.duplicated().any()
    clips = ledger[ledger.level == "clip"]
    assert not clips.clip_id.duplicated().any() and (clips.clip_id != "").all()


def test_the_cli_ledger_is_the_workflows(run, ledger):
    # both read the corrected tracks (corrected/, the workflow's track_files output)
    out = subprocess.run([sys.executable, "-m", "microg4m.cli", "ledger", str(run / "results")],
                         capture_output=True, text=True, check=True).stdout
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(out), sep="\t", dtype=str, keep_default_na=False), ledger)


def test_every_source_of_the_table_appears_once(run, ledger):
    table = load_sources(run / "config" / "sources.tsv")
    src = ledger[ledger.level == "source"]
    assert list(src.source_id) == list(table.index)  # once each, in the table's order
    # its download column is the download record's status, its trim column the trim status
    records = {r["source_id"]: r for p in (run / "results" / "download").glob("*.tsv") for r in read_records(p)}
    trims = concat((run / "results" / "clips").glob("*/status.tsv")).set_index("source_id")
    for row in src.itertuples():
        assert row.download == records[row.source_id]["status"]
        assert row.trim == f"{trims.loc[row.source_id, 'status']} ({trims.loc[row.source_id, 'clips']} clips)"


def test_sources_are_downloaded_plus_failed(ledger):
    src = ledger[ledger.level == "source"]
    assert set(src.status) == {"downloaded", "failed"}
    downloaded, failed = (src.status == "downloaded").sum(), (src.status == "failed").sum()
    assert downloaded + failed == len(src) and downloaded > 0 and failed > 0
    assert (src[src.status == "failed"].reason != "").all(), "a failed source without a reason"
    assert (src[src.status == "failed"].download == "failed").all()


def test_failed_sources_carry_their_reason_class_and_advice(ledger):
    src = ledger[ledger.level == "source"]
    failed, ok = src[src.status == "failed"], src[src.status == "downloaded"]
    assert (failed.reason_class != "").all() and (failed.advice != "").all()
    assert (ok.reason_class == "").all() and (ok.advice == "").all()
    assert (ledger[ledger.level == "clip"].reason_class == "").all()


def test_provenance_lists_every_download_record(run, ledger):
    prov = tsv(run / "results" / "provenance.tsv")
    records = [r for p in sorted((run / "results" / "download").glob("*.tsv")) for r in read_records(p)]
    assert list(prov.columns) == RECORD_COLUMNS
    assert sorted(prov.source_id) == sorted(r["source_id"] for r in records)
    src = ledger[ledger.level == "source"].set_index("source_id")
    for row in prov.itertuples():
        assert (row.status == "ok") == (src.loc[row.source_id, "status"] == "downloaded")
        if row.status == "ok":
            assert len(row.sha256) == 64 and int(row.size) > 0
            video = run / "results" / row.path
            assert hashlib.sha256(video.read_bytes()).hexdigest() == row.sha256


def test_every_clip_of_every_manifest_appears_once(run, ledger):
    manifests = concat((run / "results" / "clips").glob("*/manifest.tsv"))
    clips = ledger[ledger.level == "clip"].set_index("clip_id")
    assert sorted(clips.index) == sorted(manifests.clip_id)
    for m in manifests.itertuples():
        assert clips.loc[m.clip_id, "source_id"] == m.source_id
        assert clips.loc[m.clip_id, "trim"] == m.status


def test_clips_are_kept_plus_rejected_and_every_rejection_has_a_reason(run, ledger):
    clips = ledger[ledger.level == "clip"]
    assert set(clips.status) == {"kept", "rejected"}
    kept, rejected = clips[clips.status == "kept"], clips[clips.status == "rejected"]
    assert len(kept) + len(rejected) == len(clips) and len(kept) > 0 and len(rejected) > 0
    assert (rejected.reason != "").all(), "a rejected clip without a reason"
    assert rejected.reason.str.match(r"^(trim|filter): ").all()
    # the stage that rejected it says so: trim drops carry the manifest's reason, filter
    # rejections the filter's decision
    decisions = concat((run / "results" / "filter").glob("*.tsv")).set_index("clip_id")
    for row in clips.itertuples():
        if row.trim != "ok":
            assert row.status == "rejected" and row.reason.startswith("trim: ") and row.filter == ""
        else:
            assert row.filter == decisions.loc[row.clip_id, "reason"]
            assert (row.status == "kept") == (decisions.loc[row.clip_id, "keep"] == "1")
    # kept clips carry the number of tracked persons, as in tracks/*.csv
    tracks = pd.concat([t for p in sorted((run / "results" / "tracks").glob("*.csv"))
                        if len(t := pd.read_csv(p, dtype={"video_id": str}))])
    persons = tracks.groupby("video_id").person_id.nunique()
    for row in kept.itertuples():
        assert int(row.track) == persons.get(row.clip_id, 0)
        assert row.reason == ("" if int(row.track) else "no person recorded by the tracker")


def test_funnel_agrees_with_the_ledger(run, ledger):
    funnel = tsv(run / "results" / "funnel.tsv")
    counts = dict(zip(funnel.step, funnel["count"].astype(int)))
    src, clips = ledger[ledger.level == "source"], ledger[ledger.level == "clip"]
    assert counts["sources"] == len(src) == counts["downloaded"] + counts["failed"]
    assert counts["downloaded"] == (src.status == "downloaded").sum()
    assert counts["clips"] == len(clips) == counts["kept"] + counts["rejected"]
    assert counts["kept"] == (clips.status == "kept").sum()
    assert counts["persons"] == pd.to_numeric(clips[clips.status == "kept"].track).sum()
    assert sum(v for k, v in counts.items() if k.startswith("rejected: ")) == counts["rejected"]
    assert sum(v for k, v in counts.items() if k.startswith("failed: ")) == counts["failed"]
    failed = src[src.status == "failed"]
    assert all(counts[f"failed: {c}"] == n for c, n in failed.reason_class.value_counts().items())
    # byte for byte what funnel_counts makes of the ledger
    expected = lg.funnel_counts(ledger)
    assert funnel.astype(str).equals(expected.astype(str))


# --- funnel_counts alone ------------------------------------------------------------

def _ledger(rows) -> pd.DataFrame:
    full = [dict.fromkeys(lg.COLUMNS, "") | r for r in rows]
    return pd.DataFrame(full, columns=lg.COLUMNS)


def test_funnel_counts_of_a_small_ledger():
    df = _ledger([
        {"level": "source", "source_id": "a", "status": "downloaded"},
        {"level": "clip", "source_id": "a", "clip_id": "a_000", "status": "kept", "track": "2"},
        {"level": "clip", "source_id": "a", "clip_id": "a_001", "status": "kept", "track": "0",
         "reason": "no person recorded by the tracker"},
        {"level": "clip", "source_id": "a", "clip_id": "a_002", "status": "rejected", "reason": "filter: few_persons"},
        {"level": "clip", "source_id": "a", "clip_id": "a_003", "status": "rejected", "reason": "filter: scene_cut"},
        {"level": "clip", "source_id": "a", "clip_id": "a_004", "status": "rejected",
         "reason": "trim: final clip shorter than 3 s (16 frames)"},
        {"level": "source", "source_id": "b", "status": "downloaded"},
        {"level": "clip", "source_id": "b", "clip_id": "b_000", "status": "rejected",
         "reason": "trim: final clip shorter than 3 s (58 frames)"},
        {"level": "clip", "source_id": "b", "clip_id": "b_001", "status": "rejected",
         "reason": "trim: 89 decoded frames, expected 90"},
        {"level": "clip", "source_id": "b", "clip_id": "b_002", "status": "rejected",
         "reason": "trim: 91 decoded frames, expected 90"},
        {"level": "source", "source_id": "c", "status": "failed", "reason": "HTTP Error 404"},
    ])
    counts = dict(zip(*lg.funnel_counts(df).to_dict("list").values()))
    assert counts == {
        "sources": 3, "downloaded": 2, "failed": 1, "clips": 8, "kept": 2, "rejected": 6, "persons": 2,
        "failed: unavailable": 1,  # "HTTP Error 404", classified from the reason (no class recorded)
        "rejected: filter: few_persons": 1, "rejected: filter: scene_cut": 1,
        "rejected: trim: final clip shorter than 3 s": 2, "rejected: trim: wrong frame count": 2,
    }


def test_funnel_counts_order_is_fixed_then_reasons_sorted():
    df = _ledger([
        {"level": "source", "source_id": "a", "status": "downloaded"},
        {"level": "clip", "source_id": "a", "clip_id": "a_001", "status": "rejected", "reason": "trim: z"},
        {"level": "clip", "source_id": "a", "clip_id": "a_000", "status": "rejected", "reason": "filter: screened"},
    ])
    steps = list(lg.funnel_counts(df).step)
    assert steps == ["sources", "downloaded", "failed", "clips", "kept", "rejected", "persons",
                     "rejected: filter: screened", "rejected: trim: z"]


def test_funnel_counts_of_an_empty_ledger_and_of_failures_only():
    empty = lg.funnel_counts(_ledger([]))
    assert list(empty["count"]) == [0] * 7
    failed = lg.funnel_counts(_ledger([{"level": "source", "source_id": s, "status": "failed", "reason": "x"}
                                        for s in "abc"]))
    assert dict(zip(failed.step, failed["count"])) == {
        "sources": 3, "downloaded": 0, "failed": 3, "clips": 0, "kept": 0, "rejected": 0, "persons": 0,
        "failed: other": 3}
    classed = lg.funnel_counts(_ledger([
        {"level": "source", "source_id": "a", "status": "failed", "reason": "x", "reason_class": "bot_check"},
        {"level": "source", "source_id": "b", "status": "failed", "reason": "y", "reason_class": "bot_check"},
        {"level": "source", "source_id": "c", "status": "failed", "reason": "HTTP Error 429: Too Many Requests"},
    ]))
    assert list(classed.step)[7:] == ["failed: bot_check", "failed: rate_limited"]
    assert list(classed["count"])[7:] == [2, 1]


def test_funnel_counts_ignore_unparseable_person_counts():
    df = _ledger([
        {"level": "clip", "source_id": "a", "clip_id": "a_000", "status": "kept", "track": "3"},
        {"level": "clip", "source_id": "a", "clip_id": "a_001", "status": "kept", "track": ""},
        {"level": "clip", "source_id": "a", "clip_id": "a_002", "status": "rejected", "track": "5",
         "reason": "filter: few_persons"},  # persons of rejected clips do not count
    ])
    counts = dict(zip(*lg.funnel_counts(df).to_dict("list").values()))
    assert counts["persons"] == 3 and counts["kept"] == 2
