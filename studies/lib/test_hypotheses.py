"""test_hypotheses.py: the tests of studies/lib/hypotheses.py.

Run from the repository's root: python -m pytest -q
"""
import itertools
import math
import time

import numpy as np
import pytest

import data
from studies.lib import checks, hypotheses
from studies.conftest import NAN, walk_modules
from test_all import ARRAY_LIKE, Walk


# hypotheses.py: the counts of compatible hypotheses and GF(2). Besides the values of its kind,
# every argument gets every value of HYP_HOSTILE (it used to be an AttributeError, an
# OverflowError, a hang in count_enumerate(r=10**400) or ambiguity_probability(n_sets=10**400),
# or a wrong answer such as count_hitting(limit=-1) returning -1). Only a limit may be math.inf or
# any integer >= 1 (a cap, not a size).
HYP_HOSTILE = {"nan": NAN, "inf": float("inf"), "-inf": -float("inf"), "-1": -1, "True": True,
               "1j": 1j, "10**400": 10 ** 400, "2.5": 2.5, "None": None, "'x'": "x",
               "NaN array": np.array([[1.0, np.nan]]), "3-D": np.zeros((2, 2, 2)),
               "empty": np.zeros(0), "ragged": [[1, 2], [3]]}


CAP = {"inf": "a cap, not a size", "10**12": "a cap, not a size",
       "10**400": "a cap, not a size"}


R_LEGAL = dict(r={"0": "the empty subset", "10**12": "more than the columns: none"})


LIST_XY = dict(X={"list": ARRAY_LIKE}, y={"list": ARRAY_LIKE}, N={"list": ARRAY_LIKE})


def _hyp():  # the task, a training set and a hitting-set matrix N of the hypotheses walk
    rng = np.random.default_rng(0)
    task = data.make_task("and", 10, 3, rng)
    X, y = task.sample(20, rng)
    return dict(task=task, X=X, y=y, N=np.random.default_rng(1).random((5, 12)) < 0.6)


def _hyp_walk(args, legal=None):
    """A Walk of a hypotheses function: every argument also gets HYP_HOSTILE."""
    return Walk(lambda f: args(_hyp()), legal=legal, extra=dict.fromkeys(args(_hyp()),
                                                                          HYP_HOSTILE))


@pytest.mark.skipif(checks.physical_memory() is None, reason="the system does not say its memory")
def test_sample_sizes_are_checked_before_anything_is_allocated():
    """Issue 23, family 5: a size that cannot fit is a ValueError naming m and T, not a
    MemoryError from inside numpy (and never a machine that swaps first): the studies' doors
    check it (data.py, the reference, leaves it to numpy)."""
    rng = np.random.default_rng(0)
    task = data.make_task("and", 12, 3, rng)
    with pytest.raises(ValueError, match="samples of T=12 bits need about"):
        hypotheses.ambiguity_probability(task, 10**12, rng, 3)
    with pytest.raises(ValueError, match="samples of T=12 bits need about"):
        hypotheses.sample_unambiguous(task, 10**12, rng)
    assert hypotheses.sample_unambiguous(task, 40, rng)[0].shape == (40, 12)


def brute_count(name, s, X, y):
    """Compatible s-subsets, by checking every one of them with itertools (the definition)."""
    X, y = np.asarray(X, np.int64), np.asarray(y, np.int64)
    count = 0
    for S in itertools.combinations(range(X.shape[1]), s):
        bits = X[:, list(S)]
        k = bits.sum(1)
        if name == "junta":                     # any truth table: labels a function of the bits
            seen = {}
            ok = all(seen.setdefault(tuple(row), lab) == lab for row, lab in zip(bits, y))
        else:
            pred = {"and": k == s, "or": k > 0, "parity": k % 2 == 1,
                    "majority": 2 * k > s}[name]
            ok = bool((pred.astype(np.int64) == y).all())
        count += ok
    return count


def random_sets(rng, n):
    """n random (name, s, X, y): task data, random bits with random labels, all-positive and
    all-negative sets, at T in 6..12, s in 1..3, m in 1..12."""
    for i in range(n):
        name = data.TASKS[i % len(data.TASKS)]
        T = int(rng.integers(6, 13))
        s = int(rng.choice([1, 3])) if name == "majority" else int(rng.integers(1, 4))
        m = int(rng.integers(1, 13))
        kind = i // len(data.TASKS) % 4
        if kind == 0:                           # the task's own data: S always compatible
            X, y = data.make_task(name, T, s, rng).sample(m, rng)
        else:
            X = (rng.random((m, T)) < rng.uniform(0.2, 0.9)).astype(np.uint8)
            y = [rng.integers(0, 2, m), np.ones(m), np.zeros(m)][kind - 1].astype(np.uint8)
        yield name, s, X, y


