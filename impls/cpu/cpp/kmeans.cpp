// Plain C++ Lloyd, the loop-over-points design of document 000 ("Our C++"), for any d.
// Each point scans every centroid; sums and counts are accumulated in one pass; an empty
// cluster keeps its previous centroid (the published code zeroed it to 0/1).
#include <limits>
#include <vector>

#include "harness.hpp"

// D > 0 fixes the dimension at compile time (the 2-D fast path: 18-30% faster at
// n = 100,000, d = 2 on our 2-core machine); D = 0 takes it at run time.
// Forced inline: with both instantiations present GCC 12 kept them out of line and the
// 2-D loop ran 2.5x slower (0.80 s against 0.32 s per 300 iterations at n = 100,000).
template <std::size_t D, typename T>
inline __attribute__((always_inline)) long lloyd(const T* __restrict__ points, std::size_t n, std::size_t d_runtime, T* __restrict__ means,
           std::size_t k, const kmbench::StopRule& stop) {
    const std::size_t d = D ? D : d_runtime;
    std::vector<std::size_t> assignment(n, k);  // k: no cluster yet, so every point changes first
    std::vector<T> sums(k * d);
    std::vector<std::size_t> counts(k);
    for (long iteration = 1; iteration <= stop.max_iter; ++iteration) {
      std::size_t changed = 0;
      for (std::size_t point = 0; point < n; ++point) {
        const T* x = &points[point * d];
        T best_distance = std::numeric_limits<T>::max();
        std::size_t best_cluster = 0;
        for (std::size_t cluster = 0; cluster < k; ++cluster) {
          const T* mean = &means[cluster * d];
          T distance = 0;
          for (std::size_t j = 0; j < d; ++j) {
            const T diff = x[j] - mean[j];
            distance += diff * diff;
          }
          if (distance < best_distance) {
            best_distance = distance;
            best_cluster = cluster;
          }
        }
        changed += assignment[point] != best_cluster;
        assignment[point] = best_cluster;
      }
      std::fill(sums.begin(), sums.end(), T(0));
      std::fill(counts.begin(), counts.end(), 0);
      for (std::size_t point = 0; point < n; ++point) {
        const std::size_t cluster = assignment[point];
        for (std::size_t j = 0; j < d; ++j) sums[cluster * d + j] += points[point * d + j];
        counts[cluster] += 1;
      }
      for (std::size_t cluster = 0; cluster < k; ++cluster) {
        if (counts[cluster] == 0) continue;
        for (std::size_t j = 0; j < d; ++j) means[cluster * d + j] = sums[cluster * d + j] / T(counts[cluster]);
      }
      stop.iterated();
      if (stop.done(changed, n)) return iteration;
    }
    return stop.max_iter;
}

struct PlainLloyd {
  template <typename T>
  long operator()(const std::vector<T>& points, std::size_t n, std::size_t d, std::vector<T>& means,
                  std::size_t k, const kmbench::StopRule& stop) const {
    if (d == 2) return lloyd<2>(points.data(), n, d, means.data(), k, stop);
    return lloyd<0>(points.data(), n, d, means.data(), k, stop);
  }
};

int main(int argc, char** argv) { return kmbench::main_with(argc, argv, PlainLloyd{}); }
