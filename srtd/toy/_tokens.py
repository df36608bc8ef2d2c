"""Deterministic fake tokens: the toy model's "tokenizer" and "sampler".

A token is a word.  Prompts are counted by whitespace-separated words, and the output
for a prompt is a fixed pseudo-random walk over a small vocabulary seeded by a hash of
the prompt, so the same request always yields the same text, in any process, on any
machine (no reliance on Python's per-process salted `hash`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

VOCAB: tuple[str, ...] = (
    "the", "a", "model", "token", "gpu", "node", "job", "slurm", "step", "prefill",
    "decode", "cache", "batch", "request", "router", "worker", "latency", "stream",
    "tensor", "kernel", "layer", "attention", "weights", "serve", "fast", "small",
    "quiet", "ready", "health", "signal", "drain", "queue", "graph", "plan", "unit",
    "probe", "restart", "port", "socket", "event", "journal", "yaml", "recipe", "cluster",
    "bench", "toy", "srtd", "hello", "world", "again", "then", "and", "of", "to", "in",
    "is", "on", "with", "for", "from", "by", "at", "it", "so",
)  # fmt: skip

# Knuth's MMIX linear congruential generator: trivially reproducible, good enough to
# make fake text look varied.
_LCG_MUL = 6364136223846793005
_LCG_INC = 1442695040888963407
_MASK64 = (1 << 64) - 1


def count_tokens(text: str) -> int:
    """How many tokens `text` is, for `usage.prompt_tokens`: its whitespace-separated words."""
    return len(text.split())


def generate(prompt: str, n: int) -> Iterator[str]:
    """The first `n` output tokens for `prompt`, as text pieces that concatenate cleanly.

    The first piece is a bare word, every later one a space and a word, so that joining
    the pieces gives the completion text and `count_tokens` of it gives back `n`.
    """
    state = int.from_bytes(hashlib.blake2b(prompt.encode(), digest_size=8).digest(), "big")
    for i in range(n):
        state = (state * _LCG_MUL + _LCG_INC) & _MASK64
        word = VOCAB[(state >> 33) % len(VOCAB)]
        yield word if i == 0 else " " + word
