// The HTTP side of the lab server: routes, request checks, the API's JSON errors and the static
// files. The experiments themselves live in addnorm_lab; this file only turns requests into
// their parameters and their results (or errors) into responses.
#include "server/lab_server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "addnorm/error.hpp"
#include "addnorm/lab/depth_training.hpp"
#include "lab/json_text.hpp"
#include "server/api_error.hpp"
#include "server/compute_pool.hpp"
#include "server/connection_pool.hpp"
#include "server/embedded_files.hpp"
#include "server/experiment_endpoints.hpp"
#include "server/guarded_http_server.hpp"
#include "server/job_board.hpp"
#include "server/json_body.hpp"
#include "server/request_guard.hpp"
#include "server/training_stream.hpp"

namespace addnorm::server {
namespace {

// The charset parameter is not decoration: httplib compresses "application/json" (exactly) for
// any client that accepts it, and brotli at its default quality spends ~0.7 s on a 500 KB answer.
// On the loopback, compression only costs time, and this type is not on httplib's list.
constexpr const char* kJson = "application/json; charset=utf-8";

constexpr int kListenBacklog = 1024;

// How often a connection thread waiting for its job's result looks whether its client is still
// there (and tells the job to stop when not): the job stops within this and one step.
constexpr auto kClientPoll = std::chrono::milliseconds(10);
// A busy server's 503s say when to try again.
constexpr const char* kRetryAfterSeconds = "5";
// Events of a training stream computed but not yet sent: a slow reader holds up the run
// rather than letting them pile up in memory.
constexpr size_t kMaxPendingEvents = 256;

// Thrown from a long job's progress callback to end it early.
struct JobStopped {
  std::string reason;
};

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(lab::dump_json_safely(body), kJson);
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& parameter = {}) {
  send_json(res, status, error_body(message, parameter));
}

// A 503 that says when to come back: every worker busy and the queue full, or the memory budget
// taken by running jobs.
[[noreturn]] void refuse_busy(httplib::Response& res, const std::string& message) {
  res.set_header("Retry-After", kRetryAfterSeconds);
  throw ApiError(503, message);
}

// What a job worker hands back to the connection thread that waits for it.
struct Outcome {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  nlohmann::json result;
  std::exception_ptr error;
  double compute_ms = 0.0;
  std::atomic<bool> abandoned{false};  // the client left before the work began: skip it

  void finish(nlohmann::json value, std::exception_ptr failure, double ms) {
    {
      std::lock_guard lock(mutex);
      if (done) return;
      done = true;
      result = std::move(value);
      error = std::move(failure);
      compute_ms = ms;
    }
    done_cv.notify_all();
  }
};

// Owned by the queued task: a task the pool drops unrun (the server stopping) still answers.
// Made in place (make_shared with the outcome), never copied: a copy's end would report too.
struct OutcomeGuard {
  explicit OutcomeGuard(std::shared_ptr<Outcome> out) : outcome(std::move(out)) {}
  OutcomeGuard(const OutcomeGuard&) = delete;
  OutcomeGuard& operator=(const OutcomeGuard&) = delete;
  std::shared_ptr<Outcome> outcome;
  ~OutcomeGuard() {
    outcome->finish({}, std::make_exception_ptr(JobStopped{"the server is stopping"}), 0.0);
  }
};

// A training stream's events, from the worker that computes them to the connection thread that
// writes them.
class EventChannel {
 public:
  // The worker's side; false once the reader has gone.
  bool push(std::string text, const Job& job) {
    std::unique_lock lock(mutex_);
    // Wait while the reader is behind, unless the job is ending: its last event goes anyway.
    while (!reader_gone_ && pending_.size() >= kMaxPendingEvents && job.stop_reason().empty()) {
      changed_.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (reader_gone_) return false;
    pending_.push_back(std::move(text));
    changed_.notify_all();
    return true;
  }
  void finish() {
    std::lock_guard lock(mutex_);
    finished_ = true;
    changed_.notify_all();
  }
  bool finished() {
    std::lock_guard lock(mutex_);
    return finished_;
  }
  // The reader's side.
  enum class Next { event, finished, nothing_yet };
  Next pop(std::string& text, std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, wait, [this] { return !pending_.empty() || finished_; });
    if (!pending_.empty()) {
      text = std::move(pending_.front());
      pending_.pop_front();
      changed_.notify_all();
      return Next::event;
    }
    return finished_ ? Next::finished : Next::nothing_yet;
  }
  void reader_gone() {
    std::lock_guard lock(mutex_);
    reader_gone_ = true;
    pending_.clear();
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> pending_;
  bool finished_ = false, reader_gone_ = false;
};

// The request's JSON parameters: {} for an empty body. The request guard has already checked
// the method, the Content-Type and the size.
nlohmann::json request_params(const httplib::Request& req) {
  if (!req.params.empty()) {
    throw ApiError(400,
                   "query parameters are not read: send the parameters as a JSON object in a "
                   "POST body",
                   lab::describe_json_key(req.params.begin()->first));
  }
  return parse_request_body(req.body);
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return !allowed_hosts_for(host, 0).empty();
}

ConnectionLimits connection_limits(const LabServerOptions& options) {
  ConnectionLimits limits;
  limits.head.max_bytes = options.max_head_bytes;
  limits.head.max_fields = options.max_header_fields;
  limits.head.max_request_line = options.max_request_line;
  limits.max_body_bytes = options.max_body_bytes;
  limits.read_timeout = options.read_timeout;
  limits.write_timeout = options.read_timeout;
  limits.head_deadline = options.head_deadline;
  return limits;
}

// One worker more than long runs may hold: long runs are at most max_jobs (the job board counts
// queued ones too), so one worker is always left for the quick experiments, which would
// otherwise wait behind a training run for as long as it lasts.
int job_workers(int max_jobs) {
  return max_jobs + 1;
}

struct LabServer::Impl {
  explicit Impl(LabServerOptions server_options)
      : options(std::move(server_options)),
        http(connection_limits(options), stopping),
        jobs(options.max_jobs, options.job_time_limit),
        budget(options.training.max_total_bytes),
        pool(job_workers(options.max_jobs),
             options.threads_per_job > 0 ? options.threads_per_job
                                         : threads_per_worker(job_workers(options.max_jobs)),
             options.max_queued) {}

