"""Our own rows that run on the CPU: document 000's NumPy and C++ versions, kmbench-cpu, and the
NumPy rows of the assignment and batched tasks."""
