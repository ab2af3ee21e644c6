// `kvcompact ppl`: teacher-forced perplexity of a text file.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "heads/head_intervention.h"
#include "heads/head_means.h"
#include "metrics/perplexity.h"
#include "core/model_fingerprint.h"
#include "cli_model.h"
#include "core/error.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact::cli {

Runner register_ppl(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string data;
    long long max_tokens = 0;
    int docs = 0;
    std::string cache;
    std::string mask_heads, ablation = "zero", head_means;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("ppl", "mean NLL (nats/token) and perplexity of a text file");
  add_model_options(cmd, o->m);
  cmd->add_option("--data", o->data, "UTF-8 text; documents are separated by blank lines")->required();
  cmd->add_option("--max-tokens", o->max_tokens,
                  "encode the whole file once (with BOS) and score its first N predictions")
      ->check(positive_number());
  cmd->add_option("--docs", o->docs, "score only the first N documents")->check(positive_number());
  cmd->add_option("--cache", o->cache,
                  "score the whole --data text (encoded without BOS) as the continuation of a saved .kvc cache");
  cmd->add_option("--mask-heads", o->mask_heads,
                  "ablate heads: L<l>Q<h> query heads, L<l>H<g> KV heads (their GQA group), L<l> whole layers");
  cmd->add_option("--ablation", o->ablation, "--mask-heads: zero, mean (needs --head-means), uniform or scale[:F] (outputs times F in (0, 1], default 1e-4; every position)");
  cmd->add_option("--head-means", o->head_means, "--ablation mean: file from `kvcompact head-means`");
  add_common_options(cmd, common);
  return [o, &common] {
    if (!o->cache.empty()) {
      if (!o->mask_heads.empty()) throw Error("--mask-heads: not supported with --cache");
      if (o->docs > 0) throw Error("--docs: does not apply with --cache (the whole --data text is one continuation)");
      return run_ppl_from_cache({o->m.model, o->m.tokenizer, o->cache, o->data, o->max_tokens}, common);
    }
    Model model = load_model(o->m.model, o->m.tokenizer);
    Transformer transformer(model.config, model.weights);
    const AblationSpec spec = parse_ablation_spec(o->ablation);
    const Ablation ablation = spec.ablation;
    HeadMeans means;
    if (!o->mask_heads.empty() && ablation == Ablation::Mean) {
      if (o->head_means.empty()) throw Error("--ablation mean needs --head-means FILE (from `kvcompact head-means`)");
      means = read_head_means(o->head_means);
      check_head_means_model(means, model.config, fingerprint_hex(model_fingerprint(model.config, model.weights)),
                             o->head_means);
    }
    if (!o->head_means.empty() && ablation != Ablation::Mean)
      throw Error("--head-means applies only with --ablation mean");
    std::vector<QueryHeadId> masked;
    try {
      masked = parse_head_set(o->mask_heads, model.config);
    } catch (const Error& e) {
      throw Error(fmt::format("--mask-heads: {}", e.what()));
    }
    HeadIntervention intervention(model.config, masked, ablation,
                                  ablation == Ablation::Mean && !masked.empty() ? &means : nullptr, nullptr,
                                  {spec.scale, MaskPositions::All});
    ForwardObserver* observer = masked.empty() ? nullptr : &intervention;
    NllResult total;
    int n_docs = 0;
    if (o->max_tokens > 0) {
      const std::string text = read_text_file(o->data);
      std::vector<int> ids = model.tokenizer->encode(text, /*add_bos=*/true);
      if (static_cast<long long>(ids.size()) < o->max_tokens + 1)
        throw Error(fmt::format("{}: has {} tokens; --max-tokens {} needs {}", o->data, ids.size(),
                                o->max_tokens, o->max_tokens + 1));
      ids.resize(static_cast<std::size_t>(o->max_tokens) + 1);
      warn_past_max_seq_len(static_cast<long long>(ids.size()) - 1, model.config.max_seq_len);
      total = score_tokens(transformer, ids, 0, observer);
      n_docs = 1;
    } else {
      const auto docs = read_documents(o->data, o->docs);
      for (std::size_t d = 0; d < docs.size(); ++d) {
        const std::vector<int> ids = model.tokenizer->encode(docs[d], /*add_bos=*/true);
        if (ids.size() < 2)
          throw Error(fmt::format("{}: document {} is shorter than 2 tokens", o->data, d + 1));
        warn_past_max_seq_len(static_cast<long long>(ids.size()) - 1, model.config.max_seq_len);
        NllResult r = score_tokens(transformer, ids, 0, observer);
        total.total_nll += r.total_nll;
        total.tokens += r.tokens;
        ++n_docs;
        if (!common.json && docs.size() > 1 && (d + 1) % 50 == 0)
          std::fprintf(stderr, "ppl: %zu/%zu documents\n", d + 1, docs.size());
      }
    }
    const double nll = total.mean_nll();
    if (!std::isfinite(nll)) throw Error(fmt::format("{}: NLL is not finite", o->data));
    if (common.json) {
      print_json({{"nll", nll},
                  {"ppl", std::exp(nll)},
                  {"tokens", total.tokens},
                  {"documents", n_docs},
                  {"masked_heads", masked.size()},
                  {"ablation", masked.empty() ? "none" : to_string(spec)}});
    } else {
      fmt::print("nll {:.6f} nats/token, perplexity {:.4f} over {} tokens ({} document{}){}\n", nll,
                 std::exp(nll), total.tokens, n_docs, n_docs == 1 ? "" : "s",
                 masked.empty() ? std::string()
                                : fmt::format(", {} query heads masked ({})", masked.size(), to_string(spec)));
    }
    return 0;
  };
}

}  // namespace kvcompact::cli
