"""theory_report.py (studies, a command): the paper's quantities measured on trained models.

    python -m studies.theory_report     prints the report (about 15 s on 2 cores); -h: usage

theory.py checks the theory on hand-built weights and random draws, with no training; this report
trains small models with train.py and measures them with theory.py's quantities:
  1. norms of trained 3-sparse AND models, their covering constant C and the reconstructed gap
     bound against T (theory.norm_measures, covering_constant, generalization_gap);
  2. the [CLS] attention mass on S, the construction's beside the trained models';
  3. the trained T=100 block's token geometry (measure_trained_block): how far attention
     expands and LayerNorm contracts the tokens of a trained model;
  4. an algorithmic baseline: sparse parity by Gaussian elimination over GF(2)
     (hypotheses.gf2_sample_need) beside the trained Transformer on sparse parity.
Tags as theory.py's: [theorem check] asserted, [measurement] no claim.
"""
import sys
if not __package__ and __import__("importlib.util").util.find_spec("studies") is None:
    sys.exit(f"{__file__} is a command of the package studies: run it from the "
             "repository's root as python -m studies.theory_report")   # (run as a file)

from studies.lib import cli   # first: importing it is every command's entry prologue

import time

import numpy as np

import attn
import data
from theory import (MEAS, THM, construction_cache, covering_constant, generalization_gap, heading,
                    norm_measures, pairwise_ratios, require, say, spectral_norm)

from studies.lib import checks, harness, hypotheses, training


def measure_trained_block(p, cfg, X):
    """Token geometry of a trained model: rows x0 = embeddings [T+1, d] of one input X [1, T];
    y = x0 + SelfAttn(LN1(x0)) (f_tf-layer: every position queries, attn.self_attention_forward);
    z = LN2(y) with the trained gain and shift. -> dict of pairwise-ratio summaries and sigmas."""
    attn.check_params(p, cfg)
    if not cfg["ln"] or not cfg["mlp"]:
        raise ValueError("measure_trained_block needs a model with LayerNorms and an MLP (ln2)")
    checks.check_01("X", X, "bits")
    if X.shape != (1, cfg["T"]):
        raise ValueError(f"X must be one input [1, T={cfg['T']}] of bits, got shape {X.shape}")
    f = {k: np.asarray(v, np.float64) for k, v in p.items()}
    x0, _ = attn.embed_forward(np.asarray(X, np.intp), f["E_tok"], f["E_pos"], f["cls"])
    xn, _ = attn.layernorm_forward(x0, f["ln1_g"], f["ln1_b"])
    a, _ = attn.self_attention_forward(xn, f, cfg["heads"])
    y = x0 + a
    z, _ = attn.layernorm_forward(y, f["ln2_g"], f["ln2_b"])
    r_att, r_ln, r_all = (pairwise_ratios(u[0], v[0]) for u, v in ((x0, y), (y, z), (x0, z)))
    summ = lambda r: dict(min=float(r.min()), median=float(np.median(r)), max=float(r.max()),
                          frac_expand=float((r > 1).mean()))
    return dict(attn=summ(r_att), ln=summ(r_ln), block=summ(r_all),
                sigma_x0=float(np.median(x0[0].std(1))), sigma_y=float(np.median(y[0].std(1))))


def _train_models(Ts, ms, steps, task="and", s=3, dtype="float32", tolerate_divergence=False,
                 log=lambda line: print(line, flush=True)):
    """training.study_run for each (T, m) pair, seed 0; -> list of result dicts. With
    tolerate_divergence a diverged run gives dict(T=T, m=m, test_acc=nan) instead of raising.
    log(line) gets one line per trained model (which, how far, test accuracy, seconds), flushed
    by default so that it shows under `python -m studies.theory_report > log`; log=None for
    silence."""
    out = []
    for k, (T, m) in enumerate(zip(Ts, ms), 1):
        t0 = time.perf_counter()
        try:
            out.append(training.study_run(dict(task=task, T=T, s=s, m=m, steps=steps, log_every=0,
                                            dtype=dtype), log=lambda *a: None))
            how = f"test acc {out[-1]['test_acc']:.3f}"
        except training.Diverged:
            if not tolerate_divergence:
                raise
            out.append(dict(T=T, m=m, test_acc=float("nan")))
            how = "diverged"
        if log is not None:
            log(f"  training {task} T={T} m={m} {steps} steps ({k} of {len(Ts)}): {how}, "
                f"{time.perf_counter() - t0:.1f} s")
    return out


