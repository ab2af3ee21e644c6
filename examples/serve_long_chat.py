"""A conversation longer than the server's --ctx, through the `openai` client.

Start a server, then run this against it:
    build/kvcompact serve --model models/SmolLM2-135M-Instruct.Q4_1.gguf --ctx 512 &
    .venv/bin/python examples/serve_long_chat.py --base-url http://127.0.0.1:8080/v1 --turns 24

Each turn prints the history length in tokens, what the session's KV cache holds (the largest
head's entries, which --ctx bounds, and the bytes), and the compactions so far."""
import argparse

import openai

DAYS = ["I read about the history of bridges in old river towns.",
        "I bought apples, bread, cheese and flowers at the market.",
        "My friend called and we talked about a film we both liked.",
        "I cooked soup with carrots and onions while the radio played.",
        "I wrote a letter to my aunt about the garden and the new fence.",
        "I repaired the bicycle's chain and cleaned the kitchen window."]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--turns", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=40)
    a = ap.parse_args()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.api_key)
    model = client.models.list().data[0].id
    msgs = [{"role": "system", "content": "You are a friendly assistant. Answer in one or two sentences."},
            {"role": "user", "content": "Hi! My name is Mira and I live in Tromsø. Please remember that."}]
    for t in range(a.turns):
        if t == a.turns - 1:
            msgs.append({"role": "user", "content": "Thanks for listening. What is my name?"})
        elif t > 0:
            msgs.append({"role": "user", "content": f"Day {t}: {DAYS[t % len(DAYS)]} What do you think?"})
        r = client.chat.completions.create(model=model, messages=msgs, max_tokens=a.max_tokens, temperature=0)
        text = r.choices[0].message.content
        msgs.append({"role": "assistant", "content": text})
        k = r.usage.model_extra["kvcompact"]
        print(f"turn {t + 1:2d}: history {k['original_tokens']:5d} tokens | cache: largest head "
              f"{k['longest_head']:4d} entries, {k['cache_bytes'] / 2**20:5.1f} MiB | compactions {k['compactions']:2d}"
              f" | prefilled {k['prefilled_tokens']:3d} | {text[:60]!r}")


if __name__ == "__main__":
    main()
