"""The lab server's compute and memory stay bounded whatever the traffic (issue 37).

Threads: experiments compute on `--max-jobs` job workers started with the server, each with one
OpenMP team, never on connection threads; the process then has at most
max_connections + workers x team + a constant threads (docs/security.md). Memory: a training
request's peak is estimated before it starts; over the per-job budget it is refused (400, the
estimate in the message), and running jobs' estimates together stay within the server's budget
(503 with Retry-After).
"""
import json
import os
import re
import socket
import subprocess
import threading
import time
from collections import Counter

import pytest

MAX_CONNECTIONS = 256  # LabServerOptions::max_connections
# Threads besides connections and job workers: the main thread, the CLI's signal thread, and
# OpenBLAS's pool (at most the hardware threads).
CONSTANT_THREADS = 2 + os.cpu_count()


def start_lab(addnorm_bin, *options, env=None):
    process = subprocess.Popen([str(addnorm_bin), "lab", "--port", "0", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **(env or {})})
    line = process.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert match, f"no URL in {line!r}: {process.stderr.read() if process.poll() is not None else ''}"
    return process, int(match.group(1))


def stop_lab(process):
    assert process.poll() is None, "the server died"
    process.terminate()
    process.wait(timeout=20)


def status_field(pid, name):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {name}")


def exchange(port, method, path, body=None, timeout=300.0):
    """One request; returns (status, headers, body bytes)."""
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    if method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode() + b"\r\n" + data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return int(lines[0].split()[1]), headers, rest


def post(port, path, body):
    status, headers, answer = exchange(port, "POST", path, body)
    try:
        return status, headers, json.loads(answer)
    except ValueError:
        return status, headers, None


def info(port):
    status, _, answer = exchange(port, "GET", "/api/info")
    assert status == 200
    return json.loads(answer)["limits"]


def jobs(port):
    return json.loads(exchange(port, "GET", "/api/jobs")[2])["jobs"]


def wait_for_jobs(port, count, seconds=30):
    deadline = time.monotonic() + seconds
    while len(jobs(port)) < count:
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.01)


def long_training(**extra):
    body = {"placements": ["pre_norm"], "depths": [2], "d_model": 16, "n_heads": 2, "d_ff": 32,
            "length": 3, "batch": 4, "steps": 20000, "warmups": [False], "warmup_steps": 100,
            "seeds": 1, "grad_history_points": 1}
    body.update(extra)
    return body