  LabServerOptions options;
  std::atomic<bool> stopping{false};  // before http, which watches it
  GuardedHttpServer http;
  JobBoard jobs;
  MemoryBudget budget;  // before pool: a queued task holds a reservation
  ComputePool pool;     // after jobs and budget: its tasks hold jobs and reservations
  std::atomic<int> port{0};
  int listening_socket = -1;         // set while bind() creates it
  GuardPolicy guard;                 // set by bind(), once the port is known
  std::atomic<bool> running{false};  // inside run()

  void install_routes();
  void handle_experiment(const ExperimentEndpoint& endpoint, const httplib::Request& req,
                         httplib::Response& res);
  void handle_train(const httplib::Request& req, httplib::Response& res);
  void handle_stop(const httplib::Request& req, httplib::Response& res);
  std::shared_ptr<void> reserve_memory(double bytes, httplib::Response& res);
  void submit(std::function<void()> task, httplib::Response& res);
  nlohmann::json info() const;
};

// Runs `handler`, turning every failure into a JSON error: the user sees a message, never a
// crash or a stack trace.
template <class Handler>
void guarded(httplib::Response& res, Handler&& handler, const std::vector<std::string>& keys) {
  try {
    handler();
  } catch (const JobStopped& stopped) {
    send_error(res, 503, "the run was stopped: " + stopped.reason);
  } catch (...) {
    const ErrorAnswer answer = answer_for_current_exception(keys);
    send_json(res, answer.status, answer.body);
  }
}

std::shared_ptr<void> LabServer::Impl::reserve_memory(double bytes, httplib::Response& res) {
  if (bytes <= 0.0) return nullptr;
  std::shared_ptr<void> reservation = budget.reserve(bytes);
  if (!reservation) {
    const auto mib = [](double b) { return std::to_string(static_cast<int64_t>(b / (1 << 20))); };
    refuse_busy(res, "the running jobs hold " + mib(budget.in_use()) + " MiB of the server's " +
                         mib(budget.total()) +
                         " MiB memory budget and this request needs an "
                         "estimated " +
                         mib(bytes) + " MiB: try again when one has ended");
  }
  return reservation;
}

void LabServer::Impl::submit(std::function<void()> task, httplib::Response& res) {
  if (!pool.submit(std::move(task))) {
    refuse_busy(res, "every job worker is busy and " + std::to_string(pool.max_queued()) +
                         " requests are waiting already: try again shortly");
  }
}

void LabServer::Impl::handle_experiment(const ExperimentEndpoint& endpoint,
                                        const httplib::Request& req, httplib::Response& res) {
  guarded(
      res,
      [&] {
        const nlohmann::json params = request_params(req);
        // Refused before anything is taken: the request's estimated memory over the per-job
        // budget (400), then a job slot (429), the server's budget (503), a worker (503).
        double bytes = 0.0;
        if (endpoint.peak_bytes) {
          bytes = endpoint.peak_bytes(params, options.training, pool.team());
          check_training_memory(bytes, options.training);
        }
        std::shared_ptr<Job> job;
        if (endpoint.long_running) {
          job = jobs.start(endpoint.name);
          if (!job) {
            throw ApiError(429, std::to_string(jobs.max_jobs()) +
                                    " long runs are going already (the limit): wait for one "
                                    "to end or stop one");
          }
        }
        std::shared_ptr<void> reservation = reserve_memory(bytes, res);
        lab::Progress progress;
        if (job) {
          // Called between every optimiser step of every run (src/lab/parallel_runs.hpp): a
          // stop request, the time limit, the server stopping, or the client hanging up (seen
          // by the waiting connection thread, which stops the job) end the work within a step.
          progress = [job](double, std::string_view) {
            if (std::string reason = job->stop_reason(); !reason.empty()) {
              throw JobStopped{std::move(reason)};
            }
          };
        }
        auto outcome = std::make_shared<Outcome>();
        auto pending = std::make_shared<OutcomeGuard>(outcome);
        const TrainingLimits limits = options.training;
        // The task owns the job and the reservation: both are released when the work ends,
        // even if this connection has stopped waiting for it.
        submit(
            [&endpoint, params, limits, progress, job, reservation, pending]() mutable {
              Outcome& out = *pending->outcome;
              if (out.abandoned) return;
              const auto started = std::chrono::steady_clock::now();
              nlohmann::json result;
              std::exception_ptr error;
              try {
                result = endpoint.run(params, limits, progress);
              } catch (...) {
                error = std::current_exception();
              }
              // The job leaves the board, and its memory the budget, before the answer goes:
              // a client that asks right after sees them free.
              progress = nullptr;
              job.reset();
              reservation.reset();
              out.finish(std::move(result), std::move(error),
                         std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - started)
                             .count());
            },
            res);
        pending.reset();
        std::unique_lock lock(outcome->mutex);
        while (!outcome->done) {
          if (outcome->done_cv.wait_for(lock, kClientPoll, [&] { return outcome->done; })) break;
          if (client_has_gone()) {
            // Nobody to answer: the job stops at its next step, a queued one never starts.
            outcome->abandoned = true;
            if (job) job->request_stop("client disconnected");
            throw JobStopped{"client disconnected"};
          }
        }
        if (outcome->error) std::rethrow_exception(outcome->error);
        res.set_header("Server-Timing", "compute;dur=" + std::to_string(outcome->compute_ms));
        send_json(res, 200, outcome->result);
      },
      endpoint.keys);
}

void LabServer::Impl::handle_train(const httplib::Request& req, httplib::Response& res) {
  guarded(
      res,
      [&] {
        const StreamedTraining training =
            checked_streamed_training(request_params(req), options.training);
        const lab::DepthTrainingParams& params = training.params;
        const double bytes = training.peak_bytes;
        std::shared_ptr<Job> job = jobs.start("training");
        if (!job) {
          throw ApiError(429, std::to_string(jobs.max_jobs()) +
                                  " long runs are going already (the limit): wait for one to "
                                  "end or stop one");
        }
        std::shared_ptr<void> reservation = reserve_memory(bytes, res);
        // The runs compute on a job worker; this connection's thread only writes their events.
        auto channel = std::make_shared<EventChannel>();
        struct Closer {  // the stream ends even when the pool drops the task unrun
          Closer(std::shared_ptr<EventChannel> events, std::shared_ptr<Job> running)
              : channel(std::move(events)), job(std::move(running)) {}
          Closer(const Closer&) = delete;
          Closer& operator=(const Closer&) = delete;
          std::shared_ptr<EventChannel> channel;
          std::shared_ptr<Job> job;
          ~Closer() {
            if (channel->finished()) return;
            const nlohmann::json data = {{"reason", "the server is stopping"}, {"step", 0}};
            channel->push("event: stopped\ndata: " + data.dump() + "\n\n", *job);
            channel->finish();
          }
        };
        auto closer = std::make_shared<Closer>(channel, job);
        submit(
            [params, job, reservation, closer] {
              EventChannel& events = *closer->channel;
              const EventSink emit = [&](const std::string& event, const nlohmann::json& data) {
                return events.push("event: " + event + "\ndata: " + data.dump() + "\n\n", *job);
              };
              try {
                stream_training(params, *job, emit);
              } catch (const std::exception& e) {
                emit("error", error_body(e.what(), {}));
              }
              events.finish();
            },
            res);
        closer.reset();
        res.set_header("Cache-Control", "no-store");
        res.set_header("X-Job-Id", std::to_string(job->id()));
        const auto hang_up = [job, channel] {
          job->request_stop("client disconnected");
          channel->reader_gone();
        };
        res.set_chunked_content_provider(
            "text/event-stream",
            [channel, hang_up](size_t, httplib::DataSink& sink) {
              for (;;) {
                std::string text;
                switch (channel->pop(text, kClientPoll)) {
                  case EventChannel::Next::event:
                    if (!sink.write(text.data(), text.size())) {
                      hang_up();
                      return false;
                    }
                    break;
                  case EventChannel::Next::finished:
                    sink.done();
                    return true;
                  case EventChannel::Next::nothing_yet:
                    if (client_has_gone()) {
                      hang_up();
                      return false;
                    }
                    break;
                }
              }
            },
            // httplib never called the provider, or the answer failed: stop the job.
            [hang_up, channel](bool success) {
              if (!success) hang_up();
              channel->reader_gone();
            });
      },
      depth_training_keys());
}

void LabServer::Impl::handle_stop(const httplib::Request& req, httplib::Response& res) {
  guarded(res,
          [&] {
            const nlohmann::json params = request_params(req);
            if (!params.is_object() || !params.contains("job") ||
                !params["job"].is_number_integer() || params.size() != 1) {
              throw ApiError(400, "expected a body {\"job\": <id>} with the id of a running job",
                             "job");
            }
            // Ids are positive int64; a larger number is no job's, said as it was sent.
            const nlohmann::json& job = params["job"];
            const bool representable = job.is_number_unsigned()
                                           ? job.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                                           : true;
            if (!representable || !jobs.stop(job.get<int64_t>(), "stopped by request")) {
              throw ApiError(404, "no running job has id " + job.dump(), "job");
            }
            const int64_t id = job.get<int64_t>();
            send_json(res, 200, {{"job", id}, {"stopping", true}});
          },
          {"job"});
}

nlohmann::json LabServer::Impl::info() const {
  nlohmann::json experiments = nlohmann::json::object();
  for (const ExperimentEndpoint& endpoint : experiment_endpoints()) {
    experiments[endpoint.name] = {{"path", "/api/" + endpoint.name},
                                  {"widget", endpoint.widget},
                                  {"long_running", endpoint.long_running},
                                  {"parameters", endpoint.keys},
                                  {"defaults", endpoint.defaults}};
  }
  return {{"name", "addnorm lab"},
          {"experiments", experiments},
          {"limits",
           {{"max_body_bytes", options.max_body_bytes},
            {"max_head_bytes", options.max_head_bytes},
            {"max_header_fields", options.max_header_fields},
            {"max_jobs", options.max_jobs},
            {"job_workers", pool.workers()},
            {"threads_per_job", pool.team()},
            {"team_threads", pool.team_threads()},
            {"max_queued", pool.max_queued()},
            {"max_job_bytes", options.training.max_job_bytes},
            {"max_total_job_bytes", options.training.max_total_bytes},
            {"job_time_limit_s", options.job_time_limit.count()},
            {"training_max_runs", options.training.max_runs},
            {"training_max_block_weights", options.training.max_parameters}}}};
}

void LabServer::Impl::install_routes() {
  const size_t max_connections = static_cast<size_t>(options.max_connections);
  http.new_task_queue = [max_connections] { return new ConnectionPool(max_connections); };
  http.set_payload_max_length(options.max_body_bytes);
  // One request per connection: a refused request's unread body can never be taken for the
  // next request, and a connection's thread is free as soon as its answer is out.
  http.set_keep_alive_max_count(1);
  // Reads and writes wait at most options.read_timeout (GuardedHttpServer's own stream).
  http.set_tcp_nodelay(true);
  // httplib's defaults (SO_REUSEADDR), plus the listening socket itself, kept so that bind()
  // can lengthen its backlog.
  http.set_socket_options([this](int socket) {
    httplib::default_socket_options(socket);
    listening_socket = socket;
  });

  // Before routing and before the body is read: the Host and Origin the request comes with,
  // the body's framing and size, and whether it may start work (request_guard.hpp).
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    RequestHead head;
    head.method = req.method;
    head.path = req.path;
    head.host = req.get_header_value("Host");
    head.origin = req.get_header_value("Origin");
    head.content_type = req.get_header_value("Content-Type");
    head.content_length = req.get_header_value("Content-Length");
    head.transfer_encoding = req.get_header_value("Transfer-Encoding");
    head.content_encoding = req.get_header_value("Content-Encoding");
    head.host_fields = req.get_header_value_count("Host");
    head.content_length_fields = req.get_header_value_count("Content-Length");
    if (const auto refusal = check_request(head, guard)) {
      if (refusal->status == 405) res.set_header("Allow", "POST");
      send_error(res, refusal->status, refusal->message, refusal->parameter);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  for (const ExperimentEndpoint& endpoint : experiment_endpoints()) {
    const std::string path = "/api/" + endpoint.name;
    const auto handler = [this, &endpoint](const httplib::Request& req, httplib::Response& res) {
      handle_experiment(endpoint, req, res);
    };
    http.Post(path, handler);
  }
  http.Get("/api/info", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, info());
  });
  http.Post("/api/train", [this](const httplib::Request& req, httplib::Response& res) {
    handle_train(req, res);
  });
  http.Get("/api/jobs", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"jobs", jobs.list()}});
  });
  http.Post("/api/jobs/stop",
            [this](const httplib::Request& req, httplib::Response& res) { handle_stop(req, res); });

  // Everything else: an embedded file by exact path, or 404. Nothing is read from disk.
  http.Get(".*", [](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/api/", 0) == 0) {
      send_error(res, 404, "no API endpoint " + req.path + " (GET /api/info lists them)");
      return;
    }
    const EmbeddedFile* file = find_embedded_file(req.path);
    if (!file) {
      send_error(res, 404, "no such page: " + req.path);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(std::string(file->data), std::string(file->content_type));
  });

  // Errors httplib produces itself (413 for an oversized body, 404 for an unknown method or
  // path, 400 for a malformed request) get the same JSON body as the API's own.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message;
    switch (res.status) {
      case 413:
        message = "the request body is larger than the limit of " +
                  std::to_string(options.max_body_bytes) + " bytes";
        break;
      case 404:
        message = "nothing at " + req.method + " " + req.path;
        break;
      default:
        message = "the request was refused (" + std::to_string(res.status) + ")";
    }
    send_error(res, res.status, message, res.status == 413 ? "body" : "");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                std::exception_ptr) { send_error(res, 500, "internal error"); });
}

