"""The walk "a head whose target needs new data" (issue 57), proved with a toy: a moves-left head
(Leela Chess Zero's, plies to the game's end) trained on a toy replay field that self-play's game
record already holds. The edits, 6 in 5 files, each marked ``# edit N`` below (the two of
config.py and train.yaml are stood in for by ``LossWeights``, as in tests/test_heads.py):

1. the row of ``HEADS`` (``nn/heads.py``), its module and loss beside it;
2. its weight field in ``config.py: ModelSection``; 3. its line under ``model:`` in
   ``configs/train.yaml``;
4. the row of ``TARGETS`` (``pipeline/targets.py``), its producer beside it;
5. the row of ``RECORD_FIELDS`` (``pipeline/replay.py``), its producer from the game record
   beside it;
6. the attribute of ``Records``.

Everything else follows: self-play's records, the buffer, its shards (and old shards, with the
field's fill), sampling, the batch under each sample's symmetry, the loss and its metric."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from takzero.config import ReplayConfig, TrainSection
from takzero.game import core
from takzero.nn.heads import HEADS, Head, HeadContext
from takzero.nn.model import LossWeights, ModelConfig
from takzero.pipeline import replay
from takzero.pipeline.game_record import GameRecord
from takzero.pipeline.replay import RECORD_FIELDS, RecordField, Records, Widths
from takzero.pipeline.targets import TARGETS, TargetProducer, TargetSettings
from takzero.pipeline.trainer import Trainer, make_batch
from tests.test_game_record import games  # noqa: F401 - the fixture: a few self-played games

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# edit 5: the replay field, with its producer from the game record
def _moves_left(game: GameRecord, widths: Widths) -> np.ndarray:
    return int(game.final_state[core.I_PLY]) - game.plies.astype(np.int64)


@dataclasses.dataclass
class MovesLeftRecords(Records):
    moves_left: np.ndarray | None = None  # edit 6: the attribute

    TABLE = (*RECORD_FIELDS, RecordField("moves_left", np.int16, "", -1, "plies to the game's end "
                                         "(-1: unknown)", low=-1, produce=_moves_left))


# edit 4: the batch target (invariant under the symmetries), valid where the field is known
def _moves_left_target(records, size, symmetries, settings):
    ml = records.moves_left
    return ml.astype(np.float32), ml >= 0


# edit 1: the head, its module and its loss
class MovesLeftHead(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cfg.value_channels, 1, 1)

    def forward(self, v: Tensor) -> Tensor:
        return self.conv(v).mean(dim=(1, 2, 3))


def _moves_left_loss(outputs, ctx: HeadContext) -> Tensor:
    target, valid = ctx.target("moves_left")
    assert valid is not None
    return torch.nn.functional.huber_loss(outputs["moves_left"].float()[valid], target[valid])


@pytest.fixture
def walked(monkeypatch):
    monkeypatch.setitem(HEADS, "moves_left", Head("moves_left", "value", MovesLeftHead, _moves_left_loss,
                                                  "moves_left_weight", "moves_left", "plies to the end"))
    monkeypatch.setitem(TARGETS, "moves_left", TargetProducer("moves_left", _moves_left_target, "plies left"))
    monkeypatch.setattr(replay, "Records", MovesLeftRecords)  # the table of the module, edited


def test_a_head_with_a_new_replay_field_trains_from_self_play(walked, games, tmp_path) -> None:  # noqa: F811
    cfg, worker, _ = games
    size = worker.size
    widths = Widths(worker.top_k, worker.opponent_top_k)
    slots = [(s, w, r) for s, w, r in worker.kept if s.states]
    recs = MovesLeftRecords.concat([MovesLeftRecords.from_game(worker.game_record(*k), widths) for k in slots])
    assert (recs.moves_left == recs.end_ply - recs.ply).all() and (recs.moves_left >= 0).all()
    # the buffer, its shards and an old shard (written before the field existed)
    rcfg = ReplayConfig(top_k=worker.top_k, min_positions=1, samples_per_position=100.0, shard_positions=1)
    buf = replay.ReplayBuffer(rcfg, size, shard_dir=tmp_path, opponent_top_k=widths.opponent_top_k)
    buf.add(recs, games=len(slots))
    old_shard = tmp_path / "shard_00000099.npz"
    replay.atomic_save_npz(old_shard, **{f: getattr(recs, f) for f in Records.FIELDS})
    fresh = replay.ReplayBuffer(rcfg, size, shard_dir=tmp_path, opponent_top_k=widths.opponent_top_k)
    assert fresh.load(buf.state_dict()) == 2 * len(recs)
    assert isinstance(fresh.data, MovesLeftRecords)
    assert fresh.data.moves_left.tolist() == recs.moves_left.tolist() + [-1] * len(recs)
    sample = fresh.sample(64)
    assert isinstance(sample, MovesLeftRecords)
    # the batch and the trainer
    model = ModelConfig(size=size, channels=8, blocks=1, heads=["moves_left"])
    weights = LossWeights(heads={"moves_left": 0.5})
    tr = Trainer(TrainSection(batch_size=64, lr=0.01, warmup_steps=0, total_steps=10), model, weights,
                 device="cpu", seed=0, settings=TargetSettings.from_replay(rcfg))
    assert tr.targets == ["moves_left"]
    batch = make_batch(sample, size, model.layers, np.random.default_rng(0), targets=tr.targets)
    np.testing.assert_array_equal(batch.targets["moves_left"].numpy(), sample.moves_left.astype(np.float32))
    np.testing.assert_array_equal(batch.targets["moves_left_valid"].numpy(), sample.moves_left >= 0)
    before = tr.model.heads["moves_left"].conv.weight.detach().clone()
    metrics = tr.train_step(sample)
    assert np.isfinite(metrics["loss/moves_left"]) and metrics["loss/moves_left"] > 0
    assert not torch.equal(before, tr.model.heads["moves_left"].conv.weight)
