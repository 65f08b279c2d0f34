vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --quantization fp8 --max-num-seqs 128 --max-num-batched-tokens 8192 --speculative-config '{"method":"eagle3","model":"AngelSlim/Qwen3-8B_eagle3","num_speculative_tokens":3}'
# run on 2 replica(s) behind a load balancer
# simulated on vllm 0.34.0, with the engine limits below as simlab ran them; written for vllm 0.34.0
# checked against vllm 0.34.0: the drafter methods it serves (simlab/hardware/engine_releases/); not checked: the flags' spelling at this release
# written by simlab plan
