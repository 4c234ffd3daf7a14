"""OpenAI-compatible HTTP server over :class:`structgen.AsyncEngine`.

``structgen serve --model PATH --host 127.0.0.1 --port 30000`` (``pip install
'structgen[server]'``), or ``uvicorn`` on ``create_app(AsyncEngine(...))``.

Routes: ``GET /v1/models``, ``POST /v1/completions``, ``POST /v1/chat/completions``,
``GET /health``, ``GET /metrics`` (Prometheus text), ``GET /stats`` (``Engine.stats()``
as JSON, for debugging).

OpenAI fields honoured: ``max_tokens`` / ``max_completion_tokens`` (clamped to the room
left in the context; chat default: all of it, completions default: 16),
``temperature``, ``top_p``, ``seed``, ``stop``, ``n`` (at most ``max_n``; seeded choices
use ``seed + i``), ``presence_penalty``, ``frequency_penalty``, ``logit_bias``,
``logprobs`` / ``top_logprobs`` (chat), ``logprobs`` (int) and ``echo`` (completions,
prompt log-probs included), ``stream`` with ``stream_options.include_usage``,
``response_format`` (``json_schema`` with ``strict``, ``json_object``), ``tools`` /
``tool_choice`` / ``parallel_tool_calls`` (see :mod:`structgen.server.tools` for the
prompt format, the grammar and how several calls are streamed).
``usage.prompt_tokens_details.cached_tokens`` counts prompt tokens served from the
prefix cache.

Extra body fields (``extra_body=`` in the openai client), on both endpoints:

* ``regex`` (str): the output must fully match this regex (Python syntax, no
  lookaround or backreferences);
* ``choice`` (list of str): the output is exactly one of these strings;
* vLLM's names are accepted as aliases: ``guided_regex`` (= ``regex``), ``guided_choice``
  (= ``choice``) and ``guided_json`` (a JSON Schema, dict or JSON string; = a
  non-strict ``response_format`` ``json_schema``);
* ``grammar`` (str; alias ``guided_grammar``): a context-free grammar in Lark, GBNF or
  EBNF (syntax detected: ``::=`` rules are GBNF, ``name:`` rules Lark);
* ``constraint_trigger`` (str): the model writes free text until this string first
  appears (e.g. ``"</think>"`` ending a reasoning block), and the constraint above
  applies to what follows. Trigger and constraint are one automaton, so a token that
  spans the trigger is checked whole; the output must contain the trigger (EOS is not
  allowed before it; with ``max_tokens`` the mask steers towards the trigger and a
  complete answer in time). Chat returns, as vLLM's reasoning parsers do, the text
  before the first trigger as ``message.reasoning_content`` and the answer after it as
  ``message.content`` (streamed as ``reasoning_content`` then ``content`` deltas, see
  :mod:`structgen.server.reasoning`); completions return the whole text. vLLM and
  SGLang get this behaviour from a server-wide ``--reasoning-parser``; here it is per
  request, for any trigger text. With ``tools`` the trigger precedes the tool grammar:
  the model reasons, then writes its call(s) (``reasoning_content`` + ``tool_calls``);
* vLLM's sampling extras: ``top_k``, ``min_p``, ``min_tokens``, ``repetition_penalty``,
  ``ignore_eos``, ``stop_token_ids``;
* completions only, SGLang's ``logprob_start_len`` (int, default 0): with ``echo`` and
  ``logprobs``, prompt log-probabilities are computed from this position on (earlier
  entries are null) and the prefix cache may serve the prompt before it, so scoring
  options after a shared prompt (the language's remote ``select``) reuses its KV.

At most one of ``response_format`` (non-text), ``regex``, ``choice``, their ``guided_*``
aliases and active ``tools`` per request. ``response_format.json_schema.strict: true``
generates only the listed properties; otherwise objects may carry extra keys wherever
the schema allows.

Errors are ``{"error": {"message", "type", "param", "code"}}``: 400 for malformed JSON,
wrong field types, unsupported or invalid schemas (the message names the keyword and
its JSON pointer), prompts longer than the context (``context_length_exceeded``), ``n``
too large; 401 without the API key when one is set; 404 for an unknown ``model``.
"""

from __future__ import annotations

from structgen.server.app import create_app

__all__ = ["create_app"]
