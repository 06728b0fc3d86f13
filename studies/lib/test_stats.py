"""test_stats.py: the tests of studies/lib/stats.py.

Run from the repository's root: python -m pytest -q
"""
import math
import os

import numpy as np
import pytest

from studies.lib import intervals, laws, stats, training
from studies.conftest import NAN, SEEDS, WALK_GRID, seed_rows, stats_rows, walk_modules
from test_all import ARRAY_LIKE, HERE, RNGS, SMALL, Walk


M50_TRUE, B_TRUE = 80.0, 4.0


GRID = 10.0 * 1.15 ** np.arange(27)                          # 10 .. 378, 27 values


M90_TRUE = M50_TRUE * math.exp(math.log(9.0) / B_TRUE)     # no random effect: 138.6


def synth_rows(rng, n_seeds=40, re_sd=0.2, T=100, grid=GRID):
    """One run per (seed, m): rows (T, seed, m, success), [n_seeds * len(grid)]."""
    rows = []
    for s in range(n_seeds):
        l50 = math.log(M50_TRUE) + re_sd * rng.standard_normal()
        ok = rng.random(grid.size) < 1.0 / (1.0 + np.exp(-B_TRUE * (np.log(grid) - l50)))
        rows += [(T, s, float(m), int(o)) for m, o in zip(grid, ok)]
    return rows


def ci_ok(lo, hi, true):
    """The coverage criterion: the CI holds the truth AND is informative, i.e. it excludes both
    2x and 0.5x the truth (an estimator that ignores m, with a CI of [small, inf], fails)."""
    return lo <= true <= hi and true / 2 < lo and hi < 2 * true


def _no_nan(est):
    for k, v in est.items():
        if isinstance(v, float):
            assert not math.isnan(v), k
        if isinstance(v, np.ndarray):
            assert not np.isnan(v).any(), k


def test_bisect_finds_the_grid_walks_m_star():
    """Per-seed bisection gives the same m*(T) as walking the whole grid, when success is
    monotone in m; and it needs far fewer runs."""
    grid = stats.m_grid(8, 600)
    rng = np.random.default_rng(0)
    for trial in range(20):
        thresholds = rng.integers(5, 700, size=rng.integers(1, 12))
        rows_b, rows_g, calls = [], [], [0]
        for seed, th in enumerate(thresholds):
            def ok(m, th=th):
                calls[0] += 1
                return m >= th
            for search, rows in ((stats.bisect_search, rows_b), (stats.grid_search, rows_g)):
                gen = search(grid)
                try:
                    m = next(gen)
                    while True:
                        rows.append(dict(model="transformer", T=100, seed=seed, m=m,
                                         success=ok(m)))
                        m = gen.send(rows[-1]["success"])
                except StopIteration as stop:
                    expect = next((g for g in grid if g >= th), None)
                    assert stop.value == expect
        sb = stats.critical_sizes(rows_b, {"transformer": grid}, "bisect")[("transformer", 100)]
        sg = stats.critical_sizes(rows_g, {"transformer": grid}, "grid")[("transformer", 100)]
        assert sb["m_star"] == sg["m_star"] and sb["per_seed"] == sg["per_seed"]
        assert len(rows_b) <= len(thresholds) * (np.log2(len(grid)) + 2) < len(rows_g)


def test_critical_sizes_majority_rule():
    grid = [10, 20, 30, 40]
    rows = [dict(model="transformer", T=5, seed=s, m=m, success=m >= th)
            for s, th in enumerate([20, 30, 40, 99]) for m in grid]
    st = stats.critical_sizes(rows, {"transformer": grid}, "grid")[("transformer", 5)]
    assert st["m_star"] == 30                   # 2 of 4 seeds succeed at 30: at least half
    assert st["censored"] == 1 and st["mean"] == 30.0 and st["unfinished"] == 0
    # not monotone: seed 0 fails again at 30. Walking the grid counts successes AT each m.
    wobbly = [dict(r, success=False) if (r["seed"], r["m"]) == (0, 30) else r for r in rows]
    assert stats.critical_sizes(wobbly, {"transformer": grid}, "grid")[("transformer", 5)][
        "m_star"] == 40
    # a search interrupted after its first probe is unfinished, not "above grid"
    part = [r for r in rows if r["seed"] != 3 or r["m"] == 10]
    st = stats.critical_sizes(part, {"transformer": grid}, "grid")[("transformer", 5)]
    assert st["unfinished"] == 1 and st["censored"] == 0 and st["n_seeds"] == 3
    assert st["m_star"] == 30


