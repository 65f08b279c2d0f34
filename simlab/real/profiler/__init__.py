"""The profiler: measure every cost curve the simulator reads on this machine and write a hardware profile.

One concept per module (torch is imported only by the modules that time something, never by this package):

- :mod:`.spec`: ``ProfileSpec``, the grids and the placement of batch tokens over requests (no torch);
- :mod:`.models`: ``--model`` / ``--drafter`` resolved to a target and a drafter;
- :mod:`.steps`: the timed steps, built with static shapes so that CUDA graphs can capture them;
- :mod:`.timing`: ``time_step``, warm-ups then the median of replays;
- :mod:`.runner`: ``Profiler``, the phases, the time guard, failures per point, partial results;
- :mod:`.table`: the result as a profile mapping (monotone fix, provenance, ``kv_cache_tokens``);
- :mod:`.progress`: the progress bar or plain progress lines, and the closing summary;
- :mod:`.cli`: ``profile_command`` (``simlab profile``); ``python -m simlab.real.profiler`` runs it alone;
- :mod:`.verify_cost`: ``profile_verify_cost``, the quick verify curve of the real engine's load-aware schedulers.
"""
