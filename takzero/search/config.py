"""Search configuration: :class:`SearchConfig`.

Every knob of the batched MCTS (``takzero.search.mcts``) lives here, with the formula it feeds and
its source. Values are plain Python numbers so the dataclass maps one-to-one onto a Hydra/YAML
section (``SearchConfig.from_dict(cfg.search)``).

Formulas (values are in [-1, 1] from the view of the player to move; ``N`` are visit counts):

* PUCT (AlphaZero, Silver et al. 2018, pseudocode ``ucb_score``)::

      score(a) = Q(a) + c(s) * P(a) * sqrt(N(s)) / (1 + N(a))
      c(s)     = c_init + log((1 + N(s) + c_base) / c_base)      (c_base > 0: the log schedule)
      c(s)     = c_init                                           (c_base == 0: constant)

  ``N(s)`` is the parent's visit count (its own evaluation included).
* First-play urgency (KataGo, Wu 2019): an unvisited child gets
  ``Q = Q(parent) - fpu_reduction * sqrt(sum of P over visited children)``; at the root the reduction
  is ``fpu_reduction_root`` and 0 while Dirichlet noise is on (KataGo does the same). Set
  ``fpu_value`` to use one fixed value instead (e.g. -1: "unvisited = loss").
* Dirichlet noise (AlphaZero): root priors become ``(1 - noise_weight) * P + noise_weight * eta``,
  ``eta ~ Dir(alpha)`` over the legal moves only, drawn once per search. ``alpha =
  dirichlet_alpha`` if > 0, else ``dirichlet_alpha_scale / n_legal`` (the AlphaZero values, 0.3 for
  chess at ~35 moves and 0.03 for Go at ~360, are both about 10 / n_legal; KataGo's total
  concentration is 10.83).
* Gumbel root (Danihelka et al. 2022, "Policy improvement by planning with Gumbel"): Gumbel-top-k
  over ``min(gumbel_m, n_legal)`` actions, Sequential Halving of the budget (the visit schedule of
  DeepMind's ``mctx``), ``sigma(q) = (gumbel_c_visit + max_b N(b)) * gumbel_c_scale * q`` with the
  completed Q min-max normalised to [0, 1] (unvisited actions take ``v_mix``, eq. 33 of the paper),
  improved policy ``softmax(log P + sigma(completed Q))`` as the policy target. Interior nodes
  keep PUCT.
* Playout cap randomization (KataGo, Wu 2019, section 3.1): with ``playout_cap`` on, each search is
  full (``full_sims``, noise on, recorded as a training target) with probability ``full_prob``,
  otherwise cheap (``cheap_sims``, no noise, not recorded).
* Temperature: ``temperature`` for plies < ``temperature_plies``, then ``temperature_final``
  (0 = argmax of the visit counts).
* Forced playouts (KataGo, Wu 2019, section 3.2): in a search with root noise, a root child c
  that has received playouts but fewer than ``n_forced(c) = sqrt(forced_k * P(c) * sum_b N(b))``
  (P: the noised root prior, the sum over the root's children; KataGo: k = 2) is selected before
  PUCT is consulted (the first such child); unvisited children are left to PUCT, as in KataGo.
* Policy target pruning (KataGo, same section): the policy target (and the move choice) of a
  PUCT root uses visit counts where every child c but the most visited one, c*, loses up to
  ``n_forced(c)`` visits, as many as keep ``PUCT(c) < PUCT(c*)`` (with ``c*``'s real visits;
  the smallest ``N'(c) >= N(c) - n_forced(c)`` with ``Q(c) + c(s) P(c) sqrt(N(s)) / (1 + N'(c))
  <= PUCT(c*)``); a child left with one visit or fewer is dropped.

The compiled kernels read the settings from :func:`pack_settings`: a (1,) numpy structured array
with one field per numeric ``SearchConfig`` field, of the same name (``SETTINGS_DTYPE``, made from
the dataclass fields, so it is the one table of what the kernels can read). A kernel reads a
setting as ``cfg["c_init"]`` with ``cfg = settings[0]``: the field's offset is a compile-time
constant, and the layout is part of the kernels' compiled signature, so adding a field never
leaves a stale cached kernel reading a shifted slot. A new setting is therefore four edits in
three files: the field here (with its line in the class docstring), its check in ``validate``,
the kernel that reads it, and its default under ``mcts:`` in ``configs/train.yaml``
(``tests/test_config_docs.py`` checks that every field is listed there).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from takzero.game.tinue import DEFAULT_TINUE_NODES
from takzero.game.tinue import MAX_NODES as MAX_TINUE_NODES
from takzero.search.flat_endgame import MAX_NODES as MAX_FLAT_ENDGAME_NODES
from takzero.search.rules import RULE_KINDS, rule_codes
from takzero.search.tree import BYTES_PER_NODE

__all__ = ["BYTES_PER_NODE", "SETTINGS_DTYPE", "SearchConfig", "pack_settings"]


@dataclass
class SearchConfig:
    """Configuration of :class:`takzero.search.BatchedMCTS`.

    Attributes:
        simulations: simulations per search (leaf evaluations or terminal backups below the root;
            the root's own first evaluation is not counted). Used unless ``playout_cap`` is on.
        c_init: PUCT exploration constant (the constant c_puct when ``c_base`` is 0).
        c_base: base of the AlphaZero log schedule; 0 turns the schedule off.
        fpu_reduction: first-play-urgency reduction at interior nodes (value units, [-1, 1] scale).
        fpu_reduction_root: the same at the root (0 whenever root noise is on).
        fpu_value: if not None, unvisited children get this fixed Q instead of the reduction rule.
        root_noise: add Dirichlet noise at the root (self-play); :meth:`evaluation` turns it off.
        noise_weight: weight of the noise in the mixed root prior.
        dirichlet_alpha: fixed per-move Dirichlet alpha; 0 means ``dirichlet_alpha_scale / n_legal``.
        dirichlet_alpha_scale: total concentration spread over the legal moves.
        gumbel: use the Gumbel root (Sequential Halving, improved-policy targets) instead of PUCT +
            Dirichlet at the root.
        gumbel_m: number of actions sampled by Gumbel-top-k (m).
        gumbel_c_visit, gumbel_c_scale: the constants of sigma(q).
        temperature, temperature_plies, temperature_final: the move-selection schedule.
        playout_cap: playout cap randomization on/off.
        full_prob: probability of a full (recorded) search.
        full_sims: simulations of a full search (None: ``simulations``).
        cheap_sims: simulations of a cheap search.
        node_budget: nodes per tree (one node per child slot; ``BYTES_PER_NODE`` bytes each,
            committed by the OS only when used). Each simulation expands one leaf, so a search
            needs about simulations x legal moves nodes (6x6 mid-game: 60-150 legal moves, so
            800 simulations take 50k-120k nodes), plus the subtree kept by tree reuse. When a tree
            is full, leaves are no longer expanded: they keep their network value and later visits
            back that value up again without another network call (``BatchedMCTS.overflow``).
            Must be at least ``num_actions(N) + 1``.
        leaves_per_step: leaves selected per game per step (> 1 uses virtual loss).
        virtual_loss: value counted as a loss for each in-flight visit when ``leaves_per_step > 1``.
        max_plies: ply limit (0 = none): a non-terminal position at ply >= max_plies is scored as a
            draw by the search, without a network call.
        road_check: at every expansion, mark flat/capstone placements that complete the mover's road
            as proven wins (bitboard test, no make/unmake), proving the node at once.
        root_terminal_check: at the root, play every legal move and mark the ones that end the game
            (roads of either player, flat wins, ply limit) with their exact result.
        reuse_tree: keep the chosen child's subtree between moves (``BatchedMCTS.advance``).
        tinue_nodes: node budget of the tinue prover (``takzero.game.tinue``) that players and
            match sides run at the root around each search (``takzero.players.tactics``: a
            proven forced road is played at once; a move after which the opponent has one is
            avoided); 0 turns it off. The compiled search does not read it, and self-play does
            not use it.
        flat_endgame_nodes: node budget of the exact flat-endgame search
            (``takzero.search.flat_endgame.solve``) that players and match sides run at the root
            when the flat count can end the game within its depth (``is_flat_endgame``):
            a proved win is played at once, a searched move proved worse than what the root can
            force is replaced (``takzero.players.tactics``); 0 (the default) turns it off. The
            compiled search does not read it, and self-play does not use it.
        forced_playouts: forced playouts at a PUCT root in searches with root noise (self-play
            full searches), KataGo's ``n_forced``; :meth:`evaluation` turns it off.
        forced_k: the k of ``n_forced(c) = sqrt(k * P(c) * sum N)`` (KataGo: 2), also the bound
            of policy target pruning.
        policy_target_pruning: prune the forced (and other undeserved) visits from the policy
            target and the move choice of a PUCT root; :meth:`evaluation` turns it off.
        select_q_fraction: the move a PUCT root plays at temperature 0: 0 = the most visited
            child; f in (0, 1] = the child of highest Q among those with at least f times the
            most visits (ties: more visits, then higher prior). KataGo's move selection gates its
            lower-confidence-bound choice the same way (``minVisitPropForLCB`` = 0.15; Q here,
            without the LCB's variance term). Not used by a Gumbel root or a sampled move.
    """

    simulations: int = 800
    c_init: float = 1.25
    c_base: float = 19652.0
    fpu_reduction: float = 0.2
    fpu_reduction_root: float = 0.1
    fpu_value: float | None = None
    root_noise: bool = True
    noise_weight: float = 0.25
    dirichlet_alpha: float = 0.0
    dirichlet_alpha_scale: float = 10.0
    gumbel: bool = False
    gumbel_m: int = 16
    gumbel_c_visit: float = 50.0
    gumbel_c_scale: float = 1.0
    temperature: float = 1.0
    temperature_plies: int = 8
    temperature_final: float = 0.0
    playout_cap: bool = False
    full_prob: float = 0.25
    full_sims: int | None = None
    cheap_sims: int = 100
    node_budget: int = 200_000
    leaves_per_step: int = 1
    virtual_loss: float = 1.0
    max_plies: int = 0
    road_check: bool = True
    root_terminal_check: bool = True
    reuse_tree: bool = True
    tinue_nodes: int = DEFAULT_TINUE_NODES
    flat_endgame_nodes: int = 0
    forced_playouts: bool = False
    forced_k: float = 2.0
    policy_target_pruning: bool = False
    select_q_fraction: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first field out of range."""
        for name in ("tinue_nodes", "flat_endgame_nodes"):  # budgets the players check as integers
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ValueError(f"{name} must be an integer, got {v!r}")
        checks = [
            (self.simulations >= 1, "simulations must be >= 1"),
            (self.c_init > 0, "c_init must be > 0"),
            (self.c_base >= 0, "c_base must be >= 0 (0 = constant c_puct)"),
            (
                self.fpu_reduction >= 0 and self.fpu_reduction_root >= 0,
                "fpu reductions must be >= 0",
            ),
            (self.fpu_value is None or math.isfinite(self.fpu_value), "fpu_value must be finite"),
            (0.0 <= self.noise_weight <= 1.0, "noise_weight must be in [0, 1]"),
            (self.dirichlet_alpha >= 0, "dirichlet_alpha must be >= 0"),
            (self.dirichlet_alpha_scale > 0, "dirichlet_alpha_scale must be > 0"),
            (self.gumbel_m >= 1, "gumbel_m must be >= 1"),
            (self.gumbel_c_visit >= 0 and self.gumbel_c_scale > 0, "gumbel constants out of range"),
            (self.temperature >= 0 and self.temperature_final >= 0, "temperatures must be >= 0"),
            (self.temperature_plies >= 0, "temperature_plies must be >= 0"),
            (0.0 <= self.full_prob <= 1.0, "full_prob must be in [0, 1]"),
            (self.full_sims is None or self.full_sims >= 1, "full_sims must be >= 1"),
            (self.cheap_sims >= 1, "cheap_sims must be >= 1"),
            (self.node_budget >= 2, "node_budget must be >= 2"),
            (1 <= self.leaves_per_step <= 64, "leaves_per_step must be in 1..64"),
            (self.virtual_loss >= 0, "virtual_loss must be >= 0"),
            (self.max_plies >= 0, "max_plies must be >= 0 (0 = no limit)"),
            (0 <= self.tinue_nodes <= MAX_TINUE_NODES, f"tinue_nodes must be in 0..{MAX_TINUE_NODES} (0 = off)"),
            (
                0 <= self.flat_endgame_nodes <= MAX_FLAT_ENDGAME_NODES,
                f"flat_endgame_nodes must be in 0..{MAX_FLAT_ENDGAME_NODES} (0 = off)",
            ),
            (math.isfinite(self.forced_k) and self.forced_k > 0, "forced_k must be > 0 and finite"),
            (0.0 <= self.select_q_fraction <= 1.0, "select_q_fraction must be in [0, 1] (0 = the most visited move)"),
            (
                not (self.gumbel and (self.forced_playouts or self.policy_target_pruning)),
                "forced_playouts and policy_target_pruning work at a PUCT root: set gumbel false",
            ),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)

    # -- derived -----------------------------------------------------------------------------

    @property
    def full_simulations(self) -> int:
        """Simulations of a full search (``full_sims`` or ``simulations``)."""
        return self.simulations if self.full_sims is None else int(self.full_sims)

    @property
    def max_simulations(self) -> int:
        """The largest budget any search of this config uses."""
        if self.playout_cap:
            return max(self.full_simulations, self.cheap_sims)
        return self.simulations

    def temperature_at(self, ply: int) -> float:
        """Move-selection temperature for a root at ``ply`` (plies since the game's start)."""
        return self.temperature if ply < self.temperature_plies else self.temperature_final

    def evaluation(self) -> SearchConfig:
        """A copy for evaluation, arena and play: no noise, no playout cap, argmax moves, no
        forced playouts or policy target pruning."""
        return replace(
            self, root_noise=False, playout_cap=False, temperature_plies=0, temperature_final=0.0,
            forced_playouts=False, policy_target_pruning=False,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchConfig:
        """Build from a mapping (e.g. a Hydra node); unknown keys raise ValueError."""
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown search config keys: {sorted(unknown)}")
        return cls(**dict(d))


# Field annotation -> dtype of its slot in the packed settings (None reads as NaN or -1).
_SETTING_TYPES = {
    "float": np.float64,
    "float | None": np.float64,
    "int": np.int64,
    "int | None": np.int64,
    "bool": np.bool_,
}

#: Layout of the settings the compiled kernels read: every ``SearchConfig`` field whose type is
#: a number or a bool, under its own name (float64, int64 or bool; a ``None`` value reads as NaN
#: in a float field and -1 in an int field), then the code of the chosen rule of each kind
#: (``<kind>_rule``, int64; ``takzero.search.rules.RULES``).
SETTINGS_DTYPE = np.dtype(
    [(f.name, _SETTING_TYPES[f.type]) for f in fields(SearchConfig) if f.type in _SETTING_TYPES]
    + [(f"{kind}_rule", np.int64) for kind in RULE_KINDS],
    align=True,
)


def pack_settings(cfg: SearchConfig) -> np.ndarray:
    """The settings of ``cfg`` as a (1,) array of ``SETTINGS_DTYPE``, for the compiled kernels
    (which read ``settings[0]["field"]``), with the codes of the rules it chooses
    (``takzero.search.rules.rule_codes``)."""
    out = np.zeros(1, dtype=SETTINGS_DTYPE)
    names, dtypes = SETTINGS_DTYPE.names, SETTINGS_DTYPE.fields
    assert names is not None and dtypes is not None  # a structured dtype
    codes = rule_codes(cfg)
    for name in names:
        value = codes[name] if name in codes else getattr(cfg, name)
        if value is None:
            value = np.nan if dtypes[name][0] == np.float64 else -1
        out[0][name] = value
    return out
