"""data.py: sparse Boolean tasks on bit strings of length T (Edelman et al., ICML 2022, Section 5).

A task fixes a support S of s positions, drawn uniformly from the T positions by the seed, and a
function g of the s bits in S. Inputs are X in {0,1}^T (one token per bit); the label is

    y = g(X[:, S])  in {0, 1}     (1 means "true": AND of the bits, odd parity, majority of ones)

This is the only label convention in the project: 0/1 labels, 1 = true, scored by a logistic loss.

Tasks, and the bit distribution that makes the labels balanced (P(y = 1) = 1/2):
  "and"      y = 1 iff all s bits are 1;  bits Bernoulli(2^(-1/s))      (the paper's 3-way AND)
  "or"       y = 1 iff some bit is 1;     bits Bernoulli(1 - 2^(-1/s))
  "parity"   y = 1 iff an odd number of the s bits are 1;  fair bits
  "majority" y = 1 iff more than s/2 bits are 1 (s odd);   fair bits
  "junta"    y = table[bits as a binary number], a random balanced truth table on 2^s rows
             (exactly half ones, so it is never constant); fair bits

Everything is drawn from a numpy Generator passed in explicitly, so a seed reproduces it; a
training set and a test set drawn one after the other from the same Generator are independent
draws from the same distribution. This file needs numpy alone; copy it anywhere.

The exact count of the hypotheses a training set leaves, and the paper's data protocol built on
it, are in hypotheses.py; this file is the tasks alone.

The file reads top to bottom: the task (make_task, SparseTask), then the argument checks.
"""
import math
import os
import reprlib

import numpy as np

TASKS = ("and", "or", "parity", "majority", "junta")
JUNTA_MAX_S = 24  # the junta's truth table has 2^s entries


def bit_probability(name, s):
    """P(bit = 1) that makes P(label = 1) = 1/2 for task `name` with sparsity s."""
    check_task(name)
    check_number("s", s, INTS, 1)
    if name == "and":
        return 2.0 ** (-1.0 / s)
    if name == "or":
        return 1.0 - 2.0 ** (-1.0 / s)
    return 0.5


class SparseTask:
    """An s-sparse Boolean function of T bits: support S [s] (sorted), bit probability p.

    make it with `make_task`; draw data with `task.sample(m, rng)`; label any X with `task.label`.
    """

    def __init__(self, name, T, s, S, table=None):
        check_task(name)
        self.name, self.T = name, check_number("T", T, INTS, 1)
        self.s = check_number("s", s, INTS, 1, T + 1, f"an integer from 1 to T = {T}")
        self.S = check_support(S, T, s)
        self.table = table
        self.p = bit_probability(name, s)

    def label(self, X):
        """X [m, T] bits (0/1 numbers or bools) -> [m] labels in {0, 1} (uint8); any other value
        (NaN, 2, -1, ...) anywhere in X is a ValueError naming it."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.T:
            raise ValueError(f"X must have shape [m, {self.T}], got {X.shape}")
        return self._label(check_bits("X", X))

    def _label(self, X):  # X [m, T], known to hold bits
        bits = X[:, self.S].astype(np.intp)
        k = bits.sum(1)
        if self.name == "and":
            y = k == self.s
        elif self.name == "or":
            y = k > 0
        elif self.name == "parity":
            y = k % 2 == 1
        elif self.name == "majority":
            y = 2 * k > self.s
        else:  # junta: the bits in S, first position most significant, index the truth table
            y = self.table[bits @ (1 << np.arange(self.s - 1, -1, -1))]
        return y.astype(np.uint8)

    def sample(self, m, rng):
        """m i.i.d. examples: X [m, T] uint8 bits ~ Bernoulli(p), y [m] uint8 labels.

        Row i uses the generator's next T uniforms, so the first m rows of sample(m', rng) for
        m' >= m equal sample(m, rng) from the same generator state: one seed is one stream."""
        m = check_number("m", m, INTS, 1)
        check_rng(rng)
        check_sample_size(m, self.T)
        X = (rng.random((m, self.T)) < self.p).astype(np.uint8)
        return X, self._label(X)

    def __repr__(self):
        return f"SparseTask({self.name!r}, T={self.T}, s={self.s}, S={self.S.tolist()})"


def make_task(name, T, s, rng):
    """Draw the support S (uniformly, s of T positions) and, for "junta", the truth table."""
    check_task(name)
    T = check_number("T", T, INTS, 1)
    s = check_number("s", s, INTS, 1, T + 1, f"an integer from 1 to T = {T}")
    if name == "junta" and s > JUNTA_MAX_S:
        raise ValueError(f"junta keeps a truth table of 2^s rows: s must be <= {JUNTA_MAX_S}, "
                         f"got s={s}")
    if name == "majority" and s % 2 == 0:
        raise ValueError(f"majority needs an odd s (no ties), got s={s}")
    rng = check_rng(rng)
    S = np.sort(rng.choice(T, size=s, replace=False))
    table = None
    if name == "junta":
        table = rng.permutation(np.arange(2 ** s) % 2).astype(np.uint8)
    return SparseTask(name, T, s, S, table)


