"""Load an export's splits with the training tools' own data code, for the tests.

* PySlowFast: the reference trains with a modified PySlowFast (lei-qi-233/MicroG-4M,
  ``code/PySlowFast_for_HAR/SlowFast``, read at 3eac70c). Its frame-list reader
  (``ava_helper.load_image_lists``), frame sampler (``utils.get_sequence``), image loader
  (``utils.retry_load_images``) and evaluation readers (``ava_eval_helper.read_csv`` /
  ``read_labelmap``) are upstream's unchanged; they come from PyPI's ``pyslowfast==1.0``
  (upstream at 2019-12). Its package ``slowfast.datasets`` imports fvcore and PyAV at
  import time, which its data code does not use, so ``ava_helper.py`` and ``utils.py``
  are loaded as the files they are. The reference's own changes (no AVA second range,
  the frame stamp is the frame index, AVA ids mapped to 0..N-1) are in no package; the
  three short functions below restate them from its ``ava_helper.py``.
* mmaction2: ``mmaction2==1.2.0`` with ``mmengine`` and ``mmcv-lite`` (mmcv without its
  compiled ops: mmcv's full build needs a compiler run against torch, and the dataset
  code uses none of the ops). mmaction2 is installed with ``--no-deps`` because it asks
  for opencv-contrib-python, which would replace opencv-python; its dataset code imports
  neither decord nor einops. The datasets are built from the shipped config
  ``docs/mmaction2/slowfast_r50_microg4m.py`` as it is.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
MMACTION2_CONFIG = REPO / "docs" / "mmaction2" / "slowfast_r50_microg4m.py"
SPLIT_FILES = {"train": "ava_train.csv", "val": "ava_val_gt.csv", "test": "ava_test_gt.csv"}


def _pyslowfast_file(rel: str):
    import slowfast

    path = Path(slowfast.__file__).parent / rel
    spec = importlib.util.spec_from_file_location(f"pyslowfast_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------- the reference's changes


def reference_parse_bboxes_file(ann_filenames, ann_is_gt_box, detect_thresh):
    """The reference's ``parse_bboxes_file``: upstream's parsing without AVA's 902..1798 range."""
    all_boxes = {}
    for filename, is_gt_box in zip(ann_filenames, ann_is_gt_box):
        with open(filename) as f:
            for line in f:
                row = line.strip().split(",")
                if not is_gt_box and float(row[7]) < detect_thresh:
                    continue
                video_name, frame_num = row[0], int(row[1])
                box_key = ",".join(row[2:6])
                label = -1 if row[6] == "" else int(row[6])
                frame = all_boxes.setdefault(video_name, {}).setdefault(frame_num, {})
                frame.setdefault(box_key, [list(map(float, row[2:6])), []])[1].append(label)
    return {v: {f: list(b.values()) for f, b in fr.items()} for v, fr in all_boxes.items()}


def reference_get_keyframe_data(boxes_and_labels):
    """The reference's ``get_keyframe_data``: the frame stamp is the frame index."""
    indices, boxes = [], []
    for video_idx, frames in enumerate(boxes_and_labels):
        boxes.append([])
        for sec_idx, (frame_num, b) in enumerate(frames.items()):
            indices.append((video_idx, sec_idx, frame_num, int(frame_num)))
            boxes[video_idx].append(b)
    return indices, boxes


def reference_build_id_map(label_map_file):
    """The reference's ``build_id_map``: AVA ids -> 0..N-1."""
    ids = sorted(int(line.split(":")[1]) for line in open(label_map_file) if line.strip().startswith("id:"))
    return {oid: i for i, oid in enumerate(ids)}


# ---------------------------------------------------------------- PySlowFast


