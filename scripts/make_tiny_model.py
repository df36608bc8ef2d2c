"""Make a tiny model directory that Dynamo's mocker can serve with no hub access.

    python scripts/make_tiny_model.py /tmp/srtd-tiny-model

The mocker loads no weights, but the frontend needs a tokenizer and a config: a
byte-level BPE tokenizer with a 4096-token vocabulary (the mocker emits ids in
[1000, 2000), so a smaller vocabulary decodes to nothing), a ChatML template and a
tiny Qwen2 config.  Needs the `tokenizers` and `transformers` packages (both come
with ai-dynamo); trains on transformers' own source files, so nothing is downloaded.
"""

import json, os, glob, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, normalizers

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
import transformers

files = sorted(glob.glob(os.path.join(os.path.dirname(transformers.__file__), "**/*.py"), recursive=True))[:400]
tok = Tokenizer(models.BPE())
tok.normalizer = normalizers.NFC()
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=4096,
    special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
)
tok.train(files, trainer)
tok.save(os.path.join(out, "tokenizer.json"))
tmpl = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
json.dump(
    {
        "tokenizer_class": "Qwen2Tokenizer",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": tmpl,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "special": True,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "single_word": False,
            }
            for i, t in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        },
    },
    open(os.path.join(out, "tokenizer_config.json"), "w"),
)
open(os.path.join(out, "chat_template.jinja"), "w").write(tmpl)
json.dump(
    {
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
    },
    open(os.path.join(out, "config.json"), "w"),
)
print("ok")
