// kmbench-cpu's Lloyd loop over the kernels of nearest.hpp: OpenMP over blocks of points,
// per-thread float64 sums, both stop rules and the estimator's halt before an emptying
// iteration. The points are the caller's (centred, in T): the program's own copy, or the
// extension's view of a NumPy array, read in place.
#pragma once

#include "../cpp/harness.hpp"
#include "nearest.hpp"

namespace {

// Blocks per work unit, handed to whichever thread is free (schedule(dynamic)): equal static
// shares made every iteration wait for a thread whose core another program held (issue 34: on
// a busy 2-core machine 2 threads took 6.5 ms where 1 took 3.7). 64 blocks (4,096 points) keep
// the hand-out's atomic under 1% of a unit's work at d = 2, k = 5 (NOTES.md).
constexpr std::size_t UNIT_BLOCKS = 64;
// Each thread keeps SUM_COPIES copies of its float64 sums and counts, point r of a block adding
// to copy r % SUM_COPIES: with few clusters consecutive points share one, and each add in
// memory would wait for the one before (the loop's latency, not its work, would set its time).
constexpr std::size_t SUM_COPIES = 4;

template <typename T>
struct Problem {
  std::size_t n, d, k;
  const T* x;                  // n x d, centred, float32 (or float64 with --float64)
  const double* w = nullptr;   // n weights (kmbench.KMeans's sample_weight), or null: all 1
};

// Per thread: float64 sums and counts of the points it assigned (and their weights' sums, where
// the points are weighted).
struct Partial {
  std::vector<double> sums;
  std::vector<long long> counts;
  std::vector<double> mass;
  std::size_t changed = 0;
};

// Adds a block's points to the thread's float64 sums and counts, point r to copy r % SUM_COPIES.
// D > 0 fixes the dimension at compile time: at low d a runtime loop of one or two adds cost
// more than the adds (at 1e6 x 2, k = 5 it was most of the iteration); D = 0 is any d.
// w: the block's weights, or null (all 1; the benchmark's path, its loop as it was).
template <typename T, std::size_t D>
void add_block(std::size_t d, const T* x, const int* labels, std::size_t rows, std::size_t k, Partial& mine,
               const double* w) {
  const std::size_t dims = D > 0 ? D : d;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t label = std::size_t(labels[r]);
    const std::size_t copy = r & (SUM_COPIES - 1);
    mine.counts[copy * k + label] += 1;
    double* sum = &mine.sums[(copy * k + label) * dims];
    const T* xi = x + r * dims;
    if (w == nullptr) {
      for (std::size_t a = 0; a < dims; ++a) sum[a] += xi[a];
    } else {
      mine.mass[copy * k + label] += w[r];
      for (std::size_t a = 0; a < dims; ++a) sum[a] += w[r] * double(xi[a]);
    }
  }
}


