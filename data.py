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
"""
import numpy as np

TASKS = ("and", "or", "parity", "majority", "junta")
JUNTA_MAX_S = 24  # the junta's truth table has 2^s entries


def _int_arg(name, v, lo, hi=None):
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {v!r} ({type(v).__name__})")
    if v < lo or (hi is not None and v > hi):
        allowed = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise ValueError(f"{name} must be {allowed}, got {v}")
    return int(v)


def _generator(rng):
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator (np.random.default_rng(seed)), "
                         f"got {type(rng).__name__}")
    return rng


def bit_probability(name, s):
    """P(bit = 1) that makes P(label = 1) = 1/2 for task `name` with sparsity s."""
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
        self.name, self.T, self.s = name, T, s
        self.S = np.asarray(S, dtype=np.intp)
        self.table = table
        self.p = bit_probability(name, s)

    def label(self, X):  # [m, T] bits -> [m] labels in {0, 1} (uint8)
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.T:
            raise ValueError(f"X must have shape [m, {self.T}], got {X.shape}")
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
        """m i.i.d. examples: X [m, T] uint8 bits ~ Bernoulli(p), y [m] uint8 labels."""
        m = _int_arg("m", m, 1)
        X = (_generator(rng).random((m, self.T)) < self.p).astype(np.uint8)
        return X, self.label(X)

    def __repr__(self):
        return f"SparseTask({self.name!r}, T={self.T}, s={self.s}, S={self.S.tolist()})"


def make_task(name, T, s, rng):
    """Draw the support S (uniformly, s of T positions) and, for "junta", the truth table."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; allowed: {', '.join(TASKS)}")
    T = _int_arg("T", T, 1)
    s = _int_arg("s", s, 1, T)
    if name == "junta" and s > JUNTA_MAX_S:
        raise ValueError(f"junta keeps a truth table of 2^s rows: s must be <= {JUNTA_MAX_S}, "
                         f"got s={s}")
    if name == "majority" and s % 2 == 0:
        raise ValueError(f"majority needs an odd s (no ties), got s={s}")
    rng = _generator(rng)
    S = np.sort(rng.choice(T, size=s, replace=False))
    table = None
    if name == "junta":
        table = rng.permutation(np.arange(2 ** s) % 2).astype(np.uint8)
    return SparseTask(name, T, s, S, table)
