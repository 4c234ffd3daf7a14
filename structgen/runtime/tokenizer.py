"""``Tokenizer``: structgen's tokenizer over a ``tokenizers.Tokenizer``, without transformers.

It offers the part of transformers' ``PreTrainedTokenizerFast`` interface that structgen
(the request factory, the vocabulary builder, the DSL, the server) and its users call:
``encode`` / ``decode`` / ``__call__``, the named special tokens and their ids,
``all_special_ids``, token <-> id conversion, ``get_vocab``, ``apply_chat_template``
(rendered by :mod:`structgen.runtime.chat_template`, as transformers renders it) and
``save_pretrained`` / ``from_pretrained`` over a ``tokenizer.json`` plus a
``tokenizer_config.json`` that transformers also reads. Everything structgen does with a
tokenizer also accepts a transformers tokenizer in its place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structgen.errors import ModelLoadError, RequestError

__all__ = ["Tokenizer", "Encoding", "SPECIAL_TOKEN_NAMES"]

# transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order
SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
_CONFIG = "tokenizer_config.json"


class Encoding(dict):
    """``{"input_ids": ..., "attention_mask": ...}`` with attribute access (``enc.input_ids``),
    as transformers' ``BatchEncoding`` offers for plain lists.
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Tokenizer:
    """A fast tokenizer with its named special tokens and chat template.

    Args:
        backend: the ``tokenizers.Tokenizer`` (model, pre-tokenizer, decoder, added tokens,
            post-processor: ``add_special_tokens=True`` applies the latter).
        chat_template: the model's Jinja chat template, or None.
        model_max_length: longest input the model takes (informational).
        **special_tokens: ``bos_token``, ``eos_token``, ``unk_token``, ``pad_token`` (and
            the other names of :data:`SPECIAL_TOKEN_NAMES`): token strings, or None.

    Raises:
        ModelLoadError: an unknown special-token name, or a special token the vocabulary
            does not hold.
    """

    def __init__(
        self,
        backend,
        *,
        chat_template: str | None = None,
        model_max_length: int | None = None,
        **special_tokens: str | None,
    ) -> None:
        unknown = set(special_tokens) - set(SPECIAL_TOKEN_NAMES)
        if unknown:
            raise ModelLoadError(f"unknown special token names {sorted(unknown)}")
        self._backend = backend
        self.chat_template = chat_template
        self.model_max_length = int(model_max_length or 1 << 60)
        self._special: dict[str, str] = {}
        for name in SPECIAL_TOKEN_NAMES:
            tok = special_tokens.get(name)
            if tok is None:
                continue
            if backend.token_to_id(tok) is None:
                raise ModelLoadError(f"{name} {tok!r} is not in the tokenizer's vocabulary")
            self._special[name] = tok

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike) -> Tokenizer:
        """Load ``directory/tokenizer.json`` and, when present, ``tokenizer_config.json``
        (special tokens as strings or ``{"content": ...}`` dicts, ``chat_template``,
        ``model_max_length``) and ``chat_template.jinja``.

        Raises:
            ModelLoadError: no ``tokenizer.json``, or a file that does not parse.
        """
        from tokenizers import Tokenizer as Backend

        d = Path(directory)
        if not (d / "tokenizer.json").is_file():
            raise ModelLoadError(f"{d} has no tokenizer.json")
        try:
            backend = Backend.from_file(str(d / "tokenizer.json"))
            config = json.loads((d / _CONFIG).read_text()) if (d / _CONFIG).is_file() else {}
        except Exception as e:  # noqa: BLE001 - any parse failure: the files are unusable
            raise ModelLoadError(f"cannot read the tokenizer in {d}: {e}") from e
        template = config.get("chat_template")
        if (d / "chat_template.jinja").is_file():
            template = (d / "chat_template.jinja").read_text()
        special = {}
        for name in SPECIAL_TOKEN_NAMES:
            value = config.get(name)
            if isinstance(value, dict):
                value = value.get("content")
            if value is not None:
                special[name] = value
        return cls(
            backend,
            chat_template=template if isinstance(template, str) else None,
            model_max_length=config.get("model_max_length"),
            **special,
        )

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` (special tokens, chat
        template, ``model_max_length``) into ``directory`` (created if missing), readable by
        :meth:`from_pretrained` and by transformers' ``PreTrainedTokenizerFast``.

        Raises:
            OSError: the directory cannot be written.
        """
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self._backend.save(str(d / "tokenizer.json"))
        config: dict[str, Any] = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "clean_up_tokenization_spaces": False,
            "model_max_length": self.model_max_length,
            **self._special,
        }
        if self.chat_template is not None:
            config["chat_template"] = self.chat_template
        (d / _CONFIG).write_text(json.dumps(config, indent=2, ensure_ascii=False))

    # ---------------------------------------------------------------- encoding
    @property
    def is_fast(self) -> bool:
        """Always True: backed by a ``tokenizers.Tokenizer`` (transformers' meaning)."""
        return True

    @property
    def backend_tokenizer(self):
        """The underlying ``tokenizers.Tokenizer``."""
        return self._backend

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text`` (the post-processor's tokens, e.g. BOS, when
        ``add_special_tokens``).
        """
        return self._backend.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, text: str | Sequence[str], add_special_tokens: bool = True) -> Encoding:
        """``Encoding`` of one text (``input_ids: list[int]``) or of a list of texts
        (``input_ids: list[list[int]]``), with an all-ones ``attention_mask``.
        """
        if isinstance(text, str):
            ids = self.encode(text, add_special_tokens)
            return Encoding(input_ids=ids, attention_mask=[1] * len(ids))
        encs = self._backend.encode_batch(list(text), add_special_tokens=add_special_tokens)
        return Encoding(
            input_ids=[e.ids for e in encs], attention_mask=[[1] * len(e.ids) for e in encs]
        )

    def decode(self, token_ids: int | Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of ``token_ids`` (a sequence, a 1-D tensor or array, or one id)."""
        ids = token_ids.tolist() if hasattr(token_ids, "tolist") else token_ids
        if isinstance(ids, int):
            ids = [ids]
        return self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def batch_decode(
        self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = False
    ) -> list[str]:
        """:meth:`decode` of each sequence."""
        return [self.decode(s, skip_special_tokens) for s in sequences]

    # -------------------------------------------------------------- vocabulary
    def get_vocab(self) -> dict[str, int]:
        """Token string -> id, added tokens included."""
        return self._backend.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        """Number of ids, added tokens included."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def vocab_size(self) -> int:
        """Size of the base vocabulary (added tokens not counted), as transformers reports."""
        return self._backend.get_vocab_size(with_added_tokens=False)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | None | list[int | None]:
        """Id of a token string (None if unknown and there is no unk token), or of each."""
        if isinstance(tokens, str):
            return self._token_id(tokens)
        return [self._token_id(t) for t in tokens]

    def _token_id(self, token: str) -> int | None:
        tid = self._backend.token_to_id(token)
        if tid is None and "unk_token" in self._special:
            tid = self._backend.token_to_id(self._special["unk_token"])
        return tid

    def convert_ids_to_tokens(
        self, ids: int | Sequence[int], skip_special_tokens: bool = False
    ) -> str | None | list[str]:
        """Token string of an id (None outside the vocabulary), or of each id of a list."""
        if isinstance(ids, int):
            return self._backend.id_to_token(ids)
        special = set(self.all_special_ids) if skip_special_tokens else set()
        return [self._backend.id_to_token(i) for i in ids if i not in special]

    # ----------------------------------------------------------- special tokens
    @property
    def special_tokens_map(self) -> dict[str, str]:
        """Named special tokens that are set (``{"eos_token": "<|im_end|>", ...}``)."""
        return dict(self._special)

    @property
    def all_special_tokens(self) -> list[str]:
        """The named special tokens, each once."""
        return list(dict.fromkeys(self._special.values()))

    @property
    def all_special_ids(self) -> list[int]:
        """Ids of :attr:`all_special_tokens`."""
        return [self._backend.token_to_id(t) for t in self.all_special_tokens]

    def _named(self, name: str) -> str | None:
        return self._special.get(name)

    def _named_id(self, name: str) -> int | None:
        tok = self._special.get(name)
        return None if tok is None else self._backend.token_to_id(tok)

    bos_token = property(lambda self: self._named("bos_token"), doc="BOS token, or None.")
    eos_token = property(lambda self: self._named("eos_token"), doc="EOS token, or None.")
    unk_token = property(lambda self: self._named("unk_token"), doc="Unknown token, or None.")
    pad_token = property(lambda self: self._named("pad_token"), doc="Padding token, or None.")
    bos_token_id = property(lambda self: self._named_id("bos_token"), doc="BOS id, or None.")
    eos_token_id = property(lambda self: self._named_id("eos_token"), doc="EOS id, or None.")
    unk_token_id = property(lambda self: self._named_id("unk_token"), doc="Unknown id, or None.")
    pad_token_id = property(lambda self: self._named_id("pad_token"), doc="Padding id, or None.")

    # ----------------------------------------------------------- chat template
    def apply_chat_template(
        self,
        conversation: Any,
        tools: list | None = None,
        documents: list[dict] | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        tokenize: bool = True,
        return_dict: bool = True,
        **kwargs: Any,
    ):
        """Render chat messages with the chat template, as transformers'
        ``apply_chat_template`` does (its special tokens are template variables too).

        Args:
            conversation: a list of ``{"role", "content", ...}`` messages, or a list of such
                lists (a batch).
            tools: tool JSON schemas (or typed, documented functions) for the template.
            documents: RAG documents for the template.
            chat_template: a template to use instead of the tokenizer's.
            add_generation_prompt: end with the assistant header.
            continue_final_message: leave the last message open for the model to continue.
            tokenize: return token ids (no special tokens added) instead of text.
            return_dict: with ``tokenize``, return an :class:`Encoding` (transformers v5's
                default) instead of the ids.
            **kwargs: further template variables.

        Returns:
            The text (``tokenize=False``), or its ids / :class:`Encoding`; a list of them
            for a batch.

        Raises:
            RequestError: no chat template, an empty or malformed conversation, a tool of
                the wrong type.
            jinja2.TemplateError: the template raised.
        """
        from structgen.runtime.chat_template import render_chat_template

        template = chat_template if chat_template is not None else self.chat_template
        if template is None:
            raise RequestError("the tokenizer has no chat template; pass chat_template=")
        if not isinstance(conversation, (list, tuple)) or not conversation:
            raise RequestError("cannot apply the chat template to an empty conversation")
        batched = isinstance(conversation[0], (list, tuple)) or hasattr(conversation[0], "messages")
        variables = {**self._special, **kwargs}
        texts = [
            render_chat_template(
                template,
                conv,
                tools=tools,
                documents=documents,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                **variables,
            )
            for conv in (conversation if batched else [conversation])
        ]
        if not tokenize:
            return texts if batched else texts[0]
        enc = self(texts if batched else texts[0], add_special_tokens=False)
        return enc if return_dict else enc.input_ids

    def __repr__(self) -> str:
        return f"Tokenizer(vocab={len(self)}, special={self._special})"