def test_count_matches_brute_force_every_task():
    rng = np.random.default_rng(0)
    for name, s, X, y in random_sets(rng, 600):
        want = brute_count(name, s, X, y)
        assert hypotheses.count_compatible(name, s, X, y) == want, (name, s, X.tolist(), y.tolist())


def test_limit_is_min_of_count_and_limit():
    rng = np.random.default_rng(1)
    for name, s, X, y in random_sets(rng, 150):
        full = hypotheses.count_compatible(name, s, X, y)
        for limit in (1, 2, 3, 50):
            assert hypotheses.count_compatible(name, s, X, y, limit=limit) == min(full, limit)
    X, y = data.make_task("and", 8, 2, rng).sample(4, rng)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="limit must be"):
            hypotheses.count_compatible("and", 2, X, y, limit=bad)


def test_true_support_always_compatible_and_bools_accepted():
    rng = np.random.default_rng(2)
    for name in data.TASKS:
        task = data.make_task(name, 10, 3, rng)
        X, y = task.sample(30, rng)
        assert hypotheses.count_compatible(name, 3, X.astype(bool), y.astype(bool)) >= 1
        assert hypotheses.count_compatible(name, 3, X.astype(float), y) == brute_count(name, 3, X, y)


@pytest.mark.parametrize("seed", range(6))
def test_and_methods_agree_with_enumeration(seed, monkeypatch):
    """The three exact "and" methods on hitting-set problems large enough that _count_hitting
    branches: each matches plain enumeration, and branching really happened."""
    rng = np.random.default_rng(seed)
    k, n, r = 25, 120, 3
    N = rng.random((k, n)) < rng.uniform(0.5, 0.65)  # True = 1: a column hits rows where False
    want = hypotheses.count_enumerate(N, r, math.inf)
    calls = []
    original = hypotheses.count_hitting
    monkeypatch.setattr(hypotheses, "count_hitting", lambda *a: calls.append(1) or original(*a))
    got = hypotheses.count_hitting(N, r, math.inf, hypotheses.Work("test"))
    assert got == want and len(calls) > 1, (got, want, len(calls))
    assert hypotheses.count_hitting(N, r, 2, hypotheses.Work("test")) == min(want, 2)
    small = N[:12]
    assert (hypotheses.count_inclusion_exclusion(small, r)
            == hypotheses.count_enumerate(small, r, math.inf))


def test_the_counts_agree_on_the_empty_subset():
    """r = 0 (r >= 0 is allowed): the empty subset hits every row only of a matrix without rows,
    by every method (count_enumerate used to fail with an IndexError)."""
    N = np.random.default_rng(1).random((5, 12)) < 0.6
    for M, want in ((N, 0), (N[:0], 1)):
        assert hypotheses.count_enumerate(M, 0, 10) == want
        assert hypotheses.count_inclusion_exclusion(M, 0) == want
        assert hypotheses.count_hitting(M, 0, 10, hypotheses.Work("t")) == want


def test_and_without_positives_at_large_T():
    """No positives: P is every position, the count is huge and exact (inclusion-exclusion over
    the negatives, written out here over the few negatives directly)."""
    rng = np.random.default_rng(3)
    T, s = 2000, 3
    X = (rng.random((6, T)) < 0.8).astype(np.uint8)
    y = np.zeros(6, np.uint8)
    want = 0
    for size in range(7):
        for U in itertools.combinations(range(6), size):
            common = int(X[list(U)].all(0).sum()) if U else T
            want += (-1) ** size * math.comb(common, s)
    assert hypotheses.count_compatible("and", s, X, y) == want
    assert hypotheses.count_compatible("or", s, 1 - X, 1 - y) == want      # OR by complement


def test_count_errors():
    rng = np.random.default_rng(4)
    X, y = data.make_task("and", 8, 2, rng).sample(5, rng)
    for args, msg in [(("xor", 2, X, y), "unknown task 'xor'"),
                      (("and", 0, X, y), "s must be an integer from 1 to 8"),
                      (("and", 9, X, y), "s must be an integer from 1 to 8"),
                      (("and", 2, X[0], y), r"X must have shape \[m, T\]"),
                      (("and", 2, X, y[:4]), r"y must have shape \[5\]"),
                      (("and", 2, X, 2 * y), "y must hold bits 0/1"),
                      (("majority", 2, X, y), "odd s")]:
        with pytest.raises(ValueError, match=msg):
            hypotheses.count_compatible(*args)
    Xb = (rng.random((20, 3000)) < 0.5).astype(np.uint8)
    with pytest.raises(ValueError, match="parity: exact count unaffordable at T=3000, s=3"):
        hypotheses.count_compatible("parity", 3, Xb, Xb[:, 0])
    with pytest.raises(ValueError, match=r"majority: .*C\(T=3000, s=3\)"):
        hypotheses.count_compatible("majority", 3, Xb, Xb[:, 0])


