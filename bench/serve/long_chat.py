#!/usr/bin/env python3
"""Deterministic generator of long conversations that plant facts early and ask about them at the end.

Each conversation is a list of user turns: a few "fact" turns ("By the way, please remember this:
My sister's name is Ilse.") placed in the first part of the conversation, among filler turns (a real
paragraph from ../shared: TinyStories, WikiText-2, Paul Graham's essays; generated sentences when
none of them is there), followed by one question per fact. A client sends the turns one by one
(resending the whole history), then asks each question as the last turn over that history.
Score: the answer string appears (case-insensitive) in the model's reply.

Output (JSON list):
  [{"id": "conv0", "seed": ..., "approx_tokens": N, "turns": ["user message", ...],
    "fact_turns": [i, ...], "questions": [{"question": "...", "answer": "...", "fact": "...",
    "turn": i}, ...]}, ...]

Length: --target-tokens is the length of the whole conversation (user turns + per-turn chat
template overhead + an assistant reply of --reply-tokens per turn), counted with the model's
tokenizer (llama_cpp, vocab only) when --model is given, else words * 1.3.

Usage:
  python bench/serve/long_chat.py --n-conversations 3 --facts 5 --target-tokens 4096 \
      --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --out /tmp/convs.json
"""
import argparse
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_DEFAULT = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))

# Fact templates: (statement, question, answer generator key). Values are drawn from pools chosen
# to be unlikely in the filler text (rare first names, unusual streets, random codes).
NAMES = ["Ilse", "Bertrand", "Oona", "Casimir", "Wilhelmina", "Thaddeus", "Ottilie", "Leopold",
         "Marisol", "Evander", "Ingrid", "Ptolemy", "Rosalind", "Soren", "Zenobia", "Anselm"]
PETS = ["Biscuit", "Pumpernickel", "Waffles", "Gizmo", "Noodle", "Pickles", "Marzipan", "Turnip"]
STREETS = ["Lisbon", "Kestrel", "Juniper", "Halloway", "Marlowe", "Quarry", "Wexford", "Tamarind"]
CITIES = ["Tallinn", "Porto", "Ljubljana", "Bergen", "Valparaiso", "Tbilisi", "Hobart", "Gdansk"]
COLORS = ["turquoise", "maroon", "saffron", "lavender", "ochre", "teal", "crimson", "chartreuse"]
FRUITS = ["persimmon", "kumquat", "lychee", "gooseberry", "quince", "rambutan", "papaya"]
INSTRUMENTS = ["cello", "oboe", "harpsichord", "banjo", "bassoon", "ukulele", "accordion"]


def _digits(rng, n):
    return str(rng.randint(10 ** (n - 1), 10 ** n - 1))


FACTS = [
    ("sister", lambda r: r.choice(NAMES), "My sister's name is {v}.", "What is my sister's name?"),
    ("locker", lambda r: _digits(r, 4), "The locker code is {v}.", "What is the locker code?"),
    ("parking", lambda r: r.choice(STREETS), "I parked at {v} Street.", "On which street did I park?"),
    ("dog", lambda r: r.choice(PETS), "My dog is called {v}.", "What is my dog called?"),
    ("room", lambda r: _digits(r, 3), "My hotel room number is {v}.", "What is my hotel room number?"),
    ("city", lambda r: r.choice(CITIES), "My next business trip is to {v}.", "Which city is my next business trip to?"),
    ("color", lambda r: r.choice(COLORS), "My favourite colour is {v}.", "What is my favourite colour?"),
    ("flight", lambda r: "KX" + _digits(r, 3), "My flight number is {v}.", "What is my flight number?"),
    ("dentist", lambda r: "Dr. " + r.choice(NAMES), "My dentist is {v}.", "Who is my dentist?"),
    ("fruit", lambda r: r.choice(FRUITS), "The fruit I am allergic to is {v}.", "Which fruit am I allergic to?"),
    ("instrument", lambda r: r.choice(INSTRUMENTS), "I am learning to play the {v}.", "Which instrument am I learning to play?"),
    ("pin", lambda r: _digits(r, 6), "The garage door PIN is {v}.", "What is the garage door PIN?"),
]

FACT_PREFIXES = ["By the way, please remember this: ", "Quick note for later: ", "Keep this in mind: ",
                 "Something to remember: "]
FILLER_PROMPTS = ["Here is a passage I read today:\n\n{p}\n\nSummarize it in one sentence.",
                  "What do you think of this text?\n\n{p}",
                  "Read this and tell me the main idea briefly:\n\n{p}",
                  "{p}\n\nWhat is this passage about?"]
QUESTION_SUFFIX = " Answer with just the answer."


def _clean_wiki(line):
    line = line.strip()
    line = line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    line = re.sub(r" ([.,;:!?')])", r"\1", line)
    line = re.sub(r"([(\"]) ", r"\1", line)
    return line


def load_paragraphs(shared, min_words=40, max_words=140):
    """Paragraphs of real text from the shared data sets, each min_words..max_words words."""
    paras = []
    sources = []
    ts = os.path.join(shared, "tinystories", "tinystories_val_head.txt")
    if os.path.isfile(ts):
        sources.append("tinystories")
        with open(ts, encoding="utf-8", errors="replace") as f:
            for block in f.read().split("\n\n"):
                block = " ".join(block.split())
                if min_words <= len(block.split()) <= max_words:
                    paras.append(block)
    wt = os.path.join(shared, "wikitext2", "wiki.test.raw")
    if os.path.isfile(wt):
        sources.append("wikitext2")
        with open(wt, encoding="utf-8", errors="replace") as f:
            for line in f:
                s = line.strip()
                if not s or s.startswith("="):
                    continue
                s = _clean_wiki(s)
                words = s.split()
                if len(words) >= min_words:
                    paras.append(" ".join(words[:max_words]))
    pg = os.path.join(shared, "needle_haystack", "PaulGrahamEssays")
    if os.path.isdir(pg):
        sources.append("paul_graham_essays")
        for name in sorted(os.listdir(pg)):
            with open(os.path.join(pg, name), encoding="utf-8", errors="replace") as f:
                for block in f.read().split("\n\n"):
                    words = block.split()
                    if len(words) >= min_words:
                        paras.append(" ".join(words[:max_words]))
    return paras, sources