LabServer::LabServer(LabServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  // A browser that closes a connection mid-answer (a stopped training stream, a superseded
  // request) would otherwise kill the process with SIGPIPE on the next write; httplib on Linux
  // leaves that to its user. With it ignored, the write fails and the handler sees it.
  std::signal(SIGPIPE, SIG_IGN);
  impl_->install_routes();
}

LabServer::~LabServer() {
  stop();
}

int LabServer::bind() {
  const LabServerOptions& o = impl_->options;
  if (o.port < 0 || o.port > 65535) {
    throw Error("port is " + std::to_string(o.port) + ", expected 0 (any free port) to 65535");
  }
  int port = o.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(o.host);
    if (port < 0) port = 0;
  } else if (!impl_->http.bind_to_port(o.host, port)) {
    port = 0;
  }
  if (port == 0) {
    throw Error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                " (in use, or not an address of this machine); try another --port or --port 0");
  }
  // httplib listens with a backlog of 5: a burst of connections (the page's widgets, a script)
  // saw resets. Listening again on the same socket only lengthens the queue.
  if (impl_->listening_socket >= 0) ::listen(impl_->listening_socket, kListenBacklog);
  impl_->guard.allowed_hosts = allowed_hosts_for(o.host, port);
  impl_->guard.max_body_bytes = o.max_body_bytes;
  impl_->guard.work_paths = {"/api/train", "/api/jobs/stop"};
  for (const ExperimentEndpoint& endpoint : experiment_endpoints()) {
    impl_->guard.work_paths.push_back("/api/" + endpoint.name);
  }
  impl_->port = port;
  return port;
}

bool LabServer::run() {
  impl_->running = true;
  if (impl_->stopping) {  // stop() came first: do not start listening
    impl_->running = false;
    return true;
  }
  const bool ok = impl_->http.listen_after_bind();
  impl_->running = false;
  return ok;
}

void LabServer::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  impl_->jobs.stop_all("the server is stopping");
  // Queued work is dropped (its connections answer 503); running work ends at its next step.
  impl_->pool.shutdown();
  // run() may be between its check of `stopping` and the start of listening; httplib's stop()
  // does nothing until then, so wait for it.
  while (impl_->running && !impl_->http.is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http.stop();
}

const LabServerOptions& LabServer::options() const {
  return impl_->options;
}
int LabServer::port() const {
  return impl_->port;
}

}  // namespace addnorm::server
