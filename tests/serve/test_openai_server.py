"""`kvcompact serve` through the real `openai` Python client (pinned in scripts/requirements-ref.txt)
and raw HTTP, on SmolLM2-135M-Instruct: chat with and without streaming, completions, models, the
errors as the client's exception types, greedy output against `kvcompact generate`, prefix reuse
read from /metrics, a 40-turn conversation several times longer than --ctx, 4 concurrent clients
against the same conversations run alone, cancellation, 429, and a kill -9 + restart that keeps
the saved session. Every server is started by the test, on 127.0.0.1, and stopped by it."""
import json
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from conftest import BIN, MODEL, Server

HEAD_DIM = 64  # SmolLM2-135M: an entry holds key + value (2 x 64 float32), beta (float32), position (int32)
ENTRY_BYTES = (2 * HEAD_DIM + 2) * 4


def kv(usage):
    return usage.model_extra["kvcompact"]


def test_models_health_and_chat(server):
    c = server.client()
    models = c.models.list()
    assert [m.id for m in models.data] == [server.model_id()]
    r = c.chat.completions.create(model=server.model_id(), max_tokens=16, temperature=0,
                                  messages=[{"role": "user", "content": "What is the capital of France?"}])
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content.strip()
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    k = kv(r.usage)
    assert k["cache_entries"] > 0 and k["cache_bytes"] == k["cache_entries"] * ENTRY_BYTES
    assert k["original_tokens"] >= r.usage.prompt_tokens


