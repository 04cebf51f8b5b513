"""Writes features_v1.npz: version-1 input planes and shipped-model outputs made by the code BEFORE
feature version 2, for tests/test_nn_features_v2.py to check that version 1 did not change.

Run it against an untouched pre-version-2 checkout (this file was run against commit deafe75)::

    PYTHONPATH=/path/to/old/checkout NUMBA_CACHE_DIR=/tmp/nb python tests/data/make_features_v1.py

Contents: for each size N in 3..8, ``states_N`` (16, STATE_LEN) int64 random positions (tall stacks,
komi), ``planes_N`` their planes with the default layers and ``planes_N_l2`` with 2 layers (many
buried pieces); ``model_states`` (32, STATE_LEN) 5x5 positions with the shipped 5x5 model's
``model_priors`` (32, A) and ``model_values`` (32,) from ``Evaluator.from_checkpoint`` on the CPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from takzero.nn import features as F
from takzero.nn.inference import Evaluator

HERE = Path(__file__).resolve().parent


def main() -> None:
    torch.set_num_threads(1)
    out: dict[str, np.ndarray] = {"source_feature_version": np.array(F.FEATURE_VERSION)}
    assert F.FEATURE_VERSION == 1, "run this against the code from before feature version 2"
    for size in range(3, 9):
        states = F.random_states(
            size, 16, seed=100 + size, min_plies=0, max_plies=12 * size,
            half_komi=size - 5, spread_bias=0.7,
        )
        for layers, key in ((F.default_layers(size), f"planes_{size}"), (2, f"planes_{size}_l2")):
            planes = F.new_planes(len(states), size, layers)
            F.encode(states, planes)
            out[key] = planes
        out[f"states_{size}"] = states
    states = F.random_states(5, 32, seed=7, min_plies=0, max_plies=50)
    ev = Evaluator.from_checkpoint(HERE.parents[1] / "checkpoints/pretrained/5x5_v1.pt", device="cpu")
    priors, values, _ = ev.evaluate(states)
    out.update(model_states=states, model_priors=priors, model_values=values)
    np.savez_compressed(HERE / "features_v1.npz", **out)


if __name__ == "__main__":
    main()
