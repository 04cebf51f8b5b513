"""Matches between players: the in-process game loop, openings, results, statistics and the TEI
engine match runner.

* :mod:`takzero.matches.games` -- the one game loop for in-process players and batched networks
  (``play_games``; ``play_game``, ``run_match`` and ``play_match`` are thin calls of it);
* :mod:`takzero.matches.openings` -- random openings and openings files;
* :mod:`takzero.matches.results` -- ``GameRecord`` (with PTN output) and ``MatchResult``;
* :mod:`takzero.matches.stats` -- Elo, confidence intervals (trinomial, pentanomial, Wilson), SPRT;
* :mod:`takzero.matches.tei_match` -- matches between external TEI engines (its own loop: clocks,
  processes, forfeits);
* :mod:`takzero.matches.tei_protocol` -- the text of the TEI lines, shared by that client and the
  engine ``takzero.tei``.
"""
