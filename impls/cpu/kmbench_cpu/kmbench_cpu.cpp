// kmbench-cpu: our exact Lloyd on every core of the CPU (OpenMP), in the subprocess protocol of
// impls/cpu/cpp/harness.hpp. Design (NOTES.md has the byte and instruction counts):
// - The data are shifted by their float64 mean once, before any timed run, and kept in float32
//   (float64 with --float64, below):
//   a float32 distance then keeps its digits however far the data sit from the origin (the
//   same centring kmbench-gpu and scikit-learn do). Sums are float64, per thread, merged once
//   per iteration; the means are added back to the centroids at the end.
// - Low d (d <= LOW_DIM): blocks of 64 points, dimension-major, against every centroid in
//   turn, direct (x - c)^2 in the data's precision, the loop over the block's points vectorised
//   (a running best and label per point; strict <, so ties go to the lower index, as in the
//   oracle).
// - Low d and k >= SORTED_FROM_K: the centroids sorted along the axis where they spread most,
//   each point scanning outward from its place in that order until the axis gap alone rules
//   the rest out (sorted_search.hpp); the same float32 scores, so the same labels.
// - High d: the score |c|^2 / 2 - x . c on the centred data (what the GPU rows compute), as a
//   register block of 4 or 6 points x 16 centroids over all d (a GEMM's micro-kernel), the argmin
//   fused after each block; the n x k scores are never stored.
// - Empty clusters keep their centroid; both stop rules (harness.hpp's StopRule).
// - --float64: the same in double (points, centroids, scores), for kmbench.KMeans on float64
//   data; the portable loops only (the AVX2 code and the sorted search are float32's).
// - --weights FILE: kmbench.KMeans's sample weights, (n, 1) .npy: the means weighted, and a
//   cluster of no weight empty, as scikit-learn's.
// - AVX2 intrinsics where the compiler targets AVX2 (-march=native); the portable loops
//   otherwise, or when built with -DKMBENCH_CPU_PORTABLE (to compare the two on one machine);
//   -DKMBENCH_NO_SORTED scores every centroid at low d (the same comparison for the search).
#include "../cpp/harness.hpp"

#include <omp.h>
#if defined(__AVX2__) && !defined(KMBENCH_CPU_PORTABLE)
#define KMBENCH_AVX2 1
#include <immintrin.h>
#endif
// With AVX-512 the portable low-d loop compiles to 512-bit code with mask registers, which beat
// the AVX2 blends on a Sapphire Rapids Xeon (18-20 ms against 30-34 ms at 1e6 x 2, k = 1000;
// NOTES.md); the high-d block stays AVX2 there (as fast as the portable one).
#if defined(KMBENCH_AVX2) && !defined(__AVX512F__)
#define KMBENCH_LOW_AVX2 1
#endif
#ifdef KMBENCH_AVX2
#include "sorted_search.hpp"
#endif

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace {

constexpr std::size_t LOW_DIM = 16;
constexpr std::size_t POINTS_PER_TILE = 4;  // of the portable high-d loop
constexpr std::size_t CENTROIDS_PER_TILE = 16;
constexpr std::size_t BLOCK = 64;  // points per block of the low-d path
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
  std::vector<T> x;            // n x d, centred, float32 (or float64 with --float64)
  std::vector<double> mean;    // d
  std::vector<double> w;       // n weights (--weights, kmbench.KMeans's sample_weight), or none: all 1
};

// Per thread: float64 sums and counts of the points it assigned (and their weights' sums, where
// the points are weighted).
struct Partial {
  std::vector<double> sums;
  std::vector<long long> counts;
  std::vector<double> mass;
  std::size_t changed = 0;
};

// Calls f(std::integral_constant<std::size_t, d>{}) for 1 <= d <= MAX, so the loops over d
// inside f are compiled, and unrolled, once per d.
template <std::size_t MAX, std::size_t D = 1, typename F>
void with_dim(std::size_t d, F&& f) {
  if constexpr (D == MAX) {
    if (d != MAX) throw std::logic_error("with_dim: d outside 1.." + std::to_string(MAX));
    f(std::integral_constant<std::size_t, D>{});
  } else {
    if (d == D) return f(std::integral_constant<std::size_t, D>{});
    with_dim<MAX, D + 1>(d, std::forward<F>(f));
  }
}

