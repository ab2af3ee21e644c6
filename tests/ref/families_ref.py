"""Reference logits for tiny random-weight checkpoints of several model families.

Commands (stdout: JSON):
  make KIND OUTDIR   Builds a random-weight model of KIND with transformers, saves it to OUTDIR as a
                     float32 safetensors folder (save_pretrained) and prints
                     {"kind", "tokens": [...], "logits": [[vocab] per token]} from transformers
                     (eager attention, float32, CPU).
  gguf KIND HFDIR OUT  Writes OUT.gguf from the saved folder with gguf-py's GGUFWriter, following
                     llama.cpp's convert_hf_to_gguf conventions (llama: Q/K rows permuted for
                     ggml's interleaved RoPE, llama3 rope_freqs.weight, rope.scaling.* metadata;
                     gemma3: RMSNorm weights + 1, sliding_window(_pattern), rope.freq_base_swa).
                     Prints {"ok": true}.
  llamacpp GGUF TOKENS  Logits of llama-cpp-python (logits_all) for comma-separated TOKENS.
  make-all ROOT      `make` for every KIND in one process (torch and transformers are imported
                     once): ROOT/KIND/ and ROOT/KIND.json, each JSON written atomically after its
                     folder. The CTest fixture families_ref_checkpoints runs it for
                     tests/families_ref_test.cpp (KVC_FAMILIES_REF_DIR).
KIND: llama3, linear, yarn, mistral_swa, qwen2_swa, gemma3, gemma3_gguf.
"""
import json
import math
import sys

import numpy as np

VOCAB = 64
PROMPT_LEN = 24  # longer than every window below


def prompt():
    rng = np.random.default_rng(1234)
    return [int(t) for t in rng.integers(3, VOCAB, size=PROMPT_LEN)]


def build(kind):
    import torch
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if kind == "llama3":
        cfg = tf.LlamaConfig(num_hidden_layers=2, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 256}, **common)
        model = tf.LlamaForCausalLM(cfg)
    elif kind == "linear":
        cfg = tf.LlamaConfig(num_hidden_layers=2, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}, **common)
        model = tf.LlamaForCausalLM(cfg)
    elif kind == "yarn":
        cfg = tf.LlamaConfig(num_hidden_layers=2, tie_word_embeddings=False,
                             rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                              "original_max_position_embeddings": 32}, **common)
        model = tf.LlamaForCausalLM(cfg)
    elif kind == "mistral_swa":
        cfg = tf.MistralConfig(num_hidden_layers=2, sliding_window=8, tie_word_embeddings=False, **common)
        model = tf.MistralForCausalLM(cfg)
    elif kind == "qwen2_swa":
        cfg = tf.Qwen2Config(num_hidden_layers=2, use_sliding_window=True, sliding_window=8, max_window_layers=1,
                             tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                             **common)
        model = tf.Qwen2ForCausalLM(cfg)
    elif kind in ("gemma3", "gemma3_gguf"):
        # gemma3: query_pre_attn_scalar != head_dim, final soft-cap, linear global RoPE scaling.
        # gemma3_gguf: query_pre_attn_scalar == head_dim, as llama.cpp assumes for GGUF gemma3.
        gg = kind == "gemma3_gguf"
        cfg = tf.Gemma3TextConfig(num_hidden_layers=3, head_dim=8, sliding_window=6,
                                  layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                                  query_pre_attn_scalar=8 if gg else 12,
                                  final_logit_softcapping=None if gg else 5.0,
                                  rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0,
                                                                      "rope_theta": 1000000.0},
                                                   "sliding_attention": {"rope_type": "default",
                                                                         "rope_theta": 10000.0}},
                                  hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, **common)
        model = tf.Gemma3ForCausalLM(cfg)
    else:
        raise SystemExit(f"unknown kind {kind}")
    gemma = kind.startswith("gemma3")
    torch.manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_((0.0 if gemma else 1.0) + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.25 * torch.randn_like(p))
    return model


def logits_of(model, tokens):
    import torch
    with torch.no_grad():
        out = model(torch.tensor([tokens]), use_cache=False)
    return out.logits[0].float().numpy()


KINDS = ["llama3", "linear", "yarn", "mistral_swa", "qwen2_swa", "gemma3", "gemma3_gguf"]


def make(kind, outdir):
    """Saves the checkpoint of `kind` to `outdir`; returns its reference JSON object."""
    import transformers as tf
    model = build(kind)
    model.save_pretrained(outdir, safe_serialization=True)
    model = tf.AutoModelForCausalLM.from_pretrained(outdir, dtype="float32", attn_implementation="eager")
    model.eval()
    toks = prompt()
    return {"kind": kind, "tokens": toks, "logits": logits_of(model, toks).tolist()}


def cmd_make(kind, outdir):
    json.dump(make(kind, outdir), sys.stdout)


def cmd_make_all(root):
    import os
    import shutil
    os.makedirs(root, exist_ok=True)
    for kind in KINDS:
        out = os.path.join(root, kind)
        # The JSON goes first: an interrupted rebuild leaves no JSON beside a half-written folder.
        if os.path.exists(out + ".json"):
            os.remove(out + ".json")
        shutil.rmtree(out, ignore_errors=True)
        ref = make(kind, out)
        with open(out + ".json.tmp", "w") as f:
            json.dump(ref, f)
        os.replace(out + ".json.tmp", out + ".json")
        print(f"{kind}: {out}", flush=True)


