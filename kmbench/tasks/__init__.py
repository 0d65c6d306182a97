"""The problem shapes beside Lloyd: one assignment pass (assign) and many small problems
(batched), their suites' runner (tasks) and tables (task_export)."""