#ifdef KMBENCH_AVX2
// A running best score and its label in 8 lanes.
struct Best8 {
  __m256 score = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256i label = _mm256_setzero_si256();

  void take(__m256 candidate, __m256i index) {
    const __m256 lower = _mm256_cmp_ps(candidate, score, _CMP_LT_OQ);  // strict: the lower index keeps a tie
    score = _mm256_blendv_ps(score, candidate, lower);
    label = _mm256_blendv_epi8(label, index, _mm256_castps_si256(lower));
  }
};
#endif

// The nearest centroids of BLOCK points, low d: the block's coordinates dimension-major (xt,
// d x BLOCK), every centroid against all BLOCK points at once, so the loop over points
// vectorises; direct (x - c)^2 in float32, strict < so the lower index keeps a tie.
#ifdef KMBENCH_LOW_AVX2
// The same on AVX2 and FMA, written out: 16 points (two vectors) against every centroid in
// turn, their coordinates, running best and label held in registers for the whole pass, each
// centroid coordinate broadcast once for the 16. `omp simd` above kept the state of all 64
// points in memory and reloaded it per centroid (3-4x the instructions at k = 1000). The
// distance is the direct (x - c)^2: the expanded |c|^2 / 2 - x . c saved 2 of 9 operations
// but flipped enough near-ties on crowded 2-D data for a run to end a mismatch (NOTES.md).
template <std::size_t D>
inline __m256 squared8(const __m256 (&x)[D], const float* c) {
  __m256 sum = _mm256_setzero_ps();
  for (std::size_t a = 0; a < D; ++a) {
    const __m256 diff = _mm256_sub_ps(x[a], _mm256_broadcast_ss(c + a));
    sum = _mm256_fmadd_ps(diff, diff, sum);
  }
  return sum;
}

template <std::size_t D>
void nearest_low_avx2(const float* xt, std::size_t rows, const float* c, std::size_t k, int* labels) {
  for (std::size_t base = 0; base < rows; base += 16) {
    __m256 xa[D], xb[D];
    for (std::size_t a = 0; a < D; ++a) {
      xa[a] = _mm256_loadu_ps(xt + a * BLOCK + base);
      xb[a] = _mm256_loadu_ps(xt + a * BLOCK + base + 8);
    }
    Best8 best_a, best_b;
    for (std::size_t j = 0; j < k; ++j) {
      const __m256i index = _mm256_set1_epi32(int(j));
      best_a.take(squared8<D>(xa, c + j * D), index);
      best_b.take(squared8<D>(xb, c + j * D), index);
    }
    alignas(32) int which[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(which), best_a.label);
    _mm256_store_si256(reinterpret_cast<__m256i*>(which + 8), best_b.label);
    for (std::size_t t = 0; t < 16 && base + t < rows; ++t) labels[base + t] = which[t];
  }
}
#endif

template <typename T, std::size_t D>
void nearest_low_portable(const T* xt, std::size_t rows, const T* c, std::size_t k, int* labels) {
  alignas(64) T best[BLOCK];
  alignas(64) int which[BLOCK];
  for (std::size_t t = 0; t < BLOCK; ++t) best[t] = std::numeric_limits<T>::infinity(), which[t] = 0;
  for (std::size_t j = 0; j < k; ++j) {
    T cj[D];
    for (std::size_t a = 0; a < D; ++a) cj[a] = c[j * D + a];
    const int label = int(j);
#pragma omp simd aligned(best, which : 64)
    for (std::size_t t = 0; t < BLOCK; ++t) {
      T dd = 0;
      for (std::size_t a = 0; a < D; ++a) {  // D is known: unrolled
        const T diff = xt[a * BLOCK + t] - cj[a];
        dd += diff * diff;
      }
      const bool lower = dd < best[t];  // strict: the lower index keeps a tie
      best[t] = lower ? dd : best[t];
      which[t] = lower ? label : which[t];
    }
  }
  for (std::size_t t = 0; t < rows; ++t) labels[t] = which[t];
}

template <typename T, std::size_t D>
void nearest_low(const T* xt, std::size_t rows, const T* c, std::size_t k, int* labels) {
#ifdef KMBENCH_LOW_AVX2
  if constexpr (std::is_same_v<T, float>) return nearest_low_avx2<D>(xt, rows, c, k, labels);
#endif
  nearest_low_portable<T, D>(xt, rows, c, k, labels);
}

