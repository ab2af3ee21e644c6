// Python bindings of the per-head and whole-cache compaction (compaction/method_spec.h
// compact_head, compaction/compact_cache.h compact_cache).
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "arrays.h"
#include "compaction/compact_cache.h"
#include "compaction/head_compaction.h"
#include "compaction/method_spec.h"

namespace kvcompact::py_bind {

/// method + the keyword options as spec settings: "am" + {iters: 4} -> "am,iters=4"; a tuple or
/// list value gives its items joined by ':' (pool=("max", 5) -> "pool=max:5"), a bool gives 1/0.
std::string spec_text(const std::string& method, const py::dict& options) {
  std::string s = method;
  for (auto [key, value] : options) {
    std::string v;
    if (py::isinstance<py::bool_>(value)) {
      v = value.cast<bool>() ? "1" : "0";
    } else if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
      for (auto item : value) {
        if (!v.empty()) v += ':';
        v += std::string(py::str(item));
      }
    } else {
      v = py::str(value);
    }
    s += "," + std::string(py::str(key)) + "=" + v;
  }
  return s;
}

namespace {


/// The budget from exactly one of ratio (in [0, 1]) and t (in [0, T]). Throws py::value_error.
int budget(std::optional<double> ratio, std::optional<int> t, int T) {
  if (ratio.has_value() == t.has_value())
    throw py::value_error("give exactly one of ratio (keep ratio in [0, 1]) and t (entries to keep, 0..T)");
  if (ratio) {
    if (!(*ratio >= 0.0 && *ratio <= 1.0))
      throw py::value_error("ratio: " + std::to_string(*ratio) + " is outside [0, 1]");
    return kept_entries(*ratio, T);
  }
  if (*t < 0 || *t > T)
    throw py::value_error("t: " + std::to_string(*t) + " is outside [0, T] with T = " + std::to_string(T));
  return *t;
}

using HeadTuple = std::tuple<py::array_t<float>, py::array_t<float>, py::array_t<float>, py::array_t<int64_t>>;

/// (C1 [t, d], beta [t], C2 [t, d], indices [t]) of a compacted head.
HeadTuple head_tuple(CompactedHead&& c, int d) {
  const py::ssize_t t = c.size();
  std::vector<int64_t> idx(c.selected.begin(), c.selected.end());
  return {to_array(std::move(c.keys), {t, d}), to_array(std::move(c.beta), {t}), to_array(std::move(c.values), {t, d}),
          to_array(std::move(idx), {t})};
}

HeadTuple compact_head_py(const py::handle& K_obj, const py::handle& V_obj, const py::handle& Q_obj,
                          std::optional<double> ratio, std::optional<int> t, const std::string& method,
                          const py::object& context_queries_obj, std::uint64_t seed, const py::kwargs& options) {
  const FloatArray K = float_array(K_obj, "K", 2, "[T, head_dim]");
  const FloatArray V = float_array(V_obj, "V", 2, "[T, head_dim]");
  const FloatArray Q = float_array(Q_obj, "Q", 2, "[n_queries, head_dim]");
  const int T = static_cast<int>(K.shape(0)), d = static_cast<int>(K.shape(1));
  if (d < 1) throw py::value_error("K: head_dim must be >= 1, got shape " + shape_str(K));
  if (V.shape(0) != T || V.shape(1) != d)
    throw py::value_error("V: shape " + shape_str(V) + " differs from K's " + shape_str(K) + " (both [T, head_dim])");
  if (Q.shape(1) != d)
    throw py::value_error("Q: shape " + shape_str(Q) + " has head_dim " + std::to_string(Q.shape(1)) + ", K " +
                          shape_str(K) + " has " + std::to_string(d));
  const MethodSpec spec = parse_method_spec(spec_text(method, options));
  const int keep = budget(ratio, t, T);

  HeadCompactionInput in;
  in.keys = K.data();
  in.values = V.data();
  in.queries = Q.data();
  in.T = T;
  in.n_queries = static_cast<int>(Q.shape(0));
  in.head_dim = d;
  FloatArray CQ;
  if (!context_queries_obj.is_none()) {
    CQ = float_array(context_queries_obj, "context_queries", 2, "[T * group_size, head_dim]");
    if (CQ.shape(1) != d || T == 0 || CQ.shape(0) % T != 0)
      throw py::value_error("context_queries: shape " + shape_str(CQ) + " is not [T * group_size, head_dim] for K " +
                            shape_str(K));
    in.context_queries = CQ.data();
    in.group_size = static_cast<int>(CQ.shape(0) / T);
  }
  CompactedHead c;
  {
    py::gil_scoped_release release;
    c = compact_head(spec, in, keep, /*layer=*/0, /*n_layers=*/1, seed);
  }
  return head_tuple(std::move(c), d);
}

/// Reads [L, H, rows, d] queries into ReferenceQueries.
ReferenceQueries reference_queries(const FloatArray& Q) {
  const int L = static_cast<int>(Q.shape(0)), H = static_cast<int>(Q.shape(1)), d = static_cast<int>(Q.shape(3));
  const std::size_t rows = static_cast<std::size_t>(Q.shape(2)) * d;
  ReferenceQueries rq(L, H, d);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const float* p = Q.data() + (static_cast<std::size_t>(l) * H + h) * rows;
      rq.at(l, h).assign(p, p + rows);
    }
  return rq;
}

