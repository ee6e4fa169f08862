"""A stand-in for an LLM on the GPU machine (no key, no network there): an OpenAI-compatible
server on 127.0.0.1 whose "model" answers every request with the same list of common
Hopper tiles. It exercises the whole llm strategy path (prompt, structured reply, checks
against the space, repair, fallback, rationale in the history) without claiming a model's
judgement. Usage: python3 scripts/loopback_llm.py PORTFILE & ; then OPENAI_BASE_URL=...
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from llm_server import LLMServer, Reply, config_reply  # noqa: E402

TILES = [
    dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma"),
    dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=4, variant="grouped"),
    dict(block_m=128, block_n=256, block_k=64, group_m=16, num_warps=8, num_stages=3, variant="tma"),
    dict(block_m=256, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma"),
    dict(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma"),
    dict(block_m=64, block_n=256, block_k=64, group_m=16, num_warps=4, num_stages=4, variant="tma"),
    dict(block_m=128, block_n=128, block_k=128, group_m=8, num_warps=8, num_stages=3, variant="grouped"),
    dict(block_m=64, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4, variant="grouped"),
]

with LLMServer(default=Reply(config_reply(TILES, "a tile that ran well on Hopper elsewhere"))) as server:
    Path(sys.argv[1]).write_text(server.url)
    while True:
        time.sleep(1)
