"""Our own rows that run on one GPU: the documents' CUDA versions, kmbench-gpu and what is built
on it (yinyang-gpu, triton-fused), the assignment ladder and the batched kernels."""
