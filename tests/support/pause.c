/* The pod sandbox's process for the kubelet tier (scripts/kubelet.sh), and the main process of
 * its shell-less image: waits for signals, reaps orphans, exits 0 on SIGTERM or SIGINT. What
 * Kubernetes' own pause.c does, in the few lines a test image needs (none can be pulled). */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
