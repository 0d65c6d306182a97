"""From stored records to what people read: the cells table (report), markdown, CSV and JSON
(export), plots (plot), the reference documents' published figures (published) and the
multi-GPU scaling table (scaling)."""