def generated_paragraph(rng):
    subj = ["The committee", "A small bakery", "The old bridge", "My neighbour", "The river",
            "A local school", "The weather", "The museum"]
    verb = ["changed", "reopened", "surprised everyone", "was repaired", "attracted visitors",
            "held a meeting", "grew quieter", "announced plans"]
    tail = ["last spring", "after a long debate", "despite the rain", "in the early morning",
            "for the first time in years", "with little warning"]
    return " ".join(f"{rng.choice(subj)} {rng.choice(verb)} {rng.choice(tail)}."
                    for _ in range(rng.randint(5, 9)))


class Counter:
    """Token counts with the model's tokenizer (llama_cpp, vocab only) or words * 1.3."""

    def __init__(self, model=None):
        self.llm = None
        if model:
            try:
                from llama_cpp import Llama
                self.llm = Llama(model_path=model, vocab_only=True, verbose=False)
            except Exception as e:  # noqa: BLE001
                print(f"long_chat: tokenizer of {model} unavailable ({e}); using words*1.3", file=sys.stderr)

    @property
    def kind(self):
        return "llama_cpp" if self.llm else "words*1.3"

    def __call__(self, text):
        if self.llm:
            return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        return int(round(len(text.split()) * 1.3))


def make_conversation(idx, seed, paras, n_facts, target_tokens, count, reply_tokens=32,
                      turn_overhead=10, fact_span=0.3):
    rng = random.Random(f"{seed}:{idx}")
    if n_facts > len(FACTS):
        raise SystemExit(f"long_chat: at most {len(FACTS)} facts per conversation")
    facts = rng.sample(FACTS, n_facts)
    per_turn = reply_tokens + 2 * turn_overhead
    # Questions are asked at the end over the history; the history itself fills the target.
    turns, total = [], 0
    filler_budget = target_tokens - n_facts * (15 + per_turn)
    fillers = []
    while total < filler_budget:
        p = rng.choice(paras) if paras else generated_paragraph(rng)
        msg = rng.choice(FILLER_PROMPTS).format(p=p)
        fillers.append(msg)
        total += count(msg) + per_turn
    # Facts go into the first fact_span of the conversation, spread out, never at turn 0 or last.
    n_turns = len(fillers) + n_facts
    span = max(n_facts + 1, int(n_turns * fact_span))
    slots = sorted(rng.sample(range(1, span + 1), n_facts))
    questions = []
    fact_turns = []
    fi = 0
    facts_by_slot = dict(zip(slots, facts))
    for t in range(n_turns):
        if t in facts_by_slot:
            key, gen, stmt, q = facts_by_slot[t]
            v = gen(rng)
            text = stmt.format(v=v)
            turns.append(rng.choice(FACT_PREFIXES) + text)
            fact_turns.append(t)
            questions.append({"key": key, "fact": text, "question": q + QUESTION_SUFFIX,
                              "answer": v, "turn": t})
        else:
            turns.append(fillers[fi])
            fi += 1
    total += sum(count(t) + per_turn for t in turns if t not in fillers)
    return {"id": f"conv{idx}", "seed": seed, "approx_tokens": total, "turns": turns,
            "fact_turns": fact_turns, "questions": questions}


def generate(n_conversations, n_facts, target_tokens, seed=0, model=None, shared=SHARED_DEFAULT,
             reply_tokens=32):
    paras, sources = load_paragraphs(shared)
    if not paras:
        print("long_chat: no shared text found; using generated filler", file=sys.stderr)
    count = Counter(model)
    convs = [make_conversation(i, seed, paras, n_facts, target_tokens, count, reply_tokens)
             for i in range(n_conversations)]
    meta = {"sources": sources or ["generated"], "counter": count.kind}
    return convs, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-conversations", type=int, default=3)
    ap.add_argument("--facts", type=int, default=5)
    ap.add_argument("--target-tokens", type=int, default=4096)
    ap.add_argument("--reply-tokens", type=int, default=32, help="assistant reply length assumed per turn")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", help="GGUF whose tokenizer counts tokens (default: words*1.3)")
    ap.add_argument("--shared", default=SHARED_DEFAULT, help="shared data folder (default ../shared/data)")
    ap.add_argument("--out", default="-", help="output JSON (default stdout)")
    a = ap.parse_args()
    convs, meta = generate(a.n_conversations, a.facts, a.target_tokens, a.seed, a.model, a.shared,
                           a.reply_tokens)
    text = json.dumps(convs, indent=1)
    if a.out == "-":
        print(text)
    else:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, a.out)
    print(f"long_chat: {len(convs)} conversations, {sum(len(c['turns']) for c in convs)} turns, "
          f"~{sum(c['approx_tokens'] for c in convs) // max(1, len(convs))} tokens each "
          f"({meta['counter']}; filler from {', '.join(meta['sources'])})", file=sys.stderr)


if __name__ == "__main__":
    main()
