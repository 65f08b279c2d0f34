"""Real mode: PyTorch kernels behind the simulator's vocabulary.

- :mod:`simlab.real.config`       target / drafter configs and presets (no torch needed)
- :mod:`simlab.real.target`       Qwen3-architecture target with a static ragged KV cache (:mod:`.kv_cache`)
- :mod:`simlab.real.drafter`      DFlash/DSpark block drafter: K/V injection, Markov head, confidence head
- :mod:`simlab.real.sampling`     lossless verification (speculative sampling / greedy matching)
- :mod:`simlab.real.engine`       batched speculative decoding with the shared schedulers, writing records
- :mod:`simlab.real.hf_checkpoint` local Hugging Face Qwen3 checkpoints (read and written with `safetensors`)
- :mod:`simlab.real.train`, :mod:`.recipe`, :mod:`.pair`  training and shipping a small pair
- :mod:`simlab.real.cli`          the ``simlab real`` commands (``real_app``)

Nothing here imports torch at package import time.
"""
