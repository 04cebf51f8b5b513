"""The input planes declared as one table (``nn/features.py: PLANES``): every feature version's
encoding bit-identical to the code before the table (hashes written by that code), offsets
derived from the table, and the walk "an input plane" done on a copy of the tree (a toy plane in a
new feature version, in the edit sites docs/design.md names)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from takzero.nn import features as F

ROOT = Path(__file__).resolve().parents[1]

#: sha256[:16] of the planes of 300 random positions per (size, version, layers), written by the
#: encoder before the plane table (layers None: the size's default).
HASHES = {
    (3, 1, 1): "4f0c09a5df8652d9",
    (3, 1, 3): "c69423636120ffa2",
    (3, 1, None): "c575c0fae541c868",
    (3, 2, 1): "90fe8c1547d3d55c",
    (3, 2, 3): "196a07e49d85c662",
    (3, 2, None): "e4f1fff2e8b00f30",
    (4, 1, 1): "802627e5e0fa49e5",
    (4, 1, 3): "fba0890bf374e9e0",
    (4, 1, None): "062e5d3a29fe630a",
    (4, 2, 1): "d447e8dda736d917",
    (4, 2, 3): "ba893c426d527c71",
    (4, 2, None): "7cf22b4b36ecbbff",
    (5, 1, 1): "e6de8b6549df0d49",
    (5, 1, 3): "dca6306fddc1f717",
    (5, 1, None): "27b7ccebc0554573",
    (5, 2, 1): "f834721b993d863b",
    (5, 2, 3): "0de1a44254c421e0",
    (5, 2, None): "28e2c93ee87dc27a",
    (6, 1, 1): "974e707927429ad4",
    (6, 1, 3): "2ad8b9dcfc125954",
    (6, 1, None): "0a8e48f0dc61cc89",
    (6, 2, 1): "80524d64f86c0a27",
    (6, 2, 3): "7686e5b31acc10a7",
    (6, 2, None): "1e9edc702c18010f",
    (7, 1, 1): "d89389efebe0c54c",
    (7, 1, 3): "a93e06c04219cb28",
    (7, 1, None): "aa466fed5b732007",
    (7, 2, 1): "def2e16a33d6313a",
    (7, 2, 3): "022631f8d547d2a2",
    (7, 2, None): "394d77b5a5abff66",
    (8, 1, 1): "f0b5038f887fddf5",
    (8, 1, 3): "072f2d81022503b0",
    (8, 1, None): "7af67479d6a68493",
    (8, 2, 1): "3e3478dd8400c571",
    (8, 2, 3): "10f02aeace95767b",
    (8, 2, None): "a61ac7796b5f0372",
}


def _states(size: int, version: int) -> np.ndarray:
    seed = size * 7 + version
    return F.random_states(
        size, 300, seed=seed, max_plies=8 * size * size // 3, half_komi=(seed % 5) - 2
    )


@pytest.mark.parametrize("size", range(3, 9))
def test_encodings_bit_identical_to_the_code_before_the_table(size: int) -> None:
    for version in F.FEATURE_VERSIONS:
        states = _states(size, version)
        for layers in (1, 3, None):
            out = F.new_planes(len(states), size, layers, version=version)
            F.encode(states, out, version=version)
            digest = hashlib.sha256(out.tobytes()).hexdigest()[:16]
            assert digest == HASHES[(size, version, layers)], (size, version, layers)
            dirty = np.full_like(out, 7.0)  # every channel is written, whatever out held
            F.encode(states, dirty, version=version)
            assert np.array_equal(dirty, out), (size, version, layers)


def test_the_table_is_the_layout() -> None:
    """Channel names, counts and versions follow from ``PLANES``; each offset constant is its
    row's place after the stack layers."""
    for version in F.FEATURE_VERSIONS:
        rows = [name for row in F.PLANES if row.version <= version for name in row.names]
        assert F.NUM_FIXED_CHANNELS[version] == len(rows)
        assert F.channel_names(3, version)[6:] == rows
    assert F.FEATURE_VERSION == max(row.version for row in F.PLANES)
    names = F.channel_names(1, F.FEATURE_VERSION)[2:]
    for const, first in (("C_BURIED", "own_buried"), ("C_TOPS", "own_flat"),
                         ("C_RESERVES", "own_stones"), ("C_KOMI", "komi"),
                         ("C_PLACE_ROAD", "own_place_road"), ("C_FLAT_DIFF", "flat_diff")):
        assert names[getattr(F, const)] == first, const
    with pytest.raises(ValueError, match="out of order"):
        F._plane_offsets((F.Plane(("a",), 2, "new"), F.Plane(("b",), 1, "older after newer")))