def test_majority_mstar_hand_made():
    rows = ([(100, s, 10.0, 0) for s in range(4)]                      # 0/4
            + [(100, 0, 20.0, 1)] + [(100, s, 20.0, 0) for s in (1, 2, 3)]  # 1/4
            + [(100, 0, 40.0, 0), (100, 1, 40.0, 1)]                     # 1/2: seed 0 regresses
            + [(100, s, 80.0, int(s > 0)) for s in range(4)])            # 3/4
    assert stats.majority_mstar(rows, [5.0, 10.0, 20.0, 40.0, 80.0]) == 40.0   # 5: no runs, skipped
    assert stats.majority_mstar(rows) == 40.0
    assert stats.majority_mstar(rows, [80.0, 10.0]) == 80.0                   # 40 not in the grid
    assert stats.majority_mstar(rows, [80.0, 40.0, 10.0]) == 40.0    # walked up, not in list order
    assert stats.majority_mstar(rows, [5.0, 10.0, 20.0]) == math.inf
    dict_rows = [dict(T=t, seed=s, m=m, success=o) for t, s, m, o in rows]
    assert stats.majority_mstar(dict_rows) == 40.0


def test_m50_coverage_with_seed_random_effects():
    hits = 0
    for k in range(20):
        est = stats.success_estimates(synth_rows(np.random.default_rng(k)), n_boot=1000, seed=k)
        assert est["n_seeds"] == 40 and est["n_runs"] == 40 * GRID.size and est["flag"] is None
        hits += ci_ok(est["m50_lo"], est["m50_hi"], M50_TRUE)
        # a wrong m50 (2x or 0.5x) is outside every CI: the check can fail
        assert not ci_ok(est["m50_lo"], est["m50_hi"], 2 * M50_TRUE)
        assert not ci_ok(est["m50_lo"], est["m50_hi"], M50_TRUE / 2)
    assert hits >= 16, f"m50 CI covered the truth in {hits}/20 data sets"      # 17 at writing


def test_m90_and_m50_coverage_without_random_effects():
    hits50 = hits90 = 0
    for k in range(20):
        rows = synth_rows(np.random.default_rng(100 + k), re_sd=0.0)
        est = stats.success_estimates(rows, n_boot=1000, seed=k)
        hits50 += ci_ok(est["m50_lo"], est["m50_hi"], M50_TRUE)
        hits90 += ci_ok(est["m90_lo"], est["m90_hi"], M90_TRUE)
        assert est["m50_lo"] <= est["m50"] <= est["m50_hi"]
        assert est["m90_lo"] <= est["m90"] <= est["m90_hi"]
        assert 2.5 < est["b"] < 6.0                          # slope near B_TRUE = 4
    assert hits50 >= 16 and hits90 >= 16, f"coverage m50 {hits50}/20, m90 {hits90}/20"  # 19, 18


def test_the_coverage_check_fails_for_estimators_that_ignore_m_or_are_biased():
    ignore_m = biased = 0
    for k in range(10):
        rng = np.random.default_rng(k)
        rows = synth_rows(rng)
        # wrong estimator 1: the m column shuffled across runs, so the fit cannot use m
        ms = rng.permutation([r[2] for r in rows])
        est = stats.success_estimates([(t, s, m, o) for (t, s, _, o), m in zip(rows, ms)],
                                   n_boot=300, seed=k)
        ignore_m += ci_ok(est["m50_lo"], est["m50_hi"], M50_TRUE)
        # wrong estimator 2: the right fit, reported at 2x
        est = stats.success_estimates(rows, n_boot=300, seed=k)
        biased += ci_ok(2 * est["m50_lo"], 2 * est["m50_hi"], M50_TRUE)
    assert ignore_m <= 2 and biased == 0, (ignore_m, biased)


