#include <spattn/version.hpp>

namespace spattn {

const char* version() { return SPATTN_VERSION_STRING; }

bool built_with_cuda() {
#ifdef SPATTN_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace spattn