def _trained_row(name, res, m):
    """One row of part 1's table: norms, C and the gap bound of a parameter dict."""
    nm = norm_measures(res["params"], res["cfg"])
    C = covering_constant(nm)
    gap = generalization_gap(C, res["cfg"]["d"], m, res["cfg"]["T"])
    acc = f"{res['test_acc']:7.3f}" if "test_acc" in res else ""
    print(f"  {name:>5}  {acc:>7} {max(nm['qk_spec']):8.3f} {max(nm['qk_21']):9.3f}"
          f" {max(nm['qk_fro']):8.3f} {max(nm['v_spec']):7.3f} {max(nm['v_21']):8.3f}"
          f" {spectral_norm(res['params']['W_O']):7.3f} {np.linalg.norm(res['params']['w']):5.2f}"
          f" {nm['B_X']:5.2f} {nm['L_after']:8.3f} {C:8.3g} {gap:10.3g}")
    return max(nm["qk_spec"]), C


def _report_trained_norms(ctx):
    """Part 1: norms, C and the gap bound of the model at init and trained at each T."""
    print()
    say(MEAS, f"norms of trained models (3-sparse AND, m={ctx['train_m']}, {ctx['train_steps']} "
        "Adam steps, seed 0; 16 heads: max over heads, C sums them)")
    say("", "  reconstructed bound: log N <= C log(2dmT)/eps^2, gap ~ sqrt(C log(2dmT)/m) "
        "(shape ours, constants not from the paper;")
    say("", "  attention part only: LN2 and LNf are left out of the Lipschitz factor L_after)")
    print("      T  test acc |W_QK|_2 |W_QK|_21 |W_QK|_F |W_V|_2 |W_V|_21 |W_O|_2   |w|   B_X"
          "  L_after        C  gap bound")
    _trained_row("init", ctx["init"], ctx["train_m"])
    trend = [_trained_row(str(res["T"]), res, ctx["train_m"]) for res in ctx["trained"]]
    say("", "  (init: the T=100 model before training. B_X ~ sqrt(d+1): LN1 puts tokens on the "
        "sphere of radius sqrt(d).")
    say("", f"   The bound is vacuous at m={ctx['train_m']}, as norm-based bounds usually are; "
        "what matters is how it moves with T.)")
    qk, C = np.array(trend).T
    Ts = ctx["train_T"]
    say(MEAS, f"from T={Ts[0]} to T={Ts[-1]} (x{Ts[-1] // Ts[0]}) at a fixed budget: max |W_QK|_2 "
        f"x{qk[-1] / qk[0]:.2f}, C x{C[-1] / C[0]:.2f}; largest/smallest over these T: "
        f"x{qk.max() / qk.min():.2f}, x{C.max() / C.min():.2f}")


def _report_attention_on_S(ctx, rng):
    """Part 2: [CLS] attention mass on S, construction (checked against the build) vs trained."""
    print()
    say(MEAS, "[CLS] attention mass on S (3-sparse AND): construction (1 head) vs trained "
        "(16 heads: mean over heads, and the best head)")
    print("        T   construction   trained: mean   trained: best head   test acc")
    for res in ctx["trained"]:
        T = res["T"]
        p, cfg, info = ctx["construct"]("and", T, 3)
        task = ctx["construct"].tasks[("and", T, 3)]
        mass = float(attn.cls_attention(p, cfg, task.sample(1, rng)[0])[0, 0, task.S].sum())
        require(abs(mass - info["mass_on_S"]) < 1e-9, "attn.cls_attention disagrees with the build")
        X = task.sample(200, rng)[0]                     # any bits: only S's positions matter
        A = attn.cls_attention(res["params"], res["cfg"], X)[:, :, res["S"]].sum(-1).mean(0)
        print(f"  {T:>7}   {mass:12.4f}   {res['attn_on_S']:13.4f}   {A.max():18.4f}   "
              f"{res['test_acc']:8.3f}")
    say("", "  (uniform attention would put s/(T+1) on S)")


def _report_trained_block(ctx, rng):
    """Part 3: the trained T=100 model's block on one input's tokens: distance ratios through
    attention, through LN2 (trained affine) and both."""
    heading("3. A trained block's token geometry (the probabilistic reading of theory.py part 3)")
    res = ctx["trained"][list(ctx["train_T"]).index(100)]
    X = (rng.random((1, 100)) < data.bit_probability("and", 3)).astype(np.uint8)
    mb = measure_trained_block(res["params"], res["cfg"], X)
    say(MEAS, "the trained T=100 model's block on one input's 101 tokens (5050 pairs): distance "
        "ratios min / median / max, share > 1")
    for key, what in (("attn", "x -> x + SelfAttn(LN1(x))"), ("ln", "y -> LN2(y), trained affine"),
                      ("block", "both")):
        v = mb[key]
        say("", f"  {what:<28} {v['min']:8.3f} {v['median']:8.3f} {v['max']:8.3f}   "
            f"{100 * v['frac_expand']:5.1f}% expand")
    say("", f"  token std sigma: {mb['sigma_x0']:.4f} before attention, {mb['sigma_y']:.4f} after:"
        " sigma << 1, so here LN2 expands (its norm is 1/sigma)")


