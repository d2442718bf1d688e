// The HTTP side of the lab server: routes, request checks, the API's JSON errors and the static
// files. The experiments themselves live in addnorm_lab; this file only turns requests into
// their parameters and their results (or errors) into responses.
#include "server/lab_server.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <thread>

#include "addnorm/error.hpp"
#include "addnorm/lab/depth_training.hpp"
#include "lab/json_text.hpp"
#include "server/api_error.hpp"
#include "server/connection_pool.hpp"
#include "server/embedded_files.hpp"
#include "server/experiment_endpoints.hpp"
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

struct LabServer::Impl {
  explicit Impl(LabServerOptions server_options)
      : options(std::move(server_options)), jobs(options.max_jobs, options.job_time_limit) {}

  LabServerOptions options;
  httplib::Server http;
  JobBoard jobs;
  std::atomic<int> port{0};
  int listening_socket = -1;  // set while bind() creates it
  GuardPolicy guard;          // set by bind(), once the port is known
  std::atomic<bool> stopping{false};
  std::atomic<bool> running{false};  // inside run()

  void install_routes();
  void handle_experiment(const ExperimentEndpoint& endpoint, const httplib::Request& req,
                         httplib::Response& res);
  void handle_train(const httplib::Request& req, httplib::Response& res);
  void handle_stop(const httplib::Request& req, httplib::Response& res);
  nlohmann::json info() const;
};

// Runs `handler`, turning every failure into a JSON error: the user sees a message, never a
// crash or a stack trace.
template <class Handler>
void guarded(httplib::Response& res, Handler&& handler, const std::vector<std::string>& keys) {
  try {
    handler();
  } catch (const ApiError& e) {
    send_error(res, e.status(), e.what(), e.parameter());
  } catch (const Error& e) {
    send_error(res, 400, e.what(), parameter_named_in(e.what(), keys));
  } catch (const JobStopped& stopped) {
    send_error(res, 503, "the run was stopped: " + stopped.reason);
  } catch (const std::bad_alloc&) {
    send_error(res, 503, "the server ran out of memory for this request; try smaller parameters");
  } catch (const std::exception& e) {
    send_error(res, 500, std::string("internal error: ") + e.what());
  }
}

void LabServer::Impl::handle_experiment(const ExperimentEndpoint& endpoint,
                                        const httplib::Request& req, httplib::Response& res) {
  guarded(
      res,
      [&] {
        const nlohmann::json params = request_params(req);
        std::shared_ptr<Job> job;
        if (endpoint.long_running) {
          job = jobs.start(endpoint.name);
          if (!job) {
            throw ApiError(429, std::to_string(jobs.max_jobs()) +
                                    " long runs are going already (the limit): wait for one "
                                    "to end or stop one");
          }
        }
        lab::Progress progress;
        if (job) {
          progress = [&job](double, std::string_view) {
            if (std::string reason = job->stop_reason(); !reason.empty()) {
              throw JobStopped{std::move(reason)};
            }
          };
        }
        const auto started = std::chrono::steady_clock::now();
        const nlohmann::json result = endpoint.run(params, options.training, progress);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                .count();
        res.set_header("Server-Timing", "compute;dur=" + std::to_string(ms));
        send_json(res, 200, result);
      },
      endpoint.keys);
}

void LabServer::Impl::handle_train(const httplib::Request& req, httplib::Response& res) {
  static const std::vector<std::string> keys = [] {
    for (const ExperimentEndpoint& endpoint : experiment_endpoints()) {
      if (endpoint.name == "depth-training") return endpoint.keys;
    }
    return std::vector<std::string>{};
  }();
  guarded(
      res,
      [&] {
        const lab::DepthTrainingParams params =
            lab::depth_training_params_from_json(request_params(req));
        lab::validate(params);
        check_training_limits(params, options.training);
        std::shared_ptr<Job> job = jobs.start("training");
        if (!job) {
          throw ApiError(429, std::to_string(jobs.max_jobs()) +
                                  " long runs are going already (the limit): wait for one to "
                                  "end or stop one");
        }
        res.set_header("Cache-Control", "no-store");
        res.set_header("X-Job-Id", std::to_string(job->id()));
        res.set_chunked_content_provider(
            "text/event-stream", [params, job](size_t, httplib::DataSink& sink) {
              const EventSink emit = [&sink](const std::string& event, const nlohmann::json& data) {
                const std::string text = "event: " + event + "\ndata: " + data.dump() + "\n\n";
                return sink.write(text.data(), text.size());
              };
              try {
                stream_training(params, *job, emit);
              } catch (const std::exception& e) {
                emit("error", error_body(e.what(), {}));
              }
              sink.done();
              return true;
            });
      },
      keys);
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
            {"max_jobs", options.max_jobs},
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
  // Every read of a request waits at most this long for the next bytes.
  http.set_read_timeout(options.read_timeout.count(), 0);
  // Answers go out in several writes (headers, then body chunks); without TCP_NODELAY, Nagle's
  // algorithm meets the client's delayed ACK and a large answer waits ~40 ms for nothing.
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
    const RequestHead head{req.method,
                           req.path,
                           req.get_header_value("Host"),
                           req.get_header_value("Origin"),
                           req.get_header_value("Content-Type"),
                           req.get_header_value("Content-Length"),
                           req.get_header_value("Transfer-Encoding")};
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
