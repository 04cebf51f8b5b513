"""Players: one interface for matches, the play CLI and the TEI engine, the fixed baselines, the
network player and the table of player specs.

* :mod:`takzero.players.base` -- the :class:`Player` protocol, :class:`PlayerMove`,
  :class:`BasePlayer` (with the anytime ``think`` under a :class:`Limit`), :class:`BatchSearch`
  (many games of a batchable player searched together);
* :mod:`takzero.players.baselines` -- :class:`RandomPlayer`, :class:`GreedyPlayer` (compiled);
* :mod:`takzero.players.uct` -- :class:`UCTPlayer` (compiled UCT with random rollouts);
* :mod:`takzero.players.network` -- :class:`NetworkPlayer` (MCTS guided by a network) and
  :class:`NetworkSearch` (the one search path of a network in play);
* :mod:`takzero.players.registry` -- player specs (``random``, ``greedy``, ``uct[:N]``,
  ``model:PATH[:N]``; ``tei:[OPTS:]CMD`` engines are parsed there and started by
  ``takzero.protocols.tei.player``): :func:`make_player`, :func:`check_spec`, :func:`help_text`.

The names below are re-exported so that ``from takzero.players import make_player, UCTPlayer``
works.
"""

from takzero.players.base import (
    BasePlayer,
    BatchSearch,
    Limit,
    Player,
    PlayerMove,
    Progress,
    as_player_move,
)
from takzero.players.baselines import GreedyPlayer, RandomPlayer, greedy_move
from takzero.players.network import (
    DEFAULT_NETWORK_SIMULATIONS,
    NETWORK_CHUNK,
    NetworkPlayer,
    NetworkSearch,
)
from takzero.players.registry import (
    KINDS,
    PlayerKind,
    check_spec,
    help_text,
    make_player,
    spec_label,
    spec_syntax,
)
from takzero.players.uct import (
    DEFAULT_EXPLORATION,
    DEFAULT_ROLLOUT_PLIES,
    DEFAULT_SIMULATIONS,
    UCTPlayer,
    rollout,
    uct_search,
)

__all__ = [
    "DEFAULT_EXPLORATION",
    "DEFAULT_NETWORK_SIMULATIONS",
    "DEFAULT_ROLLOUT_PLIES",
    "DEFAULT_SIMULATIONS",
    "KINDS",
    "NETWORK_CHUNK",
    "BasePlayer",
    "BatchSearch",
    "GreedyPlayer",
    "Limit",
    "NetworkPlayer",
    "NetworkSearch",
    "Player",
    "PlayerKind",
    "PlayerMove",
    "Progress",
    "RandomPlayer",
    "UCTPlayer",
    "as_player_move",
    "check_spec",
    "greedy_move",
    "help_text",
    "make_player",
    "rollout",
    "spec_label",
    "spec_syntax",
    "uct_search",
]