# -- the walk "an input plane" -----------------------------------------------------------------

#: A toy plane (stack height / 10) in a new feature version 3: (site, file, anchor, new text).
#: A site is one edit a researcher makes.
PLANE_WALK = [
    ("the table's row", "takzero/nn/features.py",
     ")\n\n\ndef _plane_offsets(",
     '    Plane(("toy_height",), 3, "toy: stack height / 10"),\n'
     ")\n\n\ndef _plane_offsets("),
    ("its offset constant", "takzero/nn/features.py",
     'C_FLAT_DIFF = _OFFSET["flat_diff"]\n',
     'C_FLAT_DIFF = _OFFSET["flat_diff"]\nC_TOY = _OFFSET["toy_height"]\n'),
    ("its write in the encoder", "takzero/nn/features.py",
     "            _encode_v2_planes(s, o, base, scratch, buf)\n",
     "            _encode_v2_planes(s, o, base, scratch, buf)\n"
     "        if version >= 3:\n"
     "            for sq in range(n * n):\n"
     "                o[base + C_TOY, sq // n, sq % n] = s[OFF_HEIGHT + sq] / 10.0\n"),
]

PLANE_CHECK = """
import numpy as np, torch
import takzero
from takzero.game.core import OFF_HEIGHT
from takzero.nn import features as F
from takzero.nn.model import ModelConfig, TakNet
assert takzero.__file__.startswith({root!r}), takzero.__file__
assert F.FEATURE_VERSIONS == (1, 2, 3) and F.FEATURE_VERSION == 3
assert F.channel_names(7, 3) == F.channel_names(7, 2) + ["toy_height"]
assert F.num_channels(7, 3) == F.num_channels(7, 2) + 1 == 2 * 7 + 25
assert F.layers_from_channels(2 * 7 + 25, 3) == 7
states = F.random_states(5, 64, seed=4, max_plies=40)
p2 = F.encode(states, F.new_planes(64, 5, version=2), version=2)
p3 = F.encode(states, np.full(F.new_planes(64, 5, version=3).shape, 7.0, np.float32), version=3)
assert np.array_equal(p3[:, :-1], p2)  # the older channels as they were
heights = states[:, OFF_HEIGHT : OFF_HEIGHT + 25].reshape(64, 5, 5) / 10.0
assert heights.max() > 0.2 and np.allclose(p3[:, -1], heights)
cfg = ModelConfig(size=5, channels=8, blocks=1)  # new models are built for version 3
assert cfg.feature_version == 3 and cfg.in_channels == p3.shape[1]
policy, value, _ = TakNet(cfg)(torch.from_numpy(p3))
assert policy.shape[0] == value.shape[0] == 64
print("ok")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_walk_an_input_plane(tmp_path: Path) -> None:
    """3 edits in 1 file (7 in 2 before the plane table): the row of ``PLANES`` in a new version,
    its offset constant, its write in the compiled encoder; the channel names and counts, the
    version list, the default version of new models and the network's input follow."""
    assert len({site for site, _, _, _ in PLANE_WALK}) == 3
    assert len({rel for _, rel, _, _ in PLANE_WALK}) == 1
    shutil.copytree(ROOT / "takzero", tmp_path / "takzero",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    for _, rel, anchor, new in PLANE_WALK:
        path = tmp_path / rel
        text = path.read_text()
        assert text.count(anchor) == 1, f"{rel}: the anchor {anchor!r} is not there once"
        path.write_text(text.replace(anchor, new))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    code = PLANE_CHECK.replace("{root!r}", repr(str(tmp_path)))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")
