"""hypotheses.py (studies/lib): the hypotheses a training set leaves, exactly (Edelman et al., Section
5).

The paper's data protocol: "m samples were drawn from this distribution to form a training set
(rejecting training sets which were compatible with multiple hypotheses), and 10^4 samples were
drawn from the same distribution as a holdout validation set". This file makes that executable
for data.py's tasks: `count_compatible` counts the hypotheses a training set leaves,
`sample_unambiguous` is the rejection sampler, and `first_identifying_m` and
`ambiguity_probability` measure the statistical limit, the m below which S is not yet determined.
Beside them, GF(2) elimination (`learn_sparse_parity`): sparse parity from about T samples.

The file reads top to bottom: enumerating s-subsets, the counts per task ("and" by hitting sets,
"parity" by GF(2) elimination, the rest by brute force), then the protocol built on them.
Needs numpy and data.py.
"""
import math

import numpy as np

from data import JUNTA_MAX_S, SparseTask, TASKS, make_task

from studies.lib.checks import INTS, check_bits, check_number, check_rng, check_sample_size

BRUTE_FORCE_MAX = 2_000_000  # most candidate supports (or parity solutions) a count may visit
WORK_MAX = 5e9               # "and"/"or": most elementary steps (~1 ns each) one count may take
SOS_MAX_ROWS = 18            # "and"/"or": inclusion-exclusion over at most this many negatives
SIZE_MAX = 2 ** 62           # most samples or positions an argument may name (none fits memory)
SETS_MAX = 10 ** 6           # most training sets one call draws (studies.sweep limit --sets's bound)


# ------------------------------------------------------------------- what the functions accept
# Every public function checks its arguments first: a bad one is one ValueError or TypeError
# naming it and what is allowed (never an AttributeError, an OverflowError or a hang).

def _int(name, v, lo, hi=SIZE_MAX):
    """v as an int in [lo, hi] (numpy integers too; bools, floats, arrays refused); hi None:
    SIZE_MAX."""
    hi = SIZE_MAX if hi is None else hi
    return check_number(name, v, INTS, lo, hi + 1, "an integer from {lo} to " + (
        "2**62" if hi == SIZE_MAX else str(hi)))


def _bits(name, A, ndim=None):
    """A as an array of bits 0/1 (numbers or bools) with `ndim` dimensions, else one line."""
    try:
        A = np.asarray(A)
    except (ValueError, TypeError):
        raise ValueError(f"{name} must be an array of bits 0/1, got a ragged "
                         f"{type(A).__name__}") from None
    A = check_bits(name, A)
    if ndim is not None and A.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension{'s' * (ndim > 1)}, got shape "
                         f"{A.shape}")
    return A


def _hitting_args(N, r, limit):
    """The arguments of the hitting-set counts: N [k, n] bits (True = 1), r >= 0 columns to
    choose, limit >= 1 an integer or math.inf. -> (N as bool, r, limit)."""
    N = _bits("N", N, 2).astype(bool, copy=False)
    r = _int("r", r, 0)
    if not (isinstance(limit, float) and limit == math.inf):
        limit = _int("limit", limit, 1, None)   # an integer cap, or math.inf for none
    return N, r, limit


# ------------------------------------------------------- hypotheses compatible with a training set
# The hypothesis class for a task with sparsity s (Section 5's "multiple hypotheses"): one
# hypothesis per s-subset S' of the T positions, labelling x by g(x[S']).
#   and / or / parity / majority: g is the task's function, fixed by the name. Different S' give
#       different functions, so counting subsets counts distinct functions.
#   junta: g is ANY function of s bits (any truth table, not only the task's one), so S' is
#       compatible iff the labels are a function of the bits in S' on the training rows, i.e. no
#       two rows agree on X[:, S'] and differ in y. A hypothesis is the support S' alone: the
#       table off the patterns seen is not counted. Caveat: a balanced table can ignore one of its
#       bits (12 of the 70 tables for s = 3); then every s-subset holding the bits it reads is
#       compatible, no training set leaves exactly one, and sample_unambiguous raises.
# A training set is X [m, T] bits, y [m] labels; the true S is always compatible with its own data.

