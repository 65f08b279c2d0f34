vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --quantization fp8 --max-num-seqs 128 --max-num-batched-tokens 8192 --speculative-config '{"method":"dspark","model":"<dspark drafter for Qwen/Qwen3-8B>","num_speculative_tokens":7}'
# run on 3 replica(s) behind a load balancer
# simulated on vllm 0.34.0, with the engine limits below as simlab ran them; flag names checked against vllm 0.13.0
# FILL IN: <dspark drafter for Qwen/Qwen3-8B> stands for a dspark drafter checkpoint; the plan named none (give its arm `drafter:`)
# simlab credited the adaptive scheduler; vllm at this release has no flag for it and verifies all 7 drafts each step, which this plan did not simulate (add the arm with scheduler: {kind: fixed} to see what that costs)
# written by simlab plan
