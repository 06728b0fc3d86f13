"""limits.py (studies/lib): the statistical limit, the fewest samples that leave one hypothesis.

    python -m studies.sweep limit      the limit per T (no training): table.md and limit.json

For each T, over LIMIT_SEEDS independent streams of samples (the streams an iid run of each seed
draws, training.study_streams), the first m at which exactly one s-sparse hypothesis of the task fits the
m samples (hypotheses.first_identifying_m), and its median and 5-95% spread over the streams: the
reference below which no learner can be sure of S. The sweeps' tables and the headline table set
it beside m* (report.py); families of many supports are enumerated only where that is cheap.
"""
import math
import os
import time

import numpy as np

import data

from studies.lib import checks, folder, harness, hypotheses, training
from studies.lib.checks import INTS, check_number
from studies.lib.cli import claim_outputs, read_text_file, write_json, write_text
from studies.lib.harness import need


LIMIT_SEEDS = 200     # streams per T for the statistical limit (about 1 s at T = 10^4)
LIMIT_M_MAX = 100000  # the longest prefix of a stream searched; beyond it the limit is inf
_LIMITS = {}          # "task|s|T|n_seeds" -> the limit's dict, for the life of the process


STRUCTURED = ("and", "or", "parity")   # tasks whose hypotheses hypotheses.py counts without enumeration
CHEAP_SUPPORTS = 1000   # C(T, s) up to this: enumerating every support takes about a second


def _check_limit_arguments(task, s, Ts, n_seeds, compute):
    need(isinstance(task, str) and task in data.TASKS, "task", task,
            f"one of {', '.join(data.TASKS)}", ValueError)
    need(isinstance(Ts, (list, tuple)) and Ts, "Ts", Ts, "a non-empty list of integers T")
    check_number("s", s, INTS, 1)
    for T in Ts:
        check_number("Ts", T, INTS, s, 2 ** 62, "integers T >= s = {lo}")
    check_number("n_seeds", n_seeds, INTS, 1, 10 ** 6 + 1)
    need(isinstance(compute, bool), "compute", compute, "True or False")


def statistical_limits(task, s, Ts, n_seeds=LIMIT_SEEDS, cache=None, compute=True):
    """Per T, the statistical limit of the task (no training): over seeds 0..n_seeds-1, the
    smallest m at which seed's own training stream (the rows an iid run of that seed trains on)
    leaves exactly one compatible s-sparse hypothesis (hypotheses.first_identifying_m). -> {T: dict(
    median, q05, q95)}, or {} for a task whose count is not affordable at these T. No learner of
    the class can do better than this on that stream; it is the floor beside m*. cache: a JSON
    file of earlier answers (they depend on nothing else), so a report does not redo them; this
    process also keeps every answer it has computed or read (_LIMITS). A cache entry that is not
    a limit is computed again and rewritten; a cache file that is not a cache of limits
    (cli.claim_output) is neither read nor replaced, with a warning. compute=False: answer from
    the caches only (a limit found by enumeration can take many minutes per T), except where
    there are at most CHEAP_SUPPORTS supports to enumerate."""
    _check_limit_arguments(task, s, Ts, n_seeds, compute)
    if cache is not None:
        harness.check_path("cache", cache, "a limits.json's path")
    out, known = {}, {}
    if cache:
        try:
            claim_outputs([(cache, "limits", "the cache")])
            if os.path.exists(cache):
                known = folder.parse_json(read_text_file(cache, "the cache"))
                if not isinstance(known, dict):
                    raise ValueError(f"the cache {cache} is not a cache of limits")
        except (OSError, ValueError) as e:
            print(f"warning: {e}; the limits are computed without it")
            cache, known = None, {}
    for T in Ts:
        key = f"{task}|{s}|{T}|{n_seeds}"
        hit = _LIMITS.get(key) or _cached_limit(known.get(key), n_seeds, T, s)
        redo = compute or math.comb(T, s) <= CHEAP_SUPPORTS
        if not hit and key in known:
            print(f"warning: the cache {cache}: the entry {key} is not a limit (median, q05, q95 "
                  f"whole numbers up to {LIMIT_M_MAX}, or null); "
                  + ("computed again" if redo else "not shown"))
        if hit:
            out[T] = known[key] = _LIMITS[key] = hit
            continue
        if not redo:
            continue
        firsts = []
        try:
            for seed in range(n_seeds):
                streams = training.study_streams(seed)       # the streams an iid run of the seed uses
                t = data.make_task(task, T, s, streams.task)
                firsts.append(hypotheses.first_identifying_m(t, streams.train, LIMIT_M_MAX))
        except ValueError:
            continue                                  # not affordable at this T: left out
        v = np.array([np.inf if f is None else f for f in firsts], float)
        q = lambda p: float(np.percentile(v, p, method="nearest"))   # inf-safe: no interpolation
        out[T] = known[key] = _LIMITS[key] = dict(median=q(50), q05=q(5), q95=q(95),
                                                  n_seeds=n_seeds)
    if cache and len(known) > 0:
        write_json(cache, known)
    return out


