// kmbench-cpu's low-d search for many centroids: the centroids sorted along one axis, each
// point scanning outward from its own place in that order and stopping where the axis alone
// rules the rest out. Exact: the scores are the brute-force pass's own float32 (x - c)^2, and
// the stop test only drops centroids that cannot win or tie (the argument is in NOTES.md).
// AVX2 only; kmbench_cpu.cpp falls back to the brute-force pass without it.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

namespace kmbench_cpu {

constexpr std::size_t LANES = 8;
// Groups scored on each side of a point's own group before any test. A test depends on the
// scores before it and its outcome varies from point to point, so its branch mispredicts;
// scoring a few groups blindly is cheaper. 1e6 x 2, k = 1000 on 2 cores, min of 8 alternating
// runs: 1 group 29 ms, 2 18.9, 3 15.2, 4 15.5, 5 17.3 (NOTES.md).
constexpr std::size_t NEAR_GROUPS = 3;

// The centroids of one iteration, ordered by the axis along which they spread most.
struct SortedCentroids {
  std::size_t d = 0, axis = 0, slots = 0;  // slots: k rounded up to LANES
  std::vector<float> coords;               // d x slots, dimension-major, in axis order; padding +inf
  std::vector<int> index;                  // the harness index of each slot (padding: INT_MAX)
  // A table from a value on the axis to a slot near it: bucket b covers [low + b / scale, ...)
  // and holds the first slot at or past its start. Only a starting point: the scan is exact
  // from any start.
  float low = 0, scale = 0;
  std::vector<int> first;

  const float* key() const { return coords.data() + axis * slots; }

  void build(const float* c, std::size_t k, std::size_t dims) {
    d = dims;
    slots = (k + LANES - 1) / LANES * LANES;
    std::vector<double> mean(d, 0.0), spread(d, 0.0);
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t a = 0; a < d; ++a) mean[a] += c[j * d + a] / double(k);
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t a = 0; a < d; ++a) spread[a] += (c[j * d + a] - mean[a]) * (c[j * d + a] - mean[a]);
    axis = std::size_t(std::max_element(spread.begin(), spread.end()) - spread.begin());
    std::vector<int> order(k);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int i, int j) {
      return c[i * d + axis] < c[j * d + axis] || (c[i * d + axis] == c[j * d + axis] && i < j);
    });
    coords.assign(d * slots, std::numeric_limits<float>::infinity());
    index.assign(slots, std::numeric_limits<int>::max());
    for (std::size_t s = 0; s < k; ++s) {
      index[s] = order[s];
      for (std::size_t a = 0; a < d; ++a) coords[a * slots + s] = c[order[s] * d + a];
    }
    const float* keys = key();
    const std::size_t buckets = 2 * slots;
    low = keys[0];
    const float high = keys[k - 1];
    scale = high > low ? float(double(buckets) / (double(high) - low)) : 0.0f;
    first.resize(buckets);
    std::size_t s = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
      const float start = scale > 0 ? float(low + double(b) / scale) : low;
      while (s < k && keys[s] < start) ++s;
      first[b] = int(std::min(s, k - 1));
    }
  }

  // The group of LANES slots to start the scan of a point at coordinate `value` on the axis.
  std::size_t start_group(float value) const {
    const float at = (value - low) * scale;
    const std::size_t b = at <= 0 ? 0 : std::min(first.size() - 1, std::size_t(at));
    return std::size_t(first[b]) / LANES;
  }
};

// A running best score per lane with its harness index. Slots are visited in axis order, not
// index order, so an equal score takes the lane when its index is lower (the oracle's tie rule).
struct BestByIndex {
  __m256 score = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256i label = _mm256_set1_epi32(std::numeric_limits<int>::max());

  void take(__m256 candidate, __m256i index) {
    const __m256 lower = _mm256_cmp_ps(candidate, score, _CMP_LT_OQ);
    const __m256 equal = _mm256_cmp_ps(candidate, score, _CMP_EQ_OQ);
    const __m256i earlier = _mm256_cmpgt_epi32(label, index);
    const __m256 wins = _mm256_or_ps(lower, _mm256_and_ps(equal, _mm256_castsi256_ps(earlier)));
    score = _mm256_blendv_ps(score, candidate, wins);
    label = _mm256_blendv_epi8(label, index, _mm256_castps_si256(wins));
  }