def _report_gf2(ctx):
    heading("4. Algorithmic baseline: sparse parity by Gaussian elimination over GF(2)")
    rng = np.random.default_rng(7)
    say(THM, "at every T and seed below, the GF(2) learner recovers S from the first m0 samples, "
        "and from m0 - 1 the solution is not unique")
    say(MEAS, "m0 (where rank(X) first reaches T) per seed, beside the bits that name S, and the "
        "learner's time")
    print("        T  s   m0 per seed                 mean m0 - T   log2 C(T,s)   seconds")
    for T in ctx["gf2_T"]:
        t0 = time.perf_counter()
        ms = []
        for _ in range(ctx["gf2_seeds"]):
            m0, ok, unique_before = hypotheses.gf2_sample_need(T, 3, rng)
            require(ok and not unique_before, f"GF(2) learner at T={T}: recovered={ok}")
            ms.append(m0)
        print(f"  {T:>7}  3   {' '.join(str(m) for m in ms):<26}  {np.mean(ms) - T:11.1f}   "
              f"{hypotheses.log2_binomial(T, 3):11.1f}   {time.perf_counter() - t0:7.2f}")
    say("", "  the learner needs about T + 2 samples: ~T, against the s log T bits that name S "
        "(it does not use sparsity)")
    print()
    say(MEAS, "the trained Transformer on 3-sparse parity (training.study_run, float64, "
        f"{ctx['parity_steps']} steps, one seed): test accuracy")
    t0 = time.perf_counter()
    ctx["parity"] = [(T, [r["test_acc"] for r in
                          _train_models([T] * len(ctx["parity_m"]), ctx["parity_m"],
                                       ctx["parity_steps"], task="parity", dtype="float64",
                                       tolerate_divergence=True)])
                     for T in ctx["parity_T"]]
    ctx["t_parity"] = time.perf_counter() - t0
    print("        T " + "".join(f"   m={m:<5}" for m in ctx["parity_m"])
          + "   smallest m with >= 0.99")
    for T, accs in ctx["parity"]:
        ok = [m for m, a in zip(ctx["parity_m"], accs) if a >= 0.99]
        print(f"  {T:>7} " + "".join(f"   {a:7.3f}" for a in accs)
              + f"   {ok[0] if ok else 'none'}")
    say("", "  (one seed and a short budget: a rough reading, not a critical sample size; "
        "nan = the run diverged)")


# One screen of the report's settings (about 15 s in total: 13 s measured on a 2-core AMD EPYC).
TRAINED = dict(
    train_T=(20, 50, 100, 200, 400),  # parts 1-3: trained 3-sparse AND models (train.py defaults
    train_m=300,                      #   otherwise: d=64, 16 heads, lr 1e-3), their samples
    train_steps=300,                  #   and Adam steps
    gf2_T=(10, 30, 100, 300, 1000, 2000), gf2_seeds=3,            # part 4: GF(2) learner
    parity_T=(10, 20, 40), parity_m=(100, 200, 400, 800), parity_steps=300,  # part 4: Transformer
)


def main(argv=None):
    training.keep_freed_memory()
    cli.OneLineParser(
        prog="studies.theory_report", allow_abbrev=False,
        description="Print one report: the quantities of Edelman et al. (ICML 2022) that theory.py "
        "checks, measured on models train.py trains (about 15 s on 2 cores). Tags: [theorem "
        "check] asserted, [measurement] no claim.").parse_args(harness.check_argv(argv))
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)     # every line shows at once under `> log`
    t_start = time.perf_counter()
    print("studies.theory_report: theory.py's quantities on trained models\ntags: [theorem check] "
          "asserted; [measurement] no claim")
    ctx = dict(TRAINED, construct=construction_cache())
    ctx["init"] = dict(params=attn.init_params(attn.default_config(T=100), training.study_streams(0).init),
                       cfg=attn.default_config(T=100))          # the T=100 run before its 1st step
    print("\ntraining the models parts 1-3 measure (3-sparse AND, train.py's defaults, seed 0)")
    t0 = time.perf_counter()
    ctx["trained"] = _train_models(ctx["train_T"], [ctx["train_m"]] * len(ctx["train_T"]),
                                  ctx["train_steps"])
    t_train = time.perf_counter() - t0
    heading("1. Trained models' norms (Edelman Section 3)")
    _report_trained_norms(ctx)
    heading("2. [CLS] attention on S (Edelman Section 4)")
    rng = np.random.default_rng(2)
    _report_attention_on_S(ctx, rng)
    _report_trained_block(ctx, np.random.default_rng(5))
    _report_gf2(ctx)
    heading("Notes")
    say(MEAS, f"time: training for parts 1-3 {t_train:.1f} s, the parity runs of part 4 "
        f"{ctx['t_parity']:.1f} s, total {time.perf_counter() - t_start:.1f} s")
    say("", "bounds marked 'reconstructed' have the shape of Edelman et al.'s bound (log T, norms, "
        "1/eps^2); their constants are ours.")
    return 0


if __name__ == "__main__":
    sys.exit(cli.one_line_errors("studies.theory_report", main))
