"""simlab: simulate and measure LLM serving with parallel-draft speculative decoding.

The library API::

    import simlab

    results = simlab.run_scenario("scenarios/quickstart.yaml", out="results/quickstart")
    print(results.table()[["output_throughput", "median_user_tok_s", "p99_ttft_ms"]])

:func:`load_scenario` validates a file, :func:`run_scenario` simulates every arm and returns :class:`Results`
(``summary``, ``requests``, ``steps``). The command line (``simlab --help``) is a thin shell over these.
"""

from simlab.common.version import __version__

__all__ = ["Results", "RunProgress", "__version__", "load_scenario", "run_scenario"]


def __getattr__(name: str):  # imported on first use, so that ``import simlab`` and ``simlab --help`` stay light
    if name == "load_scenario":
        from simlab.config.loading import load_scenario

        return load_scenario
    if name in ("run_scenario", "Results", "RunProgress"):
        from simlab import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'simlab' has no attribute {name!r}")
