"""Matches between in-process players: the game loop, openings, results and statistics.

* :mod:`takzero.matches.games` -- the one game loop for in-process players and batched networks
  (``play_games``; ``play_game``, ``run_match`` and ``play_match`` are thin calls of it);
* :mod:`takzero.matches.openings` -- random openings and openings files;
* :mod:`takzero.matches.results` -- ``GameRecord`` (with PTN output) and ``MatchResult``;
* :mod:`takzero.matches.stats` -- Elo, confidence intervals (trinomial, pentanomial, Wilson), SPRT.

Matches between external TEI engines (processes, clocks, forfeits) are a protocol's:
:mod:`takzero.protocols.tei.match`.
"""
