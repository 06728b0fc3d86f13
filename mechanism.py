"""mechanism.py: what training finds, measured against the theory of Edelman et al. (ICML 2022).

    python mechanism.py plan OUT FOLDER FOLDER ...   the cells: per width and T a borderline m (the
                                                     folder's m*) and a fixed m; OUT/plan.json
    python mechanism.py run OUT [--workers 2]        train every planned run: one row of OUT/runs.csv
                                                     each, flushed as it finishes (resumable)
    python mechanism.py report OUT                   OUT/table.md, and OUT/mechanism.png with matplotlib
    python mechanism.py --help                       every option

The capacity argument (Section 3) says heads of bounded norm form a class whose covering number
grows only like log T; the construction (Section 4) creates the sparse variable with a head whose
score gap between S and the other positions grows like log((T - s) / (s eps)). This file measures
the same quantities on the parameters a trained run ends with (measure_mechanism) and studies
them over seeds, T and widths: do the norms stay bounded as T grows, do they tell the runs that
generalise from those that do not, and how does the head that attends S do it.

It reads top to bottom: the norms and the covering constant (theory.py imports them: one copy),
the measurement of one trained model, the plan of cells, the runs, the report, the command line.
"""
import sys

import cli                      # standard library only: the thread setting acts before numpy

if __name__ == "__main__":
    cli.quiet_interrupts("mechanism.py")
    cli.set_blas_threads()      # one BLAS thread per process: the worker pool is the parallelism

import csv
import json
import math
import multiprocessing as mp
import os
import signal
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

import numpy as np

import attn
import folder
import stats
import train
from cli import OneLineParser, int_list, integer, number

# ======== 1. NORMS AND THE COVERING CONSTANT (Edelman Section 3) ================================
# 1b. Norm measures of a parameter dict (attn.init_params, a training result, or a construction).
#     Per head h (columns h*e:(h+1)*e of W_Q, W_K, W_V; rows of W_O), with the biases folded in as
#     a constant-1 input coordinate, x~ = [x, 1]  (so a trained model's b_Q, b_K, b_V count too):
#       W_QK = (1/sqrt(e)) [W_Q; b_Q] [W_K; b_K]^T   [d+1, d+1]  the score of x_t is z~ W_QK x~_t^T
#       W_V  = [W_V; b_V]                             [d+1, e]
#       W_O  = W_O[h rows]                            [e, d]
#     B_X = max row norm of the tokens fed to attention (after LN1 when cfg["ln"]) with the 1 folded
#     in: sqrt(B^2 + 1). Before LN1 position t holds one of only two rows, so the max over the
#     2T + 1 distinct rows is the max over every possible input.

def spectral_norm(W):  # [a, b] -> float
    return float(np.linalg.norm(np.asarray(W, np.float64), 2))


def norm_21(W):  # [a, b] -> float: sum over columns of the column 2-norms
    return float(np.linalg.norm(np.asarray(W, np.float64), axis=0).sum())


def lipschitz_after_attention(p, cfg):
    """Lipschitz constant of the map from the attention output (after W_O) to the logit, *leaving
    out LN2 and LNf* (their constant 1/sigma depends on the activations, not on T):
    ||w|| (1 + L_act ||W_1||_2 ||W_2||_2), with L_act = 1 for ReLU and 1.13 for GELU."""
    attn.check_params(p, cfg)
    lip = 1.0
    if cfg["mlp"]:
        L_act = 1.0 if cfg["act"] == "relu" else 1.13
        lip += L_act * spectral_norm(p["W_1"]) * spectral_norm(p["W_2"])
    return float(np.linalg.norm(p["w"])) * lip


