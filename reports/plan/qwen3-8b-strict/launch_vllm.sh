vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --quantization fp8 --max-num-seqs 128 --max-num-batched-tokens 8192 --speculative-config '{"method":"dspark","model":"<dspark drafter for Qwen/Qwen3-8B>","num_speculative_tokens":7}'
# run on 3 replica(s) behind a load balancer
# flags as of vllm 0.13.0; written by simlab plan
