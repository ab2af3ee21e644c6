#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer harnesses: fuzz/corpus/<harness>/<seed>.

Every seed is a small valid file (a few KB) made here by an independent writer where one exists
(gguf-py's GGUFWriter, the safetensors and tokenizers libraries, Python's json/struct following the
documented layouts) — nothing is copied from ../shared or models/. Deterministic: rerunning writes
the same bytes. Run with the reference environment: .venv/bin/python scripts/make_fuzz_seeds.py
"""
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")
RNG = np.random.default_rng(20240611)


def out_path(harness, name):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)


def write(harness, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(out_path(harness, name), "wb") as f:
        f.write(data)


def write_json(harness, name, obj, **kw):
    write(harness, name, json.dumps(obj, ensure_ascii=False, **kw))


# --------------------------------------------------------------------------------------------
# GGUF (gguf-py)

# llama / SentencePiece layout: <unk> <s> </s>, the 256 byte tokens, then pieces.
SPM_PIECES = (["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] +
              ["\u2581", "\u2581t", "he", "\u2581the", "\u2581a", "o", "n", "c", "e", "\u2581Once", "\u2581upon"])


def gguf_model(path, arch, *, dim=4, hidden=8, heads=2, kv_heads=1, head_dim=None, types=None,
               biases=False, qk_norm=False, separate_output=False, vocab=True):
    """A tiny decoder of architecture `arch` (1 layer) with an SPM vocabulary of 16 pieces."""
    import gguf
    Q = gguf.GGMLQuantizationType
    types = types or {}
    w = gguf.GGUFWriter(path, arch)
    hd = head_dim or dim // heads
    w.add_context_length(16)
    w.add_embedding_length(dim)
    w.add_feed_forward_length(hidden)
    w.add_block_count(1)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    if head_dim is not None:
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    if vocab:
        w.add_tokenizer_model("llama")
        w.add_token_list(SPM_PIECES)
        w.add_token_scores([-float(i) for i in range(len(SPM_PIECES))])
        w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (len(SPM_PIECES) - 259))
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    V = len(SPM_PIECES)

    def tensor(name, shape):  # numpy shape (out, in) == ggml dims [in, out]
        a = (RNG.standard_normal(shape) * 0.1).astype(np.float32)
        t = types.get(name.split(".", 2)[-1] if name.startswith("blk.") else name, Q.F32)
        if t == Q.F32:
            w.add_tensor(name, a)
        elif t == Q.F16:
            w.add_tensor(name, a.astype(np.float16))
        else:
            q = gguf.quants.quantize(a, t)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)

    tensor("token_embd.weight", (V, dim))
    p = "blk.0."
    tensor(p + "attn_norm.weight", (dim,))
    tensor(p + "attn_q.weight", (heads * hd, dim))
    tensor(p + "attn_k.weight", (kv_heads * hd, dim))
    tensor(p + "attn_v.weight", (kv_heads * hd, dim))
    tensor(p + "attn_output.weight", (dim, heads * hd))
    if biases:
        tensor(p + "attn_q.bias", (heads * hd,))
        tensor(p + "attn_k.bias", (kv_heads * hd,))
        tensor(p + "attn_v.bias", (kv_heads * hd,))
    if qk_norm:
        tensor(p + "attn_q_norm.weight", (hd,))
        tensor(p + "attn_k_norm.weight", (hd,))
    tensor(p + "ffn_norm.weight", (dim,))
    tensor(p + "ffn_gate.weight", (hidden, dim))
    tensor(p + "ffn_down.weight", (dim, hidden))
    tensor(p + "ffn_up.weight", (hidden, dim))
    tensor("output_norm.weight", (dim,))
    if separate_output:
        tensor("output.weight", (V, dim))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_metadata(path):
    """Every metadata value type (nested arrays too), alignment 64, tensors of several types."""
    import gguf
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(path, "test")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 1.5)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", -2.25)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo")
    w.add_array("t.arr_i", [1, 2, 3])
    w.add_array("t.arr_f", [0.5, -1.0])
    w.add_array("t.arr_s", ["a", "bc", ""])
    w.add_array("t.arr_nested", [[1, 2], [3]])
    w.add_array("t.arr_empty", [])
    a = (RNG.standard_normal((2, 32)) * 0.5).astype(np.float32)
    w.add_tensor("f32", a)
    w.add_tensor("f16", a.astype(np.float16))
    for name, t in (("bf16", Q.BF16), ("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_1", Q.Q4_1)):
        q = gguf.quants.quantize(a, t)
        w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=t)
    w.add_tensor("scalar", np.array([3.0], dtype=np.float32))
    w.add_tensor("cube", (RNG.standard_normal((2, 2, 2, 2))).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_gguf():
    import gguf
    Q = gguf.GGMLQuantizationType
    for harness in ("gguf", "gguf_model"):
        gguf_model(out_path(harness, "llama_f32.gguf"), "llama")
        gguf_model(out_path(harness, "qwen3_f16.gguf"), "qwen3", heads=2, kv_heads=1, head_dim=4,
                   qk_norm=True, types={k: Q.F16 for k in ("token_embd.weight", "attn_q.weight", "attn_k.weight",
                                                           "attn_v.weight", "attn_output.weight")})
        gguf_model(out_path(harness, "qwen2_q8.gguf"), "qwen2", hidden=32, heads=2, kv_heads=2,
                   biases=True, separate_output=True,
                   types={"ffn_down.weight": Q.Q8_0, "ffn_gate.weight": Q.BF16, "token_embd.weight": Q.F16,
                          "output.weight": Q.F16})
    gguf_model(out_path("gguf_model", "llama_novocab.gguf"), "llama", vocab=False)
    gguf_metadata(out_path("gguf", "metadata.gguf"))


# --------------------------------------------------------------------------------------------
# safetensors (the safetensors library)

def make_safetensors():
    from safetensors.numpy import save
    t = {
        "a.weight": (RNG.standard_normal((4, 3))).astype(np.float32),
        "b.bias": np.arange(5, dtype=np.float16),
        "c": np.array(7, dtype=np.int64),
        "empty": np.zeros((0, 3), dtype=np.int32),
        "u8": np.arange(6, dtype=np.uint8).reshape(2, 3),
    }
    write("safetensors", "mixed.safetensors", save(t, metadata={"format": "pt", "note": "fuzz seed"}))
    write("safetensors", "one.safetensors", save({"x": np.ones((2, 2), dtype=np.float64)}))


# --------------------------------------------------------------------------------------------
# llama2.c checkpoint and tokenizer.bin (layouts of karpathy/llama2.c run.c / export.py legacy)

def llama2c_checkpoint(dim=8, hidden=16, layers=1, heads=2, kv=2, vocab=8, seq=4, shared=True):
    hs = dim // heads
    header = struct.pack("<7i", dim, hidden, layers, heads, kv, vocab if shared else -vocab, seq)
    n = (vocab * dim + layers * (2 * dim + heads * hs * dim + 2 * kv * hs * dim + dim * heads * hs
                                 + 3 * hidden * dim) + dim + seq * hs + (0 if shared else vocab * dim))
    return header + (RNG.standard_normal(n) * 0.1).astype("<f4").tobytes()


def llama2c_tokenizer(pieces):
    out = struct.pack("<i", max(len(p.encode()) for p in pieces))
    for i, p in enumerate(pieces):
        b = p.encode()
        out += struct.pack("<fi", -float(i), len(b)) + b
    return out


def make_llama2c():
    write("llama2c_checkpoint", "shared.bin", llama2c_checkpoint())
    write("llama2c_checkpoint", "wcls.bin", llama2c_checkpoint(heads=2, kv=1, shared=False))
    pieces = ["<unk>", "\n<s>\n", "\n</s>\n"] + [f"<0x{b:02X}>" for b in range(256)] + \
             [" ", "t", "h", "e", "th", "he", "the", " the", "a", " a", "Once", " Once", "\u00e9"]
    write("llama2c_tokenizer", "tok.bin", struct.pack("<i", len(pieces)) + llama2c_tokenizer(pieces))
    small = ["<unk>", "\n<s>\n", "\n</s>\n", "a", "b", "ab"]
    write("llama2c_tokenizer", "small.bin", struct.pack("<i", len(small)) + llama2c_tokenizer(small))


# --------------------------------------------------------------------------------------------
# tokenizer.json (the tokenizers library)

CORPUS = ["Once upon a time there was a little girl.", "Hello world! It's 2024: caf\u00e9 \U0001F600",
          "The quick brown fox jumps over the lazy dog 123 456.", "  spaces\tand\nnewlines  "]


def make_hf_tokenizers():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    text = "\x00Hello world, caf\u00e9 <|endoftext|> \U0001F600\n".encode()

    # Byte-level BPE, Qwen2/Llama-3 style: Split regex + ByteLevel, added special tokens.
    t = Tokenizer(models.BPE())
    pat = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
           r"\s*[\r\n]+|\s+(?!\S)|\s+")
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pat), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    t.normalizer = normalizers.NFC()
    t.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=90, special_tokens=["<|endoftext|>", "<|im_start|>"],
                                                      show_progress=False))
    write("hf_tokenizer", "bytelevel.json", t.to_str().encode() + text)

    # GPT-2 style: ByteLevel pre-tokenizer with its own regex, TemplateProcessing with a BOS.
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=80, special_tokens=["<|begin|>"],
                                                      show_progress=False))
    t.post_processor = processors.TemplateProcessing(single="<|begin|> $A", pair="<|begin|> $A $B",
                                                     special_tokens=[("<|begin|>", 0)])
    write("hf_tokenizer", "gpt2.json", t.to_str().encode())

    # SentencePiece-style BPE with byte fallback (Llama 2 / TinyLlama layout).
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for p in ["\u2581", "e", "t", "h", "o", "\u2581t", "he", "\u2581the", "l", "H", "\u2581H", "ll"]:
        vocab[p] = len(vocab)
    merges = [("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("l", "l"), ("\u2581", "H")]
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    t.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
    t.add_special_tokens(["<s>", "</s>"])
    t.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 1)])
    write("hf_tokenizer", "spm_bytefallback.json", t.to_str().encode() + text)

    # Metaspace pre-tokenizer.
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    t.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=70, special_tokens=["<unk>"], show_progress=False))
    write("hf_tokenizer", "metaspace.json", t.to_str().encode())


# --------------------------------------------------------------------------------------------
# Chat templates: tokenizer_config.json (chat_template harness) and raw Jinja (jinja harness)

LLAMA3_TEMPLATE = (
    "{{- bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system_message = \"\" %}\n"
    "{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{{- system_message }}\n"
    "{{- \"<|eot_id|>\" }}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n")

QWEN_TEMPLATE = (
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n"
    "    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == \"user\" and not(message.content.startswith('<tool_response>')) %}\n"
    "        {%- set ns.multi_step_tool = false %}\n"
    "        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.content is string %}{%- set content = message.content %}{%- else %}{%- set content = '' %}{%- endif %}\n"
    "    {%- if message.role == \"assistant\" and '</think>' in content %}\n"
    "        {%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n"
    "        {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "    {%- endif %}\n"
    "    {{- '<|im_end|>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}\n"
    "{%- endif %}\n")

FEATURES_TEMPLATE = (
    "{# every construct of the subset #}\n"
    "{% set xs = [3, 1, 2] %}{% set d = {'a': 1, 'b': [1, 2], 'c': none} %}\n"
    "{{ xs | length }} {{ xs | first }} {{ xs | last }} {{ xs | join('-') }} {{ xs | reverse | list }}\n"
    "{{ 'Ab c' | upper }} {{ 'Ab' | lower }} {{ 'ab cd' | title }} {{ 'ab' | capitalize }} {{ ' x ' | trim }}\n"
    "{{ d | tojson }} {{ d.get('z', 'dflt') }} {{ undefined_var | default('def') }} {{ 'a,b'.split(',') }}\n"
    "{% for k, v in d.items() %}{{ loop.index }}/{{ loop.length }}:{{ k }}={{ v }}{% if not loop.last %}, {% endif %}{% endfor %}\n"
    "{% for x in xs if x > 1 %}{{ x }}{% else %}none{% endfor %}\n"
    "{% for i in range(3) %}{{ i * 2 + 1 // 1 % 5 }}{{ loop.revindex }}{% endfor %}\n"
    "{{ 7 / 2 }} {{ 2 if false else 1.5 }} {{ 'x' ~ 1 }} {{ 'b' in 'abc' }} {{ 3 not in xs }}\n"
    "{{ xs[1:] }} {{ xs[::-1] }} {{ 'hello'[1:3] }} {{ d['b'][0] }} {{ d.keys() | list }} {{ d.values() | list }}\n"
    "{% if xs is iterable and d is mapping and 1 is number and 'a' is string and none is none %}tests{% endif %}\n"
    "{% if 2 is even and 3 is odd and true is true and 1.5 is float and 1 is integer %}more{% endif %}\n"
    "{{ 'a-b' | replace('-', '+') }} {{ 'abc'.startswith('a') }} {{ 'abc'.endswith('c') }} {{ 'x' | string }}\n"
    "{{ '12' | int + 1 }} {{ messages | count }} {{ messages[0].content | safe }}\n"
    "{%- if false %}{{ raise_exception('never') }}{% endif -%}\n")


def make_chat_templates():
    cfgs = {
        "llama3.json": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": LLAMA3_TEMPLATE},
        "qwen3.json": {"bos_token": None, "eos_token": {"content": "<|im_end|>", "lstrip": False},
                       "chat_template": QWEN_TEMPLATE},
        "named_list.json": {"bos_token": {"content": "<s>"}, "eos_token": "</s>",
                            "chat_template": [{"name": "tool_use", "template": "{{ tools }}"},
                                              {"name": "default", "template": FEATURES_TEMPLATE}]},
    }
    for name, cfg in cfgs.items():
        write_json("chat_template", name, cfg, indent=1)
    write("jinja", "llama3.jinja", LLAMA3_TEMPLATE)
    write("jinja", "qwen3.jinja", QWEN_TEMPLATE)
    write("jinja", "features.jinja", FEATURES_TEMPLATE)
    write("jinja", "text.jinja", "plain text {{ bos_token }} {{- ' trimmed ' -}} end\n")


# --------------------------------------------------------------------------------------------
# config.json, .kvc, task JSONL, budget schedules, influence curves

def make_hf_configs():
    write_json("hf_config", "llama.json", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 128, "hidden_act": "silu",
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": [2, 3],
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64}}, indent=1)
    write_json("hf_config", "qwen3.json", {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
        "vocab_size": 50, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "attention_bias": False,
        "use_sliding_window": False, "rope_scaling": None, "eos_token_id": 2}, indent=1)
    write_json("hf_config", "qwen2.json", {
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "vocab_size": 10, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "rope_scaling": {"type": "linear", "factor": 2.0}})
    write_json("hf_config", "mistral.json", {
        "architectures": ["MistralForCausalLM"], "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10, "sliding_window": 4096,
        "mlp_bias": False})


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def kvc_bytes(n_layers=2, n_kv=1, head_dim=4, vocab=6, T=3, lengths=(2, 3)):
    """A .kvc file following docs/kvc_format.md (version 1, little-endian)."""
    b = b"KVCOMPCT" + struct.pack("<IIQ", 1, 0, 0) + struct.pack("<Q", 0x0123456789ABCDEF)
    b += struct.pack("<8i", 8, 16, n_layers, 2, n_kv, head_dim, vocab, 32)
    b += struct.pack("<ffBBH", 10000.0, 1e-5, 1, 0, 0)
    for s in (b"model.gguf", b"am"):
        b += struct.pack("<I", len(s)) + s
    b += struct.pack("<dI", 0.5, T) + struct.pack(f"<{T}i", *range(T))
    b += (RNG.standard_normal(vocab)).astype("<f4").tobytes()
    for k in range(n_layers * n_kv):
        t = lengths[k % len(lengths)]
        b += struct.pack("<I", t) + struct.pack(f"<{t}i", *range(t))
        b += (RNG.random(t)).astype("<f4").tobytes()
        b += (RNG.standard_normal(2 * t * head_dim)).astype("<f4").tobytes()
    total = len(b) + 8
    b = b[:16] + struct.pack("<Q", total) + b[24:]
    return b + struct.pack("<Q", fnv1a64(b))


def make_kvc():
    write("kvc_file", "two_layers.kvc", kvc_bytes())
    write("kvc_file", "empty_heads.kvc", kvc_bytes(n_layers=1, n_kv=2, lengths=(0,), T=1))


def make_tasks():
    items = [
        {"id": "r1", "family": "retrieval", "prompt": "The key is 42. ... What is the key?", "reference": "42",
         "answer_type": "number", "stop": ["\n", "."], "max_new_tokens": 4, "depth": 0.25,
         "source": "essays/a.txt:1"},
        {"id": "c1", "family": "copy", "prompt": "Repeat: abc def\n", "reference": "abc def", "answer_type": "text"},
        {"id": "k1", "family": "knowledge", "prompt": "Capital of France:", "reference": "Paris",
         "answer_type": "word", "max_new_tokens": 3},
        {"id": "m1", "family": "math", "prompt": "Question: 2+2\nAnswer:", "reference": "4", "answer_type": "number",
         "unknown_key": [1, 2]},
        {"id": "i1", "family": "inference", "prompt": "Mary went to the kitchen. Where is Mary?",
         "reference": "kitchen", "answer_type": "word", "stop": []},
    ]
    write("task_suite", "suite.jsonl", "".join(json.dumps(i) + "\n" for i in items) + "   \n")


def make_budgets():
    heads = [{"name": f"L{l}H{h}", "layer": l, "kv_head": h, "proportion": p}
             for (l, h), p in zip([(0, 0), (0, 1), (1, 0), (1, 1)], [0.4, 0.3, 0.2, 0.1])]
    write_json("budget_schedule", "optimized.json", {
        "schedule": "optimized", "targets": [0.01, 0.1], "floor": 0.1, "n_layers": 2, "n_kv_heads": 2,
        "heads": heads, "predicted_delta": {"0.01": 0.5, "0.1": 0.05}}, indent=1)
    write_json("budget_schedule", "uniform.json", {
        "schedule": "uniform", "targets": [0.5], "floor": 1, "n_layers": 1, "n_kv_heads": 2,
        "heads": [{"name": "L0H1", "layer": 0, "kv_head": 1, "proportion": 0.5},
                  {"name": "L0H0", "layer": 0, "kv_head": 0, "proportion": 0.5}], "predicted_delta": {}})


def make_curves():
    grid = [0.0, 0.1, 0.5, 1.0]
    heads = [{"name": f"L{l}H{h}", "layer": l, "kv_head": h, "ratios": grid,
              "delta_nll_mean": [1.0 / (l + h + 1), 0.1, 0.01, 0.0], "delta_nll_sem": [0.1, 0.01, 0.001, 0.0],
              "delta_nll_std": [0.2, 0.02, 0.002, 0.0], "documents": 4} for l, h in [(0, 0), (1, 1), (0, 1)]]
    write_json("influence_curves", "curves.json", {
        "model_fingerprint": "0x0123456789abcdef", "method": "am", "baseline_ratio": 0.1, "grid": grid,
        "n_layers": 2, "n_kv_heads": 2, "evaluated": "continuation", "budgets": None, "heads": heads}, indent=1)
    write_json("influence_curves", "budgets.json", {
        "model_fingerprint": "0x0123456789abcdef", "method": "am", "baseline_ratio": 0.5, "grid": [0.0, 0.5],
        "n_layers": 1, "n_kv_heads": 1, "evaluated": "qa-answers",
        "budgets": {"source": "b.json", "proportions": [1.0]},
        "heads": [{"name": "L0H0", "layer": 0, "kv_head": 0, "ratios": [0.0, 0.5], "delta_nll_mean": [0.3, 0.0],
                   "delta_nll_sem": [0.0, 0.0], "delta_nll_std": [0.0, 0.0], "documents": 1}]})


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    make_gguf()
    make_safetensors()
    make_llama2c()
    make_hf_tokenizers()
    make_chat_templates()
    make_hf_configs()
    make_kvc()
    make_tasks()
    make_budgets()
    make_curves()
    total = 0
    for d in sorted(os.listdir(OUT)):
        files = sorted(os.listdir(os.path.join(OUT, d)))
        sizes = [os.path.getsize(os.path.join(OUT, d, f)) for f in files]
        total += sum(sizes)
        print(f"{d:20s} {len(files)} seeds, largest {max(sizes)} bytes")
    print(f"total {total} bytes in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
