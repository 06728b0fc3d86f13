"""test_workers.py: the tests of studies/lib/workers.py.

Run from the repository's root: python -m pytest -q
"""
import math

import numpy as np

from studies.lib import run_options, training, workers
from studies.conftest import walk_modules
from test_all import NO_ALLOC, SMALL, Walk


def test_a_monitor_only_watches_and_stops_a_stack_when_every_run_reaches_the_bar():
    runs = [dict(SMALL, task="parity", s=2, T=10, m=400, steps=400, d=16, heads=4, mlp=16, seed=s)
            for s in (0, 1)]
    watch = workers._FirstHit(10, 2)
    seen = training.study_stack(runs, monitor=watch)
    plain = training.study_stack(runs)
    ran = seen[0]["steps_run"]
    assert (watch.first > 0).all() and ran == watch.first.max() < 400 and ran % 10 == 0
    assert all(s["steps_run"] == ran for s in seen) and plain[0]["steps_run"] == 400
    for a, b in zip(seen, plain, strict=True):   # the same training, cut where it stopped
        assert a["losses"] == b["losses"][:ran]
    never = workers._FirstHit(10, 2)
    never.__class__ = type("Never", (workers._FirstHit,), {"__call__": lambda self, *a: False})
    assert training.study_stack(runs, monitor=never)[0]["steps_run"] == 400


def test_best_seen_monitor_and_loss_summary():
    b = workers._BestSeen(every=10)
    assert b(10, [0.5, np.nan], [1, 1]) is False
    assert b(20, [0.9, 0.7], [1, 1]) is False
    assert b(30, [0.9, 0.6], [1, 1]) is False           # a tie keeps the first step
    assert b.best.tolist() == [0.9, 0.7] and b.step.tolist() == [20, 20]
    final, low, jump = workers._loss_summary([0.7, 0.005, 0.002, 0.68, 0.3])
    assert (final, low, jump) == (0.3, 0.002, 0.68)
    assert math.isnan(workers._loss_summary([0.7, 0.5])[2])


_RUN = lambda **kw: dict(dict(run_options.DEFAULTS, T=8, m=16, d=8, heads=2, mlp=8, steps=20,
                              n_test=100, seed=0, log_every=0), **kw)


# ---------------- the walk: every public function refuses hostile values by name ------------------

WALK = {
    "workers.train_cell": Walk(lambda f: dict(runs=[dict(_RUN(), design="fixed")]), run=False),
    "workers.train_trace": Walk(lambda f: dict(runs=[dict(_RUN(), design="fixed")], every=10),
                                  run=False),
    "workers.sweep_worker": Walk(lambda f: dict(runs=[_RUN(steps=2)])),
    "workers.stack_size": Walk(lambda f: dict(T=100, most=8, d=64, heads=16, itemsize=4),
                             legal={k: {"10**12": NO_ALLOC} for k in ("T", "most", "d", "heads",
                                                                     "itemsize")}),
    "workers.run_stack": Walk(lambda f: dict(runs=[_RUN(steps=2, task="parity", s=2)], every=1),
                            legal=dict(every={"10**12": "past the budget: the last step is "
                                                        "checked"})),
}


def test_every_public_function_refuses_hostile_values_naming_the_argument():
    """The walker of test_all.py over workers.py: every public function has a
    WALK entry and refuses each hostile value in one line naming the argument."""
    walk_modules((workers,), WALK)
