"""Terminal play: a scripted stdin game to the end with a saved PTN, the board drawing, undo,
errors that keep the game going, the engine's evaluation and the choice of opponent."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from takzero.game import Position
from takzero.game.ptn import read_ptn, read_ptn_file
from takzero.io.ptn_ninja import read_ptn_ninja_url
from takzero.players import PlayerMove, RandomPlayer, UCTPlayer
from takzero.protocols.terminal import PlaySession, describe_eval, make_opponent, render_board

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def scripted(lines: list[str]):
    """An ``input`` replacement that returns ``lines`` and then raises EOFError."""
    it = iter(lines)

    def fn(prompt: str) -> str:
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None

    return fn


def every_placement(size: int) -> list[str]:
    files = "abcdefgh"[:size]
    return [f"{f}{r}" for r in range(1, size + 1) for f in files]


def test_output_closed_early_is_not_a_traceback(tmp_path: Path) -> None:
    """``takzero.play ... | head -1``: the session stops quietly when its output pipe closes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "takzero.play", "--opponent", "random", "--size", "3"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    proc.stdout.readline()
    proc.stdout.close()  # as head does after its first line
    _, err = proc.communicate(input=b"help\n" * 2000 + b"quit\n", timeout=120)
    assert b"Traceback" not in err, err.decode()
    assert proc.returncode == 1


