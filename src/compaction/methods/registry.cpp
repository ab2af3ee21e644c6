// The registered compaction methods, in `kvcompact methods` order. A new method is a new file in
// this folder that defines `MethodEntry <name>_method()`, plus its two lines here.
#include <vector>

#include "compaction/method.h"

namespace kvcompact {

MethodEntry am_method();
MethodEntry random_method();
MethodEntry recent_method();
MethodEntry attn_nofit_method();
MethodEntry snapkv_method();
MethodEntry streaming_method();
MethodEntry h2o_method();
MethodEntry pyramidkv_method();
MethodEntry knorm_method();
MethodEntry tova_method();
MethodEntry observed_method();
MethodEntry expected_method();
MethodEntry adakv_method();
MethodEntry keydiff_method();

const std::vector<MethodEntry>& method_registry() {
  static const std::vector<MethodEntry> methods = {
      am_method(),    random_method(),    recent_method(), attn_nofit_method(), snapkv_method(),
      streaming_method(), h2o_method(),   pyramidkv_method(), knorm_method(),   tova_method(),
      observed_method(),  expected_method(), adakv_method(),  keydiff_method(),
  };
  return methods;
}

}  // namespace kvcompact
