"""The input planes declared as one table (``nn/features.py: PLANES``): every feature version's
encoding bit-identical to the code before the table (hashes written by that code), offsets
derived from the table, and the walk "an input plane" done on a copy of the tree (a toy plane in a
new feature version, in the edit sites docs/design.md names)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from takzero.nn import features as F

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