  // Whether some lane already holds a score below `bound`: then nothing scoring at least
  // `bound` can win or tie any more.
  bool beaten_by(float bound) const {
    return _mm256_movemask_ps(_mm256_cmp_ps(score, _mm256_set1_ps(bound), _CMP_LT_OQ)) != 0;
  }

  // The lowest score over the lanes, then the lowest index among the lanes that hold it,
  // without branches (a scalar loop over the lanes mispredicted on every other point).
  int winner() const {
    __m256 low = _mm256_min_ps(score, _mm256_permute2f128_ps(score, score, 1));
    low = _mm256_min_ps(low, _mm256_shuffle_ps(low, low, _MM_SHUFFLE(1, 0, 3, 2)));
    low = _mm256_min_ps(low, _mm256_shuffle_ps(low, low, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m256i holders = _mm256_castps_si256(_mm256_cmp_ps(score, low, _CMP_EQ_OQ));
    __m256i which = _mm256_blendv_epi8(_mm256_set1_epi32(std::numeric_limits<int>::max()), label, holders);
    which = _mm256_min_epi32(which, _mm256_permute2x128_si256(which, which, 1));
    which = _mm256_min_epi32(which, _mm256_shuffle_epi32(which, _MM_SHUFFLE(1, 0, 3, 2)));
    which = _mm256_min_epi32(which, _mm256_shuffle_epi32(which, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_cvtsi256_si32(which);
  }
};

// The nearest centroid of each of `rows` points (x: rows x D, row-major). The point's own
// group of slots and NEAR_GROUPS on each side are scored; then the scan goes on right, then
// left, and ends in a direction once the gap along the axis alone, squared, exceeds a score
// already held.
// Why that is exact: the score of a slot is (x_0 - c_0)^2 + ... summed in float32 from 0 with
// non-negative terms, so it is at least the rounded square of its axis term; further from the
// point along the sorted axis that square only grows. Slots at the gap bound are still scored
// (they could tie with a lower index).
template <std::size_t D>
void nearest_sorted(const float* x, std::size_t rows, const SortedCentroids& s, int* labels) {
  const std::size_t groups = s.slots / LANES;
  const float* key = s.key();
  for (std::size_t r = 0; r < rows; ++r) {
    const float* point = x + r * D;
    __m256 at[D];
    for (std::size_t a = 0; a < D; ++a) at[a] = _mm256_set1_ps(point[a]);
    const float along = point[s.axis];
    BestByIndex best;
    auto score = [&](std::size_t g) {
      __m256 sum = _mm256_setzero_ps();
      for (std::size_t a = 0; a < D; ++a) {  // the brute-force pass's formula, term for term
        const __m256 diff = _mm256_sub_ps(at[a], _mm256_loadu_ps(s.coords.data() + a * s.slots + g * LANES));
        sum = _mm256_fmadd_ps(diff, diff, sum);
      }
      best.take(sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.index.data() + g * LANES)));
    };
    const std::size_t start = s.start_group(along);
    const std::size_t left = start > NEAR_GROUPS ? start - NEAR_GROUPS : 0;
    const std::size_t right = std::min(start + NEAR_GROUPS + 1, groups);
    for (std::size_t g = left; g < right; ++g) score(g);
    for (std::size_t g = right; g < groups; ++g) {
      const float gap = along - key[g * LANES];  // x - c, as the score computes it
      if (gap < 0 && best.beaten_by(gap * gap)) break;
      score(g);
    }
    for (std::size_t g = left; g-- > 0;) {
      const float gap = along - key[g * LANES + LANES - 1];
      if (gap > 0 && best.beaten_by(gap * gap)) break;
      score(g);
    }
    labels[r] = best.winner();
  }
}

}  // namespace kmbench_cpu