def test_stream_equals_non_stream_and_reports_usage(server):
    c = server.client()
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three fruits."}]
    full = c.chat.completions.create(model=server.model_id(), messages=msgs, max_tokens=24, temperature=0)
    chunks = list(c.chat.completions.create(model=server.model_id(), messages=msgs, max_tokens=24, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == full.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    # Without include_usage no usage chunk is sent.
    plain = list(c.chat.completions.create(model=server.model_id(), messages=msgs, max_tokens=4, stream=True))
    assert all(ch.usage is None for ch in plain)


def test_completions(server):
    c = server.client()
    r = c.completions.create(model=server.model_id(), prompt="Once upon a time", max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.choices[0].text
    s = list(c.completions.create(model=server.model_id(), prompt="Once upon a time", max_tokens=8, temperature=0,
                                  stream=True))
    assert "".join(ch.choices[0].text for ch in s if ch.choices) == r.choices[0].text


def test_greedy_equals_kvcompact_generate(server):
    c = server.client()
    prompt = "Write one sentence about the sea."
    r = c.chat.completions.create(model=server.model_id(), max_tokens=40, temperature=0,
                                  messages=[{"role": "user", "content": prompt}])
    n = r.usage.prompt_tokens
    out = subprocess.run([str(BIN), "generate", "--model", str(MODEL), "--chat", "--prompt", prompt,
                          "--temperature", "0", "--steps", str(n - 1 + 40), "--json", "--threads", "2"],
                         capture_output=True, text=True, timeout=300, check=True)
    g = json.loads(out.stdout)
    assert len(g["prompt_tokens"]) == n
    assert len(g["generated"]) == r.usage.completion_tokens
    assert g["text"].endswith(r.choices[0].message.content)
    assert r.usage.completion_tokens >= 5


def raw_errors(server):
    """(description, method, path, body bytes or JSON, headers, expected status)."""
    good = {"model": server.model_id(), "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}

    def with_(**kw):
        d = dict(good)
        d.update(kw)
        return d

    def without(k):
        return {a: b for a, b in good.items() if a != k}

    P = "/v1/chat/completions"
    return [
        ("invalid JSON", "POST", P, b'{"messages": [', {}, 400),
        ("not an object", "POST", P, b"[1, 2]", {}, 400),
        ("empty body", "POST", P, b"", {}, 400),
        ("invalid UTF-8", "POST", P, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', {}, 400),
        ("no messages", "POST", P, without("messages"), {}, 400),
        ("empty messages", "POST", P, with_(messages=[]), {}, 400),
        ("messages not array", "POST", P, with_(messages="hi"), {}, 400),
        ("message not object", "POST", P, with_(messages=[3]), {}, 400),
        ("unknown role", "POST", P, with_(messages=[{"role": "wizard", "content": "x"}]), {}, 400),
        ("content wrong type", "POST", P, with_(messages=[{"role": "user", "content": 5}]), {}, 400),
        ("image part", "POST", P, with_(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), {}, 400),
        ("huge max_tokens", "POST", P, with_(max_tokens=10**9), {}, 400),
        ("zero max_tokens", "POST", P, with_(max_tokens=0), {}, 400),
        ("max_tokens string", "POST", P, with_(max_tokens="8"), {}, 400),
        ("temperature string", "POST", P, with_(temperature="hot"), {}, 400),
        ("temperature 5", "POST", P, with_(temperature=5), {}, 400),
        ("top_p 0", "POST", P, with_(top_p=0), {}, 400),
        ("n 2", "POST", P, with_(n=2), {}, 400),
        ("five stops", "POST", P, with_(stop=["a", "b", "c", "d", "e"]), {}, 400),
        ("stream_options without stream", "POST", P, with_(stream_options={"include_usage": True}), {}, 400),
        ("seed float", "POST", P, with_(seed=1.5), {}, 400),
        ("unknown model", "POST", P, with_(model="gpt-9"), {}, 404),
        ("no key", "POST", P, good, {"Authorization": ""}, 401),
        ("wrong key", "POST", P, good, {"Authorization": "Bearer nope"}, 401),
        ("unknown route", "GET", "/v1/nothing", None, {}, 404),
        ("slot name leaves the folder", "POST", "/slots/..%2F..%2Fetc?action=save", None, {}, 400),
        ("slot file name leaves the folder", "POST", "/slots/s1?action=save", {"filename": "../../tmp/x"}, {}, 400),
        ("slot unknown action", "POST", "/slots/s1?action=explode", None, {}, 400),
        ("completions without prompt", "POST", "/v1/completions", {"max_tokens": 3}, {}, 400),
        ("too many messages", "POST", P, with_(messages=[{"role": "user", "content": "x"}] * 2000), {}, 400),
        ("number beyond a double", "POST", P, b'{"messages": [{"role": "user", "content": "x"}], "temperature": 1e400}',
         {}, 400),
        ("slot erase of an unknown session", "POST", "/slots/nobody?action=erase", b"", {}, 404),
    ]


def test_bad_requests_get_their_status_and_message(server):
    cases = raw_errors(server)
    assert len(cases) >= 20
    for name, method, path, body, headers, want in cases:
        status, data = server.request(method, path, body=body, headers=headers)
        assert status == want, (name, status, data[:300])
        err = json.loads(data)["error"]
        assert err["message"] and isinstance(err["type"], str), name
        if want == 400 and "param" in err and err["param"]:
            assert isinstance(err["param"], str)
    # A 10 MB body: 413 (or the connection closed while sending it), never a crash.
    try:
        status, data = server.request("POST", "/v1/chat/completions", body=b"x" * (10 << 20))
        assert status == 413 and json.loads(data)["error"]["message"]
    except (ConnectionError, OSError):
        pass
    # The server still answers a good request.
    r = server.client().chat.completions.create(model=server.model_id(), max_tokens=4,
                                                messages=[{"role": "user", "content": "Hi"}])
    assert r.choices[0].message.content is not None


def test_errors_arrive_as_the_clients_exceptions(server):
    c = server.client()
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=server.model_id(), messages=[], max_tokens=4)
    assert e.value.status_code == 400 and "messages" in str(e.value)
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model=server.model_id(), messages=[{"role": "user", "content": "x"}], max_tokens=10**7)
    # One new message longer than --ctx: refused, naming both numbers.
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=server.model_id(), max_tokens=4,
                                  messages=[{"role": "user", "content": "word " * 1000}])
    assert e.value.code == "context_length_exceeded", str(e.value)
    numbers = [int(x) for x in re.findall(r"\d+", e.value.message)]
    assert 384 in numbers and any(n > 1000 for n in numbers), e.value.message  # --ctx and the message's tokens
    # The same with stream=True: the 400 comes before the stream (the headers wait for the first event).
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=server.model_id(), max_tokens=4, stream=True,
                                  messages=[{"role": "user", "content": "word " * 1000}])
    assert e.value.code == "context_length_exceeded", str(e.value)
    # A lower-case scheme name is the same scheme (RFC 9110); the key itself is compared exactly.
    status, _ = server.request("GET", "/v1/models", headers={"Authorization": "bearer " + server.api_key}, auth=False)
    assert status == 200


def test_second_turn_prefills_only_new_tokens(server):
    c = server.client()
    msgs = [{"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": "My name is Ada and I live in Oslo. Say hello."}]
    r1 = c.chat.completions.create(model=server.model_id(), messages=msgs, max_tokens=16, temperature=0)
    msgs += [{"role": "assistant", "content": r1.choices[0].message.content},
             {"role": "user", "content": "Where do I live?"}]
    before = server.metrics()["kvcompact_prefilled_tokens_total"]
    r2 = c.chat.completions.create(model=server.model_id(), messages=msgs, max_tokens=16, temperature=0)
    delta = server.metrics()["kvcompact_prefilled_tokens_total"] - before
    k = kv(r2.usage)
    assert k["session"] == kv(r1.usage)["session"]
    assert k["reused_tokens"] >= r1.usage.prompt_tokens
    assert delta == k["prefilled_tokens"] == r2.usage.prompt_tokens - k["reused_tokens"]
    assert delta < 30  # the new user turn and the template around it, not the history
    assert r2.usage.prompt_tokens_details.cached_tokens == k["reused_tokens"]


FILLER = ["I spent the morning reading about the history of bridges in old river towns.",
          "Then I walked to the market and bought apples, bread, cheese and a small bunch of flowers.",
          "In the afternoon my friend called and we talked about a film we both liked last year.",
          "Later I cooked soup with carrots and onions while the radio played quiet music.",
          "Before bed I wrote a letter to my aunt about the garden and the new fence."]


def test_forty_turns_past_ctx_stay_within_it(server):
    c = server.client()
    msgs = [{"role": "system", "content": "You are a friendly assistant. Reply in one short sentence."}]
    total_tokens, answered, compactions = 0, 0, 0
    for i in range(40):
        msgs.append({"role": "user", "content": f"Day {i + 1}. " + FILLER[i % len(FILLER)]})
        r = c.chat.completions.create(model=server.model_id(), messages=msgs, max_tokens=20, temperature=0)
        text = r.choices[0].message.content
        answered += 1
        msgs.append({"role": "assistant", "content": text})
        k = kv(r.usage)
        assert k["longest_head"] <= 384, (i, k)
        assert k["cache_bytes"] == k["cache_entries"] * ENTRY_BYTES, (i, k)
        compactions = k["compactions"]
        total_tokens = r.usage.prompt_tokens + r.usage.completion_tokens
    assert answered == 40
    assert total_tokens >= 4 * 384, total_tokens
    assert compactions >= 3
    # The bytes /slots and /metrics report are the session's own count (read once the worker is
    # idle: between turns it may still compact the session after the answer went out).
    deadline = time.time() + 60
    while (server.metrics()["kvcompact_requests_in_flight"] > 0
           or server.metrics()["kvcompact_compactions_running"] > 0):
        assert time.time() < deadline
        time.sleep(0.1)
    slots = json.loads(server.request("GET", "/slots")[1])
    mine = [s for s in slots if s["id"] == k["session"]]
    assert len(mine) == 1 and mine[0]["in_memory"], mine
    assert mine and mine[0]["cache_entries"] * ENTRY_BYTES == mine[0]["cache_bytes"]
    assert mine[0]["longest_head"] <= 384
    m = server.metrics()
    assert m[f'kvcompact_session_kv_bytes{{session="{k["session"]}"}}'] == mine[0]["cache_bytes"]
    assert m["kvcompact_compactions_total"] >= compactions


def conversation(cid, turns, client, model):
    msgs = [{"role": "user", "content": f"I am client {cid}. " + FILLER[cid % len(FILLER)]}]
    answers = []
    for t in range(turns):
        r = client.chat.completions.create(model=model, messages=msgs, max_tokens=12, temperature=0)
        a = r.choices[0].message.content
        answers.append(a)
        msgs += [{"role": "assistant", "content": a}, {"role": "user", "content": f"Turn {t + 2}: tell me more."}]
    return answers


def test_four_concurrent_clients_answer_as_alone(server):
    model = server.model_id()
    with ThreadPoolExecutor(4) as ex:
        together = list(ex.map(lambda i: conversation(i, 10, server.client(), model), range(4)))
    alone = [conversation(i, 10, server.client(), model) for i in range(4)]
    assert all(len(a) == 10 for a in together)
    assert together == alone


def test_disconnect_cancels_and_full_queue_gets_429():
    s = Server("--ctx", "512", "--slots", "1", "--queue", "0", api_key=None)
    try:
        c = s.client()
        model = s.model_id()
        stream = c.chat.completions.create(model=model, max_tokens=400, temperature=0, stream=True,
                                           messages=[{"role": "user", "content": "Tell me a very long story."}])
        next(iter(stream))
        # While it generates, the one slot is taken and the queue holds none: 429.
        with pytest.raises(openai.RateLimitError):
            c.chat.completions.create(model=model, max_tokens=4, messages=[{"role": "user", "content": "x"}])
        stream.close()
        deadline = time.time() + 30
        while s.metrics()["kvcompact_requests_cancelled_total"] < 1:
            assert time.time() < deadline, "the disconnected stream was not cancelled"
            time.sleep(0.2)
        m = s.metrics()
        assert m["kvcompact_generated_tokens_total"] < 400
        assert m["kvcompact_requests_rejected_total"] >= 1
    finally:
        s.stop()


def test_kill_9_mid_stream_keeps_the_saved_session(tmp_path):
    slots = tmp_path / "slots"
    msgs = [{"role": "user", "content": "My locker code is 4817. Please remember it."}]
    s = Server("--ctx", "512", "--slot-save-path", str(slots), api_key=None)
    try:
        c = s.client()
        model = s.model_id()
        r1 = c.chat.completions.create(model=model, messages=msgs, max_tokens=16, temperature=0)
        msgs += [{"role": "assistant", "content": r1.choices[0].message.content},
                 {"role": "user", "content": "What is my locker code? Then count from one to twenty."}]
        # The session is written right after the answer went out (not before: writing does not
        # delay the answer); the worker finishes it before it takes the next request.
        deadline = time.time() + 30
        while not list(slots.glob("*.kvc")):
            assert time.time() < deadline, "the finished turn was not saved"
            time.sleep(0.1)
        got = ""
        stream = c.chat.completions.create(model=model, messages=msgs, max_tokens=60, temperature=0, stream=True)
        for ch in stream:
            if ch.choices and ch.choices[0].delta.content:
                got += ch.choices[0].delta.content
            if len(got) >= 8:
                break
        s.proc.kill()  # kill -9 mid-stream
        s.proc.wait(10)
    finally:
        s.kill()
    s2 = Server("--ctx", "512", "--slot-save-path", str(slots), api_key=None)
    try:
        c = s2.client()
        r2 = c.chat.completions.create(model=s2.model_id(), messages=msgs, max_tokens=60, temperature=0)
        text = r2.choices[0].message.content
        assert text.startswith(got), (got, text)
        k = kv(r2.usage)
        assert k["reused_tokens"] >= r1.usage.prompt_tokens  # the saved session was read back
    finally:
        s2.stop()


def test_a_taken_port_is_refused(server):
    """A second server on the first one's port exits with an error naming the port: it does not
    bind beside it (SO_REUSEPORT would split the connections, and their --api-key, between them)."""
    r = subprocess.run([str(BIN), "serve", "--model", str(MODEL), "--port", str(server.port), "--threads", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert f"--port {server.port}: cannot listen" in r.stderr, r.stderr
    r = subprocess.run([str(BIN), "serve", "--model", str(MODEL), "--port", "99999"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "--port 99999: must be in [0, 65535]" in r.stderr, r.stderr
    status, _ = server.request("GET", "/health")
    assert status == 200
