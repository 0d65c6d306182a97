"""Our own rows that spread one problem over a cluster's workers or GPUs (Dask, NCCL)."""
