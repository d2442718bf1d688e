// `addnorm lab`: serves the interactive lab page and its JSON API on this machine (src/server).
// Loopback only unless --host says otherwise; Ctrl-C (SIGINT) or SIGTERM stops it cleanly:
// running trainings are told to stop, the listening socket closes, the worker threads finish.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "addnorm/error.hpp"
#include "cli/commands.hpp"
#include "server/lab_server.hpp"

extern char** environ;

namespace addnorm::cli {
namespace {

struct LabServerCommandOptions {
  server::LabServerOptions server;
  bool open_browser = false;
};

// The first of the usual "open a URL" programs found on PATH, or "".
std::string find_browser_opener() {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  const std::string dirs = path;
  for (const char* program : {"xdg-open", "sensible-browser", "x-www-browser", "open"}) {
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::string candidate = dirs.substr(start, end - start) + "/" + program;
      struct stat info {};
      if (end > start && stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
          access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
      start = end + 1;
    }
  }
  return {};
}

void open_in_browser(const std::string& url) {
  const std::string opener = find_browser_opener();
  if (opener.empty()) {
    std::cerr << "addnorm lab: --open found no xdg-open or browser on PATH; open " << url
              << " yourself\n";
    return;
  }
  // Started and left alone: the opener returns (or keeps running) on its own.
  std::string program = opener, argument = url;
  char* argv[] = {program.data(), argument.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, opener.c_str(), nullptr, nullptr, argv, environ) != 0) {
    std::cerr << "addnorm lab: could not start " << opener << "; open " << url << " yourself\n";
  }
}

int stop_pipe[2] = {-1, -1};

void on_stop_signal(int) {
  const char byte = 1;
  [[maybe_unused]] const ssize_t written = write(stop_pipe[1], &byte, 1);
}

void serve(const LabServerCommandOptions& options) {
  if (!server::is_loopback_host(options.server.host)) {
    std::cerr << "addnorm lab: warning: listening on " << options.server.host
              << ", not only on this machine (127.0.0.1): anyone who can reach this address can "
                 "use the lab and start training runs on it\n";
  }
  server::LabServer lab(options.server);
  const int port = lab.bind();
  const std::string host = options.server.host.find(':') != std::string::npos
                               ? "[" + options.server.host + "]"
                               : options.server.host;
  const std::string url = "http://" + host + ":" + std::to_string(port) + "/";
  std::cout << "addnorm lab: serving " << url << " (Ctrl-C stops)" << std::endl;

  // Ctrl-C and SIGTERM only write a byte to a pipe (all a signal handler may safely do; any
  // thread, OpenBLAS's included, may be the one that runs it); this thread reads it and stops
  // the server as ordinary code.
  if (pipe2(stop_pipe, O_CLOEXEC) != 0) throw Error("cannot create the pipe for Ctrl-C");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::thread stopper([&lab] {
    char byte = 0;
    while (read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    lab.stop();
  });
  if (options.open_browser) open_in_browser(url);
  const bool ok = lab.run();
  // run() also returns if the server fails on its own: wake the stopper so it can be joined.
  on_stop_signal(0);
  stopper.join();
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  std::cout << "addnorm lab: stopped" << std::endl;
  if (!ok) throw Error("the server stopped with an error");
}

}  // namespace

void add_lab_server_command(CLI::App& app) {
  auto options = std::make_shared<LabServerCommandOptions>();
  CLI::App* lab = app.add_subcommand(
      "lab",
      "Serve the interactive lab page (the seed pages' widgets, computed by addnorm) and "
      "its JSON API on this machine");
  lab->add_option("--port", options->server.port, "Port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  lab->add_option("--host", options->server.host,
                  "Address to listen on; anything but a loopback address is reachable from "
                  "other machines (a warning is printed)")
      ->capture_default_str();
  lab->add_flag("--open", options->open_browser, "Open the page in a browser (xdg-open)");
  lab->add_option("--max-jobs", options->server.max_jobs,
                  "Training runs and long experiments running at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  // Issue 37: experiments compute on --max-jobs + 1 workers whose OpenMP teams together use the
  // machine's threads; requests are admitted by their estimated peak memory.
  lab->add_option("--threads-per-job", options->server.threads_per_job,
                  "OpenMP threads of each job worker (0: the hardware threads divided between "
                  "the --max-jobs + 1 workers)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  lab->add_option("--max-queued", options->server.max_queued,
                  "Requests waiting for a free job worker; more are answered 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  lab->add_option_function<double>(
         "--job-memory-mib",
         [options](double mib) { options->server.training.max_job_bytes = mib * (1 << 20); },
         "Largest estimated peak memory of one training request, MiB (default 4096)")
      ->check(CLI::Range(1.0, 1e7));
  lab->add_option_function<double>(
         "--total-job-memory-mib",
         [options](double mib) { options->server.training.max_total_bytes = mib * (1 << 20); },
         "Estimated peak memory of all running training requests together, MiB (default 8192)")
      ->check(CLI::Range(1.0, 1e7));
  lab->callback([options] { serve(*options); });
}

}  // namespace addnorm::cli