def _subsets(n, k, chunk):
    """All k-subsets of range(n), as int arrays [B, k] with B <= chunk (each row decreasing).

    Unranks ranks lo..hi-1 in the combinatorial number system (rank = sum_i C(c_i, i)), so a
    chunk costs O(B k log n) and no Python loop runs per subset."""
    total = math.comb(n, k)
    if k == 0:
        yield np.zeros((1, 0), np.intp)
        return
    tabs, col = [], np.ones(n)                  # col[c] = C(c, i - 1); float64 is exact < 2^53
    for i in range(1, k + 1):
        col = np.concatenate([[0.0], np.cumsum(col)[:-1]])      # C(c, i) = sum_h<c C(h, i-1)
        tabs.append(np.minimum(col, 2.0 ** 62).astype(np.int64))        # beyond total: only order
    for lo in range(0, total, chunk):
        rank = np.arange(lo, min(lo + chunk, total), dtype=np.int64)
        out = np.empty((len(rank), k), np.intp)
        for i in range(k, 0, -1):               # c_i = the largest c with C(c, i) <= rank
            c = np.searchsorted(tabs[i - 1], rank, side="right") - 1
            rank = rank - tabs[i - 1][c]
            out[:, k - i] = c
        yield out


def _pack_columns(B):
    """B [k, n] bool -> [n, ceil(k/64)] uint64: column j's k bits packed in words."""
    k, n = B.shape
    packed = np.packbits(B, axis=0, bitorder="little")                 # [ceil(k/8), n]
    nb = -(-max(k, 1) // 64) * 8
    out = np.zeros((n, nb), np.uint8)
    out[:, :packed.shape[0]] = packed.T
    return out.view(np.uint64)


def _big(n):  # an exact integer, in 3 significant digits
    return f"{n:.3g}" if n < 1e300 else f"about 10^{len(str(n)) - 1}"


_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], np.int64)


def _popcount(W):  # W [B, w] uint64 -> [B] number of set bits per row
    return _POPCOUNT8[np.ascontiguousarray(W).view(np.uint8)].sum(1)


# "and": a compatible S' lies inside P = the positions that are 1 in every positive row (all T
# positions if there is no positive), and every negative row must have a 0 somewhere in S'. With
# N [k, |P|] = the negatives restricted to P (True = 1), the count is the number of s-subsets of
# P's columns that "hit" every row of N (contain a column where the row is 0): hitting sets.
# Exact methods, each picked per call by its estimated cost (units of about 1 ns):
#   enumerate  every s-subset of P, its negatives' bits packed in 64-bit words: C(|P|, s) s k/64;
#   inclusion-exclusion over the k negatives: sum over U subset of rows of (-1)^|U| C(g(U), s),
#              g(U) = columns that are 1 in all rows of U, by a superset-sum over 2^k: k 2^k;
#   branch     on the row j with fewest zeros: a hitting set contains one of j's zero columns
#              z_1..z_q; partitioned by the first one it contains (take z_i, drop z_1..z_i-1),
#              each part is a hitting-set count for s-1 on the rows z_i leaves unhit.
# Before choosing, every node drops columns that cannot be in a hitting set: the r chosen columns
# must hit all k rows, so column c needs hits(c) + (the r-1 largest other hits) >= k. Random
# negatives each hit few columns of P, so this prunes most branches at once.
# Typical training sets (m >= ~40 at T = 10^4, half positives) leave |P| = s + a few, and the
# count is an enumeration of a few hundred subsets: about 1 ms, dominated by reading X.

class Work:
    """A budget of elementary steps for one count; exceeding it is a ValueError saying so."""

    def __init__(self, what):
        if not isinstance(what, str):
            raise TypeError(f"what must be a str naming the count, got {type(what).__name__}")
        self.left, self.what = WORK_MAX, what

    def spend(self, cost):
        _int("cost", cost, 0, None)
        self.left -= cost
        if self.left < 0:
            raise ValueError(f"exact count unaffordable: {self.what} needs more than "
                             f"{WORK_MAX:.0e} steps; use limit=2 to test uniqueness, or more "
                             f"samples")


