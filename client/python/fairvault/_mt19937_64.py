"""MT19937-64 (C++11 ``std::mt19937_64``) in numpy, so that a mixture's decisions drawn by
``fairvault.models`` equal ``fairvault predict --seed S`` row for row (docs/api.md, "Applying a
mixture to one row"). The company's own randomness, not a privacy mechanism."""

from __future__ import annotations

import numpy as np
from fairvault.errors import InvalidInput

_N, _M = 312, 156
_MATRIX_A = np.uint64(0xB5026F5AA96619E9)
_UPPER = np.uint64(0xFFFFFFFF80000000)
_LOWER = np.uint64(0x7FFFFFFF)
_MASK64 = (1 << 64) - 1


def _u(v: int) -> np.uint64:
    return np.uint64(v)


class MT19937_64:
    """The generator ``std::mt19937_64 gen(seed)``: the same 64-bit outputs in the same order.

    >>> MT19937_64(5489).raw(10000)[-1]  # the standard's check value for the 10000th output
    9981545732273789042
    """

    def __init__(self, seed: int):
        if not 0 <= int(seed) <= _MASK64:
            raise InvalidInput(f"seed must be an integer in 0..2^64-1 (got {seed})")
        mt = [int(seed)]
        for i in range(1, _N):
            prev = mt[-1]
            mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & _MASK64)
        self._mt = np.array(mt, dtype=np.uint64)
        self._index = _N  # outputs of the current block already used

    def _twist(self) -> None:
        # The standard's loop, i = 0..311 in order, in three vector steps that respect its
        # dependencies: entries below 156 read only old values; 156..310 read mt[i - 156],
        # already new; 311 reads the new mt[0] and mt[155].
        mt = self._mt

        def mix(cur, nxt, far):
            y = (cur & _UPPER) | (nxt & _LOWER)
            return far ^ (y >> _u(1)) ^ np.where((y & _u(1)) != 0, _MATRIX_A, _u(0))

        new = np.empty_like(mt)
        new[:_M] = mix(mt[:_M], mt[1:_M + 1], mt[_M:])
        new[_M:_N - 1] = mix(mt[_M:_N - 1], mt[_M + 1:], new[:_N - 1 - _M])
        new[_N - 1] = mix(mt[_N - 1:], new[:1], new[_M - 1:_M])[0]
        self._mt = new
        self._index = 0

    @staticmethod
    def _temper(y: np.ndarray) -> np.ndarray:
        y = y ^ ((y >> _u(29)) & _u(0x5555555555555555))
        y = y ^ ((y << _u(17)) & _u(0x71D67FFFEDA60000))
        y = y ^ ((y << _u(37)) & _u(0xFFF7EEE000000000))
        return y ^ (y >> _u(43))

    def raw(self, n: int) -> np.ndarray:
        """The next ``n`` outputs as uint64."""
        out = np.empty(n, dtype=np.uint64)
        filled = 0
        while filled < n:
            if self._index >= _N:
                self._twist()
            take = min(n - filled, _N - self._index)
            out[filled:filled + take] = self._temper(self._mt[self._index:self._index + take])
            self._index += take
            filled += take
        return out

    def draw_indices(self, m: int, n: int) -> np.ndarray:
        """``n`` indices uniform in [0, m), as model_apply.cc's DrawComponent draws them: one
        output r, redrawn while r >= 2^64 - (2^64 mod m), then r mod m."""
        if m < 1:
            raise InvalidInput(f"m must be >= 1 (got {m})")
        limit = _u(_MASK64 - ((1 << 64) % m))  # the largest accepted r
        out = np.empty(n, dtype=np.int64)
        filled = 0
        while filled < n:
            if self._index >= _N:
                self._twist()
            # Within one block: accept outputs up to the first rejected one (probability
            # m / 2^64 each), which is consumed and skipped.
            take = min(n - filled, _N - self._index)
            r = self._temper(self._mt[self._index:self._index + take])
            rejected = np.nonzero(r > limit)[0]
            accepted = take if rejected.size == 0 else int(rejected[0])
            out[filled:filled + accepted] = (r[:accepted] % _u(m)).astype(np.int64)
            filled += accepted
            self._index += accepted + (0 if rejected.size == 0 else 1)
        return out
