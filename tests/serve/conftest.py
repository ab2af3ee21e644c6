"""Fixtures of the `kvcompact serve` tests: a server started by the test on 127.0.0.1 (a free
port picked by the server itself, --port 0), stopped at teardown. Paths come from KVC_BIN and
KVC_MODEL (defaults: build/kvcompact and models/SmolLM2-135M-Instruct.Q4_1.gguf)."""
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("KVC_BIN", ROOT / "build" / "kvcompact"))
MODEL = Path(os.environ.get("KVC_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
API_KEY = "sk-kvcompact-test"


class Server:
    """A running `kvcompact serve` process; .url is http://127.0.0.1:PORT."""

    def __init__(self, *args, api_key=API_KEY, timeout=180):
        if not BIN.exists() or not MODEL.exists():
            if os.environ.get("KVC_REQUIRE_SHARED") == "1":  # CI: a missing model is a failure
                pytest.fail(f"needs {BIN} and {MODEL} (scripts/setup.sh)")
            pytest.skip(f"needs {BIN} and {MODEL} (scripts/setup.sh)")
        cmd = [str(BIN), "serve", "--model", str(MODEL), "--port", "0", "--threads", "2", *args]
        if api_key:
            cmd += ["--api-key", api_key]
        self.api_key = api_key
        self.log = []
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        self._port = threading.Event()
        self.port = None
        threading.Thread(target=self._read, daemon=True).start()
        if not self._port.wait(30):
            self.kill()
            raise RuntimeError("server did not start: " + "".join(self.log))
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + timeout
        while True:
            status, _ = self.get("/health")
            if status == 200:
                break
            assert status == 503, f"/health answered {status} while loading"
            if time.time() > deadline or self.proc.poll() is not None:
                self.kill()
                raise RuntimeError("server not ready: " + "".join(self.log))
            time.sleep(0.2)

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self._port.set()

    def request(self, method, path, body=None, headers=None, auth=True, timeout=120):
        h = {"Content-Type": "application/json"}
        if auth and self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        h.update(headers or {})
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get(self, path, **kw):
        try:
            return self.request("GET", path, **kw)
        except (urllib.error.URLError, ConnectionError):
            return 0, b""

    def metrics(self):
        status, text = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def client(self, **kw):
        import openai
        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.api_key or "none", max_retries=0,
                             timeout=120, **kw)

    def model_id(self):
        return json.loads(self.request("GET", "/v1/models")[1])["data"][0]["id"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server("--ctx", "384", "--keep-recent", "48", "--slots", "4",
               "--slot-save-path", str(tmp_path_factory.mktemp("slots")))
    yield s
    s.stop()