def test_threads_stay_bounded_under_a_burst(addnorm_bin):
    """200 concurrent experiment requests with OMP_NUM_THREADS=8 (once 2,051 threads and a
    libgomp abort): the thread count stays under the stated bound and the server survives."""
    process, port = start_lab(addnorm_bin, "--threads-per-job", "2", env={"OMP_NUM_THREADS": "8"})
    try:
        limits = info(port)
        workers, team = limits["job_workers"], limits["threads_per_job"]
        assert (workers, team) == (4, 2)  # --max-jobs 3, plus one for quick experiments
        # Every worker's team exists from the start.
        assert limits["team_threads"] == workers * team
        assert status_field(process.pid, "Threads") >= 1 + workers * team
        bound = MAX_CONNECTIONS + workers * team + CONSTANT_THREADS
        peak, done = [0], threading.Event()

        def watch():
            while not done.is_set():
                peak[0] = max(peak[0], status_field(process.pid, "Threads"))
                time.sleep(0.002)

        watcher = threading.Thread(target=watch)
        watcher.start()
        paths = [("/api/norm-steps", {}), ("/api/gradient-flow", {}),
                 ("/api/activation-growth", {}), ("/api/init-gradients", {"quick": True}),
                 ("/api/depth-training", long_training(steps=50, warmup_steps=10))]
        results = []

        def one(i):
            status, headers, _ = post(port, *paths[i % len(paths)])
            results.append((status, headers.get("retry-after")))

        clients = [threading.Thread(target=one, args=(i,)) for i in range(200)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        done.set()
        watcher.join()
        statuses = Counter(status for status, _ in results)
        print(f"burst of 200: {dict(statuses)}, peak threads {peak[0]} (bound {bound})")
        assert set(statuses) <= {200, 429, 503}, statuses
        assert statuses[200] > 0
        # Every 503 here is a full queue, which says when to come back.
        assert all(retry == "5" for status, retry in results if status == 503)
        assert peak[0] <= bound
        assert post(port, "/api/norm-steps", {})[0] == 200
    finally:
        stop_lab(process)


def test_a_full_queue_is_503_with_retry_after(addnorm_bin):
    """--max-jobs 1 gives two workers: the training run holds one, the other serves the quick
    experiments, whose queue has one place here. Eight gradient-flow requests at once (each
    ~0.3 s of draws) fill worker and queue: the rest are told when to come back."""
    process, port = start_lab(addnorm_bin, "--max-jobs", "1", "--max-queued", "1")
    try:
        answers = []
        runner = threading.Thread(
            target=lambda: answers.append(post(port, "/api/depth-training", long_training())))
        runner.start()
        wait_for_jobs(port, 1)
        time.sleep(0.2)  # the job is on its worker now
        quick = []
        burst = [threading.Thread(target=lambda: quick.append(post(port, "/api/gradient-flow", {})))
                 for _ in range(8)]
        for thread in burst:
            thread.start()
        for thread in burst:
            thread.join()
        statuses = Counter(status for status, _, _ in quick)
        assert set(statuses) == {200, 503}, statuses
        # The free worker ran one while another waited: quick work does not wait for training.
        assert statuses[200] >= 2, statuses
        for status, headers, answer in quick:
            if status == 503:
                assert headers.get("retry-after") == "5" and "busy" in answer["error"], answer
        assert [job["kind"] for job in jobs(port)] == ["depth-training"]
        exchange(port, "POST", "/api/jobs/stop", {"job": jobs(port)[0]["id"]})
        runner.join()
        assert answers[0][0] == 503 and "stopped by request" in answers[0][2]["error"]
    finally:
        stop_lab(process)


# The finding's configuration: d_model 512, d_ff 2048, batch 256, length 32 (7.85 GB RSS).
BIG = {"placements": ["pre_norm"], "warmups": [False], "d_model": 512, "n_heads": 8,
       "d_ff": 2048, "batch": 256, "length": 32, "steps": 2, "warmup_steps": 1,
       "grad_history_points": 1}


def estimate_mib(answer):
    match = re.search(r"an estimated (\d+) MiB", answer["error"])
    assert match, answer
    return int(match.group(1))


def test_requests_over_the_memory_budget_are_400_with_the_estimate(addnorm_bin):
    process, port = start_lab(addnorm_bin)
    try:
        before = status_field(process.pid, "VmHWM")
        # The stream holds every run at once: 3 runs of ~1.6 GiB each.
        status, _, answer = post(port, "/api/train", {**BIG, "depths": [1], "seeds": 3})
        assert status == 400 and answer["parameter"] == "batch", answer
        assert estimate_mib(answer) > 4096 and "limit of 4096 MiB" in answer["error"]
        # depth-training runs one run per OpenMP thread: 4 blocks of one run are enough.
        status, _, answer = post(port, "/api/depth-training", {**BIG, "depths": [4], "seeds": 1})
        assert status == 400 and estimate_mib(answer) > 4096, answer
        # The experiments that build deep stacks without training them are estimated too
        # (their work cap bounds arithmetic, not memory): 96 narrow blocks (d_model 4) on 256
        # sequences of length 64 are within the work cap and would hold about 4.6 GB.
        deep = {"placements": ["pre_norm"], "depths": [96], "d_model": 4, "n_heads": 1,
                "d_ff": 1, "batch": 256, "length": 64, "seeds": 1}
        for path in ("/api/init-gradients", "/api/update-size"):
            status, _, answer = post(port, path, deep)
            assert status == 400 and answer["parameter"] == "batch", answer
            assert estimate_mib(answer) > 4096, answer
        assert jobs(port) == []
        assert status_field(process.pid, "VmHWM") - before < 32 * 1024
    finally:
        stop_lab(process)


# A stack of 4 blocks, d_model 256, batch 64 of length 16, one run: for each endpoint that
# builds transformer stacks, with the keys that endpoint takes.
MIDDLE = {"placements": ["pre_norm"], "d_model": 256, "n_heads": 4, "d_ff": 1024, "batch": 64,
          "length": 16, "depths": [4], "seeds": 1}
TRAINING_KEYS = {"warmups": [False], "steps": 2, "warmup_steps": 1, "grad_history_points": 1}


@pytest.mark.parametrize("path, body", [
    ("/api/train", {**MIDDLE, **TRAINING_KEYS}),
    ("/api/depth-training", {**MIDDLE, **TRAINING_KEYS}),
    ("/api/init-gradients", MIDDLE),
    ("/api/update-size", {**MIDDLE, "lrs": [1e-3]}),
])
def test_a_requests_memory_stays_under_its_estimate(addnorm_bin, path, body):
    # The estimate, from a server whose per-job budget refuses everything.
    process, port = start_lab(addnorm_bin, "--job-memory-mib", "1")
    try:
        estimate = estimate_mib(post(port, path, body)[2])
    finally:
        stop_lab(process)
    process, port = start_lab(addnorm_bin)
    try:
        time.sleep(0.2)
        before = status_field(process.pid, "VmHWM")
        status, _, _ = exchange(port, "POST", path, body)
        assert status == 200
        growth = (status_field(process.pid, "VmHWM") - before) / 1024
        print(f"{path}: peak RSS growth {growth:.0f} MiB, estimate {estimate} MiB")
        assert growth < estimate
        assert estimate < 2 * growth  # an upper bound, not a wild one
    finally:
        stop_lab(process)


def test_running_jobs_estimates_stay_within_the_servers_budget(addnorm_bin):
    # One small run is estimated at just over 1 MiB: one fits in 1.5 MiB, two do not.
    process, port = start_lab(addnorm_bin, "--total-job-memory-mib", "1.5")
    try:
        first = long_training()
        answers = []
        runner = threading.Thread(target=lambda: answers.append(
            exchange(port, "POST", "/api/train", first)))
        runner.start()
        wait_for_jobs(port, 1)
        status, headers, answer = post(port, "/api/train", first)
        assert status == 503 and headers.get("retry-after") == "5", answer
        assert "memory budget" in answer["error"]
        exchange(port, "POST", "/api/jobs/stop", {"job": jobs(port)[0]["id"]})
        runner.join()
        assert answers[0][0] == 200 and b"event: stopped" in answers[0][2]
        deadline = time.monotonic() + 10
        while jobs(port) and time.monotonic() < deadline:
            time.sleep(0.01)
        status, _, stream = exchange(port, "POST", "/api/train", {**first, "steps": 2, "warmup_steps": 1})
        assert status == 200 and b"event: done" in stream
    finally:
        stop_lab(process)