def test_counting_cost_at_T_10000(capsys):
    """Printed, not asserted: the count for a typical "and" training set at T = 10^4."""
    rng = np.random.default_rng(5)
    task = data.make_task("and", 10_000, 3, rng)
    X, y = task.sample(200, rng)
    t0 = time.perf_counter()
    n = hypotheses.count_compatible("and", 3, X, y)
    dt = time.perf_counter() - t0
    t0 = time.perf_counter()
    hypotheses.count_compatible("and", 3, X[:40], y[:40], limit=2)
    dt40 = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\n[count_compatible 'and' T=10^4 s=3: m=200 -> {n} in {1e3 * dt:.1f} ms; "
              f"m=40, limit=2 in {1e3 * dt40:.1f} ms]")
    assert n == 1


def test_sample_unambiguous_deterministic_and_unique():
    for name in ("and", "or", "parity", "majority"):
        task = data.make_task(name, 10, 3, np.random.default_rng(6))
        X1, y1 = hypotheses.sample_unambiguous(task, 30, np.random.default_rng(7))
        X2, y2 = hypotheses.sample_unambiguous(task, 30, np.random.default_rng(7))
        assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
        assert X1.shape == (30, 10) and np.array_equal(task.label(X1), y1)
        assert hypotheses.count_compatible(name, 3, X1, y1) == 1


def test_sample_unambiguous_gives_up_when_m_is_too_small():
    task = data.make_task("and", 50, 3, np.random.default_rng(8))
    with pytest.raises(ValueError, match=r"m=2 is too small to identify S at T=50 .*all 5 tries"):
        hypotheses.sample_unambiguous(task, 2, np.random.default_rng(9), max_tries=5)


def brute_first_m(task, seed, m_max):
    X, y = task.sample(m_max, np.random.default_rng(seed))
    for m in range(1, m_max + 1):
        if brute_count(task.name, task.s, X[:m], y[:m]) == 1:
            return m
    return None


def test_first_identifying_m_matches_prefix_scan():
    for i, name in enumerate(data.TASKS * 3):
        T = 6 + i % 4
        s = 3 if name in ("majority", "junta") else 1 + i % 3
        task = data.make_task(name, T, s, np.random.default_rng(100 + i))
        m_max = 40 if i < 10 else 8                       # some streams end ambiguous: None
        got = hypotheses.first_identifying_m(task, np.random.default_rng(200 + i), m_max)
        assert got == brute_first_m(task, 200 + i, m_max), (name, T, s)


def test_first_identifying_m_large_T_matches_linear_scan():
    """At T = 20000 ("and", "or") the doubling, bisection and column narrowing agree with asking
    count_compatible about every prefix in turn."""
    for name, seed in [("and", 0), ("and", 1), ("or", 2)]:
        task = data.make_task(name, 20_000, 3, np.random.default_rng(seed))
        got = hypotheses.first_identifying_m(task, np.random.default_rng(seed + 10), 400)
        X, y = task.sample(400, np.random.default_rng(seed + 10))
        want = next(m for m in range(1, 401)
                    if hypotheses.count_compatible(name, 3, X[:m], y[:m], limit=2) == 1)
        assert got == want


def test_first_identifying_m_errors_and_trivial_case():
    task = data.make_task("and", 3, 3, np.random.default_rng(0))
    assert hypotheses.first_identifying_m(task, np.random.default_rng(0), 5) == 0
    with pytest.raises(ValueError, match="m_max must be an integer from 1 to"):
        hypotheses.first_identifying_m(task, np.random.default_rng(0), 0)
    with pytest.raises(ValueError, match="task must be a SparseTask"):
        hypotheses.first_identifying_m("and", np.random.default_rng(0), 5)


def test_ambiguity_probability_in_unit_interval_and_falls_with_m():
    task = data.make_task("and", 30, 2, np.random.default_rng(12))
    p = [hypotheses.ambiguity_probability(task, m, np.random.default_rng(13), 60) for m in (4, 15, 60)]
    assert all(0.0 <= q <= 1.0 for q in p)
    assert p[0] >= p[1] >= p[2] and p[0] > p[2], p
    assert p[0] == 1.0 and p[2] < 0.1, p


