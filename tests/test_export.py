"""Export (TorchScript / ONNX with metadata) and the network player: the exported model plays the
same moves as the checkpoint, loads without the run folder, and the player's search interface
(simulations, time, stop, tree reuse) behaves."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from takzero.export import main
from takzero.game import Position
from takzero.nn.features import FEATURE_VERSION
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
from takzero.pipeline.export import export_checkpoint, read_metadata
from takzero.players import NetworkPlayer, Player
from takzero.search.limit import Limit

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_checkpoint(size: int = 4, **extra) -> dict:
    """A tiny untrained network (8 channels, 1 block) whose policy is made peaked (policy layer
    scaled up) so that search results do not hinge on float ties."""
    torch.manual_seed(0)
    model = TakNet(ModelConfig(size=size, channels=8, blocks=1))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "policy" in name and p.dim() > 1:
                p.mul_(8.0)
    return checkpoint_dict(model, **extra)


def write_run(tmp_path: Path, **extra) -> Path:
    run = tmp_path / "checkpoints" / "myrun"
    run.mkdir(parents=True)
    torch.save(tiny_checkpoint(**extra), run / "best.pt")
    return run / "best.pt"


def positions(size: int, count: int, seed: int) -> list[Position]:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        pos = Position.start(size, half_komi=2)
        for _ in range(int(rng.integers(2, 12))):
            codes = pos.legal_move_codes()
            pos = pos.play(int(codes[rng.integers(len(codes))]))
            if pos.is_over:
                break
        if not pos.is_over:
            out.append(pos)
    return out


def test_cli_exports_self_describing_files(tmp_path: Path, capsys) -> None:
    best = write_run(tmp_path, generation=7, run_name="myrun", half_komi=4)
    ts, ox = tmp_path / "m.pt", tmp_path / "m.onnx"
    assert main([str(best), "-o", str(ts)]) == 0
    assert main([str(best), "-o", str(ox), "--format", "onnx"]) == 0
    assert "4x4, komi 2" in capsys.readouterr().out
    for path in (ts, ox):
        meta = read_metadata(path)
        assert meta["size"] == 4 and meta["half_komi"] == 4 and meta["komi"] == 2.0
        assert meta["feature_version"] == FEATURE_VERSION
        assert meta["num_actions"] == 944 and meta["layers"] == 6
        assert meta["run_name"] == "myrun" and meta["generation"] == 7
        assert meta["model_config"]["channels"] == 8 and "action_space" in meta
    assert read_metadata(ox)["onnx_opset"] == 17
    assert main([str(ts), "--info"]) == 0
    assert '"generation": 7' in capsys.readouterr().out


def test_exported_model_plays_like_the_checkpoint(tmp_path: Path) -> None:
    """Same seed and simulation count: the checkpoint, TorchScript and ONNX players choose the
    same moves, and the exported files load after the run folder is gone."""
    ckpt = tiny_checkpoint(generation=2, run_name="r", half_komi=2)
    export_checkpoint(ckpt, tmp_path / "out" / "m.pt")
    export_checkpoint(ckpt, tmp_path / "out" / "m.onnx", fmt="onnx")
    shutil.copytree(tmp_path / "out", tmp_path / "copy")
    shutil.rmtree(tmp_path / "out")  # loading needs only the file
    players = [  # float32 all: auto would quantize the checkpoint and the ONNX file to int8
        NetworkPlayer.load(ckpt, simulations=24, seed=3, backend="onnx"),
        NetworkPlayer.load(tmp_path / "copy" / "m.pt", simulations=24, seed=3),  # TorchScript: torch
        NetworkPlayer.load(tmp_path / "copy" / "m.onnx", simulations=24, seed=3, backend="onnx"),
    ]
    assert players[1].name == "r-g2" and players[1].model_half_komi == 2
    test_positions = positions(4, 6, seed=1)
    answers = []
    for p in players:
        p.reset(4, 2, seed=3)
        answers.append([p.choose(pos) for pos in test_positions])
    for a in answers[1:]:
        assert [x.code for x in a] == [x.code for x in answers[0]]
        assert [x.pv for x in a] == [x.pv for x in answers[0]]
        np.testing.assert_allclose([x.value for x in a], [x.value for x in answers[0]], atol=1e-5)
    # The raw network outputs agree too (TorchScript exactly, ONNX to float tolerance).
    states = np.stack([pos.state for pos in test_positions])
    outs = [p.evaluator.evaluate(states) for p in players]
    for o in outs[1:]:
        for x, y in zip(o, outs[0], strict=True):
            np.testing.assert_allclose(x, y, atol=1e-5)


def test_komi_comes_from_the_run_config_or_defaults_with_a_warning(tmp_path: Path) -> None:
    best = write_run(tmp_path)  # no half_komi in the checkpoint
    warnings: list[str] = []
    meta = export_checkpoint(best, tmp_path / "a.pt", warn=warnings.append)
    assert meta["half_komi"] == 0 and "does not say its komi" in warnings[0]
    assert meta["run_name"] == "myrun" and meta["generation"] is None
    (best.parent / "config.yaml").write_text("run_name: myrun\nboard:\n  size: 4\n  komi: 1.5\n")
    assert export_checkpoint(best, tmp_path / "b.pt")["half_komi"] == 3
    assert export_checkpoint(best, tmp_path / "c.pt", komi=2.5)["half_komi"] == 5
    with pytest.raises(ValueError, match="multiple of 0.5"):
        export_checkpoint(best, tmp_path / "d.pt", komi=0.3)


def test_exported_files_carry_the_lineage(tmp_path: Path, capsys) -> None:
    """A model file's lineage (or a checkpoint's run counters on top of their earlier lineage)
    goes into the exported metadata of both formats and the CLI's line; a malformed one is
    refused naming the file."""
    lineage = {"minutes": 56.25, "positions": 292493, "games": 5081, "steps": 5400,
               "runs": ["r6_gumbel32", "long6x6_link2"]}
    best = write_run(tmp_path, generation=6, run_name="long6x6_link2", half_komi=4, lineage=lineage)
    ts, ox = tmp_path / "m.pt", tmp_path / "m.onnx"
    assert main([str(best), "-o", str(ts)]) == 0
    assert "trained 56.2 min, 292,493 positions, 5,081 games, 5,400 steps over 2 runs" in capsys.readouterr().out
    assert main([str(best), "-o", str(ox), "--format", "onnx"]) == 0
    for path in (ts, ox, best):
        assert read_metadata(path)["lineage"] == lineage
    assert Evaluator.load(ts).metadata["lineage"] == lineage
    # A checkpoint: its own counters (minutes, positions, games; step) on top of "earlier".
    ckpt = tiny_checkpoint(run_name="b", step=300, run={"minutes": 10.0, "positions": 1000, "games": 40,
                           "earlier": {"minutes": 5.0, "positions": 500, "games": 20, "steps": 100, "runs": ["a"]}})
    meta = export_checkpoint(ckpt, tmp_path / "c.pt", komi=2)
    assert meta["lineage"] == {"minutes": 15.0, "positions": 1500, "games": 60, "steps": 400, "runs": ["a", "b"]}
    # A bare model file: its training is unknown (no counters, said as unknown), its run name.
    assert export_checkpoint(tiny_checkpoint(run_name="x"), tmp_path / "d.pt", komi=2)["lineage"] == {
        "minutes": 0.0, "positions": 0, "games": 0, "steps": 0, "runs": ["x"], "known": False}
    for bad in ({"minutes": -1.0}, {"positions": "many"}, {"steps": True}, {"runs": "a"}, [1, 2]):
        torch.save(tiny_checkpoint(half_komi=4, lineage=bad), best)
        assert main([str(best), "-o", str(tmp_path / "x.pt")]) == 1
        err = capsys.readouterr().err
        assert "export failed" in err and str(best) in err and "lineage" in err, err


def test_a_file_without_lineage_is_never_said_as_trained_0_minutes(tmp_path: Path, capsys) -> None:
    """A model file or checkpoint with no lineage (training-time) information: the export's line
    says its training is unknown, never 'trained 0.0 min'; the exported metadata keeps it as
    unknown (``known: false``), and a warm start from such a file says lower bounds."""
    from takzero.pipeline.lineage import Lineage

    for name, ckpt in (("bare", tiny_checkpoint(half_komi=4)), ("named", tiny_checkpoint(half_komi=4, run_name="v1"))):
        path = tmp_path / f"{name}.pt"
        torch.save(ckpt, path)
        assert main([str(path), "-o", str(tmp_path / f"{name}_out.pt")]) == 0
        out = capsys.readouterr().out
        assert "0.0 min" not in out and "trained" not in out, out
        assert "training: unknown (the file carries no lineage" in out, out
        meta = read_metadata(tmp_path / f"{name}_out.pt")["lineage"]
        assert meta["known"] is False and not Lineage.from_dict(meta).known
    # a run warm-started from such a file: its counters are lower bounds, said as such
    chain = Lineage.of_file({"run_name": "v1"}).plus(12.0, 300, 10, 40, "next")
    assert not chain.known and Lineage.from_dict(chain.to_dict()) == chain
    assert chain.describe().startswith("at least 12.0 min, 300 positions") and "unknown" in chain.describe()
    with pytest.raises(ValueError, match="lineage: known"):
        Lineage.from_dict({"known": "no"})


def test_bad_inputs_fail_with_a_message(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "missing.pt"), "-o", str(tmp_path / "x.pt")]) == 1
    assert "no such checkpoint" in capsys.readouterr().err
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    assert main([str(junk), "-o", str(tmp_path / "x.pt")]) == 1
    assert "cannot be read" in capsys.readouterr().err
    torch.save({"weights": 1}, junk)
    assert main([str(junk), "-o", str(tmp_path / "x.pt")]) == 1
    assert "not a takzero checkpoint" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# NetworkPlayer
# ---------------------------------------------------------------------------------------------


def test_network_player_interface() -> None:
    p = NetworkPlayer(Evaluator.from_checkpoint(tiny_checkpoint(), device="cpu"), simulations=16)
    assert isinstance(p, Player)
    pos = Position.start(4).play("a1").play("d4")
    p.reset(4, 0, seed=1)
    pm = p.choose(pos)
    assert pm.code in set(pos.legal_move_codes().tolist())
    assert pm.nodes == 16 and pm.pv[0] == pm.code and -1 <= pm.value <= 1
    assert pm.wdl is not None and sum(pm.wdl) == pytest.approx(1.0)
    assert pm.wdl[0] - pm.wdl[2] == pytest.approx(pm.value, abs=1e-6)
    with pytest.raises(ValueError, match="plays 4x4"):
        p.reset(5, 0)
    with pytest.raises(ValueError, match="plays 4x4"):
        p.choose(Position.start(5))
    over = Position.from_tps("1,1,1,1/x4/2,2,2,x/x4 2 4")
    assert over.is_over
    with pytest.raises(ValueError, match="over"):
        p.choose(over)
    with pytest.raises(ValueError):
        NetworkPlayer(p.evaluator, simulations=0)


def test_network_player_takes_a_road_in_one() -> None:
    p = NetworkPlayer.load(tiny_checkpoint(), simulations=40)
    pos = Position.from_tps("1,1,1,x/x4/2,2,2,x/x4 1 4")
    p.reset(4, 0)
    pm = p.choose(pos)
    assert pos.ptn(pm.code) == "d4"
    assert pm.value == 1.0 and pm.wdl == (1.0, 0.0, 0.0)


def test_tree_reuse_through_observe() -> None:
    p = NetworkPlayer.load(tiny_checkpoint(), simulations=32)
    p.reset(4, 0, seed=0)
    pos = Position.start(4).play("a1").play("d4")
    pm = p.choose(pos)
    assert len(pm.pv) >= 2
    reply = pm.pv[1]  # the expected reply: its subtree holds visits
    p.observe(pos, pm.code)
    p.observe(pos.play(pm.code), int(reply))
    # The kept subtree is the root of the next search (it is not rebuilt from nothing).
    after = pos.play(pm.code).play(int(reply))
    assert p._search.root_is(0, after)
    kept = p._search.mcts.tree_size(0)
    assert kept > 1
    # go nodes N on the kept tree: N new simulations (reported as N), on top of its visits, in
    # one search and chunked with progress reports (as the TEI engine searches)
    for progress in (None, lambda move, done: None):
        before = int(np.sum(p._search.mcts.root_visits(0)[1]))
        assert before > 0
        again = p.think(after, Limit(nodes=40), on_progress=progress)
        assert again.nodes == 40 and int(np.sum(p._search.mcts.root_visits(0)[1])) == before + 40
    # A position the player was not told about starts a fresh tree.
    p.observe(Position.start(4), int(Position.start(4).legal_move_codes()[0]))
    assert not p._search.root_is(0, after)
    fresh = NetworkPlayer.load(tiny_checkpoint(), simulations=32, reuse_tree=False)
    fresh.reset(4, 0, seed=0)
    fresh.choose(pos)
    fresh.observe(pos, pm.code)
    assert not fresh._search.root_is(0, pos.play(pm.code))


def test_think_stops_on_time_and_on_the_stop_flag() -> None:
    p = NetworkPlayer.load(tiny_checkpoint(), simulations=10**7)
    p.reset(4, 0)
    pos = Position.start(4).play("a1").play("d4")
    p.think(Position.start(4), Limit(nodes=8))  # warm up (the first call may compile)
    reports: list[int] = []
    t0 = time.perf_counter()
    pm = p.think(pos, Limit(seconds=0.3), on_progress=lambda a, n: reports.append(n))
    took = time.perf_counter() - t0
    assert took < 3.0 and 0 < pm.nodes < 10**7
    assert reports and reports[-1] == pm.nodes and reports == sorted(reports)
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    t0 = time.perf_counter()
    pm = p.think(pos, Limit(stop=stop))  # no limit: runs until stopped
    assert stop.is_set() and time.perf_counter() - t0 < 3.0
    assert pm.code in set(pos.legal_move_codes().tolist())


def test_export_without_out_never_overwrites(tmp_path: Path, capsys, monkeypatch) -> None:
    """Without -o the default name is used while it is free, then model_2.pt, model_3.pt, ...,
    each time saying which file was written instead: an earlier export is never replaced."""
    best = write_run(tmp_path, generation=3, run_name="r", half_komi=4)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.pt").write_bytes(b"an earlier export")
    assert main([str(best)]) == 0
    assert (tmp_path / "model.pt").read_bytes() == b"an earlier export"
    assert read_metadata(tmp_path / "model_2.pt")["generation"] == 3
    assert "model.pt exists, not overwritten: writing model_2.pt" in capsys.readouterr().err
    assert main([str(best)]) == 0
    assert (tmp_path / "model_3.pt").exists()


def test_export_never_writes_over_its_input_or_a_checkpoint(tmp_path: Path, capsys) -> None:
    """`-o` naming the input (by its path, another spelling or a hard link), the input's
    checksum file, or another checkpoint with a sidecar: refused in one line, every byte kept."""
    from takzero.pipeline.checkpoints import atomic_torch_save

    run = tmp_path / "run"
    best = run / "best.pt"
    atomic_torch_save(tiny_checkpoint(generation=2), best)
    other = run / "ckpt_000000010.pt"
    atomic_torch_save(tiny_checkpoint(generation=1), other)
    link = tmp_path / "link.pt"
    link.hardlink_to(best)
    before = {p: p.read_bytes() for p in run.iterdir()}
    for out in (best, run / ".." / "run" / "best.pt", link, Path(str(best) + ".sha256"), other):
        assert main([str(best), "-o", str(out)]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("export failed: "), err
        assert "choose another -o" in err
    assert {p: p.read_bytes() for p in run.iterdir()} == before
    assert main([str(best), "-o", str(tmp_path / "fine.pt")]) == 0


def test_an_int8_onnx_export_is_deterministic_and_plays(tmp_path: Path, capsys) -> None:
    """``--format onnx-int8``: the same checkpoint gives the same int8 file, which loads as an
    int8 evaluator (kept as it is by every backend) with the checkpoint's metadata."""
    pytest.importorskip("onnxruntime")
    from takzero.nn.backends import with_backend

    best = write_run(tmp_path, generation=7, run_name="myrun", half_komi=4)
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    assert main([str(best), "-o", str(a), "--format", "onnx-int8"]) == 0
    assert main([str(best), "-o", str(b), "--format", "onnx-int8"]) == 0
    assert a.read_bytes() == b.read_bytes()
    meta = read_metadata(a)
    assert meta["precision"] == "int8" and meta["calibration_positions"] == 512
    assert meta["half_komi"] == 4 and meta["generation"] == 7
    ev = Evaluator.load(a)
    assert with_backend(ev, "int8") is ev and with_backend(ev, "onnx") is ev
    player = NetworkPlayer.load(str(a), simulations=16, seed=0)
    pos = positions(4, 1, seed=2)[0]
    player.reset(4, pos.half_komi)
    assert int(player.think(pos, Limit(nodes=16)).code) in pos.legal_move_codes()


