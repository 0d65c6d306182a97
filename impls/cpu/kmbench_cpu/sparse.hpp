// Lloyd on sparse CSR rows with the centres dense, as scikit-learn's KMeans runs on sparse input
// (sklearn/cluster/_k_means_lloyd.pyx, _update_chunk_sparse): a row's score against centre j is
// |c_j|^2 / 2 - x . c_j, the dot product over the row's stored values only, in the data's
// precision; the nearest is the least score, the lower index on a tie. The sums are float64, one
// set a thread, merged in thread order (equal static shares: the same bits on every run). The
// data are not centred (that would fill them in), as scikit-learn's are not.
//
// For kmbench.KMeans's CSR input (inprocess.cpp); the benchmark's rows are dense.
#pragma once

#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "../cpp/harness.hpp"

namespace {

template <typename T, typename I>
struct Csr {
  std::size_t n, d;
  const T* values;
  const I* indices;
  const I* indptr;            // n + 1 offsets into values and indices
  const double* w = nullptr;  // n weights, or null: all 1
};

// The centres in the data's precision, dimension-major (d x k), so a stored value meets all k
// centres in one contiguous run, and their halved squared norms.
template <typename T>
void pack_centres(const std::vector<double>& c, std::size_t k, std::size_t d, std::vector<T>& ct, std::vector<T>& half) {
  ct.assign(d * k, T(0));
  half.assign(k, T(0));
  for (std::size_t j = 0; j < k; ++j) {
    double squares = 0;
    for (std::size_t a = 0; a < d; ++a) {
      const T value = T(c[j * d + a]);
      ct[a * k + j] = value;
      squares += double(value) * value;
    }
    half[j] = T(0.5 * squares);
  }
}

// Row i's nearest centre by score; `acc` is k scratch values.
template <typename T, typename I>
int nearest_row(const Csr<T, I>& x, std::size_t i, const T* ct, const T* half, std::size_t k, T* acc) {
  for (std::size_t j = 0; j < k; ++j) acc[j] = half[j];
  for (I e = x.indptr[i]; e < x.indptr[i + 1]; ++e) {
    const T v = x.values[e];
    const T* column = ct + std::size_t(x.indices[e]) * k;
#pragma omp simd
    for (std::size_t j = 0; j < k; ++j) acc[j] -= v * column[j];
  }
  int best = 0;
  for (std::size_t j = 1; j < k; ++j)
    if (acc[j] < acc[best]) best = int(j);  // strict: the lower index keeps a tie
  return best;
}

// Lloyd from `centroids` (float64, k x d), as lloyd.hpp's: the iterations executed; `emptied`
// whether one left a cluster of no weight; with halt_on_empty that iteration is not applied.
template <typename T, typename I>
long lloyd_sparse(const Csr<T, I>& x, std::vector<double>& centroids, std::size_t k, const kmbench::StopRule& stop,
                  int threads, bool halt_on_empty, bool& emptied, int* team = nullptr) {
  const std::size_t n = x.n, d = x.d;
  std::vector<T> ct, half;
  std::vector<std::vector<double>> sums(threads), mass(threads);
  long done = 0;
  for (done = 1; done <= stop.max_iter; ++done) {
    pack_centres(centroids, k, d, ct, half);
#pragma omp parallel num_threads(threads)
    {
      const int me = omp_get_thread_num();
      if (team != nullptr && me == 0) *team = omp_get_num_threads();
      std::vector<double>& sum = sums[me];
      std::vector<double>& weight = mass[me];
      sum.assign(k * d, 0.0);
      weight.assign(k, 0.0);
      std::vector<T> acc(k);
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < n; ++i) {
        const int label = nearest_row(x, i, ct.data(), half.data(), k, acc.data());
        const double w = x.w != nullptr ? x.w[i] : 1.0;
        weight[label] += w;
        double* into = &sum[std::size_t(label) * d];
        for (I e = x.indptr[i]; e < x.indptr[i + 1]; ++e) into[x.indices[e]] += w * double(x.values[e]);
      }
    }
    for (int t = 1; t < threads; ++t) {
      if (sums[t].empty()) continue;  // a thread the team did not have
      for (std::size_t e = 0; e < k * d; ++e) sums[0][e] += sums[t][e];
      for (std::size_t j = 0; j < k; ++j) mass[0][j] += mass[t][j];
    }
    bool empty_now = false;
    for (std::size_t j = 0; j < k; ++j) empty_now = empty_now || mass[0][j] == 0;
    emptied = emptied || empty_now;
    if (empty_now && halt_on_empty) return done - 1;
    double squared_shift = 0;
    for (std::size_t j = 0; j < k; ++j)
      if (mass[0][j] > 0)
        for (std::size_t a = 0; a < d; ++a) {
          const double moved = sums[0][j * d + a] / mass[0][j];
          squared_shift += (moved - centroids[j * d + a]) * (moved - centroids[j * d + a]);
          centroids[j * d + a] = moved;
        }
    for (auto& s : sums) s.clear();
    stop.iterated();
    if (stop.still(squared_shift)) break;
  }
  return std::min(done, stop.max_iter);
}

// Each row's nearest centre and its squared distance in float64 (|x|^2 - 2 x . c + |c|^2, at
// least 0): kmbench.KMeans's labels_, inertia_, predict and transform on CSR input.
template <typename T, typename I>
void nearest_sparse(const Csr<T, I>& x, const double* c, std::size_t k, int* labels, double* distances,
                    int threads) {
  std::vector<double> ct(x.d * k), half(k, 0.0);
  for (std::size_t j = 0; j < k; ++j)
    for (std::size_t a = 0; a < x.d; ++a) {
      ct[a * k + j] = c[j * x.d + a];
      half[j] += 0.5 * c[j * x.d + a] * c[j * x.d + a];
    }
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> acc(k);
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < x.n; ++i) {
      double norm = 0;
      for (std::size_t j = 0; j < k; ++j) acc[j] = half[j];
      for (I e = x.indptr[i]; e < x.indptr[i + 1]; ++e) {
        const double v = x.values[e];
        norm += v * v;
        const double* column = &ct[std::size_t(x.indices[e]) * k];
#pragma omp simd
        for (std::size_t j = 0; j < k; ++j) acc[j] -= v * column[j];
      }
      std::size_t best = 0;
      for (std::size_t j = 1; j < k; ++j)
        if (acc[j] < acc[best]) best = j;
      labels[i] = int(best);
      distances[i] = std::max(0.0, norm + 2 * acc[best]);
    }
  }
}

}  // namespace
