"""The ffmpeg in use: the pinned imageio-ffmpeg binary unless the config or CLI names another."""

import os
import shutil
import stat

import imageio_ffmpeg
import pytest

from microg4m.common import media


@pytest.fixture(autouse=True)
def _default_ffmpeg():
    media.use_ffmpeg(None)
    yield
    media.use_ffmpeg(None)


def test_default_is_the_pinned_binary_even_with_an_ffmpeg_on_path(tmp_path, monkeypatch):
    # A different ffmpeg first on PATH must not be picked up.
    fake = tmp_path / "bin" / "ffmpeg"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'ffmpeg version fake'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert shutil.which("ffmpeg") == str(fake)
    assert media.ffmpeg_exe() == imageio_ffmpeg.get_ffmpeg_exe()
    assert media.ffmpeg_version().startswith("ffmpeg version")
    assert "fake" not in media.ffmpeg_version()


def test_config_chooses_another_binary_and_its_version_is_reported(tmp_path):
    other = tmp_path / "my-ffmpeg"
    other.symlink_to(imageio_ffmpeg.get_ffmpeg_exe())
    assert media.use_ffmpeg(str(other)) == str(other)
    assert media.ffmpeg_exe() == str(other)
    assert media.ffmpeg_version().startswith("ffmpeg version")


@pytest.mark.parametrize("binary", ["no-such-ffmpeg-here", "/nonexistent/ffmpeg"])
def test_a_missing_binary_is_refused_naming_the_setting(binary):
    with pytest.raises(media.MediaError, match=r"ffmpeg = .*no such executable"):
        media.use_ffmpeg(binary)
    assert media.ffmpeg_exe() == imageio_ffmpeg.get_ffmpeg_exe()  # unchanged


def test_a_binary_that_does_not_run_is_refused(tmp_path):
    broken = tmp_path / "ffmpeg"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(media.MediaError, match=r"-version` failed \(exit code 3\)"):
        media.use_ffmpeg(str(broken))
