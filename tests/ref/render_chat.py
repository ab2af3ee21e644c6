"""Reference renderer for kvcompact's chat-template tests: renders each case the way Hugging Face
transformers' apply_chat_template(tokenize=False) does (Python Jinja2 set up by
transformers.utils.chat_template_utils: ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, AssistantTracker, transformers' tojson, raise_exception, strftime_now).

usage: render_chat.py INPUT.json > OUTPUT.json

INPUT: {"now": EPOCH_SECONDS (optional: strftime_now's fixed clock, local time),
        "cases": [{"tokenizer": DIR | "gguf": FILE | "template": SOURCE,
                   "special_tokens": {...} (template cases only),
                   "messages": [...], "add_generation_prompt": bool, "kwargs": {...}}]}
  tokenizer: AutoTokenizer.from_pretrained(DIR).apply_chat_template(...) (its own template and
             special tokens); gguf: the template of metadata tokenizer.chat_template read with
             gguf-py, special tokens = tokenizer.ggml.tokens at the bos/eos ids;
  template:  transformers' render_jinja_template with the given source and special tokens.
OUTPUT: {"outputs": [{"text": ...} | {"error": EXCEPTION_CLASS, "message": str(exception)}]}
"""
import json
import sys
from datetime import datetime

import transformers.utils.chat_template_utils as ctu
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import render_jinja_template


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    if spec.get("now") is not None:
        fixed = datetime.fromtimestamp(spec["now"])

        class FixedClock(datetime):
            @classmethod
            def now(cls, tz=None):
                return fixed

        ctu.datetime = FixedClock  # strftime_now calls datetime.now() from this module
    tokenizers = {}
    ggufs = {}
    outputs = []
    for case in spec["cases"]:
        kwargs = dict(case.get("kwargs", {}))
        gen = case.get("add_generation_prompt", False)
        try:
            if "tokenizer" in case:
                d = case["tokenizer"]
                if d not in tokenizers:
                    tokenizers[d] = AutoTokenizer.from_pretrained(d)
                text = tokenizers[d].apply_chat_template(case["messages"], tokenize=False,
                                                         add_generation_prompt=gen, **kwargs)
            else:
                if "gguf" in case:
                    path = case["gguf"]
                    if path not in ggufs:
                        import gguf
                        r = gguf.GGUFReader(path)
                        tokens = r.fields["tokenizer.ggml.tokens"].contents()
                        special = {}
                        for name, key in (("bos_token", "tokenizer.ggml.bos_token_id"),
                                          ("eos_token", "tokenizer.ggml.eos_token_id"),
                                          ("unk_token", "tokenizer.ggml.unknown_token_id"),
                                          ("pad_token", "tokenizer.ggml.padding_token_id")):
                            if key in r.fields:
                                special[name] = tokens[r.fields[key].contents()]
                        ggufs[path] = (r.fields["tokenizer.chat_template"].contents(), special)
                    source, special = ggufs[path]
                else:
                    source, special = case["template"], case.get("special_tokens", {})
                tools = kwargs.pop("tools", None)
                documents = kwargs.pop("documents", None)
                rendered, _ = render_jinja_template(conversations=[case["messages"]], tools=tools,
                                                    documents=documents, chat_template=source,
                                                    add_generation_prompt=gen, **{**special, **kwargs})
                text = rendered[0]
            outputs.append({"text": text})
        except Exception as e:  # the case's expected outcome is this error
            outputs.append({"error": type(e).__name__, "message": str(e)})
    json.dump({"outputs": outputs}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
