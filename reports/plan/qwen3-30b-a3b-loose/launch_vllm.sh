vllm serve Qwen/Qwen3-30B-A3B --tensor-parallel-size 2 --enable-expert-parallel --quantization fp8 --max-num-seqs 128 --max-num-batched-tokens 8192 --speculative-config '{"method":"dspark","model":"<dspark drafter for Qwen/Qwen3-30B-A3B>","num_speculative_tokens":7}'
# run on 1 replica(s) behind a load balancer
# flags as of vllm 0.13.0; written by simlab plan
