// Private to sparse_formats: writing a file so that readers never see it half-written.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

namespace sparse_formats::detail {

// Calls `write` on a stream to a fresh temporary file in the directory of `path`, then renames it
// over `path`. If `write` throws or any I/O fails, the temporary file is removed, `path` is left as
// it was, and the exception propagates (I/O failures become FormatError naming the path).
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

}  // namespace sparse_formats::detail
