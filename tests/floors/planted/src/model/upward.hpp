#pragma once
// A planted violation for the floors check's own test: src/ may not include server/.
#include "server/engine/engine.hpp"
