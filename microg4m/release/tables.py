"""The release's tables: one spec per table (its columns, types and meaning), used for the
Parquet files, the card's ``configs`` and Croissant's record sets alike.

Per-split tables are written as ``data/<table>/<split>.parquet`` (a split with no rows gets
no file: ``datasets`` cannot read an empty Parquet file); the others as
``data/<table>.parquet``. Rows are sorted; the same rows give byte-identical files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from microg4m.common.atomic import atomic_path
from microg4m.formats.splits import SPLITS

ALL = "full"  # the split name of a table that is not split (sources, labels); datasets reserves "all"


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # string, int, float, bool
    description: str


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # the sort order (and, for Croissant, the record's key)
    per_split: bool = True

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def files(self, splits=SPLITS) -> list[str]:
        """The files of the splits given, relative to the release folder."""
        if not self.per_split:
            return [f"data/{self.name}.parquet"]
        return [f"data/{self.name}/{s}.parquet" for s in splits]


_ARROW = {"string": pa.string(), "int": pa.int32(), "float": pa.float64(), "bool": pa.bool_()}

VIDEO_ID = Column("video_id", "string", "Clip id: the source's id and seq (3 digits) joined by an underscore; the "
                  "clip holds seconds 3*seq to 3*seq+3 of the source video.")
_UNSCORED = " Empty (null) for a clip the quality stage did not score."
# the quality scores of a clip (microg4m.formats.quality), as the export's clips.csv has them
_SCORES = (
    Column("transitions", "int", "Shot transitions the scenes stage found in the clip (scenes.detector's; 0 for "
           "every released clip unless filter.max_cuts allows some)." + _UNSCORED),
    Column("gradual", "int", "How many of them are gradual (dissolves, fades, wipes)." + _UNSCORED),
    Column("text_share", "float", "Share (0-1) of the frames searched for text on which burnt-in text covers at "
           "least quality.text_min_area of the picture." + _UNSCORED),
    Column("text_area", "float", "Mean share (0-1) of the picture covered by text on those frames." + _UNSCORED),
    Column("camera", "string", "Camera motion: static, pan, tilt, zoom, shake, or unknown (no trackable points); "
           "empty for a clip not scored."),
    Column("camera_magnitude", "float", "Mean shift of the frame's corners, as a share of the frame diagonal per "
           "frame." + _UNSCORED),
    Column("sharpness", "float", "Mean variance of the Laplacian over the variance of the gray levels." + _UNSCORED),
    Column("exposure", "float", "Mean luma (0-1)." + _UNSCORED),
    Column("clipped", "float", "Mean share (0-1) of crushed or blown pixels." + _UNSCORED),
)
_BOX_NORM = "normalised to [0, 1] by the frame size, 3 decimals"
_BOX_PIX = "pixels, 2 decimals"

TABLES: dict[str, Table] = {t.name: t for t in (
    Table("actions", "Action labels of each person at its keyframe, one row per action (the AVA format of the "
          "released MicroG-4M: ava_format_with_header.csv).", (
              VIDEO_ID,
              Column("frame_stamp", "int", "The keyframe: 1-based frame number in the 90-frame clip."),
              Column("xmin", "float", f"Left edge of the person's box, {_BOX_NORM}."),
              Column("ymin", "float", f"Top edge, {_BOX_NORM}."),
              Column("xmax", "float", f"Right edge, {_BOX_NORM}."),
              Column("ymax", "float", f"Bottom edge, {_BOX_NORM}."),
              Column("action_id", "int", "Action id of the label map (table labels)."),
              Column("person_id", "int", "Person id within the clip (1, 2, ... in order of first appearance)."),
          ), ("video_id", "person_id", "action_id")),
    Table("tracks", "Every tracked person's box on every frame where it was recorded.", (
        VIDEO_ID,
        Column("frame_id", "int", "1-based frame number in the clip."),
        Column("person_id", "int", "Person id within the clip (as in actions)."),
        Column("xmin", "float", f"Left edge, {_BOX_PIX}."),
        Column("ymin", "float", f"Top edge, {_BOX_PIX}."),
        Column("xmax", "float", f"Right edge, {_BOX_PIX}."),
        Column("ymax", "float", f"Bottom edge, {_BOX_PIX}."),
    ), ("video_id", "frame_id", "person_id")),
    Table("captions", "A reviewed caption of the clip (what can be seen, in English).", (
        VIDEO_ID, Column("caption", "string", "The caption."),
    ), ("video_id",)),
    Table("vqa", "Reviewed question-answer pairs about the clip; 'Not mentioned' answers a question the clip "
          "cannot answer.", (
              VIDEO_ID,
              Column("pair", "int", "1-based number of the pair within the clip."),
              Column("question", "string", "The question."),
              Column("answer", "string", "The answer."),
          ), ("video_id", "pair")),
    Table("clips", "Every released clip: where it comes from, its licence, and its video file when the source's "
          "licence allows redistribution (else fetch the source at its URL and cut seconds start_s to end_s).", (
              VIDEO_ID,
              Column("source_id", "string", "The source video's id (table sources)."),
              Column("clip_type", "string", "r: real footage, m: film."),
              Column("start_s", "int", "First second of the source video in the clip."),
              Column("end_s", "int", "start_s + 3."),
              Column("frames", "int", "Frames in the clip (90, at 30 fps)."),
              Column("width", "int", "Frame width in pixels."),
              Column("height", "int", "Frame height in pixels."),
              Column("license", "string", "The source's licence."),
              Column("source_url", "string", "Where the source video is (the sources table's URL)."),
              Column("video", "string", "The clip's H.264 mp4 in this repository (videos/SPLIT/CLIP.mp4); "
                     "empty when the source's licence does not allow redistribution."),
              Column("faces_blurred", "bool", "Faces in the video file were blurred (release.blur_faces)."),
              *_SCORES,
          ), ("video_id",)),
    Table("sources", "The source videos of the released clips, with their provenance.", (
        Column("source_id", "string", "The source's id."),
        Column("clip_type", "string", "r: real footage, m: film."),
        Column("clips", "int", "Released clips of the source."),
        Column("url", "string", "The URL (or file) the source was fetched from."),
        Column("webpage_url", "string", "The video's page, as yt-dlp reported it."),
        Column("title", "string", "The video's title."),
        Column("channel", "string", "The channel or uploader."),
        Column("upload_date", "string", "The upload date (YYYY-MM-DD) as reported."),
        Column("license", "string", "The licence the release went by."),
        Column("license_from", "string", "Where that licence comes from: the download record, or the licences "
               "table written by hand."),
        Column("videos", "bool", "The source's clips are in this repository as video files."),
        Column("format_id", "string", "The downloaded format (yt-dlp's id)."),
        Column("sha256", "string", "sha256 of the downloaded file (check it again with microg4m verify)."),
    ), ("source_id",), per_split=False),
    Table("labels", "The action label map.", (
        Column("id", "int", "Action id (AVA's ids)."),
        Column("name", "string", "Action name."),
        Column("label_type", "string", "PERSON_MOVEMENT, OBJECT_MANIPULATION or PERSON_INTERACTION."),
    ), ("id",), per_split=False),
)}


def schema(table: Table) -> pa.Schema:
    return pa.schema([pa.field(c.name, _ARROW[c.kind]) for c in table.columns])


def frame(table: Table, rows) -> pd.DataFrame:
    """Rows (a DataFrame or records) as the table's columns and types, sorted by its key."""
    df = pd.DataFrame(rows, columns=table.names) if not isinstance(rows, pd.DataFrame) else rows[table.names]
    kinds = {"string": str, "int": "Int64", "float": "float64", "bool": bool}  # Int64: a null where unknown
    df = df.astype({c.name: kinds[c.kind] for c in table.columns})
    return df.sort_values(list(table.key), kind="stable").reset_index(drop=True)


def write(table: Table, df: pd.DataFrame, out_dir: str | os.PathLike, split: str | None = None) -> str | None:
    """Write the rows of one split (or the whole table) as Parquet; returns the relative
    path, or None for an empty split (no file)."""
    if table.per_split and split is None:
        raise ValueError(f"table {table.name} is written per split")
    rel = f"data/{table.name}/{split}.parquet" if table.per_split else f"data/{table.name}.parquet"
    if table.per_split and df.empty:
        return None
    arrow = pa.Table.from_pandas(frame(table, df), schema=schema(table), preserve_index=False)
    arrow = arrow.replace_schema_metadata(None)  # no pandas version in the file
    with atomic_path(Path(out_dir) / rel, suffix=".tmp.parquet") as tmp:
        pq.write_table(arrow, tmp, compression="zstd")
    return rel


def read(path: str | os.PathLike) -> pd.DataFrame:
    """A release table read back (a previous release's, to compare)."""
    return pq.read_table(path).to_pandas()
