// kmbench-cpu in process, for kmbench.KMeans: the program's kernels (nearest.hpp, lloyd.hpp,
// sparse.hpp) on the caller's arrays, read in place, every start of a fit in one call, the GIL
// released while they run. Built by setup.py as two modules from this one file: one for any
// x86-64 (or other) CPU and one for AVX2 + FMA, chosen at run time (kmbench/estimator/
// inprocess.py), because an installed package may move between machines where the program's
// -march=native binary is built on the machine that runs it.
//
// The plain CPython API and the buffer protocol, not nanobind or pybind11: the functions take
// a few arrays and numbers, and a build that needs nothing beyond setuptools and a C++ compiler
// also builds offline (the GPU machine has no network, and pip's isolated build would have to
// download a binding library). NumPy arrays export the buffers; nothing links against NumPy.
#include <Python.h>

// The float64 loops on AVX2 for the Lloyd step (nearest.hpp; the program keeps its own).
#define KMBENCH_FLOAT64_SCORES 1
#include "lloyd.hpp"
#include "oracle_nearest.hpp"
#include "sparse.hpp"

#ifndef KMBENCH_MODULE
#define KMBENCH_MODULE _inproc_portable
#endif
#define KMBENCH_JOIN(a, b) a##b
#define KMBENCH_INIT(name) KMBENCH_JOIN(PyInit_, name)
#define KMBENCH_STR2(name) #name
#define KMBENCH_STR(name) KMBENCH_STR2(name)

