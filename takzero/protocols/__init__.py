"""Protocols: takzero speaking to other programs, each protocol its own package.

* :mod:`takzero.protocols.tei` -- TEI (Tak Engine Interface, UCI for Tak):
  :mod:`~takzero.protocols.tei.lines` (the text of each line, one formatter/parser each, and the
  time budget of a ``go``), :mod:`~takzero.protocols.tei.engine` (the engine's session, with
  its option table, its go command, its reader and its players beside it; the command line is
  :mod:`takzero.tei`), :mod:`~takzero.protocols.tei.match`
  (the client of external engines and the match runner; the command line is
  :mod:`takzero.match`);
* :mod:`takzero.protocols.playtak` -- the playtak.com server protocol:
  :mod:`~takzero.protocols.playtak.lines` (the text of each server line),
  :mod:`~takzero.protocols.playtak.bot` (a player as a bot; the command line is
  :mod:`takzero.playtak`), :mod:`~takzero.protocols.playtak.server` (an in-process server for
  tests and ``scripts/playtak_soak.py``).

The room sits above ``matches`` (the TEI match runner uses its openings and results) and below
``pipeline`` and the command-line modules (``tests/test_layering.py``).
"""
