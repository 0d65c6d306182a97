"""Other people's libraries, wrapped as rows: scikit-learn, sklearnex, faiss, SciPy, PyTorch as
users write it, fast-pytorch-kmeans, flash-kmeans, flashlib, cuML, KeOps, kmcuda."""