// x: the block's points, row-major; xt: room for them dimension-major (D x BLOCK). The copy
// is made here, where D is known: with d a runtime value, its inner loop of one or two copies
// took a third of an iteration at 1e6 x 2, k = 5.
template <typename T, std::size_t D>
void nearest_low_rows(const T* x, T* xt, std::size_t rows, const T* c, std::size_t k, int* labels) {
  for (std::size_t t = 0; t < rows; ++t)
    for (std::size_t a = 0; a < D; ++a) xt[a * BLOCK + t] = x[t * D + a];
  nearest_low<T, D>(xt, rows, c, k, labels);
}

// Low d and many centroids: the sorted-axis search of sorted_search.hpp, with AVX2, unless
// built with -DKMBENCH_NO_SORTED. Below SORTED_FROM_K its fixed cost per point loses (NOTES.md).
constexpr std::size_t SORTED_FROM_K = 256;

enum class Path { sorted_search, low, high };

// wide: float64 points, which the search (float32's AVX2) does not take.
Path path_for(std::size_t d, std::size_t k, bool wide) {
#if defined(KMBENCH_AVX2) && !defined(KMBENCH_NO_SORTED)
  if (!wide && d <= LOW_DIM && k >= SORTED_FROM_K) return Path::sorted_search;
#endif
  (void)k, (void)wide;  // without the search, neither chooses
  return d <= LOW_DIM ? Path::low : Path::high;
}

// The path's name in the record (impls/cpu/kmbench_cpu/__init__.py reads "sorted search").
const char* name_of(Path path) {
  switch (path) {
    case Path::sorted_search: return "sorted search";
    case Path::low: return "low d, every centroid";
    default: return "high d, register block";
  }
}

