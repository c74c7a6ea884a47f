"""What ``usage`` says about a request: emulated token counts, and the rule behind them.

The emulator has no tokenizer, so prompt tokens are counted from the request itself:

- **text tokens**: the pieces of GPT-2's pre-tokenizer over every text part of every
  message (no chat-template tokens): a word with its leading space, a number, a run of
  punctuation, a run of whitespace not followed by a word, a contraction suffix (``'s``).
  A lower bound on GPT-2's count (a rare word or a long number is several of its tokens);
  within one token of GPT-2, Mistral's Tekken and SentencePiece tokenizers on short
  English prompts (docs/serve-ab.md, ``kimi-bench serve``).
- **image tokens**: what the backend's processor made of the images (the emulator: K3's
  patch grid after the merge), 0 when the backend does not say.

``prompt_tokens`` = text + image tokens, itemised in ``prompt_tokens_details`` the way
the peers read it: ``image_tokens`` as SGLang reports it (GuideLLM's image tokens),
``text_tokens``, and ``prompt_tokens`` = the text tokens alone, which GuideLLM reads as the
prompt's text tokens before it adds the image tokens (so its total is what was billed,
not text + image + image); ``cached_tokens`` 0: no prefix cache. AIPerf compares
``usage.prompt_tokens`` (what was billed, images included) with its own count of the
text, so it reports a difference for every image request, as it does for any server that
bills image tokens. Every chat response says the counts are emulated in the
``USAGE_HEADER`` header."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kimi_bench.serving.openai_types import PromptTokensDetails, Usage

USAGE_HEADER = "X-Kimi-Bench-Usage"
USAGE_HEADER_VALUE = "emulated; text=gpt2-pretokenizer-pieces; image=backend-processor"

# GPT-2's pre-tokenizer (its ``pat``) in Python's ``re``, which has no \p{L}/\p{N}: letters
# are word characters that are neither digits nor "_"; "_" joins the punctuation runs.
_PIECES = re.compile(r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:_|[^\s\w])+|\s+(?!\S)|\s+")


def count_text_tokens(texts: Iterable[str]) -> int:
    """Text tokens of the request's text parts, by the module's rule."""
    return sum(len(_PIECES.findall(text)) for text in texts)


@dataclass(frozen=True)
class PromptCount:
    """A prompt's tokens: ``text`` (counted from the request) and ``image`` (the backend's)."""

    text: int
    image: int = 0

    @property
    def total(self) -> int:
        return self.text + self.image

    def usage(self, completion: int) -> Usage:
        """The OpenAI ``usage`` object of a response with ``completion`` tokens."""
        details = PromptTokensDetails(cached_tokens=0, text_tokens=self.text,
                                      image_tokens=self.image, prompt_tokens=self.text)  # fmt: skip
        return {
            "prompt_tokens": self.total,
            "completion_tokens": completion,
            "total_tokens": self.total + completion,
            "prompt_tokens_details": details,
        }
