"""bench/wheel_parts.py: a wheel split into part folders joins back to the same bytes, and a
missing, foreign or cut-short part is an error, not a broken install. Times nothing."""

import importlib.util
import os

import pytest

_PATH = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "wheel_parts.py"
)
_spec = importlib.util.spec_from_file_location("bench_wheel_parts", _PATH)
wp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wp)

NAME = "big_pkg-1.0-py3-none-manylinux_2_28_x86_64.whl"


def _wheel(tmp_path, n_bytes):
    path = tmp_path / "src" / NAME
    path.parent.mkdir()
    path.write_bytes(os.urandom(n_bytes))
    return path


@pytest.mark.parametrize("n_bytes, size_mb, n_parts", [(2_500_000, 1, 3), (1_000_000, 1, 1)])
def test_split_then_join_gives_the_same_bytes(tmp_path, n_bytes, size_mb, n_parts):
    wheel = _wheel(tmp_path, n_bytes)
    root = tmp_path / "repo"
    parts = wp.split(str(wheel), size_mb, str(root))
    assert len(parts) == n_parts
    assert [os.path.basename(os.path.dirname(p)) for p in parts] == [
        f".whl-part{i}" for i in range(1, n_parts + 1)
    ]
    assert all(os.path.getsize(p) <= size_mb * 1e6 for p in parts)
    (joined,) = wp.join(str(root), str(tmp_path / "out"))
    assert os.path.basename(joined) == NAME
    assert open(joined, "rb").read() == wheel.read_bytes()


def test_nothing_to_join_is_no_wheel(tmp_path):
    assert wp.join(str(tmp_path), str(tmp_path / "out")) == []


def test_a_missing_part_is_an_error(tmp_path):
    root = tmp_path / "repo"
    parts = wp.split(str(_wheel(tmp_path, 2_500_000)), 1, str(root))
    os.remove(parts[1])  # the second call's folder never came
    with pytest.raises(ValueError, match=r"parts \[2\] of 3 are not here"):
        wp.join(str(root), str(tmp_path / "out"))


def test_a_cut_short_or_foreign_part_fails_the_checksum(tmp_path):
    root = tmp_path / "repo"
    parts = wp.split(str(_wheel(tmp_path, 2_500_000)), 1, str(root))
    with open(parts[2], "r+b") as fh:
        fh.truncate(1000)
    with pytest.raises(ValueError, match="do not match the split's sha256"):
        wp.join(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out" / NAME).exists()  # no broken wheel left to install
