"""Sample games in TensorBoard: :func:`log_sample_game` puts one game's PTN and its PTN Ninja link
in the text tab and a picture of its final position in the image tab; :func:`evaluation_tag`
names the tags of the evaluator's games.

The driver (``pipeline/run.py``) calls it for the last self-play game of each drain (the picture
once per generation of the self-play players, read from the ``Player1`` tag ``takzero-genN`` that
``pipeline/selfplay.py`` writes) and for the first game of each evaluation file (gating and
baselines) of each generation.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from takzero.game.ptn import PTNError, read_ptn, write_ptn
from takzero.io.picture import board_image
from takzero.io.ptn_ninja import ptn_ninja_url

__all__ = ["evaluation_tag", "log_sample_game"]

log = logging.getLogger(__name__)

#: Picture size in TensorBoard: 4 inches at 80 dpi, 320 x 364 pixels.
IMAGE_WIDTH = 4.0
IMAGE_DPI = 80


def evaluation_tag(file_name: str) -> str:
    """The TensorBoard tag prefix of an evaluation PTN file, the same for every generation:
    ``gating_gen00003_vs_gen00002.ptn`` -> ``evaluation/gating``,
    ``baseline_gen00003_vs_uct1000.ptn`` -> ``evaluation/vs_uct1000``, another name -> its stem
    under ``evaluation/``."""
    stem = file_name.removesuffix(".ptn")
    if re.fullmatch(r"gating_gen\d+_vs_gen\d+", stem):
        return "evaluation/gating"
    m = re.fullmatch(r"baseline_gen\d+_(vs_.+)", stem)
    return "evaluation/" + (m.group(1) if m else stem)


def _generation(tags: dict[str, str]) -> int | None:
    """N of a ``Player1`` tag ``takzero-genN`` (self-play games), else None."""
    m = re.fullmatch(r"takzero-gen(\d+)", tags.get("Player1", ""))
    return int(m.group(1)) if m else None


def log_sample_game(
    writer: Any, prefix: str, ptn: str, step: int, pictured: dict[str, int] | None = None
) -> tuple[bool, bool]:
    """Log the first game of ``ptn`` (PTN text of one or more games) under ``prefix``: text
    ``prefix/sample_game`` (a PTN Ninja link, then the PTN) and image ``prefix/final_position``
    (the last position with its last move marked, :func:`takzero.io.picture.board_image`,
    320 x 364 pixels). ``writer``: a ``torch.utils.tensorboard.SummaryWriter``.

    ``pictured``: the caller's record of the generation pictured last per prefix; when given and
    the game's ``Player1`` tag is ``takzero-genN`` with N already pictured, only the text is
    logged (one picture per generation; a picture takes 0.1-0.5 s on a 2-core CPU).

    A game that cannot be read or drawn is logged as a warning and skipped (the run goes on).
    Returns (text logged, image logged)."""
    try:
        games = read_ptn(ptn)
        if not games:
            return False, False
        game = games[0]
        text = write_ptn(game)
        url = ptn_ninja_url(text)
        generation = _generation(game.tags)
        picture = pictured is None or generation is None or pictured.get(prefix) != generation
        if picture:
            image = board_image(
                game.final_position(),
                last_move=game.moves[-1] if game.moves else None,
                title=f"{game.tags.get('Player1', '?')} vs {game.tags.get('Player2', '?')}",
                width=IMAGE_WIDTH,
                dpi=IMAGE_DPI,
            )
    except (PTNError, ValueError) as e:
        log.warning("sample game for %s not logged: %s", prefix, e)
        return False, False
    writer.add_text(f"{prefix}/sample_game", f"[open in PTN Ninja]({url})\n\n```\n{text}```", step)
    if picture:
        writer.add_image(f"{prefix}/final_position", image, step, dataformats="HWC")
        if pictured is not None and generation is not None:
            pictured[prefix] = generation
    return True, picture