// Lloyd from `centroids` (centred, float64, k x d) on p.x; returns the iterations executed.
// `emptied`: whether an iteration left a cluster with no point (its centroid kept). With
// `halt_on_empty` (kmbench.KMeans's --halt-on-empty) such an iteration is not applied: the run
// ends with the centroids it started from, so that the estimator takes that iteration with
// scikit-learn's relocation and then runs the rest here again. `team`, where given, is set to
// the threads the parallel region ran on (the extension's tests count them).
template <typename T>
long lloyd(const Problem<T>& p, std::vector<double>& centroids, const kmbench::StopRule& stop, int threads,
           bool halt_on_empty, bool& emptied, int* team = nullptr) {
  const std::size_t n = p.n, d = p.d, k = p.k;
  const Path path = path_for(d, k, std::is_same_v<T, double>);
  const bool weighted = p.w != nullptr;
  const bool low = path != Path::high;
#ifdef KMBENCH_AVX2
  kmbench_cpu::SortedCentroids by_axis;
#endif
  const std::size_t kp = (k + CENTROIDS_PER_TILE - 1) / CENTROIDS_PER_TILE * CENTROIDS_PER_TILE;
  std::vector<T> c32(k * d), half(kp, std::numeric_limits<T>::infinity()), ct(low ? 0 : d * kp, T(0));
  std::vector<int> labels(n, -1);
  std::vector<Partial> partials(threads);
  long done = 0;
  for (done = 1; done <= stop.max_iter; ++done) {
    for (std::size_t j = 0; j < k; ++j) {
      double squares = 0;
      for (std::size_t a = 0; a < d; ++a) {
        c32[j * d + a] = T(centroids[j * d + a]);
        squares += double(c32[j * d + a]) * c32[j * d + a];
      }
      half[j] = T(0.5 * squares);
    }
    if (!low)
      for (std::size_t j = 0; j < k; ++j)
        for (std::size_t a = 0; a < d; ++a) ct[j / CENTROIDS_PER_TILE * CENTROIDS_PER_TILE * d + a * CENTROIDS_PER_TILE + j % CENTROIDS_PER_TILE] = c32[j * d + a];
#ifdef KMBENCH_AVX2
    if constexpr (std::is_same_v<T, float>)
      if (path == Path::sorted_search) by_axis.build(c32.data(), k, d);
#endif
#pragma omp parallel num_threads(threads)
    {
      Partial& mine = partials[omp_get_thread_num()];
      if (team != nullptr && omp_get_thread_num() == 0) *team = omp_get_num_threads();  // how many OpenMP gave
      mine.sums.assign(SUM_COPIES * k * d, 0.0);
      mine.counts.assign(SUM_COPIES * k, 0);
      mine.mass.assign(weighted ? SUM_COPIES * k : 0, 0.0);
      mine.changed = 0;
      std::vector<T> xt(low ? d * BLOCK : 0, T(0));
      int block_labels[BLOCK];
      auto one_block = [&](std::size_t block) {
        const std::size_t first = block * BLOCK, rows = std::min(BLOCK, n - first);
        const T* x = p.x + first * d;
        if (path == Path::sorted_search) {
#ifdef KMBENCH_AVX2
          if constexpr (std::is_same_v<T, float>)
            with_dim<LOW_DIM>(d, [&](auto D) { kmbench_cpu::nearest_sorted<D()>(x, rows, by_axis, block_labels); });
#endif
        } else if (low) {
          with_dim<LOW_DIM>(d, [&](auto D) { nearest_low_rows<T, D()>(x, xt.data(), rows, c32.data(), k, block_labels); });
        } else {
          nearest_high_block<T>(x, rows, ct.data(), half.data(), d, kp, block_labels);
        }
        for (std::size_t r = 0; r < rows; ++r) {
          mine.changed += labels[first + r] != block_labels[r];
          labels[first + r] = block_labels[r];
        }
        const double* w = weighted ? p.w + first : nullptr;
        if (low) with_dim<LOW_DIM>(d, [&](auto D) { add_block<T, D()>(d, x, block_labels, rows, k, mine, w); });
        else add_block<T, 0>(d, x, block_labels, rows, k, mine, w);
      };
      const std::size_t blocks = (n + BLOCK - 1) / BLOCK;
      if constexpr (std::is_same_v<T, double>) {
        // Equal static shares, each thread's in order: float64 sums of float64 points round, and
        // blocks handed out as threads come free summed in another order each run; a fit with
        // tol = 0 then ended at 24 iterations or 25 (scikit-learn's: 24).
#pragma omp for schedule(static)
        for (std::size_t block = 0; block < blocks; ++block) one_block(block);
      } else {
#ifdef KMBENCH_CPU_STATIC_SCHEDULE  // the equal shares of before, for f08c955:bench/kmbench_cpu_busy_core.py
#pragma omp for schedule(static)
#else
#pragma omp for schedule(dynamic, UNIT_BLOCKS)
#endif
        for (std::size_t block = 0; block < blocks; ++block) one_block(block);
      }
    }
    std::size_t changed = 0;
    std::vector<double> sums(k * d, 0.0);
    std::vector<long long> counts(k, 0);
    std::vector<double> mass(k, 0.0);  // the clusters' weights (their counts where unweighted)
    for (const Partial& part : partials) {
      changed += part.changed;
      for (std::size_t copy = 0; copy < SUM_COPIES; ++copy) {
        for (std::size_t j = 0; j < k; ++j) counts[j] += part.counts[copy * k + j];
        if (weighted)
          for (std::size_t j = 0; j < k; ++j) mass[j] += part.mass[copy * k + j];
        for (std::size_t e = 0; e < k * d; ++e) sums[e] += part.sums[copy * k * d + e];
      }
    }
    if (!weighted)
      for (std::size_t j = 0; j < k; ++j) mass[j] = double(counts[j]);
    double squared_shift = 0;
    bool empty_now = false;  // a cluster of no weight is empty, as scikit-learn counts it
    for (std::size_t j = 0; j < k; ++j) empty_now = empty_now || mass[j] == 0;
    emptied = emptied || empty_now;
    if (empty_now && halt_on_empty) return done - 1;  // this iteration's update left undone
    for (std::size_t j = 0; j < k; ++j)
      if (mass[j] > 0)
        for (std::size_t a = 0; a < d; ++a) {
          const double moved = sums[j * d + a] / mass[j];
          squared_shift += (moved - centroids[j * d + a]) * (moved - centroids[j * d + a]);
          centroids[j * d + a] = moved;
        }
    stop.iterated();
    if (stop.done(changed, n) || stop.still(squared_shift)) break;
  }
  return std::min(done, stop.max_iter);
}

}  // namespace
