"""OpenAI parity of chat completions and the legacy completions endpoint, as the official `openai`
SDK sees it, against the tiny Qwen2-shaped shared model (random weights, a real tokenizer, no chat
template of its own: the built-in ChatML).

What a prompt became is shown by greedy decoding: a chat whose rendering is the text T answers
exactly what /v1/completions answers for the prompt T, with the same prompt token count.
Covers the developer role, content part arrays, n > 1 sharing the prompt's KV, logprobs on both
endpoints, max_completion_tokens and seed, prompt arrays, token-id prompts and echo, a
per-request chat_template, and assistant prefill.
"""

from __future__ import annotations

import uuid

import httpx
import openai
import pytest

from strata_server import SHARED_DIR, metric

pytestmark = pytest.mark.timeout(300)

USER = {"role": "user", "content": "hi"}


def chatml(*turns: tuple[str, str], generation: bool = True) -> str:
    """The built-in ChatML rendering of TURNS (role, content), with the generation prompt."""
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return text + ("<|im_start|>assistant\n" if generation else "")


@pytest.fixture(scope="module")
def model(tiny_server):
    return tiny_server.model


def greedy_chat(tiny_client, model, messages, **extra):
    r = tiny_client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0,
                                       extra_body={"ignore_eos": True, **extra})
    return r.choices[0].message.content, r.usage.prompt_tokens


def greedy_text(tiny_client, model, prompt: str):
    r = tiny_client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    return r.choices[0].text, r.usage.prompt_tokens


def test_the_developer_role_is_chatmls_system_merged_with_a_leading_system_message(tiny_client, model):
    assert greedy_chat(tiny_client, model, [{"role": "developer", "content": "Be terse."}, USER]) ==\
        greedy_text(tiny_client, model, chatml(("system", "Be terse."), ("user", "hi")))
    merged = greedy_chat(tiny_client, model, [{"role": "developer", "content": "Be terse."},
                                         {"role": "system", "content": "Answer in French."}, USER])
    assert merged == greedy_text(tiny_client, model, chatml(("system", "Be terse.\n\nAnswer in French."), ("user", "hi")))


def test_a_template_without_a_developer_role_sees_it_as_its_system_message(tiny_client, model):
    llama = open(f"{SHARED_DIR}/templates/meta-llama-Llama-3.1-8B-Instruct.jinja").read()
    as_system = greedy_chat(tiny_client, model, [{"role": "system", "content": "Be terse."}, USER], chat_template=llama)
    as_developer = greedy_chat(tiny_client, model, [{"role": "developer", "content": "Be terse."}, USER], chat_template=llama)
    assert as_developer == as_system
    # Llama's template takes only messages[0] as its system block: the two become one.
    both = greedy_chat(tiny_client, model, [{"role": "developer", "content": "A."}, {"role": "system", "content": "B."}, USER],
                       chat_template=llama)
    assert both == greedy_chat(tiny_client, model, [{"role": "system", "content": "A.\n\nB."}, USER], chat_template=llama)