def test_scripted_stdin_game_to_the_end_saves_a_valid_ptn(tmp_path: Path) -> None:
    """Try every square in turn: illegal tries are refused and the game goes on; the board fills
    or a road ends the game; then the game is saved and replayed."""
    save = tmp_path / "game.ptn"
    script = ["zz9", "3a1>", "help", "tps", "moves"] + every_placement(3) * 2
    script += [f"save {save}", "quit"]
    proc = subprocess.run(
        [sys.executable, "-m", "takzero.play", "--opponent", "random", "--size", "3",
         "--seed", "4", "--komi", "0.5"],
        input="\n".join(script) + "\n", capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "'zz9' cannot be played" in out and "is not a PTN move" in out
    assert "'3a1>' cannot be played" in out
    assert "is not empty" in out  # an occupied square was refused and the game went on
    assert "commands:" in out and "legal moves:" in out
    assert "x3/x3/x3 1 1" in out  # tps
    m = re.search(r"result (\S+): (.*)", out)
    assert m, out
    games = read_ptn_file(save)
    assert len(games) == 1
    g = games[0]
    assert g.tags["Komi"] == "0.5" and g.tags["Player2"] == "random"
    game = g.replay()
    assert game.result.over
    assert str(game.result) == g.result == m.group(1)
    assert f"saved {len(g.moves)} plies" in out
    assert out.rstrip().endswith("bye")
    link = re.search(r"view the game in PTN Ninja: (\S+)", out)
    assert link, out
    assert read_ptn(read_ptn_ninja_url(link.group(1))[0]) == [g]  # the link opens the saved game


def test_render_board_shows_stacks_walls_caps_reserves_and_turn() -> None:
    pos = Position.from_tps("2,1S,x3/x5/x,12C,x3/x5/x4,21 2 4")
    text = render_board(pos, last="a5", you=1)
    assert " B " in text and " WS " in text  # black flat, white wall
    assert " wBC " in text  # white flat under a black capstone
    assert " bW " in text  # black flat under a white flat (e1: 2 then 1)
    assert "black (you): 19 stones, 0 capstones in reserve" in text
    assert "white: 18 stones, 1 capstone in reserve" in text
    assert "move 4, black to move (you)" in text
    assert "last move a5" in text
    first = text.splitlines()[0].split()
    assert first == list("abcde")


def test_undo_errors_and_evaluation_in_process() -> None:
    out: list[str] = []
    player = UCTPlayer(simulations=30, seed=1)
    session = PlaySession(
        player, Position.start(4, komi=1), human=0,
        input_fn=scripted(["undo", "Sa1", "a1", "undo", "b2", "undo", "undo", "c2", "quit"]),
        print_fn=out.append,
    )
    session.run()
    text = "\n".join(out)
    assert "nothing to undo: you have not moved yet" in text
    assert "first turn only a flat" in text  # Sa1 refused on the first turn
    assert text.count("took back your last move") == 2
    assert text.count("nothing to undo") == 2  # before any move, and after undoing b2
    plays = [ln for ln in out if ln.startswith("uct30 plays")]
    assert len(plays) == 3  # the replies to a1, b2 and c2
    # The UCT baseline counts its rollouts' wins, draws and losses: a win/draw/loss estimate.
    assert all("draw" in ln and "loss" in ln and "30 simulations" in ln for ln in plays)
    # After the session: c2 and the engine's reply, from the start (undo removed the rest).
    assert session.game.ptn_moves()[0] == "c2"
    assert len(session.game.moves) == 2


def test_resign_and_save(tmp_path: Path) -> None:
    out: list[str] = []
    save = tmp_path / "r.ptn"
    session = PlaySession(
        RandomPlayer(seed=2), Position.start(3), human=1,
        input_fn=scripted(["resign", "a1", f"save {save}"]), print_fn=out.append,
    )
    session.run()
    assert "black resigns: 1-0" in out
    assert any("the game is over" in ln for ln in out)
    g = read_ptn_file(save)[0]
    assert g.result == "1-0" and g.tags["Player2"] == "human" and len(g.moves) == 1
    links = [ln.split(": ", 1)[1] for ln in out if ln.startswith("view the game in PTN Ninja: ")]
    assert len(links) == 1
    assert read_ptn(read_ptn_ninja_url(links[0])[0]) == [g]  # the link carries the resignation


def test_describe_eval() -> None:
    assert describe_eval(PlayerMove(0, value=0.2, wdl=(0.5, 0.2, 0.3), nodes=64)) == (
        "win 50% draw 20% loss 30%, value +0.20, 64 simulations"
    )
    assert describe_eval(PlayerMove(0, value=-0.5)) == "expected score 25%, value -0.50"
    assert describe_eval(PlayerMove(0)) == "no evaluation"


def test_opponent_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.chdir(tmp_path)
    roots = (Path("checkpoints/pretrained"),)  # none here (the repository's own folder not searched)
    p, size = make_opponent(None, None, 5, 77, 0, said.append, pretrained_roots=roots)
    assert isinstance(p, UCTPlayer) and p.simulations == 77 and size == 5
    assert "checkpoints/pretrained/5x5.pt does not exist" in said[0]
    p, size = make_opponent(None, "greedy", None, None, 0, said.append)
    assert p.name == "greedy" and size == 6
    with pytest.raises(ValueError, match="cannot load model"):
        make_opponent(str(tmp_path / "missing.pt"), None, None, None, 0, said.append)

    # A pretrained model for the size is picked up; a model of another size falls back.
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.players import NetworkPlayer

    torch.manual_seed(0)
    net = TakNet(ModelConfig(size=3, channels=8, blocks=1))
    (tmp_path / "checkpoints" / "pretrained").mkdir(parents=True)
    torch.save(checkpoint_dict(net), tmp_path / "checkpoints" / "pretrained" / "3x3.pt")
    p, size = make_opponent(None, None, 3, 12, 0, said.append, pretrained_roots=roots)
    assert isinstance(p, NetworkPlayer) and size == 3 and p.simulations == 12
    # Without a size the shipped model's size is played (no 6x6 model here).
    p, size = make_opponent(None, None, None, 12, 0, said.append, pretrained_roots=roots)
    assert isinstance(p, NetworkPlayer) and size == 3
    said.clear()
    p, size = make_opponent("checkpoints/pretrained/3x3.pt", None, 4, None, 0, said.append)
    assert isinstance(p, UCTPlayer) and size == 4
    assert "plays 3x3, not 4x4" in said[0]


def test_komi_defaults_to_the_networks_and_model_excludes_a_baseline(tmp_path: Path) -> None:
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.play import main
    from takzero.players import NetworkPlayer
    from takzero.protocols.terminal import start_position

    torch.manual_seed(0)
    net = TakNet(ModelConfig(size=3, channels=8, blocks=1))
    player = NetworkPlayer.load(checkpoint_dict(net, half_komi=3), simulations=8)
    said: list[str] = []
    assert start_position(3, None, player, said.append).half_komi == 3
    assert said == ["komi 1.5, as the network was trained (--komi to change)"]
    assert start_position(3, 0.5, player, said.append).half_komi == 1  # --komi wins
    assert start_position(3, None, UCTPlayer(), said.append).half_komi == 0
    with pytest.raises(ValueError):
        start_position(3, 0.3, player, said.append)
    model = tmp_path / "m.pt"
    torch.save(checkpoint_dict(net), model)
    assert main(["--model", str(model), "--opponent", "random"]) == 2  # was: M silently ignored


def test_network_opponent_shows_win_draw_loss(tmp_path: Path) -> None:
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.players import NetworkPlayer

    torch.manual_seed(0)
    net = TakNet(ModelConfig(size=3, channels=8, blocks=1))
    player = NetworkPlayer.load(checkpoint_dict(net), simulations=8)
    out: list[str] = []
    session = PlaySession(
        player, Position.start(3), human=1, input_fn=scripted(["a1", "quit"]), print_fn=out.append
    )
    session.run()
    plays = [ln for ln in out if ln.startswith("network plays")]
    assert len(plays) == 2
    assert all(
        re.search(r"win \d+% draw \d+% loss \d+%, value [+-]\d\.\d\d, 8 simulations", ln)
        for ln in plays
    )


def test_save_never_writes_over_the_model_or_an_existing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``save self.pt`` replaced the checkpoint being played with PTN, and ``save FILE`` any file
    without asking: the model (by any name, ``--model`` or ``--opponent model:PATH``) is never
    written over, an existing file only with ``save!``."""
    import io

    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.play import main

    torch.manual_seed(0)
    model = tmp_path / "self.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=3, channels=8, blocks=1))), model)
    weights = model.read_bytes()
    os.link(model, tmp_path / "hard.pt")
    old = tmp_path / "old.ptn"
    old.write_text("the earlier game\n")
    new = tmp_path / "new.ptn"
    monkeypatch.chdir(tmp_path)
    script = ["a1", "save self.pt", "save! self.pt", f"save! {tmp_path}/../{tmp_path.name}/self.pt",
              "save! hard.pt", "save old.ptn", "save new.ptn", "quit"]
    for argv in (["--model", "self.pt"], ["--opponent", "model:self.pt:4"]):
        new.unlink(missing_ok=True)
        monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(script) + "\n"))
        assert main([*argv, "--simulations", "4", "--backend", "torch"]) == 0
        out = capsys.readouterr().out
        assert out.count("a command never writes over its input") == 4
        assert "old.ptn exists, not overwritten: 'save! old.ptn' replaces it" in out
        assert model.read_bytes() == weights and old.read_text() == "the earlier game\n"
        assert len(read_ptn_file(new)[0].moves) == 2  # a new name is saved
    monkeypatch.setattr("sys.stdin", io.StringIO("a1\nsave! old.ptn\nquit\n"))
    assert main(["--model", "self.pt", "--simulations", "4", "--backend", "torch"]) == 0
    assert len(read_ptn_file(old)[0].moves) == 2  # save! replaces an existing game file
    assert "saved 2 plies to old.ptn" in capsys.readouterr().out
