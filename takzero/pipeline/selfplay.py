"""Self-play worker: G games at once, one batched network call per search step.

Every call of :meth:`SelfPlayWorker.play_step` searches the root of every unfinished game together
(:class:`takzero.search.BatchedMCTS`: the compiled search picks one leaf per game, the network
evaluates all leaves in one batch), records the policy target of the full searches (playout cap
randomization leaves cheap searches unrecorded), plays one move in every game and returns the
records of the games that finished. Python work here is per game and move, never per node.

Value targets (from the mover's view at each recorded position): +1 if the mover went on to win,
-1 if they lost, 0 for a draw (flat tie, ply limit). A resigned game is a loss for the resigner.
Resignation (AlphaGo Zero): a player resigns after ``resign_consecutive`` of its own moves with a
root value below ``resign_threshold``; in a share ``resign_playout_share`` of games resignation is
off and the game is played out, which measures the false-resignation rate (games where the
player that would have resigned did not lose).

A finished game is handed over as a typed record (:class:`takzero.pipeline.game_record.GameRecord`:
its recorded positions, the search's policy at each, proofs, final position and end), and its
replay records are derived from it by the producers of ``replay.RECORD_FIELDS``
(``Records.from_game``).

Auxiliary targets (filled for every recorded position of a game when it ends):

* ownership (``game.ownership``): the owner of each square's top piece in the game's final
  position, from the view of the player to move at the recorded position. Valid for games that
  end on the board: roads, flat wins and draws at the ply limit (the position at the limit is the
  game's final position, as KataGo scores the final board). A resigned game has no final
  position, and its ownership is masked (``own_valid`` False) rather than guessed from the board
  at resignation (KataGo does not resign its self-play training games, it plays them out).
* opponent policy (with ``model.opponent_policy_weight`` > 0): the policy target of the next
  recorded position when that position is the very next ply (the opponent's reply); masked at a
  game's last recorded position and wherever the next ply was a cheap, unrecorded search of the
  playout cap.

Backend (``selfplay.backend``): ``torch`` runs the network in PyTorch; ``onnx`` exports the
current weights to ONNX in memory at every new generation and runs them with onnxruntime on
``selfplay.threads`` threads; ``int8`` does the same and quantizes the graph to int8
(``takzero.nn.quantize``), calibrated on this worker's newest recorded positions (the last
:data:`takzero.nn.quantize.CALIBRATION_POSITIONS`; before it has any, on games of the network's
own policy), and logs the seconds each quantization took (``selfplay/quantize_seconds``); ``auto``
times torch and onnx on a batch of this worker's size when the worker starts and keeps the faster
one. CPU only: a CUDA worker keeps torch.

Stopping (``selfplay.stop_grace_seconds``): at a run's stop the worker plays on for a grace period
without starting new games (``play_step(new_games=False)``), handing in the games that finish,
and gives what is still in play to :meth:`SelfPlayWorker.unfinished` (:class:`UnfinishedGames`:
moves, recorded plies and policy targets, no pickled object), which the run keeps in its folder
and the next start hands back (:meth:`SelfPlayWorker.continue_games`): each game goes on from its
position with its positions recorded so far, under a new game id of the new worker's stream.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from takzero.config import BoardConfig, SelfPlayConfig, TrainConfig
from takzero.game import core
from takzero.game.position import Game, Position
from takzero.game.ptn import game_to_ptn
from takzero.nn.actions import move_to_action
from takzero.nn.backends import choose_backend, onnx_evaluator, quantize
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet
from takzero.nn.quantize import CALIBRATION_POSITIONS
from takzero.pipeline.game_record import GameRecord
from takzero.pipeline.records import Records, Widths
from takzero.pipeline.unfinished import GameSlot, UnfinishedGames
from takzero.players.tactics import proven_win
from takzero.search import BatchedMCTS, SearchConfig
from takzero.search.driver import SearchDriver

GAME_COUNTER_BITS = 32


def game_id(stream: int, counter: int) -> int:
    """The id of the ``counter``-th game of random stream ``stream``: ``(stream << 32) | counter``
    (int64). Streams are unique over a run's life (one per self-play actor start, see
    :func:`stream_seed`), so game ids never repeat, across workers, actor restarts and resumes."""
    if not 0 <= counter < (1 << GAME_COUNTER_BITS):
        raise ValueError(f"game counter {counter} out of range")
    return (stream << GAME_COUNTER_BITS) | counter


def stream_seed(seed: int, stream: int) -> int:
    """The 63-bit seed of self-play stream ``stream`` of a run seeded ``seed`` (numpy's
    SeedSequence over both, so nearby streams are independent)."""
    state = np.random.SeedSequence([seed, stream]).generate_state(2, np.uint32)
    return int((int(state[0]) << 32 | int(state[1])) & ((1 << 63) - 1))


#: The statistics key of a game's end by (reason, winner); any other end is a draw (no winner)
#: or a resignation.
_END_KEYS: dict[tuple[str, int | None], str] = {
    ("road", 0): "road_white",
    ("road", 1): "road_black",
    ("flat", 0): "flat_white",
    ("flat", 1): "flat_black",
}


class SelfPlayWorker:
    """Plays ``selfplay.games_per_worker`` games at once.

    Args:
        cfg: the ``selfplay`` config section (:class:`takzero.config.SelfPlayConfig`), read as
            ``self.cfg``.
        board: the ``board`` section (size, komi, reserves of the games).
        search: the self-play search settings
            (:meth:`takzero.config.TrainConfig.selfplay_search_config`).
        model_config: the network's shape (:meth:`takzero.config.TrainConfig.model_config`).
        top_k: policy-target entries recorded per position (``replay.top_k``).
        opponent_top_k: opponent-policy entries recorded per position
            (:meth:`takzero.config.TrainConfig.replay_opponent_top_k`; 0: none).
        seed: the run's seed (``seed``); with ``stream`` it seeds the search and the openings.
        device: ``auto``/``cpu``/``cuda[:N]`` of the network.
        sample_games_every: one PTN sample game per this many finished games
            (``sample_games_every``).
        worker_id: index of this worker.
        stream: random stream and game-id prefix of this worker (:func:`game_id`); a training run
            gives each actor start a new one (``Coordinator.new_stream``), so no two starts play
            the same games. Default: the worker id.
        evaluator: the network as an evaluator the worker does not own (``selfplay.inference:
            server``: a :class:`takzero.pipeline.inference_server.RemoteEvaluator`, which
            carries the ``generation`` of its last answer); the worker then builds no network
            of its own, takes no weights (:meth:`set_weights` refuses them) and always searches
            its games in two halves (as ``selfplay.pipeline``), so that one half is searched
            while the other half's batch is out. Default: its own network on ``device``.

    :meth:`from_run` builds one from a whole :class:`takzero.config.TrainConfig`.
    """

    def __init__(
        self,
        cfg: SelfPlayConfig,
        board: BoardConfig,
        search: SearchConfig,
        model_config: ModelConfig,
        *,
        top_k: int,
        opponent_top_k: int = 0,
        seed: int,
        device: str,
        sample_games_every: int,
        worker_id: int = 0,
        stream: int | None = None,
        evaluator: Any = None,
    ) -> None:
        self.cfg = cfg
        self.size = board.size
        self.top_k = top_k
        self.opponent_top_k = opponent_top_k
        self.sample_games_every = sample_games_every
        self.num_games = self.cfg.games_per_worker
        self.worker_id = worker_id
        self.stream = worker_id if stream is None else stream
        self.search_config = search
        seed = stream_seed(seed, self.stream)
        self.mcts = BatchedMCTS(self.num_games, self.size, self.search_config, seed=seed)
        self.rng = np.random.default_rng(seed)
        #: the network is another's (the inference server's): no weights of its own
        self.remote = evaluator is not None
        if self.remote:
            self.evaluator = evaluator
            self._torch_evaluator = None
            self.backend = "remote"
        else:
            model = TakNet(model_config)
            self.evaluator = Evaluator(model, device=device, bf16=self.cfg.bf16)  # bf16: CUDA only
            self._torch_evaluator = self.evaluator
            self.backend = self._resolve_backend(self.cfg.backend)
        #: the newest recorded positions (a ring of CALIBRATION_POSITIONS), the int8 calibration
        self._recent = np.zeros((CALIBRATION_POSITIONS, core.STATE_LEN), np.int64)
        self._recent_count = 0
        #: seconds the last int8 quantization took (0 without int8)
        self.quantize_seconds = 0.0
        if not self.remote:
            self._cpu_evaluator()
        self.driver = SearchDriver(self.mcts, self.evaluator)
        # two halves of the games in flight (always with a remote network: one half is searched
        # while the other's batch is at the server)
        self.driver.pipelined = bool(self.cfg.pipeline) or self.remote
        self.generation = 0
        self.start = Position.start(self.size, komi=board.komi, flats=board.flats, caps=board.caps)
        self.games_finished = 0
        self._next_id = 0
        #: the games in play, by slot (None: a slot left empty at a stop, ``play_step(new_games=False)``)
        self.slots: list[GameSlot | None] = [self._new_game(g) for g in range(self.num_games)]

    @classmethod
    def from_run(
        cls, run: TrainConfig, worker_id: int = 0, device: str | None = None, stream: int | None = None,
        evaluator: Any = None,
    ) -> SelfPlayWorker:
        """The worker of a training run's config: its sections and translations, ``device``
        defaulting to ``run.device`` (other arguments as for the class)."""
        return cls(
            run.selfplay, run.board, run.selfplay_search_config(), run.model_config(),
            top_k=run.replay.top_k, opponent_top_k=run.replay_opponent_top_k(), seed=run.seed,
            device=device or run.device, sample_games_every=run.sample_games_every,
            worker_id=worker_id, stream=stream, evaluator=evaluator,
        )

    def set_weights(self, state_dict: dict[str, torch.Tensor], generation: int) -> None:
        """Load new network weights (the generation is recorded with each position); with the
        onnx backend, export them to a new onnxruntime session. Raises RuntimeError for a worker
        whose network is remote (its weights go to the inference server)."""
        if self._torch_evaluator is None:
            raise RuntimeError("this worker's network is an inference server's: its weights go there")
        self._torch_evaluator.load_state_dict(state_dict)
        self._cpu_evaluator()
        self.driver.evaluator = self.evaluator
        self.generation = generation

    def _cpu_evaluator(self) -> None:
        """Point ``self.evaluator`` at the current weights in the worker's backend: the PyTorch
        evaluator itself, a new onnxruntime session of them, or their int8 quantization
        calibrated on the newest recorded positions (timed in ``quantize_seconds``)."""
        torch_evaluator = self._torch_evaluator
        assert torch_evaluator is not None  # a worker with its own network (never a remote one)
        if self.backend == "onnx":
            self.evaluator = onnx_evaluator(torch_evaluator.model, threads=self.cfg.threads)
        elif self.backend == "int8":
            n = min(self._recent_count, len(self._recent))
            states = self._recent[:n].copy() if n >= 64 else None  # None: games of its own policy
            self.evaluator, self.quantize_seconds = quantize(
                torch_evaluator, states, threads=self.cfg.threads, seed=self.stream
            )
        else:
            self.evaluator = torch_evaluator

    def _remember(self, state: np.ndarray) -> None:
        """Keep ``state`` among the newest recorded positions (the int8 calibration ring)."""
        self._recent[self._recent_count % len(self._recent)] = state
        self._recent_count += 1

    def _resolve_backend(self, backend: str) -> str:
        """``torch``, ``onnx`` or ``int8`` for ``selfplay.backend`` (see the module docstring)."""
        torch_evaluator = self._torch_evaluator
        assert torch_evaluator is not None  # a worker with its own network (never a remote one)
        if backend == "torch" or torch_evaluator.device.type != "cpu":
            return "torch"
        if backend in ("onnx", "int8"):
            return backend
        return choose_backend(torch_evaluator.model, self.num_games, self.cfg.threads)

    def _new_game(self, g: int) -> GameSlot:
        game = Game(self.start, ply_limit=self.cfg.ply_limit)
        for _ in range(self.cfg.opening_random_plies):
            codes = game.position.legal_move_codes()
            if len(codes) == 0 or game.result.over:
                break
            game.play(int(codes[self.rng.integers(len(codes))]))
        slot = GameSlot(
            game=game,
            game_id=self._next_game_id(),
            resign_disabled=bool(self.rng.random() < self.cfg.resign_playout_share),
        )
        self.mcts.reset(g, game.position.state)
        return slot

    def _next_game_id(self) -> int:
        gid = game_id(self.stream, self._next_id)
        self._next_id += 1
        return gid

    # -- a stop and the next start -------------------------------------------------------------

    def in_play(self) -> int:
        """Games in play (slots not left empty)."""
        return sum(slot is not None for slot in self.slots)

    def unfinished(self) -> UnfinishedGames:
        """The games in play, for a later start to continue (:meth:`continue_games`)."""
        return UnfinishedGames.from_slots(self.size, [slot for slot in self.slots if slot is not None])

    def continue_games(self, games: UnfinishedGames) -> int:
        """Put the first games of ``games`` (as many as there are slots) in this worker's slots in
        place of new ones: each goes on from its position with its recorded positions and
        resignation state, under a new game id of this worker's stream (so no id is used twice,
        whatever restarts follow). Returns how many went on; the others (beyond the slots, or
        that no longer replay: :meth:`UnfinishedGames.slots`) are not played."""
        taken, _ = games.split(self.num_games)
        n = 0
        for slot in taken.slots(self.start, self.cfg.ply_limit):
            if slot is None:
                continue
            slot.game_id = self._next_game_id()
            self.mcts.reset(n, slot.game.position.state)
            self.slots[n] = slot
            n += 1
        return n

    # -- one step ----------------------------------------------------------------------------

    def play_step(self, new_games: bool = True) -> tuple[Records | None, dict[str, float], list[str]]:
        """Search every open game once, play one move in each; returns (records of the games that
        finished, statistics for logging, PTN texts of sample games). ``new_games=False`` (a
        stop's grace period): a finished game's slot stays empty (``None``) instead of taking a
        new game."""
        t0 = time.perf_counter()
        active = self.mcts.active_games()
        if active.size == 0 and not new_games:
            return self._finish([], None, 0, 0, time.perf_counter() - t0)
        if active.size == 0:  # every slot finished without a move (cannot normally happen)
            for g in range(self.num_games):
                self.slots[g] = self._new_game(g)
            active = self.mcts.active_games()
        sstats = self.driver.run(active)  # the config's budgets, playout cap and root noise
        if self.remote:  # the generation of the server's weights (recorded with the positions)
            self.generation = max(self.generation, int(getattr(self.evaluator, "generation", self.generation)))
        sims = 0
        finished: list[tuple[GameSlot, int | None, str]] = []
        for g in active:
            slot = self.slots[g]
            assert slot is not None  # (an active slot holds a game)
            pos = slot.game.position
            out = self.driver.outcome(g, policy=self.mcts.is_full_search(g), choose=False)
            sims += out.nodes
            if out.full:
                slot.states.append(pos.state.copy())
                self._remember(pos.state)
                slot.actions.append(out.policy_actions)
                slot.probs.append(out.policy_probs)
                slot.movers.append(pos.side_to_move)
                slot.plies.append(pos.ply)
                exact, winning_move = self._proof(out.proven, pos)
                slot.proven.append(exact)
                if winning_move is not None and self.cfg.tinue_policy_targets:
                    slot.actions[-1] = np.array([move_to_action(winning_move, pos.size)], np.int64)
                    slot.probs[-1] = np.ones(1, np.float32)
            mover = pos.side_to_move
            if self._resigns(slot, mover, out.value):
                finished.append((slot, 1 - mover, "resign"))
                self._replace(g, new_games)
                continue
            move = self.mcts.choose_move(g)  # after the resignation check: as the stream expects
            slot.game.play(move)
            self.mcts.advance(g, move)
            res = slot.game.result
            if res.over:
                finished.append((slot, res.winner, res.reason))
                self._replace(g, new_games)
        return self._finish(finished, sstats, sims, len(active), time.perf_counter() - t0)

    def _replace(self, g: int, new_game: bool) -> None:
        """Slot ``g``'s game ended: a new game in it, or (at a stop) an empty slot."""
        if new_game:
            self.slots[g] = self._new_game(g)
        else:
            self.slots[g] = None
            self.mcts.free(g)

    def _proof(self, proven: int | None, pos: Position) -> tuple[int | None, int | None]:
        """The exact value of a recorded position for its side to move, when
        ``selfplay.proven_value_targets`` is on and it is known: the search's own proof of the
        root (MCTS-solver: 1, 0 or -1), else, with ``selfplay.tinue_nodes`` > 0, a forced road
        proved by the tinue prover (1). None otherwise (the game's outcome is the target).

        Also returns the prover's first move (a move code) when the prover made the proof, else
        None: with ``selfplay.tinue_policy_targets`` it becomes the position's policy target
        (one-hot), so the network learns the forced roads its own few simulations miss (the
        prover as a tactical expert, as in expert iteration, Anthony et al. 2017)."""
        if not self.cfg.proven_value_targets and not self.cfg.tinue_policy_targets:
            return None, None
        move = None
        if proven is None and self.cfg.tinue_nodes > 0:
            answer = proven_win(pos, self.cfg.tinue_nodes)
            if answer is not None:
                proven, move = 1, answer.code
        return (proven if self.cfg.proven_value_targets else None), move

    def _resigns(self, slot: GameSlot, mover: int, value: float) -> bool:
        sp = self.cfg
        if sp.resign_threshold <= -1.0:
            return False
        if value < sp.resign_threshold:
            slot.low_streak[mover] += 1
        else:
            slot.low_streak[mover] = 0
        if slot.low_streak[mover] < sp.resign_consecutive:
            return False
        if slot.resign_disabled:
            if slot.would_resign is None:
                slot.would_resign = mover
            return False
        slot.resigned = mover
        return True

    def _finish(
        self,
        finished: list[tuple[GameSlot, int | None, str]],
        sstats: Any,
        sims: int,
        searched: int,
        seconds: float,
    ) -> tuple[Records | None, dict[str, float], list[str]]:
        parts: list[Records] = []
        stats: dict[str, float] = {
            "count/moves": float(searched),
            "selfplay/simulations_per_s": sims / max(seconds, 1e-9),
            "selfplay/moves_per_s": searched / max(seconds, 1e-9),
            "selfplay/mean_batch_size": sstats.leaves / max(sstats.steps, 1) if sstats else 0.0,
            "selfplay/network_share": sstats.eval_seconds / max(seconds, 1e-9) if sstats else 0.0,
            "selfplay/generation": float(self.generation),
            "selfplay/quantize_seconds": float(self.quantize_seconds),
            # gauges of this worker (the driver keeps the latest per stream, not summed over time)
            "inflight/stream": float(self.stream),
            "inflight/games": float(self.in_play()),
            "inflight/positions": float(sum(len(slot.states) for slot in self.slots if slot is not None)),
        }
        ptn: list[str] = []
        lengths = []
        positions = 0
        for slot, winner, reason in finished:
            self.games_finished += 1
            lengths.append(slot.game.position.ply)
            recs = self._records(slot, winner, reason)
            if recs is not None:
                parts.append(recs)
                positions += len(recs)
            key = _END_KEYS.get((reason, winner), "draw" if winner is None else "resigned")
            stats[f"count/{key}"] = stats.get(f"count/{key}", 0.0) + 1
            if slot.would_resign is not None:
                stats["count/resign_checks"] = stats.get("count/resign_checks", 0.0) + 1
                if winner != 1 - slot.would_resign:
                    stats["count/false_resign"] = stats.get("count/false_resign", 0.0) + 1
            every = max(1, self.sample_games_every)
            if self.games_finished % every == 0:
                tags = {"Player1": f"takzero-gen{self.generation}", "Player2": f"takzero-gen{self.generation}"}
                if reason == "resign":
                    text = game_to_ptn(slot.game, tags=tags, result="1-0" if winner == 0 else "0-1")
                else:
                    text = game_to_ptn(slot.game, tags=tags)
                ptn.append(text)
        stats["count/games"] = float(len(finished))
        stats["count/positions"] = float(positions)
        if lengths:
            stats["selfplay/game_length"] = float(np.mean(lengths))
        stats["selfplay/positions_per_s"] = positions / max(seconds, 1e-9)
        records = Records.concat(parts) if parts else None
        return records, stats, ptn

    def game_record(self, slot: GameSlot, winner: int | None, reason: str = "") -> GameRecord:
        """The typed record of ``slot``'s finished game (``winner`` None: none; ``reason``
        ``resign`` or the game's ``Result.reason``), which its replay records derive from."""
        return GameRecord.of_game(
            self.size, slot.game_id, self.generation, slot.states, slot.plies, slot.movers, slot.proven,
            slot.actions, slot.probs, slot.game.position.state, winner, reason,
        )

    def _records(self, slot: GameSlot, winner: int | None, reason: str = "") -> Records | None:
        if not slot.states:
            return None
        return Records.from_game(self.game_record(slot, winner, reason), Widths(self.top_k, self.opponent_top_k))
