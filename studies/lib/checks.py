"""checks.py (studies/lib): one vocabulary of argument checks for the studies.

The reference at the root checks only at its doors, in a line each; everything built on it here
(the studies' trainer, its options, checkpoints, the hypotheses count, the symmetries, the
statistics) refuses a caller's bad value through these: one line that names the argument and
what is allowed (refuse; WrongType, a ValueError that is also a TypeError, for a wrong type).
Needs numpy alone; a model's config and parameters are checked by attn.py's own door checks
(attn.check_config, attn.check_params).
"""
import math
import os
import reprlib

import numpy as np

FLOAT_DTYPES = ("float32", "float64")


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


def check_choice(name, v, allowed):  # v one of the strings `allowed` (never hashed: a str only)
    if not (isinstance(v, str) and v in allowed):
        raise refuse(name, v, f"one of {', '.join(allowed)}", isinstance(v, str))


def check_array(name, v, kinds, shape, what):
    """v a numpy array whose dtype has a kind in `kinds` ("biuf": bool, integer or float) or is one
    of `kinds` (a tuple of dtypes), else WrongType; of `shape` (a tuple, or a test of the shape),
    else ValueError. Both say "{name} must be {what}", '{shape}' filled in."""
    right_type = isinstance(v, np.ndarray) and (v.dtype.kind in kinds if isinstance(kinds, str)
                                                else v.dtype in kinds)
    if not (right_type and (v.shape == shape if isinstance(shape, tuple) else shape(v.shape))):
        hint = f": pass np.asarray({name})" if isinstance(v, (list, tuple)) else ""
        raise refuse(name, v, what.format(shape=shape), right_type, hint)


def check_01(name, v, what):  # v's values 0 and 1 only: one scan, none for a bool array
    check_array(name, v, "biuf", lambda s: True, f"a numpy array of {what} (dtype bool, integer "
                "or float)")
    if v.dtype != np.bool_:
        bad = (v != 0) & (v != 1)                                    # NaN fails both comparisons
        if bad.any():
            raise ValueError(f"{name} must hold {what} 0 and 1 only, got {v[bad].flat[0].item()!r}")


def physical_memory():
    """Bytes of physical memory (os.sysconf), or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(need, what, of, advice):  # need bytes within half of physical memory
    check_number("need", need, REALS, 0, math.inf, "a number of bytes >= 0")
    limit = 0.5 * (physical_memory() or math.inf)
    if need > limit:
        raise ValueError(f"{what} needs about {need / 2**30:.1f} GiB {of}; this machine allows "
                         f"{limit / 2**30:.1f} GiB: {advice}")


def check_support(S, T, s):
    """S as an intp array of s distinct positions in [0, T), sorted (array-likes are read)."""
    A = np.asarray(S)
    if not (A.dtype.kind in "iu" and A.shape == (s,) and A.min() >= 0 and A.max() < T
            and np.all(A[:-1] < A[1:])):                         # increasing: distinct too
        raise ValueError(f"S must be {s} distinct positions in [0, {T}) in increasing order (the "
                         f"support, s={s}), got {repr(A.tolist())[:80]}")
    return A.astype(np.intp)


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
    return m


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


def float_dtype(name, v):
    """v as np.dtype float32 or float64 (a name, a dtype or a numpy type), or ValueError."""
    try:
        dt = None if v is None else np.dtype(v)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.name not in FLOAT_DTYPES:
        raise ValueError(f"{name} must be 'float32' or 'float64', got {describe(v)}")
    return dt
