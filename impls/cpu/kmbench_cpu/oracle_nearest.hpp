// The float64 oracle's nearest centre of every point (kmbench.protocol.reference.nearest), bit
// for bit, in process: kmbench.KMeans's labels_, inertia_, predict and score. The oracle's answer
// is the direct form's: 0 + (x_0 - c_0)^2, then + (x_1 - c_1)^2, ..., each operation rounded on
// its own, the first lowest on a tie (np.argmin's: the first NaN, where there is one).
//
// As kmbench/estimator/labels.py does in NumPy (its docstring has the argument): a float64
// product ranks the centres, on coordinates moved by the centres' mean (scores64.hpp); a point
// whose best two scores are further apart than `factor` (|x'| + max |c'|)^2 + `floor` takes the
// best, and its distance is the direct form's for that centre alone; any other point (NaN,
// overflow, a near-tie) is decided by the direct form over every centre. The margin bounds any
// float64 product's rounding, whatever its order or FMAs, so the answer is the same on any CPU.
// It fused what NumPy took in five passes over the n x k scores: at 1e5 x 16, k = 100 on two
// cores the labels pass took 0.31 s of a 0.54 s fit (bench/README.md has the numbers after).
#pragma once

#include <omp.h>

#include <cmath>
#include <vector>

#include "scores64.hpp"

namespace {

// t * t rounded to double before any add: GCC contracts t * t + acc into one FMA (one rounding,
// not the oracle's two) across statements too; an empty asm that may change the square stops it.
inline double rounded_square(double t) {
  double square = t * t;
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(square));
#elif defined(__aarch64__)
  asm("" : "+w"(square));
#else
  volatile double kept = square;
  square = kept;
#endif
  return square;
}

// The direct form's squared distance of a point (d values of T) to a centre (float64).
template <typename T>
double direct_distance(const T* x, const double* c, std::size_t d) {
  double total = 0;
  for (std::size_t a = 0; a < d; ++a) total = total + rounded_square(double(x[a]) - c[a]);
  return total;
}

// The direct form over every centre: the first lowest, or the first NaN (np.argmin's rule).
template <typename T>
void direct_nearest(const T* x, const double* c, std::size_t k, std::size_t d, long long& label, double& distance) {
  label = 0, distance = std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < k; ++j) {
    const double dd = direct_distance(x, c + j * d, d);
    if (dd != dd) {
      label = (long long)(j), distance = dd;
      return;
    }
    if (dd < distance) label = (long long)(j), distance = dd;  // strict: a tie keeps the lower index
  }
}

// The centres moved by their mean, in panels (scores64.hpp), and each one's |c'|^2 / 2.
struct MovedCentres {
  std::size_t k, d, kp;
  std::vector<double> middle, ct, half;
  double reach = 0;  // max |c'|

  MovedCentres(const double* c, std::size_t k_, std::size_t d_)
      : k(k_), d(d_), kp((k_ + PANEL - 1) / PANEL * PANEL), middle(d_, 0.0), ct(kp * d_, 0.0),
        half(kp, std::numeric_limits<double>::infinity()) {
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t a = 0; a < d; ++a) middle[a] += c[j * d + a];
    for (double& m : middle) m /= double(k);
    double most = 0;
    for (std::size_t j = 0; j < k; ++j) {
      double squares = 0;
      for (std::size_t a = 0; a < d; ++a) {
        const double moved = c[j * d + a] - middle[a];
        ct[j / PANEL * PANEL * d + a * PANEL + j % PANEL] = moved;
        squares += moved * moved;
      }
      half[j] = 0.5 * squares;
      most = std::max(most, half[j]);  // NaN (overflow to inf - inf) stays out; reach below is inf then
      if (!(half[j] <= most)) most = std::numeric_limits<double>::infinity();
    }
    reach = std::sqrt(2 * most);
  }
};

// labels (int64) and squared distances (float64) of n points x (n x d, T) to centres c (k x d).
// Returns the threads the parallel region ran on (the thread tests read it).
template <typename T>
int oracle_nearest(const T* x, std::size_t n, std::size_t d, const double* c, std::size_t k, double factor,
                   double floor, long long* labels, double* distances, int threads) {
  const MovedCentres m(c, k, d);
  const std::size_t blocks = (n + SCORE_ROWS - 1) / SCORE_ROWS;
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() == 0) team = omp_get_num_threads();
    std::vector<double> moved(SCORE_ROWS * d), scores(SCORE_ROWS * m.kp), norms(SCORE_ROWS);
#pragma omp for schedule(dynamic, 16)
    for (std::size_t block = 0; block < blocks; ++block) {
      const std::size_t first = block * SCORE_ROWS, rows = std::min(SCORE_ROWS, n - first);
      const T* xb = x + first * d;
      for (std::size_t r = 0; r < rows; ++r) {
        double squares = 0;
        for (std::size_t a = 0; a < d; ++a) {
          const double v = double(xb[r * d + a]) - m.middle[a];
          moved[r * d + a] = v;
          squares += v * v;
        }
        norms[r] = std::sqrt(squares);
      }
      panel_scores64(moved.data(), rows, m.ct.data(), m.half.data(), d, m.kp, scores.data());
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t i = first + r;
        const BestTwo two = best_two(scores.data() + r * m.kp, m.kp);
        const double gap = 2 * (two.second - two.best);
        // Squared first, as the oracle does: where (|x'| + reach)^2 overflows, its margin is inf
        // and the point goes to the direct form; factor * s * s would stay finite and certify it.
        const double reach = norms[r] + m.reach;
        const double bound = factor * (reach * reach) + floor;
        if (two.clean && two.winner < k && gap > bound) {  // NaN anywhere: not certified
          labels[i] = (long long)(two.winner);
          distances[i] = direct_distance(xb + r * d, c + two.winner * d, d);
        } else {
          direct_nearest(xb + r * d, c, k, d, labels[i], distances[i]);
        }
      }
    }
  }
  return team;
}

}  // namespace
