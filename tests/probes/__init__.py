"""Plugins that child pytest runs of the suite's own tests load with ``-p``."""
