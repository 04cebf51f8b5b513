"""Random numbers of the search: one splitmix64 stream per game (Steele, Lea & Flood 2014, "Fast
splittable pseudorandom number generators"), so that a game's search does not depend on the other
games of the batch.

A stream is one uint64 state per game, ``rng (G,) uint64``; ``next_u64`` adds the golden-ratio
increment and returns the splitmix64 output of the new state. The compiled draws (numba ``@njit``,
``cache=True``) are uniform, normal (Box-Muller), Gumbel, log-Gamma (Marsaglia & Tsang 2000) and
Dirichlet. The Python seeding (``game_seed``, ``stream_state``) calls the same compiled
``splitmix64``: there is one implementation of the output function.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "draw_dirichlet",
    "game_seed",
    "log_gamma",
    "next_u64",
    "rand_gumbel",
    "rand_normal",
    "rand_uniform",
    "splitmix64",
    "stream_state",
]

_INV_2_53 = 1.0 / 9007199254740992.0
_MASK64 = (1 << 64) - 1
#: The splitmix64 increment (2**64 / golden ratio).
GOLDEN = 0x9E3779B97F4A7C15


@njit(cache=True, error_model="numpy")
def splitmix64(x: np.uint64) -> np.uint64:
    """The splitmix64 output function of the state ``x`` (uint64; arithmetic modulo 2**64)."""
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, error_model="numpy")
def next_u64(rng: np.ndarray, g: int | np.integer) -> np.uint64:
    """Advance game ``g``'s stream (``rng`` (G,) uint64) and return 64 random bits."""
    s = rng[g] + np.uint64(GOLDEN)
    rng[g] = s
    return splitmix64(s)


@njit(cache=True, error_model="numpy")
def rand_uniform(rng: np.ndarray, g: int | np.integer) -> float:
    """Uniform float64 in the open interval (0, 1) from game ``g``'s stream (the top 53 bits)."""
    return (np.float64(next_u64(rng, g) >> np.uint64(11)) + 0.5) * _INV_2_53


@njit(cache=True, error_model="numpy")
def rand_normal(rng: np.ndarray, g: int | np.integer) -> float:
    """Standard normal float64 (Box-Muller, the cosine branch) from game ``g``'s stream."""
    u1 = rand_uniform(rng, g)
    u2 = rand_uniform(rng, g)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


@njit(cache=True, error_model="numpy")
def rand_gumbel(rng: np.ndarray, g: int | np.integer) -> float:
    """Standard Gumbel float64, ``-log(-log(U))``, from game ``g``'s stream."""
    return -np.log(-np.log(rand_uniform(rng, g)))


@njit(cache=True, error_model="numpy")
def log_gamma(rng: np.ndarray, g: int | np.integer, alpha: float) -> float:
    """log of a Gamma(alpha, 1) sample (alpha > 0): Marsaglia & Tsang (2000); for alpha < 1 the
    boost Gamma(a) = Gamma(a + 1) * U**(1/a), kept in log space so tiny alphas do not underflow."""
    a = alpha
    boost = 0.0
    if a < 1.0:
        boost = np.log(rand_uniform(rng, g)) / a
        a += 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    while True:
        x = rand_normal(rng, g)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = rand_uniform(rng, g)
        if np.log(u) < 0.5 * x * x + d - d * v + d * np.log(v):
            return np.log(d * v) + boost


@njit(cache=True, error_model="numpy")
def draw_dirichlet(rng: np.ndarray, g: int | np.integer, out: np.ndarray, k: int, alpha: float) -> None:
    """Write a Dir(alpha, ..., alpha) sample of length ``k`` into ``out[:k]`` (float array): Gamma
    draws normalised to sum 1, through their logs (a max shift first, so no underflow to 0/0)."""
    mx = -np.inf
    for i in range(k):
        lg = log_gamma(rng, g, alpha)
        out[i] = lg
        if lg > mx:
            mx = lg
    s = 0.0
    for i in range(k):
        e = np.exp(np.float64(out[i]) - mx)
        out[i] = e
        s += e
    for i in range(k):
        out[i] = out[i] / s


def _mix(x: int) -> int:
    """``splitmix64`` of the Python int ``x`` modulo 2**64, as an int."""
    with np.errstate(over="ignore"):  # plain Python (NUMBA_DISABLE_JIT): uint64 products wrap
        return int(splitmix64(np.uint64(x & _MASK64)))


def game_seed(seed: int, g: int) -> int:
    """Initial random-stream state (uint64 as int) of game ``g`` of a search seeded with ``seed``:
    ``splitmix64(splitmix64(seed) ^ ((g + 1) * GOLDEN))`` modulo 2**64."""
    return _mix(_mix(int(seed)) ^ ((g + 1) * GOLDEN))


def stream_state(seed: int) -> int:
    """Stream state (uint64 as int) for an explicit per-game seed (``BatchedMCTS.reset(...,
    seed=...)``): ``splitmix64(seed ^ 0xD1B54A32D192ED03)`` modulo 2**64."""
    return _mix(int(seed) ^ 0xD1B54A32D192ED03)
