// Errors raised by spattn. Validation happens once, at the API boundary, and every message names
// the argument and the values ("backward: dO has 63 rows, Q has 64"). Inner loops assert.
#pragma once

#include <sparse_formats/error.hpp>

#include <stdexcept>
#include <string>

namespace spattn {

// Bad input (shapes, masks, options, files). Nothing was written to any output.
using InvalidArgument = sparse_formats::FormatError;

// A failure while running on valid input (out of memory, a device error, an infeasible schedule).
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& message) : std::runtime_error(message) {}
};

using sparse_formats::fail;  // fail("forward: q has ", n, " rows") throws InvalidArgument

}  // namespace spattn
