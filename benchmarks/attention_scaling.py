"""Time and memory of MultiHeadAttention as the sequence length T grows; writes a JSON record.

    python benchmarks/attention_scaling.py                       # NumPy, this machine's CPU
    python benchmarks/attention_scaling.py --backend cupy        # CuPy, needs a CUDA GPU
    python benchmarks/attention_scaling.py --out mhattn/data/attention_scaling_numpy.json

The code is mhattn/course/scaling.py, so that a wheel runs it too (``python -m mhattn.course.scaling``);
notebook 08 reads the records shipped in mhattn/data/.
"""

from __future__ import annotations

import sys

from mhattn.course.scaling import main, run  # noqa: F401  (run: for scripts that import it from here)

if __name__ == "__main__":
    sys.exit(main())
