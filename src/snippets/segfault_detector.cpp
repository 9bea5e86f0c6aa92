#include "snippets/segfault_detector.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>

namespace kiln::snippets {

namespace {

thread_local const DebugState* t_active = nullptr;
struct sigaction g_previous;

void write_err(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void on_segv(int sig, siginfo_t* info, void* ctx) {
  const DebugState* st = t_active;
  if (st) {
    // Not strictly async-signal-safe (snprintf), acceptable in a debug mode about to die.
    char line[512];
    std::snprintf(line, sizeof line, "kiln snippets segfault detector: kernel '%s' faulted at address %p\n",
                  st->kernel.c_str(), info ? info->si_addr : nullptr);
    write_err(line);
    const int32_t e = st->expr;
    if (e >= 0 && static_cast<size_t>(e) < st->expr_names.size()) {
      std::snprintf(line, sizeof line, "  in emitter: %s\n", st->expr_names[static_cast<size_t>(e)].c_str());
    } else {
      std::snprintf(line, sizeof line, "  outside any emitter (prologue / loop control)\n");
    }
    write_err(line);
    for (size_t i = 0; i < st->iterations.size() && i < st->loop_names.size(); ++i) {
      if (st->iterations[i] < 0) continue;
      std::snprintf(line, sizeof line, "  %s: iteration %lld\n", st->loop_names[i].c_str(),
                    static_cast<long long>(st->iterations[i]));
      write_err(line);
    }
    t_active = nullptr;
  }
  // The previous handler, or the default action (the fault repeats on return).
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
    return g_previous.sa_handler(sig);
  }
  ::signal(SIGSEGV, SIG_DFL);
}

}  // namespace

void install_segfault_detector() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous);
  });
}

void set_active_kernel(const DebugState* state) { t_active = state; }

}  // namespace kiln::snippets
