"""Output of game records to people and disks, above the rules room ``game`` (which imports
nothing of it):

* :mod:`takzero.io.files` -- atomic file writes (temp file beside the target, then ``os.replace``)
  used by every user-facing output of the package and scripts/, and ``write_ptn_file``;
* :mod:`takzero.io.ptn_ninja` -- PTN Ninja links (over :mod:`takzero.io.lz_string`, lz-string's
  URI-safe codec);
* :mod:`takzero.io.machine` -- the machine's memory (``machine_memory``: the run's memory checks
  and the TEI engine's ``TreeNodes`` bound share it);
* :mod:`takzero.io.picture` -- board pictures (matplotlib imported inside its functions, so the
  room stays light).

Reading and writing the PTN and TPS text stays in ``game``: it is the notation of the rules.
"""
