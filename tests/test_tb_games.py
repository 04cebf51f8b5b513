"""Sample games in TensorBoard (``takzero.pipeline.tb_games``): the text with a PTN Ninja link, the
final-position picture once per self-play generation, evaluation tags, bad games skipped; read
back from the event file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from takzero.game.position import Game, Position
from takzero.game.ptn import game_to_ptn, read_ptn
from takzero.io.ptn_ninja import read_ptn_ninja_url
from takzero.pipeline.tb_games import IMAGE_DPI, IMAGE_WIDTH, evaluation_tag, log_sample_game


def _selfplay_ptn(generation: int) -> str:
    """A short 4x4 road game as the self-play worker writes it (Player tags takzero-genN)."""
    game = Game(Position.start(4))
    for move in ["a1", "d4", "d1", "c4", "d2", "b4", "d3"]:
        game.play(move)
    tags = {"Player1": f"takzero-gen{generation}", "Player2": f"takzero-gen{generation}"}
    return game_to_ptn(game, tags=tags)


@pytest.mark.parametrize(
    "name, tag",
    [
        ("gating_gen00003_vs_gen00002.ptn", "evaluation/gating"),
        ("baseline_gen00012_vs_uct1000.ptn", "evaluation/vs_uct1000"),
        ("baseline_gen00012_vs_model_best.ptn", "evaluation/vs_model_best"),
        ("other.ptn", "evaluation/other"),
    ],
)
def test_evaluation_tag_is_the_same_every_generation(name: str, tag: str) -> None:
    assert evaluation_tag(name) == tag


def test_sample_games_in_tensorboard(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    pictured: dict[str, int] = {}
    gen3, gen4 = _selfplay_ptn(3), _selfplay_ptn(4)
    with SummaryWriter(str(tmp_path)) as writer:
        assert log_sample_game(writer, "selfplay", gen3, 10, pictured) == (True, True)
        assert log_sample_game(writer, "selfplay", gen3, 20, pictured) == (True, False)  # same gen
        assert log_sample_game(writer, "selfplay", gen4, 30, pictured) == (True, True)
        evaluation = _selfplay_ptn(4).replace("takzero-gen4", "takzero:best.pt") + "\n" + gen3
        assert log_sample_game(writer, "evaluation/gating", evaluation, 30) == (True, True)
        assert log_sample_game(writer, "evaluation/gating", "1. a1 zz9\n", 40) == (False, False)
        assert log_sample_game(writer, "evaluation/gating", "", 40) == (False, False)
    assert pictured == {"selfplay": 4}

    events = EventAccumulator(str(tmp_path), size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    images = events.Images("selfplay/final_position")
    assert [e.step for e in images] == [10, 30]
    assert images[0].width == round(IMAGE_WIDTH * IMAGE_DPI) and images[0].height > images[0].width
    assert [e.step for e in events.Images("evaluation/gating/final_position")] == [30]
    texts = events.Tensors("selfplay/sample_game/text_summary")
    assert [e.step for e in texts] == [10, 20, 30]
    for event, ptn in zip(texts, [gen3, gen3, gen4], strict=True):
        text = event.tensor_proto.string_val[0].decode()
        url = re.search(r"\[open in PTN Ninja\]\((\S+)\)", text).group(1)
        assert read_ptn(read_ptn_ninja_url(url)[0]) == read_ptn(ptn)
        assert ptn.strip() in text
    (gating,) = events.Tensors("evaluation/gating/sample_game/text_summary")
    assert "takzero:best.pt" in gating.tensor_proto.string_val[0].decode()  # the first game only