def test_content_part_arrays_are_read_on_every_role_and_other_parts_are_a_400(tiny_client, model):
    def parts(text):
        return [{"type": "text", "text": t} for t in text.split("|")]
    as_parts = greedy_chat(tiny_client, model, [
        {"role": "developer", "content": parts("Be|terse.")},
        {"role": "user", "content": parts("What is|the weather?")},
        {"role": "assistant", "content": parts("Let me|check."), "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": parts("Sunny|20C")},
        {"role": "user", "content": parts("Thanks")},
    ])
    as_strings = greedy_chat(tiny_client, model, [
        {"role": "system", "content": "Be\nterse."},
        {"role": "user", "content": "What is\nthe weather?"},
        {"role": "assistant", "content": "Let me\ncheck.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny\n20C"},
        {"role": "user", "content": "Thanks"},
    ])
    assert as_parts == as_strings
    for role in ("system", "developer", "user", "assistant", "tool"):
        message = {"role": role, "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}
        if role == "tool":
            message["tool_call_id"] = "call_1"
        with pytest.raises(openai.BadRequestError) as err:
            tiny_client.chat.completions.create(model=model, messages=[message, USER], max_tokens=2)
        assert err.value.param == "messages[0].content[1].type", role
        assert "image_url" in err.value.body["message"]


def test_n_choices_share_the_prompt_which_is_computed_once(tiny_server, tiny_client, model):
    def figures():
        text = httpx.get(f"{tiny_server.base_url}/metrics", timeout=60).text
        return metric(text, "strata_prefix_cache_queries_total"), metric(text, "strata_prefix_cache_hits_total")
    # A prompt no earlier request holds in the cache, longer than one step's token budget (512), so
    # that its prefill takes several steps (32-token blocks).
    prompt = f"{uuid.uuid4()} " + "the quick brown fox jumps over the lazy dog " * 150
    queries, hits = figures()
    r = tiny_client.completions.create(model=model, prompt=prompt, n=4, max_tokens=4, temperature=1.0, seed=7,
                                  extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    n_prompt = r.usage.prompt_tokens
    assert 1000 < n_prompt < 2000, "the prompt counts once in usage"
    assert r.usage.prompt_tokens_details.cached_tokens == 0
    assert r.usage.completion_tokens == 16
    queries2, hits2 = figures()
    assert queries2 - queries == 4 * n_prompt
    computed = (queries2 - queries) - (hits2 - hits)
    # The first choice computes the prompt; the others only the tail of its last block.
    assert computed <= n_prompt + 3 * 32, f"{computed} prompt tokens computed for a prompt of {n_prompt} and n = 4"


def test_logprobs_on_completions_have_the_legacy_shape(tiny_client, model):
    r = tiny_client.completions.create(model=model, prompt="The sky is", max_tokens=5, temperature=0, logprobs=3,
                                  extra_body={"ignore_eos": True})
    c = r.choices[0]
    lp = c.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 5
    assert "".join(lp.tokens) == c.text
    assert lp.text_offset[0] == 0
    assert lp.text_offset == sorted(lp.text_offset)
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert logprob <= 0
        assert 1 <= len(top) <= 3
        # Greedy: the chosen token is the most likely one.
        assert abs(max(top.values()) - logprob) < 1e-5
    chat = tiny_client.chat.completions.create(model=model, messages=[USER], max_tokens=3, temperature=0, logprobs=True,
                                          top_logprobs=2, extra_body={"ignore_eos": True})
    assert [len(t.top_logprobs) for t in chat.choices[0].logprobs.content] == [2, 2, 2]


def test_max_completion_tokens_and_seed_and_include_usage(tiny_client, model):
    r = tiny_client.chat.completions.create(model=model, messages=[USER], max_completion_tokens=5, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 5
    assert r.choices[0].finish_reason == "length"
    body = dict(model=model, prompt="Once upon a time", max_tokens=8, temperature=1.0, extra_body={"ignore_eos": True})
    a = tiny_client.completions.create(seed=11, **body).choices[0].text
    assert tiny_client.completions.create(seed=11, **body).choices[0].text == a
    assert tiny_client.completions.create(seed=12, **body).choices[0].text != a
    chunks = list(tiny_client.completions.create(seed=11, stream=True, stream_options={"include_usage": True}, **body))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == a
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8


def test_prompt_arrays_give_one_choice_per_prompt_in_order(tiny_server, tiny_client, model):
    prompts = ["The capital of France is", "One two three", "Hello"]
    singles = [greedy_text(tiny_client, model, p)[0] for p in prompts]
    r = tiny_client.completions.create(model=model, prompt=prompts, max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.text for c in r.choices] == singles
    assert r.usage.prompt_tokens == sum(greedy_text(tiny_client, model, p)[1] for p in prompts)
    # n choices per prompt: prompt i's are choices i*n .. i*n+n-1.
    r2 = tiny_client.completions.create(model=model, prompt=prompts[:2], n=2, max_tokens=6, temperature=0,
                                   extra_body={"ignore_eos": True})
    assert [c.text for c in sorted(r2.choices, key=lambda c: c.index)] == [singles[0], singles[0], singles[1], singles[1]]
    # Token ids: one prompt as a list, several as a list of lists.
    ids = [httpx.post(f"{tiny_server.base_url}/tokenize", json={"content": p}, timeout=60).json()["tokens"] for p in prompts]
    one = tiny_client.completions.create(model=model, prompt=ids[0], max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    assert one.choices[0].text == singles[0]
    lists = tiny_client.completions.create(model=model, prompt=ids, max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
    assert [c.text for c in lists.choices] == singles
    streamed = tiny_client.completions.create(model=model, prompt=prompts, max_tokens=6, temperature=0, stream=True,
                                         extra_body={"ignore_eos": True})
    texts = ["", "", ""]
    for c in streamed:
        for choice in c.choices:
            texts[choice.index] += choice.text
    assert texts == singles


def test_echo_puts_the_prompt_before_the_completion(tiny_client, model):
    prompts = ["The sky is", "Grass is"]
    singles = [greedy_text(tiny_client, model, p)[0] for p in prompts]
    r = tiny_client.completions.create(model=model, prompt=prompts, echo=True, max_tokens=6, temperature=0, logprobs=1,
                                  extra_body={"ignore_eos": True})
    assert [c.text for c in r.choices] == [p + s for p, s in zip(prompts, singles)]
    # The prompt's tokens carry no logprobs: those listed are the completion's, offset past the prompt.
    for p, c in zip(prompts, r.choices):
        assert len(c.logprobs.tokens) == 6
        assert c.logprobs.text_offset[0] == len(p)
    streamed = tiny_client.completions.create(model=model, prompt=prompts[0], echo=True, max_tokens=6, temperature=0, stream=True,
                                         extra_body={"ignore_eos": True})
    assert "".join(c.choices[0].text for c in streamed if c.choices) == prompts[0] + singles[0]


def test_a_request_may_bring_its_own_chat_template(tiny_client, model):
    template = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[bot]{% endif %}"
    assert greedy_chat(tiny_client, model, [USER], chat_template=template) == greedy_text(tiny_client, model, "[user]hi[bot]")
    # chat_template_kwargs reach it.
    with_kwargs = "{{ greeting }}{% for m in messages %}{{ m.content }}{% endfor %}"
    assert greedy_chat(tiny_client, model, [USER], chat_template=with_kwargs, chat_template_kwargs={"greeting": "Dear "}) ==\
        greedy_text(tiny_client, model, "Dear hi")
    for bad, what in [("{% for %}", "does not parse"), ("{{ raise_exception('no users here') }}", "no users here")]:
        with pytest.raises(openai.BadRequestError) as err:
            tiny_client.chat.completions.create(model=model, messages=[USER], max_tokens=2, extra_body={"chat_template": bad})
        assert err.value.param == "chat_template"
        assert err.value.code == "template_error"
        assert what in err.value.body["message"]


def test_a_last_assistant_message_is_continued_not_closed(tiny_client, model):
    prefill = [USER, {"role": "assistant", "content": "Once upon"}]
    continued = greedy_chat(tiny_client, model, prefill)
    assert continued == greedy_text(tiny_client, model, chatml(("user", "hi"), generation=True) + "Once upon")
    assert greedy_chat(tiny_client, model, prefill, continue_final_message=True) == continued
    # As vLLM names it: a generation prompt after the closed message instead.
    closed = greedy_chat(tiny_client, model, prefill, add_generation_prompt=True)
    assert closed == greedy_text(tiny_client, model, chatml(("user", "hi"), ("assistant", "Once upon")))
    with pytest.raises(openai.BadRequestError) as err:
        tiny_client.chat.completions.create(model=model, messages=[USER], max_tokens=2, extra_body={"continue_final_message": True})
    assert err.value.param == "continue_final_message"
