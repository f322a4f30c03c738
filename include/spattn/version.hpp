#pragma once

namespace spattn {

const char* version();     // "MAJOR.MINOR.PATCH"
bool built_with_cuda();    // whether this build contains the CUDA backend

}  // namespace spattn
