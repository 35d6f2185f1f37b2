"""Report stage: raw records -> statistics -> LaTeX tables, figures, macros and
the JSON sidecars that map every cell back to its runs."""