def test_point_fit_recovers_parameters_and_is_a_stationary_point():
    rng = np.random.default_rng(5)
    m = np.exp(rng.uniform(np.log(10), np.log(400), 20000))
    y = (rng.random(m.size) < stats.sigmoid(B_TRUE * (np.log(m) - math.log(M50_TRUE)))) * 1.0
    a, b = stats.fit_success_curve(m, y)
    assert abs(b - B_TRUE) < 0.2 and abs(stats.m_at(0.5, a, b) / M50_TRUE - 1) < 0.03
    # gradient of the penalised log-likelihood (centred parametrisation) is zero
    x = np.log(m) - np.log(m).mean()
    ac = a + b * np.log(m).mean()
    r = y - stats.sigmoid(ac + b * x)
    assert abs(r.sum() - stats.RIDGE * ac) < 1e-6 and abs((r * x).sum() - stats.RIDGE * b) < 1e-6


def test_vectorised_bootstrap_matches_refitting_each_resample():
    rows = synth_rows(np.random.default_rng(3), n_seeds=12)
    ci, samples = stats.bootstrap_over_seeds(rows, n_boot=20, rng=np.random.default_rng(7))
    C = intervals.seed_counts(np.random.default_rng(7), 12, 20)     # the same draws
    for i in range(20):
        res = [r for r in rows for _ in range(int(C[i, r[1]]))]
        a, b = stats.fit_success_curve([r[2] for r in res], [r[3] for r in res])
        # equal up to the ridge's centring (full-data mean ln m vs the resample's): ~1e-5
        assert math.isclose(stats.m_at(0.5, a, b), samples["m50"][i], rel_tol=1e-3)
        assert math.isclose(stats.m_at(0.9, a, b), samples["m90"][i], rel_tol=1e-3)
    assert ci["m50"] == intervals.percentile_ci(samples["m50"])


def test_the_bootstrap_does_not_depend_on_the_order_of_the_rows():
    """Seeds are indexed in sorted order, so the same runs read in another order (a folder's CSV
    against the width table's pooled rows, two protocols finishing in different orders) give the
    same intervals, and replicate i resamples the same seed labels in every folder and at every T
    (paired_ratio and scaling_fits rely on that)."""
    grid = 10.0 * 1.2 ** np.arange(20)
    rows = synth_rows(np.random.default_rng(0), n_seeds=25, grid=grid)      # 500 runs
    est = stats.success_estimates(rows, n_boot=1000)
    shuffled = [rows[i] for i in np.random.default_rng(1).permutation(len(rows))]
    again = stats.success_estimates(shuffled, n_boot=1000)
    assert est["n_runs"] == 500 and math.isfinite(est["m50_hi"])
    for k in ("m50", "m50_lo", "m50_hi", "m90_lo", "m90_hi"):      # up to the order of sums
        assert math.isclose(again[k], est[k], rel_tol=1e-9), k
    np.testing.assert_allclose(again["m50_boot"], est["m50_boot"], rtol=1e-9)
    assert stats.parse_rows(shuffled)["seeds"] == list(range(25))
    csv_like = [{"T": "100", "seed": str(s), "m": "10", "success": "1"} for s in (10, 9, 2)]
    assert stats.parse_rows(csv_like)["seeds"] == ["2", "9", "10"]      # by number, not text
    assert stats.parse_rows(csv_like)["seed"].tolist() == [2, 1, 0]


def test_complete_separation_gives_a_finite_steep_fit_with_m50_in_the_gap():
    rows = [(50, s, m, int(m >= 80)) for s in range(5) for m in (10.0, 20, 40, 80, 160, 320)]
    est = stats.success_estimates(rows, n_boot=200)
    _no_nan(est)
    assert 40 < est["m50"] < 80 and math.isclose(est["m50"], math.sqrt(40 * 80), rel_tol=1e-6)
    assert 5 < est["b"] < 100 and "complete separation" in est["flag"]
    assert est["m50"] < est["m90"] < 80