namespace {

// A buffer released when it goes out of scope.
struct View {
  View() = default;
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  Py_buffer b{};
  bool held = false;
  ~View() {
    if (held) PyBuffer_Release(&b);
  }
  bool get(PyObject* object, int flags, const char* what) {
    if (PyObject_GetBuffer(object, &b, flags | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous array", what);
      return false;
    }
    held = true;
    return true;
  }
  char kind() const {  // 'f' float32, 'd' float64, else 0
    const char* f = b.format ? b.format : "B";
    const char last = f[std::strlen(f) - 1];
    if (last == 'f' && b.itemsize == 4) return 'f';
    if (last == 'd' && b.itemsize == 8) return 'd';
    return 0;
  }
};

int threads_for(long asked) { return asked > 0 ? int(asked) : omp_get_max_threads(); }

// Every start's run, one after another, each on `threads` threads; centres (m, k, d) float64
// updated in place. Returns the iterations and whether each run emptied a cluster.
template <typename T>
void runs(const Problem<T>& p, double* centres, std::size_t m, const kmbench::StopRule& stop, int threads,
          bool halt, std::vector<long>& iterations, std::vector<char>& emptied, int& team) {
  std::vector<double> one(p.k * p.d);
  for (std::size_t s = 0; s < m; ++s) {
    std::copy(centres + s * p.k * p.d, centres + (s + 1) * p.k * p.d, one.begin());
    bool empty = false;
    iterations[s] = lloyd(p, one, stop, threads, halt, empty, &team);
    emptied[s] = empty;
    std::copy(one.begin(), one.end(), centres + s * p.k * p.d);
  }
}

PyObject* result(const std::vector<long>& iterations, const std::vector<char>& emptied, int team) {
  PyObject* counts = PyList_New(Py_ssize_t(iterations.size()));
  PyObject* empties = PyList_New(Py_ssize_t(emptied.size()));
  for (std::size_t s = 0; s < iterations.size(); ++s) {
    PyList_SET_ITEM(counts, Py_ssize_t(s), PyLong_FromLong(iterations[s]));
    PyList_SET_ITEM(empties, Py_ssize_t(s), PyBool_FromLong(emptied[s]));
  }
  return Py_BuildValue("(NNi)", counts, empties, team);
}

// Checks the centres (m, k, d) float64 and the weights (n,) float64 or None against n and d.
bool check_common(View& centres, View& weights, PyObject* weights_object, std::size_t n, std::size_t d) {
  if (centres.kind() != 'd' || centres.b.ndim != 3 || std::size_t(centres.b.shape[2]) != d || centres.b.readonly) {
    PyErr_SetString(PyExc_ValueError, "centres must be a writable float64 array (starts, k, d) of the data's d");
    return false;
  }
  if (weights_object != Py_None) {
    if (!weights.get(weights_object, PyBUF_ND, "weights")) return false;
    if (weights.kind() != 'd' || weights.b.ndim != 1 || std::size_t(weights.b.shape[0]) != n) {
      PyErr_SetString(PyExc_ValueError, "weights must be float64, one a point");
      return false;
    }
  }
  return true;
}

// lloyd(x, centres, weights, max_iter, shift_tol, threads, halt_on_empty) -> (iterations, emptied, team)
// x (n, d) float32 or float64, centred; shift_tol < 0: none; threads 0: OpenMP's own count
// (OMP_NUM_THREADS, threadpoolctl's limit); team: the threads the last parallel region ran on.
PyObject* py_lloyd(PyObject*, PyObject* args) {
  PyObject *x_object, *centres_object, *weights_object;
  long max_iter, threads;
  double shift_tol;
  int halt;
  if (!PyArg_ParseTuple(args, "OOOldlp", &x_object, &centres_object, &weights_object, &max_iter, &shift_tol,
                        &threads, &halt))
    return nullptr;
  View x, centres, weights;
  if (!x.get(x_object, PyBUF_ND, "x") || !centres.get(centres_object, PyBUF_WRITABLE | PyBUF_ND, "centres"))
    return nullptr;
  if (x.b.ndim != 2 || !x.kind()) {
    PyErr_SetString(PyExc_ValueError, "x must be a 2-D float32 or float64 array");
    return nullptr;
  }
  const std::size_t n = x.b.shape[0], d = x.b.shape[1];
  if (!check_common(centres, weights, weights_object, n, d)) return nullptr;
  const std::size_t m = centres.b.shape[0], k = centres.b.shape[1];
  const kmbench::StopRule stop{max_iter, -1, shift_tol};
  std::vector<long> iterations(m);
  std::vector<char> emptied(m);
  int team = 0;
  const double* w = weights.held ? static_cast<const double*>(weights.b.buf) : nullptr;
  double* c = static_cast<double*>(centres.b.buf);
  const int count = threads_for(threads);
  std::string error;
  Py_BEGIN_ALLOW_THREADS try {
    if (x.kind() == 'f')
      runs(Problem<float>{n, d, k, static_cast<const float*>(x.b.buf), w}, c, m, stop, count, halt, iterations,
           emptied, team);
    else
      runs(Problem<double>{n, d, k, static_cast<const double*>(x.b.buf), w}, c, m, stop, count, halt, iterations,
           emptied, team);
  } catch (const std::exception& e) {
    error = e.what();
  }
  Py_END_ALLOW_THREADS if (!error.empty()) {
    PyErr_SetString(PyExc_RuntimeError, error.c_str());
    return nullptr;
  }
  return result(iterations, emptied, team);
}

// The CSR arrays' index type: 4 for int32, 8 for int64, 0 for anything else.
int index_size(const View& v) {
  const char* f = v.b.format ? v.b.format : "B";
  const char last = f[std::strlen(f) - 1];
  if ((last == 'i' || last == 'l' || last == 'q') && (v.b.itemsize == 4 || v.b.itemsize == 8)) return int(v.b.itemsize);
  return 0;
}

// Calls f(Csr<T, I>) for the CSR matrix's value and index types; false (with the error set) if
// they are not float32/float64 and int32/int64, or its arrays do not agree.
template <typename F>
bool with_csr(PyObject* values_object, PyObject* indices_object, PyObject* indptr_object, std::size_t d,
              const double* w, View& values, View& indices, View& indptr, F&& f) {
  if (!values.get(values_object, PyBUF_ND, "data") || !indices.get(indices_object, PyBUF_ND, "indices") ||
      !indptr.get(indptr_object, PyBUF_ND, "indptr"))
    return false;
  const int size = index_size(indices);
  if (!values.kind() || !size || index_size(indptr) != size || indptr.b.ndim != 1 || indptr.b.shape[0] < 1 ||
      indices.b.shape[0] != values.b.shape[0]) {
    PyErr_SetString(PyExc_ValueError, "a CSR matrix of float32 or float64 values and int32 or int64 indices");
    return false;
  }
  const std::size_t n = std::size_t(indptr.b.shape[0] - 1);
  auto go = [&](auto zero, auto index) {
    using T = decltype(zero);
    using I = decltype(index);
    f(Csr<T, I>{n, d, static_cast<const T*>(values.b.buf), static_cast<const I*>(indices.b.buf),
                static_cast<const I*>(indptr.b.buf), w});
  };
  if (values.kind() == 'f' && size == 4) go(float{}, std::int32_t{});
  else if (values.kind() == 'f') go(float{}, std::int64_t{});
  else if (size == 4) go(double{}, std::int32_t{});
  else go(double{}, std::int64_t{});
  return true;
}

// sparse_lloyd(data, indices, indptr, d, centres, weights, max_iter, shift_tol, threads, halt_on_empty)
// -> (iterations, emptied, team), as lloyd() on a CSR matrix's three arrays.
PyObject* py_sparse_lloyd(PyObject*, PyObject* args) {
  PyObject *values_object, *indices_object, *indptr_object, *centres_object, *weights_object;
  Py_ssize_t d;
  long max_iter, threads;
  double shift_tol;
  int halt;
  if (!PyArg_ParseTuple(args, "OOOnOOldlp", &values_object, &indices_object, &indptr_object, &d, &centres_object,
                        &weights_object, &max_iter, &shift_tol, &threads, &halt))
    return nullptr;
  View values, indices, indptr, centres, weights;
  if (!centres.get(centres_object, PyBUF_WRITABLE | PyBUF_ND, "centres")) return nullptr;
  std::size_t n = 0;
  {
    View rows;  // its length, released at once: with_csr takes the arrays again
    if (!rows.get(indptr_object, PyBUF_ND, "indptr")) return nullptr;
    n = std::size_t(std::max<Py_ssize_t>(rows.b.shape[0] - 1, 0));
  }
  if (!check_common(centres, weights, weights_object, n, std::size_t(d))) return nullptr;
  const std::size_t m = centres.b.shape[0], k = centres.b.shape[1];
  const double* w = weights.held ? static_cast<const double*>(weights.b.buf) : nullptr;
  double* c = static_cast<double*>(centres.b.buf);
  const kmbench::StopRule stop{max_iter, -1, shift_tol};
  std::vector<long> iterations(m);
  std::vector<char> emptied(m);
  int team = 0;
  const int count = threads_for(threads);
  std::string error;
  const bool ok = with_csr(values_object, indices_object, indptr_object, std::size_t(d), w, values, indices, indptr,
                           [&](const auto& x) {
    Py_BEGIN_ALLOW_THREADS try {
      std::vector<double> one(k * x.d);
      for (std::size_t s = 0; s < m; ++s) {
        std::copy(c + s * k * x.d, c + (s + 1) * k * x.d, one.begin());
        bool empty = false;
        iterations[s] = lloyd_sparse(x, one, k, stop, count, halt, empty, &team);
        emptied[s] = empty;
        std::copy(one.begin(), one.end(), c + s * k * x.d);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    Py_END_ALLOW_THREADS
  });
  if (!ok) return nullptr;
  if (!error.empty()) {
    PyErr_SetString(PyExc_RuntimeError, error.c_str());
    return nullptr;
  }
  return result(iterations, emptied, team);
}

// sparse_nearest(data, indices, indptr, centres, labels, distances, threads): each row's nearest
// centre (into labels, int32) and squared distance (into distances, float64).
PyObject* py_sparse_nearest(PyObject*, PyObject* args) {
  PyObject *values_object, *indices_object, *indptr_object, *centres_object, *labels_object, *distances_object;
  long threads;
  if (!PyArg_ParseTuple(args, "OOOOOOl", &values_object, &indices_object, &indptr_object, &centres_object,
                        &labels_object, &distances_object, &threads))
    return nullptr;
  View values, indices, indptr, centres, labels, distances;
  if (!centres.get(centres_object, PyBUF_ND, "centres") || !labels.get(labels_object, PyBUF_WRITABLE | PyBUF_ND, "labels") ||
      !distances.get(distances_object, PyBUF_WRITABLE | PyBUF_ND, "distances"))
    return nullptr;
  if (centres.kind() != 'd' || centres.b.ndim != 2 || index_size(labels) != 4 || distances.kind() != 'd') {
    PyErr_SetString(PyExc_ValueError, "centres (k, d) float64, labels int32, distances float64");
    return nullptr;
  }
  const std::size_t k = centres.b.shape[0], d = centres.b.shape[1];
  const double* c = static_cast<const double*>(centres.b.buf);
  const int count = threads_for(threads);
  bool sized = true;
  const bool ok = with_csr(values_object, indices_object, indptr_object, d, nullptr, values, indices, indptr,
                           [&](const auto& x) {
    if (std::size_t(labels.b.shape[0]) != x.n || std::size_t(distances.b.shape[0]) != x.n) {
      sized = false;
      return;
    }
    Py_BEGIN_ALLOW_THREADS nearest_sparse(x, c, k, static_cast<int*>(labels.b.buf),
                                          static_cast<double*>(distances.b.buf), count);
    Py_END_ALLOW_THREADS
  });
  if (!ok) return nullptr;
  if (!sized) {
    PyErr_SetString(PyExc_ValueError, "labels and distances must have one entry a row");
    return nullptr;
  }
  Py_RETURN_NONE;
}

// nearest(x, centres, labels, distances, factor, floor, threads) -> team: the float64 oracle's
// nearest centre of each row of x (n, d) float32 or float64 and its squared distance, into labels
// (int64) and distances (float64); factor and floor: labels.py's margin (oracle_nearest.hpp);
// team: the threads it ran on.
PyObject* py_nearest(PyObject*, PyObject* args) {
  PyObject *x_object, *centres_object, *labels_object, *distances_object;
  double factor, floor;
  long threads;
  if (!PyArg_ParseTuple(args, "OOOOddl", &x_object, &centres_object, &labels_object, &distances_object, &factor,
                        &floor, &threads))
    return nullptr;
  View x, centres, labels, distances;
  if (!x.get(x_object, PyBUF_ND, "x") || !centres.get(centres_object, PyBUF_ND, "centres") ||
      !labels.get(labels_object, PyBUF_WRITABLE | PyBUF_ND, "labels") ||
      !distances.get(distances_object, PyBUF_WRITABLE | PyBUF_ND, "distances"))
    return nullptr;
  if (x.b.ndim != 2 || !x.kind() || centres.kind() != 'd' || centres.b.ndim != 2 || centres.b.shape[1] != x.b.shape[1] ||
      centres.b.shape[0] < 1 || index_size(labels) != 8 || labels.b.ndim != 1 || labels.b.shape[0] != x.b.shape[0] ||
      distances.kind() != 'd' || distances.b.ndim != 1 || distances.b.shape[0] != x.b.shape[0]) {
    PyErr_SetString(PyExc_ValueError, "x (n, d) float32 or float64, centres (k >= 1, d) float64, labels (n,) int64, "
                                      "distances (n,) float64");
    return nullptr;
  }
  const std::size_t n = x.b.shape[0], d = x.b.shape[1], k = centres.b.shape[0];
  const double* c = static_cast<const double*>(centres.b.buf);
  auto* l = static_cast<long long*>(labels.b.buf);
  auto* out = static_cast<double*>(distances.b.buf);
  const int count = threads_for(threads);
  int team = 0;
  Py_BEGIN_ALLOW_THREADS if (x.kind() == 'f') team =
      oracle_nearest(static_cast<const float*>(x.b.buf), n, d, c, k, factor, floor, l, out, count);
  else team = oracle_nearest(static_cast<const double*>(x.b.buf), n, d, c, k, factor, floor, l, out, count);
  Py_END_ALLOW_THREADS return PyLong_FromLong(team);
}

PyObject* py_max_threads(PyObject*, PyObject*) { return PyLong_FromLong(omp_get_max_threads()); }

// Whether this CPU runs the AVX2 module's code (asked of the portable module before loading it).
PyObject* py_cpu_has_avx2(PyObject*, PyObject*) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return PyBool_FromLong(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#else
  Py_RETURN_FALSE;
#endif
}

PyMethodDef methods[] = {
    {"lloyd", py_lloyd, METH_VARARGS,
     "lloyd(x, centres, weights, max_iter, shift_tol, threads, halt_on_empty) -> (iterations, emptied, team)"},
    {"sparse_lloyd", py_sparse_lloyd, METH_VARARGS,
     "sparse_lloyd(data, indices, indptr, d, centres, weights, max_iter, shift_tol, threads, halt_on_empty)"},
    {"sparse_nearest", py_sparse_nearest, METH_VARARGS,
     "sparse_nearest(data, indices, indptr, centres, labels, distances, threads): float64 squared distances"},
    {"nearest", py_nearest, METH_VARARGS,
     "nearest(x, centres, labels, distances, factor, floor, threads) -> team: the float64 oracle's labels, distances"},
    {"max_threads", py_max_threads, METH_NOARGS, "OpenMP's thread count for the next parallel region"},
    {"cpu_has_avx2", py_cpu_has_avx2, METH_NOARGS, "whether the CPU has AVX2 and FMA"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, KMBENCH_STR(KMBENCH_MODULE), "kmbench-cpu's kernels in process", -1,
                      methods};

}  // namespace

PyMODINIT_FUNC KMBENCH_INIT(KMBENCH_MODULE)(void) {
  PyObject* m = PyModule_Create(&module);
  if (m != nullptr) {
#ifdef KMBENCH_AVX2
    PyModule_AddStringConstant(m, "target", "avx2");
#else
    PyModule_AddStringConstant(m, "target", "portable");
#endif
  }
  return m;
}