def count_enumerate(N, r, limit):
    """Hitting r-subsets of N's columns by enumeration: a subset hits every row iff the AND of
    its columns' packed row bits is 0."""
    N, r, limit = _hitting_args(N, r, limit)
    if r > N.shape[1]:
        return 0                                # no r-subset of fewer than r columns
    if r == 0:
        return min(int(N.shape[0] == 0), limit)   # the empty subset hits no row: only of none
    W = _pack_columns(N)
    count = 0
    for combos in _subsets(N.shape[1], r, 1 << 15):
        acc = W[combos[:, 0]]
        for i in range(1, r):
            acc = acc & W[combos[:, i]]
        count += int((acc == 0).all(1).sum())
        if count >= limit:
            return limit
    return count


def count_inclusion_exclusion(N, r):
    """Hitting r-subsets of N's columns, N [k, n] with k <= SOS_MAX_ROWS:
    sum over row sets U of (-1)^|U| C(g(U), r), g(U) = #columns that are True on all of U."""
    N, r, _ = _hitting_args(N, r, 1)
    k, n = N.shape
    if k > SOS_MAX_ROWS:
        raise ValueError(f"N must have at most {SOS_MAX_ROWS} rows (2^k terms), got {k}")
    if r > n:
        return 0
    word = (N.astype(np.int64) << np.arange(k, dtype=np.int64)[:, None]).sum(0)       # [n]
    g = np.bincount(word, minlength=1 << k).astype(np.int64)
    for j in range(k):                          # superset sums: g[U] = #columns with word >= U
        v = g.reshape(-1, 2, 1 << j)
        v[:, 0, :] += v[:, 1, :]
    sign = np.ones(1, np.int64)
    for _ in range(k):
        sign = np.concatenate([sign, -sign])    # (-1)^|U|
    net = np.rint(np.bincount(g, weights=sign, minlength=n + 1)).astype(np.int64)   # by g value
    if 2 * r <= n and math.comb(n, r) < 2 ** 62:
        # C(v, r) for v = 0..n exactly in int64; the sum wraps mod 2^64 but the result, in
        # [0, C(n, r)], is below 2^62, so it comes out exact
        col = np.ones(n + 1, np.int64)
        for _ in range(r):
            col = np.concatenate([[0], np.cumsum(col)[:-1]])
        return int((net * col).sum())
    return sum(int(net[v]) * math.comb(int(v), r) for v in np.flatnonzero(net))


