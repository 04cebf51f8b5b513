"""TEI, the Tak Engine Interface: the line syntax (:mod:`.lines`), the engine (:mod:`.engine`) and
the engine match runner (:mod:`.match`); see :mod:`takzero.protocols`."""
