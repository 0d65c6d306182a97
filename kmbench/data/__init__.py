"""What kmbench keeps on disk: generated datasets and users' files (datasets), the record store
(results), and the atomic writes both rely on (files)."""
