"""What is measured, task by task: Lloyd (lloyd), one assignment pass (assign) and many small
problems (batched), and the latter two's suites' runner (tasks); their tables are report's."""
