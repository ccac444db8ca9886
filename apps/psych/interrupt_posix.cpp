// interrupt.hpp on POSIX: the signals are blocked in every thread and taken by one waiter; SIGUSR1
// is how the waiter is told to finish.
#include "interrupt.hpp"

#include <pthread.h>
#include <signal.h>

#include <csignal>

namespace psych::cli {

interrupt_canceller::interrupt_canceller() {
  sigset_t signals{};
  sigemptyset(&signals);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // An ignored signal is discarded before sigwait could see it, and a shell starts
  // background jobs with SIGINT ignored. nohup's ignored SIGHUP stays ignored.
  for (int signal : {SIGINT, SIGTERM, SIGUSR1}) std::signal(signal, SIG_DFL);
  waiter_ = std::thread([this, signals] {
    for (;;) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0 || signal == SIGUSR1) return;
      source_.request_stop();
    }
  });
}

interrupt_canceller::~interrupt_canceller() {
  pthread_kill(waiter_.native_handle(), SIGUSR1);
  waiter_.join();
}

}  // namespace psych::cli