def count_hitting(N, r, limit, work):
    """Number of r-subsets of N's columns (N [k, n] bool) containing, for every row, a column
    where the row is False; min(count, limit). See the comment block above."""
    N, r, limit = _hitting_args(N, r, limit)
    if not isinstance(work, Work):
        raise TypeError(f"work must be a hypotheses.Work budget, got {type(work).__name__}")
    k, n = N.shape
    if k == 0:
        return min(math.comb(n, r), limit)
    if r == 0 or r > n:
        return 0
    work.spend(k * n + 20_000)
    hits = k - N.sum(0)                                                # rows each column hits
    if N.all(1).any():
        return 0                                                       # a row nothing can hit
    top = np.sort(np.partition(hits, n - r)[n - r:])                   # the r largest hits
    if top.sum() < k:
        return 0
    keep = hits >= k - top[1:].sum()
    if not keep.all():
        N, hits = N[:, keep], hits[keep]
        n = N.shape[1]
        if N.all(1).any():
            return 0
    if r == 1:
        return min(int((hits == k).sum()), limit)
    nw = -(-k // 64)
    enum = math.comb(n, r) * (12 * r + 2 * r * nw)
    sos = (2 * k + 24) << k if k <= SOS_MAX_ROWS else math.inf
    row_zeros = n - N.sum(1)
    j = int(np.argmin(row_zeros))
    kk = max(0, k - int(hits.mean()))                                  # rows a child keeps
    child = min(math.comb(n - 1, r - 1) * (12 * (r - 1) + 2 * (r - 1) * nw),
                (2 * kk + 24) << kk if kk <= SOS_MAX_ROWS else math.inf)
    branch = int(row_zeros[j]) * (child + k * n + 20_000)
    if enum <= min(sos, branch):
        work.spend(enum)
        return count_enumerate(N, r, limit)
    if sos <= branch:
        work.spend(sos)
        return min(count_inclusion_exclusion(N, r), limit)
    zeros = np.flatnonzero(~N[j])
    zeros = zeros[np.argsort(-hits[zeros], kind="stable")]            # likely solutions first
    alive = np.ones(n, bool)
    total = 0
    for z in zeros:
        alive[z] = False                        # take z; z_1..z_i-1 were dropped before
        total += count_hitting(N[N[:, z]][:, alive], r - 1, limit - total, work)
        if total >= limit:
            return limit
    return total


def _count_and(X, y, s, limit, what):
    """Number of "and" supports compatible with X [m, T] bool, y [m] bool (the block above)."""
    P = X[y].all(0) if y.any() else np.ones(X.shape[1], bool)
    N = X[~y][:, P]                                                    # [k, |P|]
    if N.shape[0] > 1:                                                 # repeats ask nothing new
        first = {row.tobytes(): i for i, row in enumerate(np.packbits(N, axis=1))}
        N = N[sorted(first.values())]
    work = Work(f"{what} (|P| = {N.shape[1]} candidate positions, {N.shape[0]} distinct "
                 f"negatives)")
    return count_hitting(N, s, limit, work)


# "parity": S' is compatible iff its indicator v (weight exactly s) solves X v = y over GF(2).
# Gauss-Jordan elimination on the bit-packed [X | y] (m row passes, each O(m T / 64)) gives the
# rank r, the pivot columns and the free columns F (k = T - r of them): every solution is
# v_pivot = b + A_F v_F for a free part v_F. Weight s needs |v_F| <= s, so the count enumerates the
# free parts of weight j = 0..s, sum_j C(k, j) <= min(2^k, ~C(T + s, s)) candidates, and keeps
# those whose pivot part has weight s - j. Beyond BRUTE_FORCE_MAX candidates it is a ValueError.

def _gf2_solutions(X, y):
    """X [m, T], y [m] bool -> (pivot_cols [r], free_cols [k], A_F [r, k] bool, b [r] bool,
    pivot_rows [r]), the reduced system v_pivot = b + A_F v_free over GF(2); None if X v = y has
    no solution. Rows are taken in order and each is reduced by the earlier pivots only, so row i
    is a pivot row exactly when it is independent of rows 0..i-1."""
    m, T = X.shape
    W = _pack_columns(np.concatenate([X, y[:, None]], 1).T)           # [m, words] rows packed
    coef = np.zeros(W.shape[1], np.uint64)                             # the bits of columns < T
    coef[:T >> 6] = np.uint64(2 ** 64 - 1)
    coef[T >> 6] = np.uint64((1 << (T & 63)) - 1)
    pivots = []
    for i in range(m):
        row = W[i] & coef
        nz = np.flatnonzero(row)
        if nz.size == 0:
            if (int(W[i, T >> 6]) >> (T & 63)) & 1:
                return None                                            # 0 = 1: inconsistent
            continue
        w = int(nz[0])
        word = int(row[w])
        b = (word & -word).bit_length() - 1
        has = ((W[:, w] >> np.uint64(b)) & np.uint64(1)).astype(bool)
        has[i] = False
        W[has] ^= W[i]
        pivots.append((i, 64 * w + b))
    rows = [i for i, _ in pivots]
    pivot_cols = np.array([c for _, c in pivots], np.intp)
    bits = np.unpackbits(W[rows].view(np.uint8), axis=1, bitorder="little")[:, :T + 1]
    bits = bits.astype(bool)
    free = np.setdiff1d(np.arange(T), pivot_cols)
    return pivot_cols, free, bits[:, free], bits[:, T], np.array(rows, np.intp)


def _count_parity(X, y, s, limit):
    """Number of weight-s solutions v [T] of X v = y over GF(2) (X [m, T], y [m] bool)."""
    m, T = X.shape
    sol = _gf2_solutions(X, y)
    if sol is None:
        return 0
    pivot_cols, free, A_F, b, _ = sol
    r, k = len(pivot_cols), len(free)
    cands = sum(math.comb(k, j) for j in range(min(s, k) + 1))
    if cands > BRUTE_FORCE_MAX:
        raise ValueError(f"parity: exact count unaffordable at T={T}, s={s}: the solutions of "
                         f"X v = y span dimension {k}, and their free parts of weight <= {s} "
                         f"are {_big(cands)} > {BRUTE_FORCE_MAX} candidates")
    cols = _pack_columns(A_F)                                          # [k, words] over r rows
    b = _pack_columns(b[:, None])[0]
    count = 0
    for j in range(min(s, k) + 1):
        if s - j > r:
            continue
        for combos in _subsets(k, j, 1 << 15):
            acc = np.broadcast_to(b, (len(combos), len(b)))
            for i in range(j):
                acc = acc ^ cols[combos[:, i]]
            count += int((_popcount(acc) == s - j).sum())
            if count >= limit:
                return limit
    return count


def gf2_solve(X, y):
    """The unique v [T] (uint8 bits) with X v = y over GF(2), for X [m, T] and y [m] bits; None
    when the system has no solution or more than one (rank < T). Learns sparse parity from about
    T samples whatever s is: the algorithmic baseline beside the statistical limit."""
    X, y = _bits("X", X).astype(bool), _bits("y", y).astype(bool)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"need X [m, T] and y [m], got shapes {X.shape} and {y.shape}")
    sol = _gf2_solutions(X, y)
    if sol is None or sol[1].size:
        return None
    v = np.zeros(X.shape[1], np.uint8)
    v[sol[0]] = sol[3]
    return v


