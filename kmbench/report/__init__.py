"""From stored records to what people read. One exporter per format (exporters: markdown, csv,
json; html to come), each rendering every task from the typed records (contents); the views
they draw on: Lloyd's cells frame (report) and tables (lloyd_markdown, comparisons), the task
suites' cells and tables (task_cells, task_markdown), the plans' scaling and out-of-core tables
(scaling, out_of_core); plots (plot) and the reference documents' published figures (published)."""
