// The AVX2 + FMA build of inprocess.cpp (setup.py compiles it with -mavx2 -mfma): a file of its
// own so that the two builds of one source get two object files.
#define KMBENCH_MODULE _inproc_avx2
#include "inprocess.cpp"