// The nearest centroids of a block of points, high d: score = half[j] - x . c_j, computed for
// a few points x CENTROIDS_PER_TILE centroids at a time from the centroids packed in panels
// (ct: a tile of 16 centroids, dimension-major, 16 x d floats contiguous; kp a multiple of 16,
// padding scored +inf by half), so the partial dots stay in registers (a GEMM's register
// block, the argmin fused after it).
#ifdef KMBENCH_AVX2
// Written out on AVX2: ROWS points x 16 centroids are 2 ROWS accumulators of 8 lanes; per
// dimension two loads of centroid values (pinned to registers: left to itself GCC folds them
// into every FMA, 2 ROWS loads where 2 do, and the loads, not the FMAs, set the pace: 30 ->
// 22 ms at 2e5 x 64, k = 100), ROWS broadcasts and 2 ROWS FMAs. Blocked for cache as a GEMM
// is: a tile of 16 centroids meets every point of the block before the next tile, so it is
// read from L1. Each point keeps a running best per lane across the tiles (strict <, so a lane
// keeps its lower index), and the lanes are reduced once at the end, lowest index on a tie.
template <std::size_t ROWS>
void nearest_high_rows(const float* x, std::size_t rows, const float* ct, const float* half, std::size_t d,
                       std::size_t kp, int* labels) {
  static_assert(CENTROIDS_PER_TILE == 16, "the block below is two vectors of centroids wide");
  Best8 best[BLOCK][2];
  for (std::size_t j0 = 0; j0 < kp; j0 += CENTROIDS_PER_TILE) {
    const float* panel = ct + j0 * d;
    const __m256 h0 = _mm256_loadu_ps(half + j0), h1 = _mm256_loadu_ps(half + j0 + 8);
    const __m256i i0 = _mm256_add_epi32(_mm256_set1_epi32(int(j0)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i i1 = _mm256_add_epi32(i0, _mm256_set1_epi32(8));
    for (std::size_t t = 0; t < rows; t += ROWS) {
      const float* xs[ROWS];
      for (std::size_t r = 0; r < ROWS; ++r) xs[r] = x + std::min(t + r, rows - 1) * d;
      __m256 acc[ROWS][2];
      for (auto& point : acc) point[0] = point[1] = _mm256_setzero_ps();
      for (std::size_t a = 0; a < d; ++a) {
        __m256 c0 = _mm256_loadu_ps(panel + a * CENTROIDS_PER_TILE), c1 = _mm256_loadu_ps(panel + a * CENTROIDS_PER_TILE + 8);
        asm("" : "+x"(c0), "+x"(c1));  // keep them in registers (above)
        for (std::size_t r = 0; r < ROWS; ++r) {
          const __m256 xa = _mm256_broadcast_ss(xs[r] + a);
          acc[r][0] = _mm256_fmadd_ps(xa, c0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(xa, c1, acc[r][1]);
        }
      }
      for (std::size_t r = 0; r < ROWS && t + r < rows; ++r) {
        best[t + r][0].take(_mm256_sub_ps(h0, acc[r][0]), i0);
        best[t + r][1].take(_mm256_sub_ps(h1, acc[r][1]), i1);
      }
    }
  }
  for (std::size_t r = 0; r < rows; ++r) {  // 16 lanes to one label, by (score, index), without branches
    kmbench_cpu::BestByIndex lanes{best[r][0].score, best[r][0].label};
    lanes.take(best[r][1].score, best[r][1].label);
    labels[r] = lanes.winner();
  }
}

// 6 points (12 accumulators, 8 loads per 12 FMAs) from d = TALL_FROM_DIM, where the block's
// points no longer fit L1 and the broadcasts come from L2; 4 points below it, where the
// 6-point block measured slower (2e5 x 64, k = 100: 23.4 against 24.8 ms; 5e4 x 256, k = 500:
// 127 against 105 ms; NOTES.md).
constexpr std::size_t TALL_FROM_DIM = 96;

inline void nearest_high_avx2(const float* x, std::size_t rows, const float* ct, const float* half, std::size_t d,
                              std::size_t kp, int* labels) {
  if (d >= TALL_FROM_DIM) return nearest_high_rows<6>(x, rows, ct, half, d, kp, labels);
  return nearest_high_rows<4>(x, rows, ct, half, d, kp, labels);
}
#endif

template <typename T>
void nearest_high(const T* x, std::size_t rows, const T* ct, const T* half, std::size_t d, std::size_t kp,
                  int* labels) {
  T best[POINTS_PER_TILE];
  int which[POINTS_PER_TILE];
  for (std::size_t r = 0; r < POINTS_PER_TILE; ++r) best[r] = std::numeric_limits<T>::infinity(), which[r] = 0;
  const T* xs[POINTS_PER_TILE];
  for (std::size_t r = 0; r < POINTS_PER_TILE; ++r) xs[r] = x + (r < rows ? r : 0) * d;
  for (std::size_t j0 = 0; j0 < kp; j0 += CENTROIDS_PER_TILE) {
    T acc[POINTS_PER_TILE][CENTROIDS_PER_TILE] = {};
    for (std::size_t a = 0; a < d; ++a) {
      const T* cta = ct + j0 * d + a * CENTROIDS_PER_TILE;
      for (std::size_t r = 0; r < POINTS_PER_TILE; ++r) {
        const T xa = xs[r][a];
#pragma omp simd
        for (std::size_t jj = 0; jj < CENTROIDS_PER_TILE; ++jj) acc[r][jj] += xa * cta[jj];
      }
    }
    for (std::size_t r = 0; r < POINTS_PER_TILE; ++r)
      for (std::size_t jj = 0; jj < CENTROIDS_PER_TILE; ++jj) {
        const T score = half[j0 + jj] - acc[r][jj];
        if (score < best[r]) best[r] = score, which[r] = int(j0 + jj);  // strict: the lower index keeps a tie
      }
  }
  for (std::size_t r = 0; r < rows; ++r) labels[r] = which[r];
}

template <typename T>
void nearest_high_block(const T* x, std::size_t rows, const T* ct, const T* half, std::size_t d, std::size_t kp,
                        int* labels) {
#ifdef KMBENCH_AVX2
  if constexpr (std::is_same_v<T, float>) return nearest_high_avx2(x, rows, ct, half, d, kp, labels);
#endif
  for (std::size_t t = 0; t < rows; t += POINTS_PER_TILE)
    nearest_high<T>(x + t * d, std::min(POINTS_PER_TILE, rows - t), ct, half, d, kp, labels + t);
}

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
// scikit-learn's relocation and then runs the rest here again.
template <typename T>
long lloyd(const Problem<T>& p, std::vector<double>& centroids, const kmbench::StopRule& stop, int threads,
           bool halt_on_empty, bool& emptied) {
  const std::size_t n = p.n, d = p.d, k = p.k;
  const Path path = path_for(d, k, std::is_same_v<T, double>);
  const bool weighted = !p.w.empty();
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
      mine.sums.assign(SUM_COPIES * k * d, 0.0);
      mine.counts.assign(SUM_COPIES * k, 0);
      mine.mass.assign(weighted ? SUM_COPIES * k : 0, 0.0);
      mine.changed = 0;
      std::vector<T> xt(low ? d * BLOCK : 0, T(0));
      int block_labels[BLOCK];
      auto one_block = [&](std::size_t block) {
        const std::size_t first = block * BLOCK, rows = std::min(BLOCK, n - first);
        const T* x = &p.x[first * d];
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
        const double* w = weighted ? &p.w[first] : nullptr;
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

// Reads the inputs, centres the data in T, runs the harness's timed runs of lloyd<T>, prints the record.
template <typename T>
void run(const kmbench::Options& o, int threads, bool halt_on_empty, const std::string& weights) {
  const kmbench::Inputs in = kmbench::read_inputs(o);
  const kmbench::Matrix &data = in.data, &init = in.init;
  Problem<T> p{data.rows, data.cols, init.rows, std::vector<T>(data.rows * data.cols), std::vector<double>(data.cols, 0.0),
               {}};
  if (!weights.empty()) {  // an (n, 1) .npy
    kmbench::Matrix w = kmbench::read_npy(weights);
    if (w.rows != p.n || w.cols != 1) throw std::runtime_error(weights + ": expected one weight a point");
    p.w = std::move(w.values);
  }
  for (std::size_t i = 0; i < p.n; ++i)
    for (std::size_t a = 0; a < p.d; ++a) p.mean[a] += data.values[i * p.d + a];
  for (double& m : p.mean) m /= double(p.n);
  for (std::size_t i = 0; i < p.n; ++i)
    for (std::size_t a = 0; a < p.d; ++a) p.x[i * p.d + a] = T(data.values[i * p.d + a] - p.mean[a]);
  kmbench::StopRule stop{o.iterations, o.tol, o.shift_tol};
  std::vector<double> centroids, times, warmup, trace;
  bool emptied = false;
  if (!o.trace.empty())  // every iteration's centroids, moved back from the centred frame
    stop.after_iteration = [&] {
      for (std::size_t j = 0; j < p.k; ++j)
        for (std::size_t a = 0; a < p.d; ++a) trace.push_back(centroids[j * p.d + a] + p.mean[a]);
    };
  const long executed = kmbench::timed_runs(
      o,
      [&] {  // the harness's start, centred like the data
        centroids = init.values;
        trace.clear();
        emptied = false;
        for (std::size_t j = 0; j < p.k; ++j)
          for (std::size_t a = 0; a < p.d; ++a) centroids[j * p.d + a] -= p.mean[a];
      },
      [&] { return lloyd(p, centroids, stop, threads, halt_on_empty, emptied); }, times, warmup);
  for (std::size_t j = 0; j < p.k; ++j)
    for (std::size_t a = 0; a < p.d; ++a) centroids[j * p.d + a] += p.mean[a];
  if (!o.trace.empty()) kmbench::write_npy(o.trace, trace, trace.size() / (p.k * p.d), p.k, p.d);
  kmbench::print_json(centroids, p.d, executed, times, warmup,
                      std::string("\"strategy\": \"") + name_of(path_for(p.d, p.k, std::is_same_v<T, double>)) +
                          "\", \"scalar\": \"" + (std::is_same_v<T, double> ? "fp64" : "fp32") +
                          "\", \"emptied\": " + (emptied ? "true" : "false"));
}

}  // namespace

int main(int argc, char** argv) {
  return kmbench::guarded([&] {
    int threads = omp_get_max_threads();
    bool halt_on_empty = false, wide = false;
    std::string weights;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--threads" && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
      else if (std::string(argv[i]) == "--halt-on-empty") halt_on_empty = true;
      else if (std::string(argv[i]) == "--float64") wide = true;
      else if (std::string(argv[i]) == "--weights" && i + 1 < argc) weights = argv[++i];
      else rest.push_back(argv[i]);
    }
    const kmbench::Options o = kmbench::parse(int(rest.size()), rest.data());
    if (wide) run<double>(o, threads, halt_on_empty, weights);
    else run<float>(o, threads, halt_on_empty, weights);
  });
}