std::vector<std::vector<HeadTuple>> compact_cache_py(const py::handle& K_obj, const py::handle& V_obj,
                                                     const py::handle& Q_obj, std::optional<double> ratio,
                                                     std::optional<std::vector<int>> budgets,
                                                     const std::string& method, const py::object& context_queries_obj,
                                                     std::uint64_t seed, const py::kwargs& options) {
  const FloatArray K = float_array(K_obj, "K", 4, "[n_layers, n_kv_heads, T, head_dim]");
  const FloatArray V = float_array(V_obj, "V", 4, "[n_layers, n_kv_heads, T, head_dim]");
  const FloatArray Q = float_array(Q_obj, "Q", 4, "[n_layers, n_kv_heads, n_queries, head_dim]");
  const int L = static_cast<int>(K.shape(0)), H = static_cast<int>(K.shape(1));
  const int T = static_cast<int>(K.shape(2)), d = static_cast<int>(K.shape(3));
  if (d < 1) throw py::value_error("K: head_dim must be >= 1, got shape " + shape_str(K));
  for (int i = 0; i < 4; ++i)
    if (V.shape(i) != K.shape(i))
      throw py::value_error("V: shape " + shape_str(V) + " differs from K's " + shape_str(K));
  if (Q.shape(0) != L || Q.shape(1) != H || Q.shape(3) != d)
    throw py::value_error("Q: shape " + shape_str(Q) + " is not [n_layers, n_kv_heads, n_queries, head_dim] for K " +
                          shape_str(K));
  CompactionOptions co;
  co.method = parse_method_spec(spec_text(method, options));
  co.seed = seed;
  if (ratio.has_value() == budgets.has_value())
    throw py::value_error("give exactly one of ratio (keep ratio in [0, 1]) and budgets (n_layers * n_kv_heads entries)");
  if (ratio) {
    if (!(*ratio >= 0.0 && *ratio <= 1.0)) throw py::value_error("ratio: " + std::to_string(*ratio) + " is outside [0, 1]");
    co.ratio = *ratio;
  } else {
    if (budgets->size() != static_cast<std::size_t>(L) * H)
      throw py::value_error("budgets: " + std::to_string(budgets->size()) + " entries, need n_layers * n_kv_heads = " +
                            std::to_string(L * H) + " (layer-major) for K " + shape_str(K));
    for (std::size_t i = 0; i < budgets->size(); ++i)
      if ((*budgets)[i] < 0 || (*budgets)[i] > T)
        throw py::value_error("budgets[" + std::to_string(i) + "]: " + std::to_string((*budgets)[i]) +
                              " is outside [0, T] with T = " + std::to_string(T));
    co.head_budgets = *budgets;
  }
  KVCache full(L, H, d);
  const std::size_t head_floats = static_cast<std::size_t>(T) * d;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      HeadCache& hc = full.head(l, h);
      const std::size_t off = (static_cast<std::size_t>(l) * H + h) * head_floats;
      hc.keys.assign(K.data() + off, K.data() + off + head_floats);
      hc.values.assign(V.data() + off, V.data() + off + head_floats);
      hc.beta.assign(T, 0.0f);
      hc.positions.resize(T);
      for (int i = 0; i < T; ++i) hc.positions[i] = i;
    }
  full.next_position = T;
  const ReferenceQueries rq = reference_queries(Q);
  std::optional<ReferenceQueries> cq;
  if (!context_queries_obj.is_none()) {
    const FloatArray CQ = float_array(context_queries_obj, "context_queries", 4,
                                      "[n_layers, n_kv_heads, T * group_size, head_dim]");
    if (CQ.shape(0) != L || CQ.shape(1) != H || CQ.shape(3) != d || T == 0 || CQ.shape(2) % T != 0)
      throw py::value_error("context_queries: shape " + shape_str(CQ) +
                            " is not [n_layers, n_kv_heads, T * group_size, head_dim] for K " + shape_str(K));
    cq = reference_queries(CQ);
  }
  KVCache out;
  {
    py::gil_scoped_release release;
    out = compact_cache(full, rq, co, cq ? &*cq : nullptr);
  }
  std::vector<std::vector<HeadTuple>> result(L);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      HeadCache& hc = out.head(l, h);
      CompactedHead c;
      c.selected.assign(hc.positions.begin(), hc.positions.end());
      c.keys = std::move(hc.keys);
      c.beta = std::move(hc.beta);
      c.values = std::move(hc.values);
      result[l].push_back(head_tuple(std::move(c), d));
    }
  return result;
}

}  // namespace

