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

#include "lloyd.hpp"

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
