"""Batched k-means the way document 003's baseline ran it: scikit-learn's KMeans in a Python
loop, one fit per row and seed, the best inertia per row kept. It is slow, so it takes a
time budget: when the budget runs out it stops after the current row, and the result says how
many rows it computed and the whole run's time extrapolated from them (stated as such)."""

from __future__ import annotations

import warnings

import numpy as np

from kmbench.tasks.batched import BatchedProblem, BatchedResult, BudgetedBatched, RowBudget


class BatchedSklearn(BudgetedBatched):
    name = "batched-sklearn"
    row_order = 310
    baseline = True
    label = "scikit-learn in a loop"
    description = "KMeans(n_init=1, init=<the seed's centroids>) per row and seed; time budget, extrapolated"
    source = "003 (batched k-means), its scikit-learn baseline"

    def run(self, problem: BatchedProblem) -> BatchedResult:
        from sklearn.cluster import KMeans

        rows, seeds, k, d = problem.initial_centroids.shape
        result = BatchedResult.unfilled(rows, seeds, k, d)
        inertia = result.inertia
        # scikit-learn stops on its own centre-shift tolerance; tol=0 keeps only its strict
        # convergence (no label changed), the nearest it comes to either of our rules.
        budget = RowBudget(self.budget_s, rows)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for row in range(rows):
                points = problem.data[row].astype(np.float64)
                for seed in range(seeds):
                    model = KMeans(n_clusters=k, init=problem.initial_centroids[row, seed].astype(np.float64),
                                   n_init=1, max_iter=problem.iterations, tol=0.0).fit(points)
                    result.iterations[row, seed] = model.n_iter_
                    if seed == 0 or model.inertia_ < inertia[row]:
                        inertia[row], result.centroids[row], result.best_seed[row] = (
                            model.inertia_, model.cluster_centers_, seed)
                if budget.spent(row + 1):
                    break
        elapsed = budget.elapsed()
        self.phases = {"iterate": elapsed}
        return budget.cut(result, elapsed)