def test_all_fail_and_all_succeed_are_flagged_as_censored():
    fail = [(50, s, m, 0) for s in range(4) for m in (10.0, 20, 40)]
    est = stats.success_estimates(fail, n_boot=100)
    _no_nan(est)
    assert est["b"] is None and est["a"] == -math.inf and "above the largest m tried" in est["flag"]
    assert est["m50"] == est["m50_lo"] == est["m50_hi"] == est["m90_hi"] == math.inf

    win = [(50, s, m, 1) for s in range(4) for m in (10.0, 20, 40)]
    est = stats.success_estimates(win, n_boot=100)
    _no_nan(est)
    assert est["b"] is None and est["a"] == math.inf and "below the smallest m tried" in est["flag"]
    assert est["m50"] == est["m50_lo"] == est["m50_hi"] == est["m90"] == 0.0


@pytest.mark.parametrize("m, s, m50", [
    ([10.0], [0], math.inf), ([10.0], [1], 0.0),                # one run
    ([10.0, 10.0], [0, 1], math.inf),                           # one m: slope undetermined
    ([10.0, 20.0], [1, 0], math.inf),                           # decreasing: b < 0
    ([10.0, 20.0], [0, 1], math.sqrt(200.0)),                   # separated pair
])
def test_tiny_data(m, s, m50):
    a, b = stats.fit_success_curve(m, s)
    assert not math.isnan(a) and (b is None or math.isfinite(b))
    assert stats.m_at(0.5, a, b) == pytest.approx(m50)
    assert stats.fit_flag(m, s, a, b) is not None            # every case here is degenerate


def test_resamples_that_lose_all_successes_give_an_inf_upper_bound():
    # 2 of 8 seeds ever succeed: (6/8)^8 = 10% of resamples draw neither -> m50 = inf in > 2.5%
    rows = [(50, s, m, int(s < 2 and m >= 40)) for s in range(8) for m in (10.0, 20, 40, 80)]
    est = stats.success_estimates(rows, n_boot=1000)
    _no_nan(est)
    frac_inf = np.isinf(est["m50_boot"]).mean()
    assert frac_inf > 0.025 and est["m50_hi"] == math.inf and math.isfinite(est["m50_lo"])


def test_m_at_scalar_and_vector():
    assert stats.m_at(0.5, -4 * math.log(80), 4.0) == pytest.approx(80.0)
    out = stats.m_at(0.9, np.array([-4 * math.log(80), 0.0, -np.inf, np.inf, -1e6]),
                  np.array([4.0, -1.0, 0.0, 0.0, 1e-3]))
    assert out[0] == pytest.approx(M90_TRUE) and out[1] == out[2] == out[4] == math.inf
    assert out[3] == 0.0


def test_seeds_pair_cells_at_one_T_and_nothing_across_T():
    """stats.py's design, shown on what a seed draws (training.draw_study_data) and on how it resamples:
    at one T a seed gives every width and every m the same S and the same training inputs (a
    larger m extends a smaller one's set), so those cells are paired and draw the same
    resamples; at another T it shares nothing, and its resamples are drawn independently."""
    run = lambda **o: training.draw_study_data(dict(SMALL, seed=3, **o))
    a, b = run(T=12, m=40, d=8), run(T=12, m=80, d=16)
    assert (a[0].S == b[0].S).all() and (a[1][0] == b[1][0][:40]).all()
    assert (a[1][1] == b[1][1][:40]).all()                       # the same labelled examples
    c = run(T=24, m=40, d=8)        # another T: the same coin flips cut into rows of another
    assert (c[1][0][:20].reshape(40, 12) == a[1][0]).all()        # length, S drawn anew, so
    assert 0.25 < (c[1][1][:40] == a[1][1]).mean() < 0.75          # labels that agree by chance
    A, B = intervals.resample_counts(20, 100, 4000), intervals.resample_counts(20, 300, 4000)
    assert (A == intervals.resample_counts(20, 100, 4000)).all()      # one T: the same resamples
    assert abs(np.corrcoef(A.ravel(), B.ravel())[0, 1]) < 0.03   # two T: independent ones
    # so the same runs read at T = 100 and at T = 300 have independent bootstrap replicates, and
    # a fit across T does not see a pairing the runs do not have
    rows = seed_rows(5)
    e100 = stats.success_estimates(rows, n_boot=4000)
    e300 = stats.success_estimates([dict(r, T=300) for r in rows], n_boot=4000)
    assert e100["m50"] == e300["m50"]
    assert abs(np.corrcoef(np.log(e100["m50_boot"]), np.log(e300["m50_boot"]))[0, 1]) < 0.06
    np.testing.assert_array_equal(stats.success_estimates(rows, n_boot=4000)["m50_boot"],
                                  e100["m50_boot"])


