"""The playtak.com server protocol: the line syntax (:mod:`.lines`), the bot (:mod:`.bot`) and a
test server (:mod:`.server`); see :mod:`takzero.protocols`."""