def gf2_first_full_rank(X):
    """The smallest m0 with rank(X[:m0]) = T over GF(2), X [m, T] bits; None if X has rank < T."""
    X = _bits("X", X).astype(bool)
    if X.ndim != 2:
        raise ValueError(f"need X [m, T], got shape {X.shape}")
    pivot_rows = _gf2_solutions(X, np.zeros(X.shape[0], bool))[4]
    return int(pivot_rows[-1]) + 1 if len(pivot_rows) == X.shape[1] else None


def learn_sparse_parity(X, y):
    """The GF(2) learner: the support {j : w_j = 1} of the unique solution of X w = y, or None.
    Parity labels are linear over GF(2) (y = X w mod 2, w the indicator of S), and the solution
    is unique once X has full column rank T, which random bits reach at m = T + O(1)."""
    w = gf2_solve(X, y)
    return None if w is None else np.flatnonzero(w)


def gf2_sample_need(T, s, rng):
    """Samples the GF(2) learner needs on one draw of make_task('parity', T, s, rng), the training
    stream drawn from rng after the task: -> (m0, S recovered at m0, unique already at m0 - 1)."""
    T, s, rng = _int("T", T, 1), _int("s", s, 1), check_rng(rng)
    check_sample_size(T + 200, T)               # before the task: T positions are drawn from
    task = make_task("parity", T, s, rng)
    X, y = task.sample(T + 200, rng)
    m0 = gf2_first_full_rank(X)
    if m0 is None:
        raise RuntimeError(f"{T + 200} samples did not reach rank T={T}")
    found = learn_sparse_parity(X[:m0], y[:m0])
    before = learn_sparse_parity(X[:m0 - 1], y[:m0 - 1]) if m0 > 1 else None
    return m0, found is not None and found.tolist() == task.S.tolist(), before is not None


def log2_binomial(T, s):
    """log2 C(T, s): the bits needed to name the support among the C(T, s) possible ones; each
    label carries at most one bit, so no learner identifies S from fewer labels than this."""
    T, s = _int("T", T, 1), _int("s", s, 0)
    if s > T:
        raise ValueError(f"s must be <= T, got s={s}, T={T}")
    return (math.lgamma(T + 1) - math.lgamma(s + 1) - math.lgamma(T - s + 1)) / math.log(2)


# "majority" and "junta": no structure used; every s-subset is checked (C(T, s) of them, at most
# BRUTE_FORCE_MAX, vectorised in chunks), at O(m s) each.

