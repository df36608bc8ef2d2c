"""Make a tiny model directory that Dynamo's mocker can serve with no hub access.

    python scripts/make_tiny_model.py /tmp/srtd-tiny-model

The mocker loads no weights, but the frontend needs a tokenizer and a config: a
byte-level BPE tokenizer with a 4096-token vocabulary (the mocker emits ids in
[1000, 2000), so a smaller vocabulary decodes to nothing), a ChatML template and a
tiny Qwen2 config.  Needs the `tokenizers` and `transformers` packages (both come
with ai-dynamo); trains on transformers' own source files, so nothing is downloaded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONFIG = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "vocab_size": 4096,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "max_position_embeddings": 4096,
    "eos_token_id": 2,
    "bos_token_id": 0,
    "torch_dtype": "bfloat16",
}


def train_tokenizer(out: Path) -> None:
    import transformers
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    sources = sorted(str(p) for p in Path(transformers.__file__).parent.rglob("*.py"))[:400]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=CONFIG["vocab_size"],
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train(sources, trainer)
    tokenizer.save(str(out / "tokenizer.json"))


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    train_tokenizer(out)
    special = {"special": True, "lstrip": False, "rstrip": False, "normalized": False, "single_word": False}
    tokenizer_config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(i): {"content": t, **special} for i, t in enumerate(SPECIALS)},
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    (out / "config.json").write_text(json.dumps(CONFIG, indent=2))
    print(f"model directory ready: {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_tiny_model.py OUTPUT_DIR")
    main(Path(sys.argv[1]))
