"""The replay record's schema is declared once (``replay.RECORD_FIELDS``): ``Records`` and the
shards follow it, and a new per-record field costs a table row and an attribute (plus its producer
and its reader): the walk of issue 57, proved here with a toy field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from takzero.pipeline.replay import (
    RECORD_FIELDS,
    RecordField,
    Records,
    atomic_save_npz,
    board_record_len,
)


def test_the_records_attributes_are_the_table_rows() -> None:
    names = [f.name for f in dataclasses.fields(Records)]
    assert names == [f.name for f in RECORD_FIELDS] == list(Records.FIELDS)
    empty = Records.empty(5, top_k=8, opponent_top_k=3)
    for f in RECORD_FIELDS:
        a = getattr(empty, f.name)
        assert a.dtype == np.dtype(f.dtype) and a.ndim == (2 if f.width else 1), f.name
    assert empty.widths() == {"board": board_record_len(5), "policy_index": 8, "policy_prob": 8,
                              "ownership": 25, "opp_index": 3, "opp_prob": 3}


@dataclasses.dataclass
class ToyRecords(Records):
    """Records with one more field: the two edits of the walk (a row and an attribute)."""

    root_q: np.ndarray | None = None

    TABLE = (*RECORD_FIELDS, RecordField("root_q", np.float16, "", np.nan, "root Q of the search"))


def _toy(n: int, size: int = 4, top_k: int = 4, root_q: np.ndarray | None = None) -> ToyRecords:
    rng = np.random.default_rng(n)
    return ToyRecords(
        board=rng.integers(0, 255, (n, board_record_len(size)), dtype=np.uint8),
        policy_index=rng.integers(0, 50, (n, top_k), dtype=np.int32),
        policy_prob=np.full((n, top_k), 1 / top_k, np.float16),
        value=rng.integers(-1, 2, n, dtype=np.int8),
        flat_diff=np.zeros(n, np.int8),
        game_id=np.arange(n, dtype=np.int64),
        generation=np.zeros(n, np.int32),
        ply=np.arange(n, dtype=np.int16),
        root_q=root_q,
    )


def test_a_toy_field_is_carried_everywhere_by_its_row(tmp_path: Path) -> None:
    assert ToyRecords.FIELDS[-1] == "root_q" and Records.FIELDS[-1] == "end_ply"
    q = np.linspace(-1, 1, 6).astype(np.float16)
    recs = _toy(6, root_q=q)
    # made without it: its fill; the empty batch, slicing and concatenation carry it
    assert np.isnan(_toy(3).root_q).all() and _toy(3).root_q.dtype == np.float16
    assert ToyRecords.empty(4, 4).root_q.shape == (0,)
    both = ToyRecords.concat([recs.take(slice(0, 2)), recs.take(np.array([5]))])
    assert isinstance(both, ToyRecords) and both.root_q.tolist() == [q[0], q[1], q[5]]
    assert recs.nbytes_per_position() == Records.nbytes_per_position(recs)
    # a shard written with it and one written before it existed
    path = tmp_path / "shard.npz"
    atomic_save_npz(path, **{f: getattr(recs, f) for f in ToyRecords.FIELDS})
    with np.load(path) as z:
        back = ToyRecords.from_arrays(dict(z), opponent_top_k=2)
    assert back.root_q.tolist() == q.tolist() and back.opp_index.shape == (6, 2)
    assert (back.opp_index == -1).all() and (back.opp_prob == 0).all()
    old = {f: getattr(recs, f) for f in Records.FIELDS}
    assert np.isnan(ToyRecords.from_arrays(old, 0).root_q).all()
    # and it is checked like the others
    with pytest.raises(ValueError, match="'root_q': 2 dimensions"):
        ToyRecords.from_arrays({**old, "root_q": np.zeros((6, 2))}, 0)
    with pytest.raises(ValueError, match="'root_q': 5 rows"):
        ToyRecords.from_arrays({**old, "root_q": np.zeros(5)}, 0)


def test_a_required_field_missing_and_a_partial_group() -> None:
    recs = _toy(4)
    arrays = {f: getattr(recs, f) for f in Records.FIELDS}
    with pytest.raises(KeyError, match="'ply'"):
        Records.from_arrays({k: v for k, v in arrays.items() if k != "ply"}, 0)
    # ownership without own_valid (a partial write): the whole group is filled, never half kept
    arrays["ownership"] = np.ones((4, 16), np.int8)
    del arrays["own_valid"]
    back = Records.from_arrays(arrays, 0)
    assert not back.ownership.any() and not back.own_valid.any()