def pyslowfast_split(export_dir: Path, frame_dir: Path, split: str, *, num_frames=8, sampling_rate=8) -> dict:
    """Load one split as the reference's PySlowFast ``Ava`` dataset does (its SLOWFAST.yaml
    settings: 8 frames, rate 8, score threshold 0.0); read every keyframe's frames.

    Returns ``{(clip, stamp): (path of the window's centre frame, n boxes, labels)}``;
    raises on any problem.
    """
    helper = _pyslowfast_file("datasets/ava_helper.py")
    utils = _pyslowfast_file("datasets/utils.py")
    evalh = importlib.import_module("slowfast.utils.ava_eval_helper")
    ava = SimpleNamespace(
        FRAME_LIST_DIR=str(export_dir / "frame_lists"),
        FRAME_DIR=str(frame_dir),
        TRAIN_LISTS=["train.csv"],
        TEST_LISTS=[f"{split}.csv"],
    )
    image_paths, names = helper.load_image_lists(SimpleNamespace(AVA=ava), is_train=split == "train")
    box_file = "ava_train.csv" if split == "train" else f"ava_{split}_predicted_boxes.csv"
    boxes = reference_parse_bboxes_file([str(export_dir / box_file)], [split == "train"], 0.0)
    id_map = reference_build_id_map(export_dir / "label_map.pbtxt")
    assert len(id_map) == 50
    assert len(boxes) == len(image_paths), (sorted(boxes), names)  # the reference's own assertion
    for frames in boxes.values():
        for b in frames.values():
            for _, labels in b:
                labels[:] = [id_map[x] for x in labels if x != -1]
    indices, per_key = reference_get_keyframe_data([boxes[names[i]] for i in range(len(image_paths))])
    seq_len = num_frames * sampling_rate
    out = {}
    for video_idx, sec_idx, stamp, center in indices:
        seq = utils.get_sequence(center, seq_len // 2, sampling_rate, num_frames=len(image_paths[video_idx]))
        paths = [image_paths[video_idx][i] for i in seq]
        imgs = utils.retry_load_images(paths, retry=1, backend="cv2")
        assert len(imgs) == num_frames and all(im is not None for im in imgs)
        labels = sorted(x for _, lab in per_key[video_idx][sec_idx] for x in lab)
        out[(names[video_idx], stamp)] = (paths[num_frames // 2], len(per_key[video_idx][sec_idx]), labels)
    # the evaluation side: ground truth and label map as PySlowFast's AVA evaluator reads them
    categories, whitelist = evalh.read_labelmap(str(export_dir / "label_map.pbtxt"))
    assert len(categories) == 50
    gt_boxes, gt_labels, _ = evalh.read_csv(str(export_dir / SPLIT_FILES[split]), whitelist)
    assert set(gt_boxes) == {f"{c},{s:04d}" for c, s in out}
    return out


# ---------------------------------------------------------------- mmaction2


def mmaction2_datasets(workdir: Path) -> dict:
    """The datasets of the shipped config, built by mmaction2 in ``workdir`` (which holds
    ``results/export`` with its frames, ``results/export/frames``; the caller's working directory, where the
    config's relative paths point), for every split the config keeps. The config drops val
    (its loader, evaluator and loop) when the export wrote no ``ava_val_gt.csv``; a split it
    keeps whose files are missing fails to build here, as in mmaction2's runner."""
    import mmaction.datasets  # noqa: F401  registers AVADataset and the transforms
    from mmaction.registry import DATASETS
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    init_default_scope("mmaction")  # the config's default_scope; models (einops ...) are not imported
    here = os.getcwd()
    os.chdir(workdir)
    try:
        cfg = Config.fromfile(str(MMACTION2_CONFIG))
        dropped = [cfg.val_dataloader is None, cfg.val_evaluator is None, cfg.val_cfg is None]
        assert len(set(dropped)) == 1, f"val only partly dropped: loader, evaluator, loop = {dropped}"
        return {
            split: (DATASETS.build(loader.dataset), loader.dataset.pipeline)
            for split, loader in (
                ("train", cfg.train_dataloader),
                ("val", cfg.val_dataloader),
                ("test", cfg.test_dataloader),
            )
            if loader is not None
        }
    finally:
        os.chdir(here)


def mmaction2_sample(dataset, pipeline, idx: int, workdir: Path) -> dict:
    """Run the config's SampleAVAFrames + RawFrameDecode (test mode) on record ``idx``;
    return the record's info, the frame files read and the decoded images."""
    from mmaction.registry import TRANSFORMS

    sample = TRANSFORMS.build(dict(pipeline[0], test_mode=True))
    decode = TRANSFORMS.build(pipeline[1])
    here = os.getcwd()
    os.chdir(workdir)
    try:
        info = dataset.get_data_info(idx)
        res = decode.transform(sample.transform(dict(info)))
    finally:
        os.chdir(here)
    files = [workdir / res["frame_dir"] / res["filename_tmpl"].format(int(i)) for i in res["frame_inds"]]
    return dict(info=info, files=files, imgs=res["imgs"], centre=len(files) // 2)


def load_proposals(export_dir: Path, split: str) -> dict:
    with open(export_dir / f"ava_{split}_dense_proposals.pkl", "rb") as fh:
        return pickle.load(fh)


def decoded_frame_diffs(img_rgb: np.ndarray, decoded_bgr: list[np.ndarray]) -> np.ndarray:
    """Mean absolute difference of ``img_rgb`` to each decoded frame (index 0 = frame 1)."""
    bgr = cv2.cvtColor(img_rgb, cv2.COLOR_RGB2BGR).astype(np.float32)
    return np.array([np.abs(bgr - d.astype(np.float32)).mean() for d in decoded_bgr])
