// kmbench-cpu's kernels: the nearest centroid of a block of points, by the path its shape takes
// (kmbench_cpu.cpp's header says which and why). Included by the program (kmbench_cpu.cpp) and
// by kmbench.KMeans's in-process extension (inprocess.cpp), so both run the same code; each
// translation unit gets its own copy (an anonymous namespace), compiled for its own target.
#pragma once


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
// The extension's float64 loops on AVX2 (nearest_low64_avx2 below, and scores64.hpp's block at
// high d): the portable loops' bits; the program does not define KMBENCH_FLOAT64_SCORES, so its
// float64 rows run as they did.
#if defined(KMBENCH_FLOAT64_SCORES) && defined(KMBENCH_AVX2)
#include "scores64.hpp"
#define KMBENCH_FLOAT64_AVX2 1
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

#ifdef KMBENCH_FLOAT64_AVX2
// The float64 low-d loop in process, written out on AVX2: 8 points (two vectors) against every
// centroid, their running best and label in registers. The portable loop's operations, lane for
// lane (diff = x - c, then dd = fma(diff, diff, dd) from 0, in the order of the dimensions;
// strict <), so the same labels; compiled by itself that loop kept its best and labels in memory
// with masked stores, and took 30 ms an iteration at 1e5 x 16, k = 100 (one thread).
template <std::size_t D>
void nearest_low64_avx2(const double* xt, std::size_t rows, const double* c, std::size_t k, int* labels) {
  for (std::size_t base = 0; base < rows; base += 8) {  // lanes past `rows` score stale points, not stored
    __m256d xa[D], xb[D];
    for (std::size_t a = 0; a < D; ++a) {
      xa[a] = _mm256_loadu_pd(xt + a * BLOCK + base);
      xb[a] = _mm256_loadu_pd(xt + a * BLOCK + base + 4);
    }
    __m256d best_a = _mm256_set1_pd(std::numeric_limits<double>::infinity()), best_b = best_a;
    __m256d label_a = _mm256_setzero_pd(), label_b = label_a;  // labels as doubles: exact below 2^53
    for (std::size_t j = 0; j < k; ++j) {
      __m256d sum_a = _mm256_setzero_pd(), sum_b = sum_a;
      for (std::size_t a = 0; a < D; ++a) {
        const __m256d cj = _mm256_broadcast_sd(c + j * D + a);
        const __m256d diff_a = _mm256_sub_pd(xa[a], cj), diff_b = _mm256_sub_pd(xb[a], cj);
        sum_a = _mm256_fmadd_pd(diff_a, diff_a, sum_a);
        sum_b = _mm256_fmadd_pd(diff_b, diff_b, sum_b);
      }
      const __m256d index = _mm256_set1_pd(double(j));
      const __m256d lower_a = _mm256_cmp_pd(sum_a, best_a, _CMP_LT_OQ), lower_b = _mm256_cmp_pd(sum_b, best_b, _CMP_LT_OQ);
      best_a = _mm256_blendv_pd(best_a, sum_a, lower_a), label_a = _mm256_blendv_pd(label_a, index, lower_a);
      best_b = _mm256_blendv_pd(best_b, sum_b, lower_b), label_b = _mm256_blendv_pd(label_b, index, lower_b);
    }
    alignas(32) double which[8];
    _mm256_store_pd(which, label_a);
    _mm256_store_pd(which + 4, label_b);
    for (std::size_t t = 0; t < 8 && base + t < rows; ++t) labels[base + t] = int(which[t]);
  }
}
#endif

template <typename T, std::size_t D>
void nearest_low(const T* xt, std::size_t rows, const T* c, std::size_t k, int* labels) {
#ifdef KMBENCH_LOW_AVX2
  if constexpr (std::is_same_v<T, float>) return nearest_low_avx2<D>(xt, rows, c, k, labels);
#endif
#ifdef KMBENCH_FLOAT64_AVX2
  if constexpr (std::is_same_v<T, double>) return nearest_low64_avx2<D>(xt, rows, c, k, labels);
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
[[maybe_unused]] const char* name_of(Path path) {
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

#ifdef KMBENCH_FLOAT64_AVX2
// The float64 block in process: SCORE_ROWS points' scores at a time (scores64.hpp), then each
// one's first lowest; the same labels as nearest_high<double> below, 3-4x as fast at d = 64.
inline void nearest_high64(const double* x, std::size_t rows, const double* ct, const double* half, std::size_t d,
                           std::size_t kp, int* labels) {
  static_assert(PANEL == CENTROIDS_PER_TILE, "lloyd.hpp packs the centroids in panels of 16");
  thread_local std::vector<double> scores;  // each OpenMP thread's, kept across blocks and iterations
  scores.resize(SCORE_ROWS * kp);
  for (std::size_t t = 0; t < rows; t += SCORE_ROWS) {
    const std::size_t count = std::min(SCORE_ROWS, rows - t);
    panel_scores64(x + t * d, count, ct, half, d, kp, scores.data());
    for (std::size_t r = 0; r < count; ++r) labels[t + r] = first_lowest(scores.data() + r * kp, kp);
  }
}
#endif

template <typename T>
void nearest_high_block(const T* x, std::size_t rows, const T* ct, const T* half, std::size_t d, std::size_t kp,
                        int* labels) {
#ifdef KMBENCH_AVX2
  if constexpr (std::is_same_v<T, float>) return nearest_high_avx2(x, rows, ct, half, d, kp, labels);
#endif
#ifdef KMBENCH_FLOAT64_AVX2
  if constexpr (std::is_same_v<T, double>) return nearest_high64(x, rows, ct, half, d, kp, labels);
#endif
  for (std::size_t t = 0; t < rows; t += POINTS_PER_TILE)
    nearest_high<T>(x + t * d, std::min(POINTS_PER_TILE, rows - t), ct, half, d, kp, labels + t);
}

}  // namespace
