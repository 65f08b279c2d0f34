python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 1 --quantization fp8 --max-running-requests 128 --chunked-prefill-size 2048 --speculative-algorithm EAGLE3 --speculative-draft-model-path AngelSlim/Qwen3-8B_eagle3 --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
# run on 4 replica(s) behind a load balancer
# NOT SIMULATED: simlab planned this deployment on vllm 0.34.0; this is the same deployment in sglang 0.5.23's flags, whose own scheduling and kernels were not simulated
# checked against sglang 0.5.23: the drafter methods it serves (simlab/hardware/engine_releases/); not checked: the flags' spelling at this release
# written by simlab plan
