vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 1 --quantization fp8 --max-num-seqs 128 --max-num-batched-tokens 8192
# run on 1 replica(s) behind a load balancer
# NOT SIMULATED: simlab planned this deployment on sglang 0.5.23; this is the same deployment in vllm 0.34.0's flags, whose own scheduling and kernels were not simulated
# checked against vllm 0.34.0: the drafter methods it serves (simlab/hardware/engine_releases/); not checked: the flags' spelling at this release
# NOT IN vllm 0.34.0: it serves the drafters eagle3, mtp (vllm/config/speculative.py: SpeculativeConfig.method @v0.34.0 (PyPI sdist) (ngram, eagle, eagle3, medusa, mlp_speculator, draft_model, the *_mtp); simlab's eagle3 and mtp (line not pinned)); the dspark drafter the plan credited has no flag there, so this command serves without speculation
# written by simlab plan
