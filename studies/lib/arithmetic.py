"""arithmetic.py (studies/lib): what arithmetic made a number: the BLAS library, its kernel, threads,
CPU, dtype.

A float32 training run is bit for bit the same only where the same arithmetic runs it. numpy's
matrix products go to the BLAS library numpy loaded; OpenBLAS, the one numpy's wheels carry,
picks a kernel for the processor when it loads (Haswell on an AMD EPYC without AVX-512,
SkylakeX on an Intel Xeon with it), and two kernels round a float32 product differently. So
every number the project writes says which arithmetic made it (record), a folder continued under
another arithmetic is refused (differences), and a reader can ask OpenBLAS for another kernel
(OPENBLAS_CORETYPE, set before numpy loads; kernels_here says which this processor can run).

The kernel is read at run time from the library numpy loaded, through the standard library's
ctypes (openblas_get_corename under the symbol prefix of the build: scipy-openblas's
`scipy_openblas_..64_`, a system OpenBLAS's plain names); where it cannot be read (MKL,
Accelerate, a stripped build) the record says so. Needs numpy and the standard library.
"""
import ctypes
import os
import platform

import numpy as np

UNREAD = "not read"                # a field the library or the system does not tell
# OpenBLAS's symbol prefixes and suffixes, tried in order: numpy's wheels (scipy-openblas, 64-bit
# integers), scipy-openblas 32-bit, a system OpenBLAS built with 64-bit integers, a plain one
PREFIXES = (("scipy_openblas_", "64_"), ("scipy_openblas_", ""), ("openblas_", "64_"),
            ("openblas_", ""))
# The x86-64 kernels a reader may ask OpenBLAS for (OPENBLAS_CORETYPE), with the CPU flags
# (/proc/cpuinfo) each needs: a kernel the processor cannot run crashes it, so none is offered
# without them. OpenBLAS may serve a newer name with an older kernel (it says which: record).
KERNEL_FLAGS = {
    "Nehalem": {"sse4_2"},
    "Sandybridge": {"avx"},
    "Haswell": {"avx2", "fma"},
    "Zen": {"avx2", "fma"},
    "SkylakeX": {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"},
    "Cooperlake": {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"},
    "SapphireRapids": {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16",
                       "avx512_fp16", "amx_bf16", "amx_tile"},
}
# The fields that decide the bits: a folder's rows agree on these or were made by two arithmetics
DECIDING = ("blas", "blas_version", "kernel", "dtype")


def blas_path():
    """The file of the BLAS library numpy loaded (from the process's memory map), or None."""
    try:
        with open("/proc/self/maps") as f:
            hits = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
    except OSError:
        return None
    return sorted(hits)[0] if hits else None


def _openblas_call(lib, name, restype):
    for pre, post in PREFIXES:
        f = getattr(lib, f"{pre}{name}{post}", None)
        if f is not None:
            f.restype, f.argtypes = restype, []
            return f()
    return None


def blas_library():
    """{blas, blas_version, kernel, threads} of the library numpy loaded, each UNREAD where it
    cannot be read (the library's path stays out: it names this machine's folders)."""
    np.ones((2, 2)) @ np.ones((2, 2))                  # the library is loaded by now
    out, path = dict(blas=UNREAD, blas_version=UNREAD, kernel=UNREAD, threads=UNREAD), blas_path()
    if path is None:
        return out
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return out
    config = _openblas_call(lib, "get_config", ctypes.c_char_p)
    if config:
        words = config.decode(errors="replace").split()
        out.update(blas="OpenBLAS", blas_version=words[1] if len(words) > 1 else UNREAD)
        core = _openblas_call(lib, "get_corename", ctypes.c_char_p)
        out["kernel"] = core.decode(errors="replace") if core else UNREAD
        threads = _openblas_call(lib, "get_num_threads", ctypes.c_int)
        out["threads"] = threads if threads is not None else UNREAD
    elif "mkl" in path.lower():
        out["blas"] = "MKL"
    return out


def cpu_model():
    """The processor's model name (/proc/cpuinfo), or platform's word for it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or UNREAD


def cpu_flags():
    """The processor's feature flags (/proc/cpuinfo), an empty set where the system hides them."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def numpy_simd():
    """numpy's own SIMD targets on this processor (its elementwise loops dispatch on them)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:                                  # numpy 1.x
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return UNREAD
    return " ".join(k for k in ("SSE42", "AVX2", "FMA3", "AVX512F", "AVX512_SKX", "AVX512_ICL",
                                "AVX512_SPR", "ASIMD", "SVE") if features.get(k)) or "none"


def record(dtype):
    """The arithmetic a run in `dtype` gets in this process: BLAS library, version, kernel,
    threads, numpy's version and SIMD targets, Python's version, the CPU model, the dtype, and
    OPENBLAS_CORETYPE as the environment set it (None: OpenBLAS chose)."""
    if not (isinstance(dtype, (str, np.dtype)) and str(dtype) in ("float32", "float64")
            or dtype is np.float32 or dtype is np.float64):
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r:.40}")
    return dict(blas_library(), numpy=np.__version__, numpy_simd=numpy_simd(),
                python=platform.python_version(), cpu=cpu_model(), dtype=str(np.dtype(dtype)),
                coretype_env=os.environ.get("OPENBLAS_CORETYPE"))


def differences(a, b):
    """The DECIDING fields on which two records differ, as 'field: a vs b' (empty: the same
    arithmetic, as far as a record can tell)."""
    for name, rec in (("a", a), ("b", b)):
        _check_record(name, rec)
    return [f"{k}: {a.get(k, UNREAD)} vs {b.get(k, UNREAD)}" for k in DECIDING
            if a.get(k, UNREAD) != b.get(k, UNREAD)]


def words(rec):
    """A record in a few words: 'OpenBLAS 0.3.31 SkylakeX, 1 thread, float32'."""
    _check_record("rec", rec)
    threads = rec.get("threads", UNREAD)
    return (f"{rec.get('blas', UNREAD)} {rec.get('blas_version', UNREAD)} "
            f"{rec.get('kernel', UNREAD)}, {threads} thread{'s' * (threads != 1)}, "
            f"{rec.get('dtype', UNREAD)}")


def kernels_here():
    """The OpenBLAS kernels this processor can run (KERNEL_FLAGS), newest last; empty where its
    flags cannot be read (no kernel is then offered)."""
    flags = cpu_flags()
    return [k for k, need in KERNEL_FLAGS.items() if flags and need <= flags]


def _check_record(name, rec):
    if not isinstance(rec, dict):
        raise TypeError(f"{name} must be a record of arithmetic.record (a dict), got "
                        f"{type(rec).__name__}")