def test_gf2_learner_recovers_support():
    for T in (15, 200):
        m0, ok, unique_before = hypotheses.gf2_sample_need(T, 3, np.random.default_rng(T))
        assert ok and not unique_before
        assert T <= m0 <= T + 30


def test_gf2_solve_matches_mod2_products():
    rng = np.random.default_rng(16)
    X = (rng.random((90, 70)) < 0.5).astype(np.uint8)
    w = (rng.random(70) < 0.3).astype(np.uint8)
    y = (X.astype(int) @ w % 2).astype(np.uint8)
    assert np.array_equal(hypotheses.gf2_solve(X, y), w)
    assert hypotheses.gf2_solve(X[:40], y[:40]) is None                # rank < T: not unique
    Xd = np.vstack([X, X[:1]])                                     # a duplicated row, flipped label
    assert hypotheses.gf2_solve(Xd, np.append(y, 1 - y[0])) is None    # inconsistent
    assert hypotheses.gf2_first_full_rank(X) >= 70


def test_log2_binomial_matches_paper_numbers():
    assert abs(hypotheses.log2_binomial(100, 3) - 17.3) < 0.05
    assert abs(hypotheses.log2_binomial(1100, 3) - 27.7) < 0.05


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "hypotheses.count_enumerate": _hyp_walk(lambda h: dict(N=h["N"], r=2, limit=10),
                                            legal=dict(limit=CAP, **R_LEGAL, N=LIST_XY["N"])),
    "hypotheses.count_inclusion_exclusion": _hyp_walk(lambda h: dict(N=h["N"], r=2),
                                                      legal=dict(R_LEGAL, N=LIST_XY["N"])),
    "hypotheses.count_hitting": _hyp_walk(lambda h: dict(N=h["N"], r=2, limit=10,
                                                         work=hypotheses.Work("t")),
                                          legal=dict(limit=CAP, **R_LEGAL, N=LIST_XY["N"])),
    "hypotheses.gf2_solve": _hyp_walk(lambda h: dict(X=h["X"], y=h["y"]), legal=LIST_XY),
    "hypotheses.gf2_first_full_rank": _hyp_walk(lambda h: dict(X=h["X"]), legal=LIST_XY),
    "hypotheses.learn_sparse_parity": _hyp_walk(lambda h: dict(X=h["X"], y=h["y"]),
                                                legal=LIST_XY),
    "hypotheses.gf2_sample_need": _hyp_walk(lambda h: dict(T=10, s=3,
                                                           rng=np.random.default_rng(0))),
    "hypotheses.log2_binomial": _hyp_walk(lambda h: dict(T=10, s=3), legal=dict(
        T={"10**12": "a number, computed in logs"}, s={"0": "C(T, 0) = 1"})),
    "hypotheses.count_compatible": _hyp_walk(lambda h: dict(name="and", s=3, X=h["X"], y=h["y"],
                                                            limit=5),
                                             legal=dict(limit={**CAP, "None": "no cap"},
                                                        **LIST_XY)),
    "hypotheses.sample_unambiguous": _hyp_walk(lambda h: dict(task=h["task"], m=30,
                                                              rng=np.random.default_rng(0),
                                                              max_tries=50)),
    "hypotheses.first_identifying_m": _hyp_walk(lambda h: dict(task=h["task"],
                                                               rng=np.random.default_rng(0),
                                                               m_max=200),
                                               legal=dict(m_max={"10**12": "a cap: the search "
                                                                 "stops where S is identified"})),
    "hypotheses.ambiguity_probability": _hyp_walk(lambda h: dict(task=h["task"], m=20,
                                                                 rng=np.random.default_rng(0),
                                                                 n_sets=3)),
    "hypotheses.Work": _hyp_walk(lambda h: dict(what="t"), legal=dict(
        what=dict.fromkeys(("'x'", "'bogus'"), "a name"))),
    "hypotheses.Work.spend": Walk(lambda f: dict(self=hypotheses.Work("t"), cost=10),
                                  legal=dict(cost={"0": "nothing spent", "10**12": "over the "
                                                   "budget: the count says so"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over hypotheses.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((hypotheses,), WALK)


@pytest.mark.parametrize("call, match", [
    (lambda: hypotheses.gf2_solve(np.full((2, 2), 2), [0, 0]), "bits"),
    (lambda: hypotheses.log2_binomial(3, 5), "s=5")])
def test_bad_arguments_raise_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as e:
        call()
    assert "\n" not in str(e.value)
