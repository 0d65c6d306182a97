"""kmbench.KMeans against scikit-learn's KMeans from the same given centres: fit and predict
times, iterations, inertia and which implementation ran (impl_). It is how a float32 fit that
left a cluster empty was found taking 239 s where scikit-learn's took 4 (about 5 s once the
estimator's labels came from one product and kmbench-cpu halted before the emptying iteration
rather than the whole fit being redone in NumPy). Not a test.

    .venv/bin/python bench/estimator_same_start.py                      # 1e6 x 16 float32, k = 100
    .venv/bin/python bench/estimator_same_start.py --n 100000 --dtype float64 --max-iter 50
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.cluster import KMeans as SklearnKMeans
from sklearn.datasets import make_blobs

from kmbench import KMeans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--max-iter", type=int, default=20)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--impl", default="auto", help="kmbench.KMeans's impl")
    args = parser.parse_args()
    x = make_blobs(args.n, args.d, centers=args.k, random_state=0)[0].astype(args.dtype)
    start = x[np.random.default_rng(0).choice(args.n, args.k, replace=False)]
    for name, make in (("scikit-learn", lambda: SklearnKMeans(args.k, init=start, n_init=1, max_iter=args.max_iter)),
                       ("kmbench", lambda: KMeans(args.k, impl=args.impl, init=start, n_init=1,
                                                  max_iter=args.max_iter))):
        model = make()
        started = time.perf_counter()
        model.fit(x)
        fitted = time.perf_counter() - started
        started = time.perf_counter()
        model.predict(x)
        predicted = time.perf_counter() - started
        print(f"{name:12s} fit {fitted:7.2f} s  predict {predicted:6.2f} s  iterations {model.n_iter_:3d}  "
              f"inertia {model.inertia_:.10e}  {getattr(model, 'impl_', '')}", flush=True)


if __name__ == "__main__":
    main()