def permute(w, n_head, n_head_kv):  # convert_hf_to_gguf LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def cmd_gguf(kind, hfdir, out):
    import gguf
    from safetensors.numpy import load_file
    cfg = json.load(open(f"{hfdir}/config.json"))
    t = load_file(f"{hfdir}/model.safetensors")
    gemma = kind.startswith("gemma3")
    arch = "gemma3" if gemma else "llama"
    w = gguf.GGUFWriter(out, arch)
    L, H, KV = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(L)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    rp = cfg.get("rope_parameters") or {}
    if gemma:
        w.add_key_length(hd)
        w.add_value_length(hd)
        full, local = rp["full_attention"], rp["sliding_attention"]
        w.add_rope_freq_base(full["rope_theta"])
        w.add_rope_freq_base_swa(local["rope_theta"])
        if full.get("rope_type") == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(full["factor"])
        w.add_sliding_window(cfg["sliding_window"])
        w.add_sliding_window_pattern([lt == "sliding_attention" for lt in cfg["layer_types"]])
        if cfg.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
    else:
        w.add_rope_dimension_count(hd)
        w.add_rope_freq_base(rp["rope_theta"])
        if rp.get("rope_type") == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rp["factor"])
        elif rp.get("rope_type") == "yarn":
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            w.add_rope_scaling_factor(rp["factor"])
            w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
    # A tiny SentencePiece-style vocabulary so llama.cpp accepts the file.
    w.add_tokenizer_model("llama")
    toks = ["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(3, VOCAB)]
    w.add_token_list(toks)
    w.add_token_scores([0.0] * 3 + [-float(i) for i in range(3, VOCAB)])
    w.add_token_types([2, 3, 3] + [1] * (VOCAB - 3))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def f32(a):
        return np.ascontiguousarray(a.astype(np.float32))

    def norm(a):
        return f32(a + 1.0) if gemma else f32(a)  # Gemma3Model.norm_shift

    w.add_tensor("token_embd.weight", f32(t["model.embed_tokens.weight"]))
    for i in range(L):
        p = f"model.layers.{i}."
        q, k = t[p + "self_attn.q_proj.weight"], t[p + "self_attn.k_proj.weight"]
        if not gemma:
            q, k = permute(q, H, H), permute(k, H, KV)
        w.add_tensor(f"blk.{i}.attn_norm.weight", norm(t[p + "input_layernorm.weight"]))
        w.add_tensor(f"blk.{i}.attn_q.weight", f32(q))
        w.add_tensor(f"blk.{i}.attn_k.weight", f32(k))
        w.add_tensor(f"blk.{i}.attn_v.weight", f32(t[p + "self_attn.v_proj.weight"]))
        w.add_tensor(f"blk.{i}.attn_output.weight", f32(t[p + "self_attn.o_proj.weight"]))
        if gemma:
            w.add_tensor(f"blk.{i}.attn_q_norm.weight", norm(t[p + "self_attn.q_norm.weight"]))
            w.add_tensor(f"blk.{i}.attn_k_norm.weight", norm(t[p + "self_attn.k_norm.weight"]))
            w.add_tensor(f"blk.{i}.post_attention_norm.weight", norm(t[p + "post_attention_layernorm.weight"]))
            w.add_tensor(f"blk.{i}.ffn_norm.weight", norm(t[p + "pre_feedforward_layernorm.weight"]))
            w.add_tensor(f"blk.{i}.post_ffw_norm.weight", norm(t[p + "post_feedforward_layernorm.weight"]))
        else:
            w.add_tensor(f"blk.{i}.ffn_norm.weight", f32(t[p + "post_attention_layernorm.weight"]))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", f32(t[p + "mlp.gate_proj.weight"]))
        w.add_tensor(f"blk.{i}.ffn_up.weight", f32(t[p + "mlp.up_proj.weight"]))
        w.add_tensor(f"blk.{i}.ffn_down.weight", f32(t[p + "mlp.down_proj.weight"]))
    w.add_tensor("output_norm.weight", norm(t["model.norm.weight"]))
    if "lm_head.weight" in t:
        w.add_tensor("output.weight", f32(t["lm_head.weight"]))
    if rp.get("rope_type") == "llama3":  # convert_hf_to_gguf LlamaModel.generate_extra_tensors
        base = rp["rope_theta"]
        freqs = 1.0 / (base ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
        factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
        old = rp["original_max_position_embeddings"]
        low_wl, high_wl = old / lo, old / hi
        ff = []
        for f in freqs:
            wl = 2 * math.pi / f
            if wl < high_wl:
                ff.append(1)
            elif wl > low_wl:
                ff.append(factor)
            else:
                s = (old / wl - lo) / (hi - lo)
                ff.append(1 / ((1 - s) / factor + s))
        w.add_tensor("rope_freqs.weight", np.array(ff, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    json.dump({"ok": True}, sys.stdout)


def cmd_llamacpp(path, tokens):
    import llama_cpp
    toks = [int(x) for x in tokens.split(",")]
    # F32 KV cache (llama.cpp defaults to F16, which alone moves logits by ~1e-3)
    m = llama_cpp.Llama(model_path=path, logits_all=True, n_ctx=64, n_batch=64, n_threads=1, verbose=False,
                        type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    m.eval(toks)
    json.dump({"tokens": toks, "logits": np.asarray(m.scores[: len(toks)], dtype=np.float32).tolist()}, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        cmd_make(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "make-all":
        cmd_make_all(sys.argv[2])
    elif sys.argv[1] == "gguf":
        cmd_gguf(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "llamacpp":
        cmd_llamacpp(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
