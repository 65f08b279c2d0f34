python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 1 --quantization fp8 --max-running-requests 128 --chunked-prefill-size 8192 --speculative-algorithm DSPARK --speculative-draft-model-path '<dspark drafter for Qwen/Qwen3-8B>' --speculative-num-steps 7 --speculative-eagle-topk 1 --speculative-num-draft-tokens 8
# run on 3 replica(s) behind a load balancer
# flags as of sglang 0.5.3; written by simlab plan
