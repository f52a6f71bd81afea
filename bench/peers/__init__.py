"""One module per framework, each exposing ``build(workload) -> Runner`` (see ``bench.runner``).

Each module imports its framework lazily inside ``build`` so that the harness can list and
skip a framework that is not installed instead of failing on import.
"""
