"""numpy's BLAS threads for a benchmark, set before numpy loads (it reads them only then).

The benchmarks compare CPU time with onnxruntime on one thread (``intra_op_num_threads=1``),
so the VM's BLAS gets one thread too unless ``--blas-threads N`` says otherwise: OpenBLAS's
spare threads spin while they wait, which CPU time counts as work. Import this module and
call :func:`pin_blas_threads` before anything imports numpy.
"""

from __future__ import annotations

import os

VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def pin_blas_threads(argv: list[str], default: str = "1") -> str:
    """Set the BLAS thread variables from ``--blas-threads N`` in ``argv`` (else ``default``)
    and return the count."""
    threads = default
    for i, a in enumerate(argv):
        if a == "--blas-threads" and i + 1 < len(argv):
            threads = argv[i + 1]
        elif a.startswith("--blas-threads="):
            threads = a.split("=", 1)[1]
    for var in VARIABLES:
        os.environ[var] = threads
    return threads
