"""The measurements' scripts: dump real servers' tool lists, run peer linters on them (CI runs neither)."""
