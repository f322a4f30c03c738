// Progress on stderr while a long command works: a bar redrawn in place on a terminal, one line
// per step otherwise (logs stay readable).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace spattn::cli {

class Progress {
 public:
  explicit Progress(int total) : total_(total), terminal_(isatty(fileno(stderr)) != 0) {}
  ~Progress() {
    if (terminal_ && started_) std::fputs("\r\033[K", stderr);
  }
  void step(const std::string& what) {
    ++done_;
    started_ = true;
    if (terminal_) {
      const int width = 30;
      const int filled = total_ > 0 ? width * (done_ - 1) / total_ : 0;
      std::fprintf(stderr, "\r\033[K[%s%s] %d/%d %s", std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(width - filled), '.').c_str(), done_, total_, what.c_str());
    } else {
      std::fprintf(stderr, "[%d/%d] %s\n", done_, total_, what.c_str());
    }
    std::fflush(stderr);
  }

 private:
  int total_;
  int done_ = 0;
  bool terminal_;
  bool started_ = false;
};

}  // namespace spattn::cli
