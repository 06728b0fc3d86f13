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
it, are the studies' (studies/lib/hypotheses.py); this file is the tasks alone.

The file reads top to bottom: the task (SparseTask, made by make_task), then the checks of its
doors (make_task or SparseTask, task.sample, task.label, bit_probability): each refusal a one-line
ValueError naming the value and what is allowed; nothing inside checks again.
"""
import numpy as np

TASKS = ("and", "or", "parity", "majority", "junta")
JUNTA_MAX_S = 24  # the junta's truth table has 2^s entries


def bit_probability(name, s):
    """P(bit = 1) that makes P(label = 1) = 1/2 for task `name` (of TASKS) with sparsity s >= 1."""
    _check_task(name, 2**62, s)                         # s of any T
    if name == "and":
        return 2.0 ** (-1.0 / s)
    if name == "or":
        return 1.0 - 2.0 ** (-1.0 / s)
    return 0.5


class SparseTask:
    """An s-sparse Boolean function of T bits, drawn by rng: the support S [s] (sorted, uniformly s
    of the T positions) and, for "junta", the truth table [2^s] (0/1, half of them 1; else None);
    p, the bits' probability of 1. Draw data with `task.sample(m, rng)`; label any X with
    `task.label(X)`. make_task(name, T, s, rng) is the same call."""

    def __init__(self, name, T, s, rng):
        self.T, self.s = _check_task(name, T, s)
        _check_arg(isinstance(rng, np.random.Generator), "rng", "a numpy Generator", repr(rng))
        self.name, self.p = name, bit_probability(name, self.s)
        self.S = np.sort(rng.choice(self.T, size=self.s, replace=False)).astype(np.intp)
        self.table = (rng.permutation(np.arange(2 ** self.s) % 2).astype(np.uint8)
                      if name == "junta" else None)

    def label(self, X):
        """X [m, T] bits (0/1 numbers or bools) -> [m] labels in {0, 1} (uint8)."""
        X = np.asarray(X)
        ok = X.dtype.kind in "biuf" and X.shape[1:] == (self.T,) and np.all((X == 0) | (X == 1))
        _check_arg(ok, "X", f"bits 0/1 (or bools) of shape [m, {self.T}]", ok or f"shape "
                   f"{X.shape}, dtype {X.dtype}, non-bits {X[(X != 0) & (X != 1)][:3]}")
        return self._label(X)

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
        m' >= m equal sample(m, rng) from the same generator state: one seed is one stream. A
        sample larger than memory is numpy's MemoryError."""
        _check_arg(_check_int(m, 2**62), "m", "an integer from 1 to 2**62", repr(m))
        _check_arg(isinstance(rng, np.random.Generator), "rng", "a numpy Generator", repr(rng))
        X = (rng.random((m, self.T)) < self.p).astype(np.uint8)
        return X, self._label(X)

    def __repr__(self):
        return f"SparseTask({self.name!r}, T={self.T}, s={self.s}, S={self.S.tolist()})"


def make_task(name, T, s, rng):
    """The task `name` (of TASKS) on T bits with sparsity s, its support S (and a junta's truth
    table) drawn by rng: SparseTask(name, T, s, rng)."""
    return SparseTask(name, T, s, rng)


# ---------------------------------------------------------------- the doors' checks ------------
# One ValueError in one line, naming the value and what is allowed; nothing inside checks again.

def _check_arg(ok, name, allowed, got):  # got: the caller's value, as the message shows it
    if not ok:
        raise ValueError(f"{name} must be {allowed}, got {' '.join(got.split()):.80}")


def _check_int(v, hi):  # is v an integer (not a bool) from 1 to hi?
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 1 <= v <= hi


def _check_task(name, T, s):  # -> (T, s) as Python ints
    _check_arg(name in TASKS, "task", f"one of {', '.join(TASKS)}", repr(name))
    _check_arg(_check_int(T, 2**62), "T", "an integer from 1 to 2**62", repr(T))
    _check_arg(_check_int(s, min(T, JUNTA_MAX_S if name == "junta" else T)) and (
        name != "majority" or s % 2), "s", "an integer from 1 to T, odd for majority, <= "
        f"{JUNTA_MAX_S} for a junta", repr(s))
    return int(T), int(s)
