"""Grids of cells: a suite file per reference document (suites/*.toml, suite) expanded into
steps that are checked whole before anything is written and run one by one (plan)."""
