"""The draws of numpy's legacy seeded generator (numpy.random.seed(s)
followed by numpy.random.power, randint and gamma), in the standard library,
so that a benchmark client that drew its workload with numpy can be replayed
request for request (bench/lora-validate.py: S-LoRA's trace.py).

What numpy's RandomState does, from its documented legacy stream
(numpy/random/_mt19937.pyx, src/legacy/legacy-distributions.c,
src/distributions/distributions.c; numpy promises this stream stays fixed):

* seed(s) for an integer s: MT19937 initialised by Matsumoto's init_genrand
  (not init_by_array, which Python's random.seed uses), so the state is
  computed here and handed to random.Random.setstate, whose generator is the
  same MT19937;
* a double: (a >> 5, b >> 6) of two 32-bit outputs, (a 2^26 + b) / 2^53,
  which is also random.Random.random();
* standard_exponential: -log(1 - U);
* power(a): (1 - exp(-E))^(1/a), E a standard exponential;
* randint(low, high) (int64): one 32-bit output masked to the next power of
  two above high - 1 - low, drawn again while above it (masked rejection);
* gamma(shape, scale): scale times Marsaglia-Tsang (shape > 1, normals by
  the polar method, which caches its second value), the exponential (shape
  1), or Johnk-like rejection (shape < 1).

The known first values (seed 42: 0.3745401188473625 for random_sample,
6 3 7 4 6 9 2 6 7 4 for randint(0, 10, 10), 0.4967141530112327 for randn)
are checked by tests/cli-lora-validate.sh.
"""
import math
import random


class LegacyRandomState:
    def __init__(self, seed):
        if not 0 <= seed <= 0xFFFFFFFF:
            raise ValueError("seed must be between 0 and 2**32 - 1")
        key = [0] * 624
        s = seed
        for i in range(624):
            key[i] = s
            s = (1812433253 * (s ^ (s >> 30)) + i + 1) & 0xFFFFFFFF
        self._r = random.Random()
        self._r.setstate((3, tuple(key) + (624,), None))
        self._gauss = None

    def uint32(self):
        return self._r.getrandbits(32)

    def double(self):
        return self._r.random()

    def standard_exponential(self):
        return -math.log(1.0 - self.double())

    def power(self, a, size):
        return [math.pow(1.0 - math.exp(-self.standard_exponential()), 1.0 / a)
                for _ in range(size)]

    def randint(self, low, high, size):
        rng = high - 1 - low
        if not 0 <= rng <= 0xFFFFFFFF:
            raise ValueError("randint: range out of 32 bits")
        mask = rng
        for sh in (1, 2, 4, 8, 16):
            mask |= mask >> sh
        out = []
        for _ in range(size):
            v = self.uint32() & mask
            while v > rng:
                v = self.uint32() & mask
            out.append(low + v)
        return out

    def gauss(self):
        if self._gauss is not None:
            g, self._gauss = self._gauss, None
            return g
        while True:
            x1 = 2.0 * self.double() - 1.0
            x2 = 2.0 * self.double() - 1.0
            r2 = x1 * x1 + x2 * x2
            if 0.0 < r2 < 1.0:
                break
        f = math.sqrt(-2.0 * math.log(r2) / r2)
        self._gauss = f * x1
        return f * x2

    def standard_gamma(self, shape):
        if shape == 1.0:
            return self.standard_exponential()
        if shape == 0.0:
            return 0.0
        if shape < 1.0:
            while True:
                u = self.double()
                v = self.standard_exponential()
                if u <= 1.0 - shape:
                    x = math.pow(u, 1.0 / shape)
                    if x <= v:
                        return x
                else:
                    y = -math.log((1.0 - u) / shape)
                    x = math.pow(1.0 - shape + shape * y, 1.0 / shape)
                    if x <= v + y:
                        return x
        b = shape - 1.0 / 3.0
        c = 1.0 / math.sqrt(9.0 * b)
        while True:
            while True:
                x = self.gauss()
                v = 1.0 + c * x
                if v > 0.0:
                    break
            v = v * v * v
            u = self.double()
            if u < 1.0 - 0.0331 * (x * x) * (x * x):
                return b * v
            if math.log(u) < 0.5 * x * x + b * (1.0 - v + math.log(v)):
                return b * v

    def gamma(self, shape, scale, size):
        return [scale * self.standard_gamma(shape) for _ in range(size)]
