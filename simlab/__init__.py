"""simlab: simulate and measure LLM serving with parallel-draft speculative decoding.

The public entry points are :func:`simlab.scenario.load_scenario` and
:func:`simlab.runner.run_scenario`; the command line is ``simlab`` (see ``simlab --help``).
"""

__version__ = "0.1.0"