# ---------------------------------------------------------------- argument checks --------------
# One vocabulary for every check (WrongType .. check_rng): attn.py, data.py and optim.py each keep
# the part they use, word for word (each file stands alone; test_all.py pins the copies equal).
# Then data.py's own: the task's name, the support, a sample's size in memory, bits.

class WrongType(ValueError, TypeError):
    """A wrong type: a ValueError like every refusal here, a TypeError for callers expecting one."""


def describe(v):  # what a caller gave, in a few words: 5, 'cls', [[0, 1], ...], an array's shape
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape} and dtype {v.dtype}"
    plain = (type(None), int, float, complex, str, list, tuple, dict, type, np.generic, np.dtype)
    return reprlib.repr(v) if isinstance(v, plain) else f"an object of type {type(v).__name__}"


def refuse(name, v, what, right_type, hint=""):  # the one-line error; WrongType: a wrong type
    return (ValueError if right_type else WrongType)(
        f"{name} must be {what}, got {describe(v)}{hint}")


INTS, REALS = (int, np.integer), (int, float, np.integer, np.floating)
FLOAT_MAX = float(np.finfo(np.float64).max)       # 10**400 is an int no float holds: refused


def check_number(name, v, types, lo, hi=math.inf, what=None, bools=False):
    """v (a numpy scalar as the Python number) when it is of `types` (INTS or REALS; bools only
    where `bools`), lo <= v < hi and within a float's range; else refuse's one line "{name} must
    be {what}", '{lo}' and '{hi}' filled in (by default "an integer >= {lo}" or "a finite number
    >= {lo}", and "< {hi}" where hi is finite)."""
    right_type = isinstance(v, types) and (bools or not isinstance(v, (bool, np.bool_)))
    if not (right_type and lo <= v < hi and -FLOAT_MAX <= v <= FLOAT_MAX):
        if what is None:
            what = ("an integer" if types == INTS else "a finite number") + " >= {lo}" + (
                " and < {hi}" if hi < math.inf else "")
        raise refuse(name, v, what.format(lo=lo, hi=hi), right_type)
    return v.item() if isinstance(v, np.generic) else v


def check_rng(rng, optional=False):  # a numpy Generator; None too where optional (dropout off)
    if not (isinstance(rng, np.random.Generator) or (optional and rng is None)):
        raise refuse("rng", rng, "a numpy Generator such as np.random.default_rng(seed)"
                     + " or None" * optional, False)
    return rng


def check_task(name):
    if not (isinstance(name, str) and name in TASKS):
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(TASKS)}")


def check_support(S, T, s):
    """S as an intp array of s distinct positions in [0, T), sorted (array-likes are read)."""
    A = np.asarray(S)
    if not (A.dtype.kind in "iu" and A.shape == (s,) and A.min() >= 0 and A.max() < T
            and np.all(A[:-1] < A[1:])):                         # increasing: distinct too
        raise ValueError(f"S must be {s} distinct positions in [0, {T}) in increasing order (the "
                         f"support, s={s}), got {repr(A.tolist())[:80]}")
    return A.astype(np.intp)


def physical_memory():
    """Bytes of physical memory (os.sysconf), or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_sample_size(m, T, budget=0.5):
    """ValueError naming m and T, before anything is allocated, when drawing m samples of T bits
    (T float64 uniforms and T uint8 bits per sample) would take more than `budget` of the
    machine's physical memory."""
    m, T = check_number("m", m, INTS, 0), check_number("T", T, INTS, 1)
    need, mem = 9 * m * T, physical_memory()
    if need > 2**62 or (mem and need > budget * mem):   # 2**62 bytes: more than any machine
        short = lambda v: str(v) if v < 10**15 else f"{str(v)[0]}.{str(v)[1:3]}e+{len(str(v))-1}"
        gib = f"{need / 2**30:.1f}" if need <= 2**62 else short(need >> 30)
        raise ValueError(f"m={short(m)} samples of T={short(T)} bits need about {gib} GiB to "
                         f"draw; this machine allows {budget * mem / 2**30:.1f} GiB: ask for fewer")


def check_bits(name, A):
    """A as an array holding only bits: 0/1 numbers or bools, else a one-line ValueError naming
    the first bad value (NaN, 2, -1, 0.5, ...) and where it is."""
    A = np.asarray(A)
    if A.dtype == np.bool_:
        return A
    if A.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold bits 0/1 (numbers or bools), got dtype {A.dtype}")
    if A.size == 0:
        return A
    if A.dtype.kind in "iu":
        ok = A.min() >= 0 and A.max() <= 1
    else:
        ok = bool(((A == 0) | (A == 1)).all())
    if not ok:
        where = tuple(int(i) for i in np.argwhere((A != 0) & (A != 1))[0])
        raise ValueError(f"{name} must hold bits 0/1 (or bools), got {A[where].item()!r} "
                         f"at index {list(where)}")
    return A
