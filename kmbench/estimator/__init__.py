"""A scikit-learn estimator backed by any registered implementation: how a user takes the
winner of a benchmark into their own code.

    from kmbench import KMeans
    model = KMeans(n_clusters=8, impl="kmbench-gpu").fit(X)

A drop-in for sklearn.cluster.KMeans (docs/usage.md says what differs): the best of n_init runs
by inertia; each run stops by scikit-learn's rule (the centroids moved, in all, by at most `tol`
times the data's mean variance), so it runs the iterations scikit-learn's would from the same
start; an empty cluster is relocated to the point farthest from its centre. Rows keep an empty
cluster's centroid (the benchmark's rule). A row that follows the stop rule itself
(`follows_shift`: kmbench-cpu) runs whole runs, each ending before an iteration that would
leave a cluster empty, which the estimator's own step (lloyd.py) takes instead; any other row
is stepped one iteration at a time, and a step that left a cluster empty is taken again by the
estimator's own step. A row that does not say whether it did is judged by its end (a cluster
empty there: the run is redone by the estimator's own NumPy Lloyd). Sample weights go to a row
that `takes_weights` (kmbench-cpu); with any other, the own Lloyd runs the weighted fit. The
data are centred first, as scikit-learn's are,
and the initial centroids come from the harness's seeding (k-means++ or k distinct points),
so every implementation starts from the same place for the same random_state.

This file checks the parameters and the data and keeps the fitted state; fitting.py runs each
run, choice.py picks the row, labels.py finds the nearest centres.
"""

from __future__ import annotations

import warnings
from contextlib import nullcontext

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from kmbench.estimator import choice, fitting, inprocess, lloyd, on_gpu, sparse
from kmbench.estimator.labels import distances, nearest, nearest_labels
from kmbench.protocol.settings import initial_centroids

INITS = {"k-means++": "kmeans++", "random": "random"}
DENSE_LIMIT = 1 << 30  # bytes: sparse input up to this size (dense) is densified, larger refused
ONE_BLAS_THREAD = 1 << 22  # values of X up to which seeding runs BLAS on one thread


