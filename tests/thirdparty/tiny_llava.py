"""Write a tiny random LLaVA (CLIP vision tower + one-layer Llama) with a local processor
into a folder, with no hub access: ``python tests/thirdparty/tiny_llava.py OUT``. Runs in
the ``transformers serve`` environment (scripts/transformers-serve-env.sh), not in
kimi-bench's.

What serve-ab's figures need from it: every image of a request reaches the vision tower
(32x32 after the CLIP processor, 8x8 patches: IMAGE_TOKENS placeholders in the prompt, so
usage.prompt_tokens grows by that many per image); one output token per decode step and
one streamed text chunk per token (a WordLevel vocabulary of words ``t0``..; the special
tokens are suppressed, so none decodes to empty text); no EOS, so every stream ends at
max_tokens with finish_reason ``length``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

IMAGE_SIZE, PATCH = 32, 8
IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2  # the CLS feature is dropped ("default" strategy)
SPECIAL = ["<unk>", "<s>", "</s>", "<image>"]
# text parts and images in message order; the prompt ends with <s> before the answer
CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }} {% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}<image> "
    "{% elif c['type'] == 'text' %}{{ c['text'] }} {% endif %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<s>{% endif %}"
)


def _tokenizer_json(words: list[str]) -> dict:
    special = [{"id": i, "content": w, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, w in enumerate(SPECIAL)]  # fmt: skip
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None, "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)},
                  "unk_token": "<unk>"},
    }  # fmt: skip


def main(out: Path, stops: bool = False) -> None:
    """``stops``: every word but ``t0`` ends a sequence (its ``eos_token_id``), so a greedy
    answer stops after its first token unless that is ``t0``, and a server told to ignore
    the end of sequence (``min_new_tokens``) answers ``t0`` up to max tokens (issue 43)."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    out.mkdir(parents=True, exist_ok=True)
    words = SPECIAL + [f"t{i}" for i in range(252)]
    (out / "tokenizer.json").write_text(json.dumps(_tokenizer_json(words)))
    tok = PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"), unk_token="<unk>",
                                  bos_token="<s>", eos_token="</s>")  # fmt: skip
    size = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    images = CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size=size)
    LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=PATCH, image_token="<image>",
                   vision_feature_select_strategy="default", num_additional_image_tokens=1,
                   chat_template=CHAT_TEMPLATE).save_pretrained(out)  # fmt: skip
    torch.manual_seed(0)
    text = LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64,
                       num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                       max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
                       pad_token_id=0)  # fmt: skip
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=2, image_size=IMAGE_SIZE, patch_size=PATCH,
                              projection_dim=32)  # fmt: skip
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_index=3,
                      vision_feature_layer=-1,
                      vision_feature_select_strategy="default")  # fmt: skip
    model = LlavaForConditionalGeneration(cfg)
    model.generation_config.eos_token_id = None  # never stops early: max_tokens ends it
    if stops:
        model.generation_config.eos_token_id = list(range(len(SPECIAL) + 1, len(words)))
    model.generation_config.suppress_tokens = list(range(len(SPECIAL)))
    model.save_pretrained(out)
    print(json.dumps({"model": str(out), "image_tokens": IMAGE_TOKENS}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), stops="--stops" in sys.argv[2:])
