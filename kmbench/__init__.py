"""kmbench: benchmark k-means implementations fairly, and validate every result.

`kmbench.KMeans` is a scikit-learn estimator backed by any registered implementation.

The harness never imports an implementation, and each of its packages imports only its own and
those on lower layers: tests/test_import_graph.py defines the layers and checks every import."""

__version__ = "0.1.0"


def __getattr__(name):
    if name == "KMeans":  # imported on first use: the CLI need not load scikit-learn's estimator
        from kmbench.estimator import KMeans

        return KMeans
    raise AttributeError(f"module 'kmbench' has no attribute {name!r}")