void bind_compact(py::module_& m) {
  m.def("compact_head", &compact_head_py, py::arg("K"), py::arg("V"), py::arg("Q"), py::arg("ratio") = py::none(),
        py::arg("t") = py::none(), py::arg("method") = "am", py::kw_only(),
        py::arg("context_queries") = py::none(), py::arg("seed") = 0,
        "Compacts one KV head; see kvcompact/_kvcompact.pyi.");
  m.def("compact_cache", &compact_cache_py, py::arg("K"), py::arg("V"), py::arg("Q"),
        py::arg("ratio") = py::none(), py::arg("budgets") = py::none(), py::arg("method") = "am", py::kw_only(),
        py::arg("context_queries") = py::none(), py::arg("seed") = 0,
        "Compacts every head of a cache; see kvcompact/_kvcompact.pyi.");
  m.def("kept_entries", &kept_entries, py::arg("ratio"), py::arg("T"),
        "Entries kept for keep ratio r over T entries: max(1, floor(r*T)), 0 when r == 0.");
  m.def("method_help", &method_help, "Every compaction method family with its keys and defaults.");
  m.def("canonical_method", [](const std::string& method, const py::kwargs& options) {
    return to_string(parse_method_spec(spec_text(method, options)));
  }, py::arg("method"), "The canonical spec string of a method with keyword options.");
  m.def("needs_context_queries", [](const std::string& method, const py::kwargs& options) {
    return uses_context_queries(parse_method_spec(spec_text(method, options)));
  }, py::arg("method"), "Whether the method needs the context's own queries (context_queries=).");
  m.def("needs_reference_queries", [](const std::string& method, const py::kwargs& options) {
    return uses_reference_queries(parse_method_spec(spec_text(method, options)));
  }, py::arg("method"), "Whether the method reads the reference queries Q (am, attn-nofit, ...).");
}

}  // namespace kvcompact::py_bind
