// Fixture (see core/kv_cache.h): a model header may include core.
#pragma once
#include "core/kv_cache.h"
