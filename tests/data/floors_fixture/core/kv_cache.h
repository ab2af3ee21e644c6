// Fixture for the CTest test floors_refuses_an_upward_include: a core header that includes a
// model header, which cmake/check_floors.cmake must refuse.
#pragma once
#include "core/config.h"
#include "model/transformer.h"