def _cached_limit(entry, n_seeds, T=None, s=None):
    """A limits.json entry as statistical_limits returns it (null, how strict JSON writes inf,
    read back as inf), or None when it is not one (damaged or impossible: computed again). A
    limit is a number of samples: each of median, q05 and q95 is inf or a whole number from 1
    (0 only when T = s) to LIMIT_M_MAX, in that order."""
    if not isinstance(entry, dict) or entry.get("n_seeds") != n_seeds:
        return None
    out, least = {}, 0 if T is None or T == s else 1
    for k in ("median", "q05", "q95"):
        v = entry.get(k, "missing")
        if v is None:                 # how the cache writes inf; a non-finite float (NaN,
            v = math.inf              # -Infinity, Infinity) is never written, so never believed
        elif not isinstance(v, (int, float)) or isinstance(v, bool) or (
                isinstance(v, float) and not math.isfinite(v)) or not (
                least <= v <= LIMIT_M_MAX and v == int(v)):    # compared as read: a 400-digit
            return None                                        # integer never becomes a float
        out[k] = float(v)
    out["n_seeds"] = n_seeds
    return out if out["q05"] <= out["median"] <= out["q95"] else None


def limit_text(lim):
    """A limit (statistical_limits' dict) as 'median [q05, q95]'; '' for none (None or {})."""
    if not lim:
        return ""
    need(isinstance(lim, dict) and {"median", "q05", "q95"} <= set(lim), "lim", lim,
            "a limit of statistical_limits (median, q05, q95)", ValueError)
    show = lambda v: f"{v:.0f}" if np.isfinite(v) else "inf"
    return f"{show(lim['median'])} [{show(lim['q05'])}, {show(lim['q95'])}]"

def limit_command(a, fail):
    """`python -m studies.sweep limit`: per T, the statistical limit and the probability that a
    random training set of m samples leaves more than one hypothesis; a is the parsed command
    line, fail(text) ends the command with one line."""
    if a.s > min(a.Ts):
        fail(f"--s {a.s} is larger than the smallest T {min(a.Ts)}")
    for T in a.Ts:                           # sizes, before anything is allocated
        try:
            checks.check_sample_size(max(a.ms), T)
        except ValueError as e:
            fail(f"--Ts {T} with --ms {max(a.ms)}: {e}")
    if a.out:                                # the files it writes: free, or its own kind
        if os.path.exists(a.out) and not os.path.isdir(a.out):
            fail(f"--out {a.out} is a file; give a folder")
        try:
            os.makedirs(a.out, exist_ok=True)
            claim_outputs([(os.path.join(a.out, "table.md"), "table", "--out"),
                           (os.path.join(a.out, "limit.json"), "limit", "--out")])
        except OSError as e:
            fail(f"--out {a.out}: cannot create the folder ({e.strerror})")
        except ValueError as e:
            fail(str(e))
    t0 = time.perf_counter()
    lines = ["| T | first m that identifies S: median [5%, 95%] | "
             + " | ".join(f"P(ambiguous), m = {m}" for m in a.ms) + " |",
             "|---|---|" + "---|" * len(a.ms)]
    out = []
    for T in a.Ts:
        lim = statistical_limits(a.task, a.s, [T], a.seeds).get(T)
        if lim is None:
            fail(f"counting {a.task} hypotheses at T={T} is not affordable; use smaller T")
        rng = np.random.default_rng(1000 + T)
        task = data.make_task(a.task, T, a.s, rng)
        probs = [hypotheses.ambiguity_probability(task, m, rng, a.sets) for m in a.ms]
        out.append(dict(T=T, **lim, p_ambiguous=dict(zip(a.ms, probs))))
        lines.append(f"| {T} | {limit_text(lim)} | " + " | ".join(f"{p:.3f}" for p in probs) + " |")
        print(lines[-1] if len(lines) > 3 else "\n".join(lines), flush=True)
    print(f"({a.seeds} streams and {a.sets} sets per T, {a.task} s={a.s}; "
          f"{time.perf_counter() - t0:.0f} s)")
    if a.out:
        write_text(os.path.join(a.out, "table.md"), "\n".join(lines) + "\n")
        write_json(os.path.join(a.out, "limit.json"), dict(task=a.task, s=a.s, seeds=a.seeds,
                                                           sets=a.sets, rows=out))
    return 0
