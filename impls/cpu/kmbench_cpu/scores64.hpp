// float64 scores half[j] - x . c_j of a few points against every centroid, for kmbench.KMeans's
// float64 fits in process: the Lloyd step's argmin at high d (nearest.hpp, where the extension
// defines KMBENCH_FLOAT64_SCORES) and the product that ranks the centres in the float64 oracle's
// labels pass (oracle_nearest.hpp). The program keeps its portable loop (its rows stay as
// they were); these give the same bits as that loop (below), so the program and the extension
// still end on the same centroids (tests/test_estimator_inprocess.py).
//
// The centroids come packed in panels of PANEL (ct: dimension-major, PANEL x d doubles
// contiguous, kp a multiple of PANEL, padding scored +inf by half). Each score is 0, then
// + x_0 c_0, + x_1 c_1, ... by fused multiply-adds in the order of the dimensions, then
// half - that: the portable loop's operations as GCC compiles it with -mfma (it contracts
// acc += x * c into one FMA), lane for lane.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__) && !defined(KMBENCH_CPU_PORTABLE)
#define KMBENCH_SCORES64_AVX2 1
#include <immintrin.h>
#endif

namespace {

constexpr std::size_t PANEL = 16;       // centroids a panel: four vectors of four doubles
constexpr std::size_t SCORE_ROWS = 16;  // points scored at a time: their scores (16 x kp) stay in L1

// s[r * kp + j] = half[j] - x_r . c_j for r < rows <= SCORE_ROWS (x: rows x d, row-major).
// Blocked as a GEMM: a panel meets all the rows before the next panel, so it is read from L1.
inline void panel_scores64(const double* x, std::size_t rows, const double* ct, const double* half, std::size_t d,
                           std::size_t kp, double* s) {
#ifdef KMBENCH_SCORES64_AVX2
  // Two points x 16 centroids: 8 accumulators, 4 centroid vectors pinned to registers (left to
  // itself GCC folds their loads into every FMA: nearest.hpp's float32 block says why that
  // loses), 2 broadcasts; 8 FMAs a dimension for 6 loads.
  for (std::size_t j0 = 0; j0 < kp; j0 += PANEL) {
    const double* panel = ct + j0 * d;
    for (std::size_t t = 0; t < rows; t += 2) {
      const double* x0 = x + t * d;
      const double* x1 = x + std::min(t + 1, rows - 1) * d;  // a last odd row scored twice, stored once
      __m256d acc[2][4];
      for (auto& point : acc)
        for (auto& v : point) v = _mm256_setzero_pd();
      for (std::size_t a = 0; a < d; ++a) {
        __m256d c0 = _mm256_loadu_pd(panel + a * PANEL), c1 = _mm256_loadu_pd(panel + a * PANEL + 4);
        __m256d c2 = _mm256_loadu_pd(panel + a * PANEL + 8), c3 = _mm256_loadu_pd(panel + a * PANEL + 12);
        asm("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3));
        const __m256d xa = _mm256_broadcast_sd(x0 + a), xb = _mm256_broadcast_sd(x1 + a);
        acc[0][0] = _mm256_fmadd_pd(xa, c0, acc[0][0]);
        acc[0][1] = _mm256_fmadd_pd(xa, c1, acc[0][1]);
        acc[0][2] = _mm256_fmadd_pd(xa, c2, acc[0][2]);
        acc[0][3] = _mm256_fmadd_pd(xa, c3, acc[0][3]);
        acc[1][0] = _mm256_fmadd_pd(xb, c0, acc[1][0]);
        acc[1][1] = _mm256_fmadd_pd(xb, c1, acc[1][1]);
        acc[1][2] = _mm256_fmadd_pd(xb, c2, acc[1][2]);
        acc[1][3] = _mm256_fmadd_pd(xb, c3, acc[1][3]);
      }
      for (std::size_t r = 0; r < 2 && t + r < rows; ++r)
        for (std::size_t q = 0; q < 4; ++q)
          _mm256_storeu_pd(s + (t + r) * kp + j0 + 4 * q, _mm256_sub_pd(_mm256_loadu_pd(half + j0 + 4 * q), acc[r][q]));
    }
  }
#else
  for (std::size_t j0 = 0; j0 < kp; j0 += PANEL)
    for (std::size_t r = 0; r < rows; ++r) {
      double acc[PANEL] = {};
      for (std::size_t a = 0; a < d; ++a) {
        const double xa = x[r * d + a];
        const double* cta = ct + j0 * d + a * PANEL;
#pragma omp simd
        for (std::size_t jj = 0; jj < PANEL; ++jj) acc[jj] += xa * cta[jj];
      }
      for (std::size_t jj = 0; jj < PANEL; ++jj) s[r * kp + j0 + jj] = half[j0 + jj] - acc[jj];
    }
#endif
}

// The index of the first lowest of kp scores (strict <: a tie keeps the lower index; a NaN
// never wins; all NaN or +inf: 0), as the portable loop's running best finds it.
inline int first_lowest(const double* s, std::size_t kp) {
  double best = std::numeric_limits<double>::infinity();
  std::size_t which = 0;
#ifdef KMBENCH_SCORES64_AVX2
  // Four lanes, lane l keeping the first lowest of the scores j = l (mod 4); then the lowest of
  // the lanes, the lower index on a tie: the first lowest of all.
  __m256d low = _mm256_set1_pd(best), index = _mm256_setzero_pd();
  __m256d at = _mm256_setr_pd(0, 1, 2, 3);
  const __m256d four = _mm256_set1_pd(4);
  for (std::size_t j = 0; j < kp; j += 4, at = _mm256_add_pd(at, four)) {
    const __m256d v = _mm256_loadu_pd(s + j);
    const __m256d lower = _mm256_cmp_pd(v, low, _CMP_LT_OQ);
    low = _mm256_blendv_pd(low, v, lower);
    index = _mm256_blendv_pd(index, at, lower);
  }
  alignas(32) double lanes[4], indices[4];
  _mm256_store_pd(lanes, low);
  _mm256_store_pd(indices, index);
  best = lanes[0], which = std::size_t(indices[0]);
  for (std::size_t l = 1; l < 4; ++l)
    if (lanes[l] < best || (lanes[l] == best && std::size_t(indices[l]) < which))
      best = lanes[l], which = std::size_t(indices[l]);
#else
  for (std::size_t j = 0; j < kp; ++j)
    if (s[j] < best) best = s[j], which = j;
#endif
  return int(which);
}

// The first lowest of kp scores, its score and the lowest of the others (the runner-up; equal
// to the lowest where two tie); `clean`: no score is NaN.
struct BestTwo {
  std::size_t winner = 0;
  double best = std::numeric_limits<double>::infinity(), second = std::numeric_limits<double>::infinity();
  bool clean = true;
};

inline BestTwo best_two(const double* s, std::size_t kp) {
  BestTwo out;
#ifdef KMBENCH_SCORES64_AVX2
  // Four lanes as first_lowest's, each with its own runner-up; then the lanes' lowest (lower
  // index on a tie), and the lowest of every other lane's best and every lane's runner-up. The
  // scalar loop below, with a branch a score, was half of the labels pass at d = 16.
  const __m256d inf = _mm256_set1_pd(std::numeric_limits<double>::infinity());
  __m256d low = inf, next = inf, index = _mm256_setzero_pd(), nan = _mm256_setzero_pd();
  __m256d at = _mm256_setr_pd(0, 1, 2, 3);
  const __m256d four = _mm256_set1_pd(4);
  for (std::size_t j = 0; j < kp; j += 4, at = _mm256_add_pd(at, four)) {
    const __m256d v = _mm256_loadu_pd(s + j);
    const __m256d lower = _mm256_cmp_pd(v, low, _CMP_LT_OQ);
    next = _mm256_blendv_pd(_mm256_min_pd(v, next), low, lower);  // min_pd: a NaN v keeps next
    low = _mm256_blendv_pd(low, v, lower);
    index = _mm256_blendv_pd(index, at, lower);
    nan = _mm256_or_pd(nan, _mm256_cmp_pd(v, v, _CMP_UNORD_Q));
  }
  alignas(32) double lows[4], nexts[4], indices[4];
  _mm256_store_pd(lows, low);
  _mm256_store_pd(nexts, next);
  _mm256_store_pd(indices, index);
  std::size_t lane = 0;
  for (std::size_t l = 1; l < 4; ++l)
    if (lows[l] < lows[lane] || (lows[l] == lows[lane] && indices[l] < indices[lane])) lane = l;
  out.winner = std::size_t(indices[lane]), out.best = lows[lane];
  for (std::size_t l = 0; l < 4; ++l) out.second = std::min(out.second, l == lane ? nexts[l] : std::min(lows[l], nexts[l]));
  out.clean = _mm256_movemask_pd(nan) == 0;
  return out;
#endif
  for (std::size_t j = 0; j < kp; ++j) {
    const double v = s[j];
    if (v < out.best) {
      out.second = out.best, out.best = v, out.winner = j;
    } else {
      out.second = std::min(out.second, v);  // v NaN: second kept, and clean says so below
      out.clean = out.clean && v == v;
    }
  }
  return out;
}

}  // namespace
