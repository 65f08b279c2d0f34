python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp 1 --quantization fp8 --max-running-requests 128 --chunked-prefill-size 2048 --speculative-algorithm DSPARK --speculative-draft-model-path '<dspark drafter for Qwen/Qwen3-30B-A3B>' --speculative-num-steps 7 --speculative-num-draft-tokens 8
# run on 1 replica(s) behind a load balancer
# simulated on sglang 0.5.23, with the engine limits below as simlab ran them; written for sglang 0.5.23
# checked against sglang 0.5.23: the drafter methods it serves (simlab/hardware/engine_releases/); not checked: the flags' spelling at this release
# FILL IN: <dspark drafter for Qwen/Qwen3-30B-A3B> stands for a dspark drafter checkpoint; the plan named none (give its arm `drafter:`)
# simlab credited the adaptive scheduler; sglang 0.5.23 has no flag for it (no adaptive or dynamic speculation setting among its release's settings) and verifies all 7 drafts each step, which this plan did not simulate (add the arm with scheduler: {kind: fixed} to see what that costs)
# written by simlab plan
