#!/usr/bin/env python3
"""Long-context QA articles from the shared Paul Graham essays, for `kvcompact influence --qa`.

Influence curves score the full-cache model's own answer to each question (qa-eval's reference
answers), so the questions need no gold answer; the two options per question only satisfy the
QuALITY format (kvcompact's multiple-choice accuracy on them means nothing). Each essay becomes
one article in QuALITY JSONL ({"article_id", "title", "article", "questions": [{"question",
"options", "gold_label"}]}) with the same open questions.

  python3 scripts/make_essay_qa.py --first 0 --n 10 -o results/essays_qa.jsonl
  python3 scripts/make_essay_qa.py --first 10 --n 5 -o results/essays_qa_heldout.jsonl

Essays are taken in a fixed order (those of 4,000 to 12,000 bytes, sorted by name), so two
calls with disjoint --first/--n ranges give disjoint articles. Data folder: --data-dir, else
$KVC_SHARED/data, else ../shared/data beside the checkout.
"""

import argparse
import json
import os
import sys

QUESTIONS = [
    "What is the main argument of this essay? Answer in two sentences.",
    "Which examples does the author use to support the argument?",
]


def essays(data_dir):
    folder = os.path.join(data_dir, "needle_haystack", "PaulGrahamEssays")
    if not os.path.isdir(folder):
        sys.exit(f"make_essay_qa: {folder}: no such folder (set --data-dir or KVC_SHARED)")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".txt"))
    out = []
    for n in names:
        path = os.path.join(folder, n)
        size = os.path.getsize(path)
        if 4000 <= size <= 12000:
            out.append(path)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_data = os.path.join(os.environ["KVC_SHARED"], "data") if os.environ.get("KVC_SHARED") else \
        os.path.normpath(os.path.join(here, "..", "..", "shared", "data"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=default_data)
    ap.add_argument("--first", type=int, default=0, help="index of the first essay (in the fixed order)")
    ap.add_argument("--n", type=int, default=10, help="number of essays")
    ap.add_argument("-o", "--out", required=True, help="JSONL file to write")
    a = ap.parse_args()
    paths = essays(a.data_dir)
    if a.first < 0 or a.n < 1 or a.first + a.n > len(paths):
        sys.exit(f"make_essay_qa: --first {a.first} --n {a.n}: only {len(paths)} essays of 4-12 kB in {a.data_dir}")
    lines = []
    for p in paths[a.first:a.first + a.n]:
        with open(p, encoding="utf-8") as f:
            text = f.read().strip()
        name = os.path.splitext(os.path.basename(p))[0]
        qs = [{"question": q, "options": ["yes", "no"], "gold_label": 1} for q in QUESTIONS]
        lines.append(json.dumps({"article_id": name, "title": name, "article": text, "questions": qs}))
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, a.out)
    print(f"wrote {a.out}: {len(lines)} essays x {len(QUESTIONS)} questions")


if __name__ == "__main__":
    main()