def test_paired_ratio_cancels_the_seeds_shared_luck():
    # protocol b is protocol a with every m doubled: the same seeds, the same outcomes
    rows_a = seed_rows(3)
    rows_b = [dict(r, m=2 * r["m"]) for r in rows_a]
    a, b = stats.success_estimates(rows_a), stats.success_estimates(rows_b)
    ratio, lo, hi = laws.paired_ratio(b, a)
    assert abs(ratio - 2) < 1e-6 and abs(lo - 2) < 1e-6 and abs(hi - 2) < 1e-6
    # unpaired (another bootstrap draw of the seeds) the same ratio is uncertain
    _, lo_u, hi_u = laws.paired_ratio(stats.success_estimates(rows_b, seed=1), a)
    assert hi_u - lo_u > 0.2


def test_paired_growth_cancels_a_constant_offset_and_sees_a_growing_gap():
    """b needs 1.5 times a's m at T0 (an offset) and 3 times at T: growth 2, exactly, since every
    replicate resamples the same seeds; the same offset at both T gives 1; unpaired, it wobbles."""
    base = seed_rows(4)
    scaled = lambda k: stats.success_estimates([dict(r, m=k * r["m"]) for r in base])
    a = stats.success_estimates(base)
    g, lo, hi = laws.paired_growth(scaled(3.0), a, scaled(1.5), a)
    assert (g, lo, hi) == pytest.approx((2, 2, 2))
    assert laws.paired_growth(scaled(1.5), a, scaled(1.5), a) == pytest.approx((1, 1, 1))
    other = stats.success_estimates([dict(r, m=3 * r["m"]) for r in base], seed=1)
    _, lo_u, hi_u = laws.paired_growth(other, a, scaled(1.5), a)
    assert hi_u - lo_u > 0.2