def test_info_checks_the_metadata_and_says_what_fails(tmp_path: Path, capsys) -> None:
    """--info printed a file's metadata as fact: it now says whether it passed its checks
    ('metadata_checks' in the JSON, a warning line on stderr for what fails)."""
    import onnx

    ox = tmp_path / "m.onnx"
    export_checkpoint(tiny_checkpoint(generation=2, run_name="r", half_komi=2), ox, fmt="onnx")
    assert main([str(ox), "--info"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["metadata_checks"] == "passed" and err == ""
    changes = {"model_config": [], "size": "4", "half_komi": 3, "generation": -1, "in_channels": 7,
               "metadata_checks": "passed"}
    proto = onnx.load(str(ox))
    for entry in proto.metadata_props:
        if entry.key == "takzero":
            entry.value = json.dumps({**json.loads(entry.value), **changes})
    onnx.save(proto, str(ox))
    assert main([str(ox), "--info"]) == 0
    out, err = capsys.readouterr()
    checks = json.loads(out)["metadata_checks"]  # the file's own "passed" is not taken
    assert checks == [
        "size '4' is not a whole number in 3..8",
        "in_channels 7 is not a plane count of feature version 2",
        "komi 1.0 is not half of half_komi 3",
        "model_config [] is not the settings of a network",
        "generation -1 is not a whole number >= 0",
    ]
    assert err.count("\n") == 1 and err.startswith("warning: ") and "fails 5 check(s)" in err
