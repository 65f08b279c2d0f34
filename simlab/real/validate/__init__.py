"""``simlab validate``: run a scenario's workload and arms through the real engine, fit the simulator's inputs
from that run (acceptance from a calibration part's rounds, the cost curve from the run's own steps), simulate
the held-out part with the same arrivals and arms, and report real against simulated per arm.

- :mod:`.workload`: the scenario's requests as real requests (prompts from the held-out corpus);
- :mod:`.costs`: a ``kind: table`` profile fitted from a real run's steps;
- :mod:`.acceptance`: the acceptance model fitted from a real run's rounds (``simlab acceptance fit``'s code);
- :mod:`.compare`: the compared metrics and their relative errors (``validation.json``);
- :mod:`.run`: the whole procedure; :mod:`.plots`: the real-against-simulated figure; :mod:`.cli`: the command.

Nothing here imports torch at package import time.
"""