@pytest.mark.parametrize("call, match", [
    (lambda: stats.fit_success_curve([10.0, -1.0], [0, 1]), "m must be positive"),
    (lambda: stats.fit_success_curve([10.0, 20.0], [0, 2]), r"success must be 0 or 1.*2"),
    (lambda: stats.m_at(1.0, 0.0, 1.0), "p must be in"),
    (lambda: stats.success_estimates([(10, 0, 5, 1), (20, 0, 5, 0)]), r"T=\[10.0, 20.0\]"),
    (lambda: stats.success_estimates([(10, 0, 5, 1)], n_boot=0), "n_boot must be"),
    (lambda: stats.parse_rows([(10, 0, 5, 0.5)]), "success must be 0 or 1, got 0.5"),
    (lambda: stats.parse_rows([{"T": 10, "seed": 0, "m": 5}]), "lacks key 'success'"),
    (lambda: laws.scaling_fits([10, 20], [1, 2], [[1], [2]]), "at least|>= 3"),
    (lambda: laws.scaling_fits([10, 20, 40], [1, np.inf, 2], np.ones((3, 4))),
     r"m50=\[inf\] at T=\[20\]"),
    (lambda: laws.scaling_fits([10, 20, 40], [1, 2, 3], np.ones((2, 4))), r"shape \[n_T=3"),
    # issue 39's hostile values: each names its argument in one line (no numpy message, no
    # MemoryError)
    (lambda: stats.success_estimates([(10, 0, 5, 1), (10, 1, 5, 0)], seed=-1), "^seed must be"),
    (lambda: intervals.seed_resamples(0), "^n_seeds must be an integer from 1, got 0"),
    (lambda: intervals.seed_resamples(3, n_boot=True, exact=False), "^n_boot must be"),
    (lambda: intervals.percentile_ci([1.0, 2.0], lo=120), "^lo must be a percent"),
    (lambda: intervals.median_ci([1.0, 2.0], lo=5, hi=5), "^lo must be below hi"),
    (lambda: stats.success_estimates([(10, 0, 5, 1), (10, 1, 5, 0)], n_boot=10 ** 12),
     "^n_boot must be an integer from 1 to 10,000,000, got 1000000000000"),
    (lambda: intervals.seed_resamples(20, n_boot=10 ** 12), "^n_boot must be"),
    (lambda: intervals.resample_counts(3, float("nan")), "^T must be a positive"),
])
def test_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_majority_mstar_after_bisection_has_an_exact_interval():
    # m* after bisection is the ceil(n/2)-th smallest critical m: its bootstrap distribution from
    # binomial tails, against every resample listed (n = 5, 6), ties and seeds above the grid
    for crit in ([np.inf, 30.0, 10.0, 30.0, 70.0], [np.inf, 30.0, 10.0, 30.0, 70.0, np.inf]):
        n, k = len(crit), math.ceil(len(crit) / 2)
        C, w = intervals.seed_resamples(n)
        kth = np.array([np.sort(np.repeat(crit, c.astype(int)))[k - 1] for c in C])
        support, p = intervals.order_statistic_bootstrap(crit, k)
        assert np.allclose([w[kth == x].sum() for x in support], p, rtol=0, atol=1e-12)
    grid = stats.m_grid(8, 600)
    rng = np.random.default_rng(4)
    rows = [dict(model="transformer", T=100, seed=sd, m=m, success=m >= th)
            for sd, th in enumerate(rng.choice(grid[:40], 15).tolist() + [10_000] * 3)
            for m in grid]                                   # every m run: bisection replays it
    st = stats.critical_sizes(rows, {"transformer": grid}, "bisect")[("transformer", 100)]
    support, p = intervals.order_statistic_bootstrap(st["per_seed"], 9)
    assert (st["m_star_lo"], st["m_star_hi"]) == intervals.distribution_ci(support, p)
    assert st["m_star_above"] == pytest.approx(p[np.isinf(support)].sum(), abs=1e-15)
    # the one committed interval the drawn resamples had wrong: 50 seeds at T = 1100
    table = open(os.path.join(HERE, "results/paper-range-ours/table.md")).read()
    row = next(ln for ln in table.splitlines() if ln.startswith("| transformer | 1100 |"))
    assert "| 134 [110, 208] |" in row


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    # stats.py: the m grid and the searches
    "stats.m_grid": Walk(lambda f: dict(lo=8, hi=100, ratio=1.05),
                         legal=dict(hi={"10**12": "about 520 sizes"},
                                    ratio={"10**12": "a grid of its two ends"})),
    "stats.bisect_search": Walk(lambda f: dict(grid=list(WALK_GRID)), legal=dict(grid={
        "[5]": "a grid of one size"}), extra=dict(grid={"unsorted": [16, 8], "[]": [],
                                                        "[0]": [0], "[nan]": [NAN]})),
    "stats.grid_search": Walk(lambda f: dict(grid=list(WALK_GRID)), legal=dict(grid={
        "[5]": "a grid of one size"}), extra=dict(grid={"unsorted": [16, 8], "[]": [],
                                                        "[0]": [0], "[nan]": [NAN]})),
    "stats.replay": Walk(lambda f: dict(gen=stats.bisect_search(list(WALK_GRID)),
                                        saved={16: True, 8: False}, answer=None),
                         legal=dict(saved={"missing key": "a search that needs a run"})),
    "stats.seed_outcome": Walk(lambda f: dict(grid=list(WALK_GRID), search="bisect",
                                              results={16: True, 8: False}),
                               legal=dict(grid={"[5]": "a grid of one size"},
                                          results={"missing key": "a search that needs a run"}),
                               extra=dict(grid={"[]": []})),
    # stats.py: rows
    "stats.parse_rows": Walk(lambda f: dict(rows=stats_rows()), names=dict(rows=r"\brows?\b"),
                             extra=dict(rows={"nan m": [dict(T=10, seed=0, m=NAN, success=1)],
                                              "success 2": [dict(T=10, seed=0, m=8, success=2)],
                                              "[]": []})),
    "stats.split_by_T": Walk(lambda f: dict(rows=stats_rows()), names=dict(rows=r"\brows?\b")),
    # stats.py: the success curve
    "stats.sigmoid": Walk(lambda f: dict(z=f["z"]),
                          legal=dict(z={"list": ARRAY_LIKE, "0-d": "elementwise: any shape",
                                        "wrong shape": "elementwise: any shape"})),
    "stats.fit_success_curve": Walk(lambda f: dict(m=np.array([8.0, 8, 16, 16, 32]),
                                                   success=np.array([0.0, 0, 1, 0, 1])),
                                    legal=dict(m={"list": ARRAY_LIKE}, success={"list":
                                                                                ARRAY_LIKE}),
                                    extra=dict(m={"-1": -np.ones(5), "nan": np.full(5, NAN)},
                                               success={"2": np.full(5, 2.0)})),
    "stats.m_at": Walk(lambda f: dict(p=0.5, a=-2.0, b=1.0),
                       legal=dict(a={"inf": "every run succeeded: 0.0", "-inf": "every run "
                                     "failed: inf", "-1": "an intercept", "0": "an intercept",
                                     "10**12": "an intercept"},
                                  b={"-1": "a falling curve: inf", "0": "a flat curve: inf",
                                     "10**12": "a steep curve", "None": "undetermined: inf"}),
                       extra=dict(a={"nan array": np.array([0.0, NAN]), "text": np.array(["1"])},
                                  b={"nan array": np.array([1.0, NAN])})),
    "stats.fit_flag": Walk(lambda f: dict(m=np.array([8.0, 8, 16, 16, 32]),
                                          success=np.array([0.0, 0, 1, 0, 1]), a=-5.0, b=2.0),
                           legal=dict(m={"list": ARRAY_LIKE}, success={"list": ARRAY_LIKE},
                                      a={"inf": "the fit's all-succeeded encoding", "-inf":
                                         "the fit's all-failed encoding", "-1": "an intercept",
                                         "0": "an intercept", "10**12": "an intercept"},
                                      b={"-1": "a falling curve, said so", "0": "a flat curve, "
                                         "said so", "None": "undetermined, said so", "10**12":
                                         "a steep curve"})),
    # stats.py: the bootstrap over seeds
    "stats.default_stat": Walk(lambda f: dict(a=np.array([-2.0, -3]), b=np.array([1.0, 1.2])),
                               legal=dict(a={"list": ARRAY_LIKE, "0-d": "a scalar fit",
                                             "wrong shape": "any shape a and b share"},
                                          b={"list": ARRAY_LIKE, "0-d": "broadcast to a",
                                             "None": "undetermined: inf"})),
    "stats.bootstrap_over_seeds": Walk(lambda f: dict(rows=stats_rows(), stat=stats.default_stat,
                                                      n_boot=50, rng=None),
                                       names=dict(rows=r"\brows?\b"),
                                       legal=dict(rng={"None": "the default generator"}),
                                       extra=dict(rng=RNGS)),
    "stats.success_estimates": Walk(lambda f: dict(rows=stats_rows(), n_boot=50, seed=0),
                                    names=dict(rows=r"\brows?\b"),
                                    legal=dict(seed=SEEDS)),
    # stats.py: m* by the majority rule
    "stats.critical_sizes": Walk(lambda f: dict(rows=stats_rows(model="transformer"),
                                                grid_by_model={"transformer": list(WALK_GRID)},
                                                search="bisect"),
                                 names=dict(rows=r"\brows?\b")),
    "stats.majority_mstar": Walk(lambda f: dict(rows=stats_rows(), grid=None),
                                 names=dict(rows=r"\brows?\b"),
                                 extra=dict(grid={"'x'": "x", "[[8]]": [[8]], "[]": [],
                                                  "[nan]": [NAN], "[1j]": [1j]})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over stats.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((stats,), WALK)