class KMeans(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin, BaseEstimator):
    """K-means clustering (Lloyd's algorithm), a drop-in for sklearn.cluster.KMeans, run by
    any implementation kmbench benchmarks (`kmbench list` names them).

    Parameters
    ----------
    n_clusters : int, default 8
    impl : str, default "auto"
        Which implementation runs the fit: "auto" takes the GPU for a CuPy array or torch CUDA
        tensor, and for float32 NumPy data whose n x d x k reaches 1e10 and k 64 (on_gpu.py
        says why) where a GPU runs; else the first that runs here of kmbench-cpu and numpy.
        kmbench-cpu runs in process, on the arrays as they are, by the extension `pip install -e .`
        compiles; where that found no compiler it runs as a program (compiled on the first fit,
        10 to 20 s once, then a process and a temporary file a start), and the first fit says so.
        "gpu": the GPU whatever the input (on_gpu.py: kmbench-gpu for float32 data, else an exact
        float64 Lloyd there). Or a name from `kmbench list`, such as "kmbench-gpu" or "sklearn".
        On GPU input, fit, predict, transform and score compute on its device and return CuPy
        arrays (torch tensors for torch input), as do the fitted cluster_centers_ and labels_.
        Sparse input is computed sparse (CSR rows, dense centres) by the extension under "auto"
        and "kmbench-cpu"; otherwise densified.
    init : "k-means++", "random", array (n_clusters, n_features) or callable, default "k-means++"
        A callable is called as init(X, n_clusters, random_state).
    n_init : "auto" or int, default "auto"
        Runs from different starts; the one of least inertia is kept. "auto": one run from
        k-means++ or given centres, ten from random starts.
    max_iter : int, default 300
    tol : float or None, default 1e-4
        A run stops once the centres moved, in all (squared), by at most tol times the data's
        mean per-feature variance, as scikit-learn's does; None runs exactly max_iter iterations.
    verbose : int, default 0
        Prints each iteration's inertia, as scikit-learn's does; the fit then runs one iteration
        a call (kmbench-cpu: a process an iteration), several times slower.
    random_state : int, RandomState or None
    copy_x : bool, default True
    algorithm : "lloyd" or "elkan", default "lloyd"
        Both run the same exact Lloyd iterations.
    n_threads : int or None, default None
        Threads of kmbench-cpu in process; None: OpenMP's count, which OMP_NUM_THREADS sets and
        threadpoolctl's limits lower, as scikit-learn's KMeans counts them ($KMBENCH_THREADS caps it).

    Attributes
    ----------
    cluster_centers_, labels_, inertia_, n_iter_, n_features_in_, feature_names_in_ : as
        scikit-learn's.
    impl_ : str
        The implementation that ran the kept run, or "own-numpy" ("own-cupy" on a GPU) where the
        estimator's own Lloyd did: with sample weights (unless all equal) where the row takes none
        (kmbench-cpu does; "auto" takes it for weighted fits). That Lloyd is exact but 3 to 10
        times slower than scikit-learn's.

    Seeding differs from scikit-learn's: the same random_state gives other starts. k-means++
    is the same greedy algorithm, but kmbench's own (kmbench.protocol.seeding, the starts every
    benchmarked implementation gets), drawing from a seed that random_state picks, so centres,
    labels and inertia differ from sklearn.cluster.KMeans(random_state=...) by the starts alone;
    given the same starts (init=array, e.g. sklearn.cluster.kmeans_plusplus's), a fit runs the
    iterations scikit-learn's runs and ends at its centres. Sparse input gets the dense input's
    starts (to rounding: the dense points are centred first).

    Empty clusters are moved to the farthest points, as scikit-learn moves them; labels_,
    inertia_ and predict are computed in float64 (on sparse input from the expanded form).
    docs/usage.md says what else differs from scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> from kmbench import KMeans
    >>> X = np.array([[1, 2], [1, 4], [1, 0], [10, 2], [10, 4], [10, 0]], dtype=np.float32)
    >>> model = KMeans(n_clusters=2, init=X[[0, 3]]).fit(X)
    >>> model.labels_.tolist()
    [0, 0, 0, 1, 1, 1]
    >>> model.predict(np.array([[0, 0], [12, 3]], dtype=np.float32)).tolist()
    [0, 1]
    """

    def __init__(self, n_clusters=8, *, impl="auto", init="k-means++", n_init="auto", max_iter=300, tol=1e-4,
                 verbose=0, random_state=None, copy_x=True, algorithm="lloyd", n_threads=None):
        self.n_clusters = n_clusters
        self.impl = impl
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.copy_x = copy_x
        self.algorithm = algorithm
        self.n_threads = n_threads

    # ------------------------------------------------------------------ checks

    def _check_params(self) -> None:
        def positive_int(value):
            return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1

        if not positive_int(self.n_clusters):
            raise ValueError(f"n_clusters must be a positive integer; got {self.n_clusters!r}.")
        if not positive_int(self.max_iter):
            raise ValueError(f"max_iter must be a positive integer; got {self.max_iter!r}.")
        if not (self.n_threads is None or positive_int(self.n_threads)):
            raise ValueError(f"n_threads must be a positive integer or None; got {self.n_threads!r}.")
        if not (self.n_init == "auto" or positive_int(self.n_init)):
            raise ValueError(f"n_init must be 'auto' or a positive integer; got {self.n_init!r}.")
        if self.tol is not None and not (isinstance(self.tol, (int, float, np.number)) and self.tol >= 0):
            raise ValueError(f"tol must be a number >= 0 (or None); got {self.tol!r}.")
        if isinstance(self.init, str) and self.init not in INITS:
            raise ValueError(f"init must be one of {', '.join(INITS)}, an array or a callable; got {self.init!r}.")
        if self.algorithm not in ("lloyd", "elkan"):
            raise ValueError(f"algorithm must be 'lloyd' or 'elkan'; got {self.algorithm!r}.")
        if not isinstance(self.copy_x, (bool, np.bool_)):
            raise ValueError(f"copy_x must be True or False; got {self.copy_x!r}.")
        if not isinstance(self.verbose, (int, np.integer)):
            raise ValueError(f"verbose must be an integer or a bool; got {self.verbose!r}.")
        if not isinstance(self.impl, str) or "," in self.impl or not self.impl.strip():
            raise ValueError(f"impl must name one implementation; got {self.impl!r}.")
        if self.algorithm == "elkan" and self.n_clusters == 1:  # scikit-learn's own warning
            warnings.warn("algorithm='elkan' doesn't make sense for a single cluster. Using 'lloyd' instead.",
                          RuntimeWarning, stacklevel=3)

    def _init_count(self) -> int:
        """scikit-learn's n_init, "auto" resolved: one run from k-means++ or given centres, ten
        from random ones or a callable's; one whatever was asked where the centres are given."""
        given = not isinstance(self.init, str) and not callable(self.init)
        count = self.n_init
        if count == "auto":
            count = 1 if given or self.init == "k-means++" else 10
        if given and count != 1:
            warnings.warn(f"Explicit initial center position passed: performing only one init in KMeans "
                          f"instead of n_init={count}.", RuntimeWarning, stacklevel=3)
            count = 1
        return count

    def _data(self, X, reset: bool, copy: bool = False) -> np.ndarray:
        """X as a C-ordered float32 or float64 array, or CSR where the extension computes on it;
        other sparse input densified up to DENSE_LIMIT."""
        X = validate_data(self, X, accept_sparse=True, dtype=[np.float64, np.float32], order="C", copy=copy,
                          reset=reset)
        if not sp.issparse(X):
            return X
        if sparse.kept(X, self.impl):  # computed sparse, by the extension (sparse.py)
            return sparse.as_csr(X)
        size = X.shape[0] * X.shape[1] * X.dtype.itemsize
        if size > DENSE_LIMIT:
            raise ValueError(f"X is a sparse matrix of {X.shape[0]:,} x {X.shape[1]:,}, {size / 2**30:.1f} GiB as a "
                             f"dense array, and kmbench.KMeans densifies sparse input only up to "
                             f"{DENSE_LIMIT / 2**30:g} GiB unless its compiled extension computes on them (impl 'auto' or "
                             f"'kmbench-cpu', with the extension built): pass a dense array, or use scikit-learn's "
                             f"KMeans, which works on sparse data as they are.")
        return np.ascontiguousarray(X.toarray())

    @staticmethod
    def _weights(sample_weight, n: int) -> np.ndarray | None:
        """float64 weights, one a sample; None where they are all equal (they change nothing)."""
        if sample_weight is None:
            return None
        weights = np.asarray(sample_weight, dtype=np.float64)
        weights = np.full(n, float(weights)) if weights.ndim == 0 else weights
        if weights.shape != (n,):
            raise ValueError(f"sample_weight has shape {weights.shape}; expected ({n},), one weight a sample.")
        if not np.isfinite(weights).all() or (weights < 0).any():
            raise ValueError("sample_weight must be finite and non-negative.")
        if weights.sum() == 0:
            raise ValueError("Sample weights must contain at least one non-zero number.")  # scikit-learn 1.9's sentence
        return None if (weights == weights[0]).all() else weights.copy()

    def _checked_centers(self, centers, X) -> np.ndarray:
        centers = on_gpu.host(centers)  # given or made on a GPU: checked, and run from, on the host
        centers = np.array(centers.toarray() if sp.issparse(centers) else centers, dtype=X.dtype, order="C")
        if centers.ndim != 2 or centers.shape[0] != self.n_clusters:
            raise ValueError(f"The shape of the initial centers {centers.shape} does not match the number of "
                             f"clusters {self.n_clusters}.")
        if centers.shape[1] != X.shape[1]:
            raise ValueError(f"The shape of the initial centers {centers.shape} does not match the number of "
                             f"features of the data {X.shape[1]}.")
        return centers

    def _starts(self, X, weights, count: int) -> list[np.ndarray]:
        """The initial centres of each run, in the data's coordinates: the given ones, the
        callable's (handed the data as given, unlike scikit-learn's, which hands it centred), or
        the harness's seeding with a seed drawn from random_state (weighted by the samples)."""
        random_state = check_random_state(self.random_state)
        if callable(self.init):
            return [self._checked_centers(self.init(X, self.n_clusters, random_state=random_state), X)
                    for _ in range(count)]
        if not isinstance(self.init, str):
            return [self._checked_centers(self.init, X)]
        if self.init == "random" and weights is not None and np.count_nonzero(weights) < self.n_clusters:
            raise ValueError(f"init='random' needs at least n_clusters={self.n_clusters} samples of positive "
                             f"weight; sample_weight has {np.count_nonzero(weights)}.")
        seeds = [int(random_state.randint(np.iinfo(np.int32).max)) for _ in range(count)]
        if sp.issparse(X):
            return sparse.starts(X, self.n_clusters, self.init, seeds, weights)
        # k-means++ multiplies a few candidates by every point, a product too thin for BLAS's
        # threads to pay on small data: they only contend (1e5 x 2 seeded in 28 ms on one thread,
        # 39 ms on two; the matrix product itself 0.5 ms against 4).
        with threadpool_limits(1, "blas") if X.size <= ONE_BLAS_THREAD else nullcontext():
            return [initial_centroids(X, self.n_clusters, INITS[self.init], seed, weights) for seed in seeds]

    def _row(self, dtype, weights):
        """The row that runs each run, or None where only the estimator's own Lloyd can: sample
        weights, where the row takes none (under "auto": where none of its rows that do can run)."""
        if weights is None:
            return choice.choose(self.impl, dtype)
        if self.impl == "auto":
            try:
                return choice.choose("auto", dtype, weighted=True)
            except RuntimeError:
                return None
        row = choice.choose(self.impl, dtype)  # a wrong name is still an error
        if row.takes_weights:
            return row
        warnings.warn(f"impl={self.impl!r} takes no sample weights; the fit runs on kmbench.KMeans's own "
                      f"NumPy Lloyd ({lloyd.OWN!r}).", UserWarning, stacklevel=3)
        return None

    # ------------------------------------------------------------------ the estimator API

    def fit(self, X, y=None, sample_weight=None):
        """Compute the clustering of X (n_samples, n_features); sample_weight: one non-negative
        weight a sample. Returns the fitted estimator."""
        self._check_params()
        if on_gpu.wanted(self, X, sample_weight):  # GPU input, impl="gpu", or "auto" on large float32 data
            return on_gpu.fit(self, X, sample_weight)
        given = self._data(X, reset=True)  # the samples as predict and score will read them
        # Centred below: into a copy of our own, made by the subtraction itself, unless
        # copy_x=False, where the caller's X is centred in place and put back (which may move a
        # last bit; densified sparse input is already a copy, CSR is not centred).
        own, X = self.copy_x and not sp.issparse(X), given
        if X.shape[0] < self.n_clusters:
            raise ValueError(f"n_samples={X.shape[0]} should be >= n_clusters={self.n_clusters}.")
        weights = self._weights(sample_weight, X.shape[0])
        self._n_init = self._init_count()
        starts = self._starts(X, weights, self._n_init)
        row = inprocess.InProcessRow() if sp.issparse(X) else self._row(X.dtype, weights)
        if hasattr(row, "n_threads"):  # the in-process row (inprocess.py): OpenMP's count unless set
            row.n_threads = self.n_threads
        still = lloyd.tolerance(X, self.tol)
        # Centred, as scikit-learn's are: rows that expand distances lose nothing far from the
        # origin. One pass into the copy (a copy, then a subtraction in place, read X twice).
        dense = not sp.issparse(X)  # CSR stays as it is, uncentred (sparse.py)
        shift = X.mean(axis=0, dtype=np.float64).astype(X.dtype) if dense else np.zeros(X.shape[1], X.dtype)
        put_back = dense and not own
        if own:
            X = np.subtract(given, shift)
        elif dense:
            X -= shift
        try:
            runs = fitting.all_runs(row, X, [start - shift for start in starts], weights, still, self.max_iter,
                                    self.verbose)
            centers, self.n_iter_, self.impl_ = (runs[0] if len(runs) == 1 else
                                                 fitting.best(runs, X, weights, self.n_threads))
        finally:
            if put_back:
                X += shift
        self.cluster_centers_ = (centers + shift).astype(X.dtype)
        # Of the samples as given, not the centred copy put back: labels_ is predict(X)'s, and
        # inertia_ is -score(X) to the bit.
        self.labels_, self.inertia_ = self._labels_inertia(given, weights)
        distinct = np.count_nonzero(np.bincount(self.labels_, minlength=self.n_clusters))  # np.unique sorts
        if distinct < self.n_clusters:
            warnings.warn(f"Number of distinct clusters ({distinct}) found smaller than n_clusters "
                          f"({self.n_clusters}). Possibly due to duplicate points in X.", ConvergenceWarning,
                          stacklevel=2)
        return self

    def _labels_inertia(self, X, weights) -> tuple[np.ndarray, float]:
        labels, distances = nearest(X, on_gpu.host(self.cluster_centers_), self.n_threads)
        return labels.astype(np.int32), fitting.weighted_sum(distances, weights)

    def predict(self, X):
        """The index of the nearest fitted centre of each sample of X: the float64 oracle's, found
        by a product certified by a margin (labels.nearest_labels: the extension's float64 pass,
        or NumPy's in X's precision)."""
        check_is_fitted(self)
        if on_gpu.kind_of(X):  # a CuPy array or torch CUDA tensor: computed there, returned as one
            return on_gpu.predict(self, X)
        return nearest_labels(self._data(X, reset=False), on_gpu.host(self.cluster_centers_),
                              self.n_threads).astype(np.int32)

    def transform(self, X):
        """Euclidean distance from each point to each cluster centre (in float64 by one matrix
        product on centred coordinates, as scikit-learn's by one on raw ones; then X's dtype)."""
        check_is_fitted(self)
        if on_gpu.kind_of(X):
            return on_gpu.transform(self, X)
        X = self._data(X, reset=False)
        return distances(X, on_gpu.host(self.cluster_centers_))

    def score(self, X, y=None, sample_weight=None):
        """Minus the inertia of X with respect to the fitted centres (higher is better)."""
        check_is_fitted(self)
        if on_gpu.kind_of(X):
            return on_gpu.score(self, X, sample_weight)
        X = self._data(X, reset=False)
        return -self._labels_inertia(X, self._weights(sample_weight, X.shape[0]))[1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # computed sparse by the extension, else densified up to DENSE_LIMIT
        return tags

    @property
    def _n_features_out(self):
        return self.cluster_centers_.shape[0]