def norm_measures(p, cfg):
    """Edelman Section 3's norm bounds for a parameter dict -> dict.
    Keys: B_X, L_after (lipschitz_after_attention), and per-head lists qk_spec, qk_21, qk_fro,
    v_spec, v_21, o_spec (spectral, (2,1) and Frobenius norms of the per-head matrices above).
    """
    attn.check_params(p, cfg)
    d, H = cfg["d"], cfg["heads"]
    e = d // H
    f64 = {k: np.asarray(p[k], np.float64) for k in attn.ATTN_KEYS}
    rows = np.concatenate([(p["E_tok"][:, None, :] + p["E_pos"]).reshape(-1, d),
                           p["cls"][None]]).astype(np.float64)      # the 2T + 1 distinct tokens
    if cfg["ln"]:
        rows = attn.layernorm_forward(rows, p["ln1_g"].astype(np.float64),
                                      p["ln1_b"].astype(np.float64))[0]
    B = float(np.linalg.norm(rows, axis=1).max())
    keys = ("qk_spec", "qk_21", "qk_fro", "v_spec", "v_21", "o_spec")
    out = dict(B_X=float(np.hypot(B, 1.0)), L_after=lipschitz_after_attention(p, cfg),
               **{k: [] for k in keys})
    for h in range(H):
        c = slice(h * e, (h + 1) * e)
        Q = np.vstack([f64["W_Q"][:, c], f64["b_Q"][c]])                # [d+1, e]
        K = np.vstack([f64["W_K"][:, c], f64["b_K"][c]])
        V = np.vstack([f64["W_V"][:, c], f64["b_V"][c]])
        W_QK = (Q @ K.T) * e ** -0.5                                       # [d+1, d+1]
        for k, v in zip(keys, (spectral_norm(W_QK), norm_21(W_QK), float(np.linalg.norm(W_QK)),
                               spectral_norm(V), norm_21(V), spectral_norm(f64["W_O"][c]))):
            out[k].append(v)
    return out


# 1c. The covering number and the generalization gap, in the RECONSTRUCTED shape (Edelman
#     Section 3 gives the shape; we could not confirm its exact constants, so these are ours, in
#     the style of Bartlett-Foster-Telgarsky 2017). For head h, with L_h = ||W_O,h||_2 * L_after:
#       scores   z~ W_QK x~_t = <W_QK, z~ x~_t^T> over the m(T+1) (sample, position) pairs: a
#                linear class in W_QK of scale a1 = ||W_QK||_F B_X^2 (Frobenius: it is <= the (2,1)
#                norm, and that of e_CLS u^T, ||u||_1, is loose by up to sqrt(d)); an l_inf error e1
#                in the scores is an l_1 error 2 e1 in the weights (1a): rho1 = 2 B_X ||W_V||_2 L_h
#       values   x~_t W_V over the m(T+1) tokens: a2 = ||W_V||_{2,1} B_X, rho2 = L_h
#       readout  the head output (norm <= B_X ||W_V||_2) read out: a3 = B_X ||W_V||_2 L_h, rho3 = 1
#     A linear class of scale a has an eps-cover with log N <= a^2 log(2 d n) / eps^2 (Zhang 2002's
#     lemma, n points). Splitting eps = sum_i rho_i eps_i optimally gives
#       log N_inf(F; eps) <= C * log(2 d m T) / eps^2,   C = (sum_{h,i} (a_i rho_i)^(2/3))^3
#     and the gap sqrt(C log(2 d m T) / m) (Dudley's integral, log factors dropped). T enters
#     only through the logarithm.

def covering_constant(nm):
    """C of the reconstructed bound from norm_measures(...) output; see the comment above."""
    if not isinstance(nm, dict) or "qk_fro" not in nm:
        raise ValueError(f"nm must be the dict returned by norm_measures, got {type(nm).__name__}")
    B, total = nm["B_X"], 0.0
    for qkF, v2, v21, o2 in zip(nm["qk_fro"], nm["v_spec"], nm["v_21"], nm["o_spec"]):
        L = o2 * nm["L_after"]
        terms = ((qkF * B * B) * (2 * B * v2 * L), (v21 * B) * L, B * v2 * L)
        total += sum(t ** (2.0 / 3.0) for t in terms)
    return total ** 3
