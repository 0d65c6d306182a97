"""What is measured, task by task: Lloyd (lloyd), one assignment pass (assign) and many small
problems (batched), the latter two's suites' runner (tasks) and tables (task_export)."""
