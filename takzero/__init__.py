"""takzero: AlphaZero-style self-play training for Tak (see README.md and docs/design.md).

Importing the package first runs ``takzero.numba_cache.guard``, which removes numba's cached
kernels when a compiled module changed (numba alone would keep a kernel that inlined the old code
of another file).
"""

from takzero.numba_cache import guard as _guard_numba_cache

_guard_numba_cache()
