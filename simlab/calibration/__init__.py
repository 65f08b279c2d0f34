"""Calibration: fitting the roofline and the serving stacks to public engine measurements, and stating the error.

One package above the runner, since every stage after the kernels fits what the engine simulates:

- ``stages/``: the fit of fitted.yaml, stage by stage (kernels, serving stacks on engine runs, the stacks' MoE
  latency, their host time of speculative decoding), stages 3-5 on the engine's replay of each run
  (:func:`simlab.calibration.profile_check.replay_record`, read directly);
- ``userfit`` and ``benchfit``: ``simlab profiles fit`` on a user's step timings or engine benchmark files;
- ``profile_check`` and ``gain_check``: ``simlab profiles check``, the engine's error on every record and
  speculation's gain on pairs of runs;
- ``cli``: the two commands.

The cost models read what the fit wrote through :mod:`simlab.hardware.calibration` (a floor below).
"""