def _count_brute(name, s, X, y, limit):
    """Number of "majority"/"junta" supports compatible with X [m, T], y [m] bool, one by one."""
    m, T = X.shape
    total = math.comb(T, s)
    if total > BRUTE_FORCE_MAX:
        raise ValueError(f"{name}: exact count unaffordable: brute force over all C(T={T}, s={s}) "
                         f"= {_big(total)} supports exceeds the limit {BRUTE_FORCE_MAX}")
    if m == 0:
        return min(total, limit)
    yi = y.astype(np.int64)[:, None]
    count = 0
    for combos in _subsets(T, s, max(1, (1 << 22) // (m * s))):
        bits = X[:, combos]                                            # [m, B, s]
        if name == "majority":
            ok = ((2 * bits.sum(2, dtype=np.int64) > s) == y[:, None]).all(0)
        else:  # junta: sort (pattern, label) keys per subset; a conflict is one pattern, 2 labels
            code = (bits.astype(np.int64) << np.arange(s, dtype=np.int64)).sum(2)
            key = np.sort(2 * code + yi, axis=0)
            clash = ((key[1:] >> 1) == (key[:-1] >> 1)) & (key[1:] != key[:-1])
            ok = ~clash.any(0)
        count += int(ok.sum())
        if count >= limit:
            return limit
    return count


def count_compatible(name, s, X, y, limit=None):
    """Number of hypotheses of task `name` with sparsity s compatible with a training set -> int.

    X [m, T] bits, y [m] labels (0/1 numbers or bools). The hypotheses are the s-subsets S' of the
    T positions, labelling by the task's g ("junta": by any g; see the block comment
    "hypotheses compatible with a training set"); S' is compatible iff its labels equal y on
    every row. The count is exact; with
    `limit` it is min(count, limit) and may stop early (limit=2 asks "exactly one?", the
    paper's rejection test, Section 5). How each task counts, and what it costs:
      "and"      hitting sets of the negatives inside P = positions 1 in every positive
                 (enumeration / inclusion-exclusion / branching, by cost; comment above
                 `Work`). O(m T) to find P, then about 1 ms for typical sets at any T.
      "or"       "and" on the complement: OR(x) = NOT AND(NOT x).
      "parity"   weight-s solutions of X v = y over GF(2) (comment above `_gf2_solutions`):
                 O(m^2 T / 64) elimination, then sum_{j<=s} C(T - rank, j) candidates.
      "majority", "junta"   every s-subset: C(T, s) m s.
    A count beyond its budget (BRUTE_FORCE_MAX candidates, or WORK_MAX steps for "and"/"or") is a
    ValueError saying so, never a guess.
    """
    if not isinstance(name, str) or name not in TASKS:
        got = repr(name) if isinstance(name, str) else f"a {type(name).__name__}"
        raise ValueError(f"name: unknown task {got}; allowed: {', '.join(TASKS)}")
    X, y = _bits("X", X), _bits("y", y)
    if X.ndim != 2 or X.shape[1] < 1:
        raise ValueError(f"X must have shape [m, T] with T >= 1, got {X.shape}")
    m, T = X.shape
    s = _int("s", s, 1, T)
    if y.shape != (m,):
        raise ValueError(f"y must have shape [{m}] (one label per row of X), got {y.shape}")
    cap = math.inf if limit is None else _int("limit", limit, 1, None)
    if name == "majority" and s % 2 == 0:
        raise ValueError(f"majority needs an odd s (no ties), got s={s}")
    if name == "junta" and s > JUNTA_MAX_S:
        raise ValueError(f"junta: s must be <= {JUNTA_MAX_S}, got s={s}")
    X, y = X.astype(bool), y.astype(bool)
    what = f"count_compatible({name!r}, s={s}) at T={T}, m={m}"
    if name == "and":
        count = _count_and(X, y, s, cap, what)
    elif name == "or":
        count = _count_and(~X, ~y, s, cap, what)
    elif name == "parity":
        count = _count_parity(X, y, s, cap)
    else:
        count = _count_brute(name, s, X, y, cap)
    return int(min(count, cap))


# ------------------------------------------------------------------- the paper's data protocol

def _task_arg(task):
    if not isinstance(task, SparseTask):
        raise ValueError(f"task must be a SparseTask (make_task), got {type(task).__name__}")
    return task


def sample_unambiguous(task, m, rng, max_tries=1000):
    """The paper's training set (Section 5): m samples, redrawn until exactly one hypothesis is
    compatible -> X [m, T] uint8, y [m] uint8.

    Each try is task.sample(m, rng) from the same rng, so the result is a deterministic function of
    the rng state, and a validation set drawn from rng afterwards is independent of it. Unlike
    the plain protocol, where the training set for m is the first m samples of a seed's stream
    (task.sample's rows are a prefix-stable stream), sets for different m are NOT nested: each
    try consumes m samples, and which try is accepted depends on m. After max_tries ambiguous
    sets, a ValueError says m is too small to identify S at this T.
    """
    task, rng = _task_arg(task), check_rng(rng)
    m = check_sample_size(_int("m", m, 1), task.T)   # before numpy is asked for the memory
    max_tries = _int("max_tries", max_tries, 1, SETS_MAX)
    for _ in range(max_tries):
        X, y = task.sample(m, rng)
        if count_compatible(task.name, task.s, X, y, limit=2) == 1:
            return X, y
    raise ValueError(f"m={m} is too small to identify S at T={task.T} ({task.name}, s={task.s}): "
                     f"all {max_tries} tries were compatible with more than one hypothesis")


def first_identifying_m(task, rng, m_max):
    """The statistical limit of one stream: the smallest m <= m_max whose first m samples leave
    exactly one compatible hypothesis (the true S), or None if m_max samples leave several.

    The stream is task.sample drawn from rng in blocks (the same rows as one task.sample(m_max,
    rng) call, since rows are prefix-stable). The count for a prefix is non-increasing in m, so m
    is found by doubling then bisection: O(log m) calls of count_compatible(limit=2), each at most
    m_max samples. For "and" ("or"), once a prefix m_lo is known to be ambiguous only prefixes
    longer than m_lo are asked about, whose compatible supports lie in P(m_lo) (positions 1 in
    every positive so far), so only those columns are kept: memory O(m |P|), not O(m T), and
    T = 10^5 is cheap. Returns 0 when T == s (no data needed). Section 5's protocol, per stream.
    """
    task, rng = _task_arg(task), check_rng(rng)
    m_max = _int("m_max", m_max, 1)
    name, T, s = task.name, task.T, task.s
    if math.comb(T, s) == 1:
        return 0
    block = max(1, min(256, (1 << 22) // T))                            # float draws <= 32 MB
    state = dict(X=np.zeros((0, T), bool), y=np.zeros(0, bool), cols=np.arange(T))

    def prefix(m):
        while len(state["y"]) < m:
            Xb, yb = task.sample(min(block, m_max - len(state["y"])), rng)
            state["X"] = np.concatenate([state["X"], Xb[:, state["cols"]].astype(bool)])
            state["y"] = np.concatenate([state["y"], yb.astype(bool)])
        return state["X"][:m], state["y"][:m]

    def ambiguous(m):
        X, y = prefix(m)
        return count_compatible(name, s, X, y, limit=2) > 1

    def narrow(m_lo):  # later questions are about prefixes > m_lo: keep the columns of P(m_lo)
        if name not in ("and", "or"):
            return
        X, y = prefix(m_lo)
        rows = X[y] if name == "and" else ~X[~y]                       # "or": 0 in every negative
        if len(rows):
            keep = rows.all(0)
            state["X"], state["cols"] = state["X"][:, keep], state["cols"][keep]

    lo, m = 0, 1
    while ambiguous(m):
        lo = m
        narrow(lo)
        if m == m_max:
            return None
        m = min(2 * m, m_max)
    hi = m
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ambiguous(mid):
            lo = mid
            narrow(lo)
        else:
            hi = mid
    return hi


def ambiguity_probability(task, m, rng, n_sets):
    """Fraction of n_sets training sets of size m (each task.sample(m, rng), drawn in turn) that
    are compatible with more than one hypothesis -> float in [0, 1]: the rejection rate of
    sample_unambiguous at this m (Section 5), non-increasing in m on average."""
    task, rng = _task_arg(task), check_rng(rng)
    m = check_sample_size(_int("m", m, 1), task.T)   # before numpy is asked for the memory
    n_sets = _int("n_sets", n_sets, 1, SETS_MAX)
    bad = 0
    for _ in range(n_sets):
        X, y = task.sample(m, rng)
        bad += count_compatible(task.name, task.s, X, y, limit=2) > 1
    return bad / n_sets
