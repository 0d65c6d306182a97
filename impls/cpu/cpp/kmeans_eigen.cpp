// C++/Eigen Lloyd, the array-expression design of document 000 ("Our C++ (Eigen)"), for any d.
// Distances to all centroids come from one Eigen expression per dimension (the data column
// broadcast against the centroids' row); the argmin and the sums stay a loop over points,
// as in the blog, because Eigen has no row-wise argmin. Counts start at zero (the published
// code started them at one, biasing every mean) and an empty cluster keeps its centroid.
#include <Eigen/Dense>
#include <vector>

#include "harness.hpp"

struct EigenLloyd {
  template <typename T>
  long operator()(const std::vector<T>& points, std::size_t n, std::size_t d, std::vector<T>& means,
                  std::size_t k, const kmbench::StopRule& stop) const {
    using Array = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Column = Eigen::Array<T, Eigen::Dynamic, 1>;
    const Eigen::Map<const Array> data(points.data(), n, d);
    Eigen::Map<Array> centroids(means.data(), k, d);
    Array distances(n, k);
    Array sums(k, d);
    Column counts(k);
    std::vector<Eigen::Index> assignment(n, Eigen::Index(k));  // k: no cluster yet
    for (long iteration = 1; iteration <= stop.max_iter; ++iteration) {
      distances.setZero();
      for (std::size_t j = 0; j < d; ++j)
        distances += (data.col(j).replicate(1, k).rowwise() - centroids.col(j).transpose()).square();
      sums.setZero();
      counts.setZero();
      std::size_t changed = 0;
      for (std::size_t point = 0; point < n; ++point) {
        Eigen::Index nearest;
        distances.row(point).minCoeff(&nearest);
        changed += assignment[point] != nearest;
        assignment[point] = nearest;
        sums.row(nearest) += data.row(point);
        counts(nearest) += 1;
      }
      for (std::size_t cluster = 0; cluster < k; ++cluster)
        if (counts(cluster) > 0) centroids.row(cluster) = sums.row(cluster) / counts(cluster);
      stop.iterated();
      if (stop.done(changed, n)) return iteration;
    }
    return stop.max_iter;
  }
};

int main(int argc, char** argv) { return kmbench::main_with(argc, argv, EigenLloyd{}); }
