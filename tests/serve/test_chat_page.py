"""The chat page of `kvcompact serve` (src/serve/chat_page.html, served at GET /) in a real
browser against the real server: Debian's headless chromium driven by selenium talks to
`kvcompact serve` on SmolLM2-135M-Instruct for two turns, and the cache figures the page shows
below each answer are checked against the model's KV layout and against GET /slots.

Run from the repository root: .venv/bin/python -m pytest tests/serve/test_chat_page.py
KVC_BIN (default build/kvcompact) and KVC_MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf)
name the binary and the model. Everything listens on 127.0.0.1 only."""
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _path(env: str, default: str) -> Path:
    p = Path(os.environ.get(env, default))
    return p if p.is_absolute() else ROOT / p


BIN = _path("KVC_BIN", "build/kvcompact")
MODEL = _path("KVC_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
PAGE = ROOT / "src" / "serve" / "chat_page.html"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

HEAD_DIM = 64                           # SmolLM2-135M
ENTRY_BYTES = (2 * HEAD_DIM + 2) * 4    # key + value (head_dim float32 each), float32 beta, int32 position
START_TIMEOUT = 120                     # s until GET /health is 200
ANSWER_TIMEOUT = 120                    # s per answer
PROMPTS = ["Hello! What is 2+2?", "Name a color."]

# Plain HTTP to 127.0.0.1, never through a proxy named by the environment.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str, timeout: float = 10):
    """(status, body text) of GET url; HTTP error statuses are returned, not raised."""
    try:
        with _http.open(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


class Server:
    """`kvcompact serve` as a child process; its stderr is collected for failure messages."""

    def __init__(self):
        self.lines = []
        self.proc = subprocess.Popen(
            [str(BIN), "serve", "--model", str(MODEL), "--host", "127.0.0.1", "--port", "0", "--ctx", "512",
             "--keep-recent", "128", "--threads", "2"],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            errors="replace")
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.url = None

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def log(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])

    def start(self):
        deadline = time.monotonic() + START_TIMEOUT
        while self.url is None:
            for line in list(self.lines):
                m = re.search(r"kvcompact serve: listening on (http://127\.0\.0\.1:\d+)", line)
                if m:
                    self.url = m.group(1)
            if self.url is None:
                assert self.proc.poll() is None, f"kvcompact serve exited ({self.proc.returncode}):\n{self.log()}"
                assert time.monotonic() < deadline, f"no 'listening on' line in {START_TIMEOUT} s:\n{self.log()}"
                time.sleep(0.1)
        while True:
            assert self.proc.poll() is None, f"kvcompact serve exited ({self.proc.returncode}):\n{self.log()}"
            try:
                status, body = http_get(self.url + "/health", timeout=5)
            except OSError as e:
                status, body = None, str(e)
            if status == 200:
                return
            assert status in (503, None), f"GET /health: {status} {body}"
            assert time.monotonic() < deadline, f"GET /health not 200 in {START_TIMEOUT} s ({status} {body}):\n{self.log()}"
            time.sleep(0.5)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.reader.join(timeout=5)


def _require_inputs():
    for p, what in [(BIN, "the kvcompact binary (KVC_BIN)"), (MODEL, "the model (KVC_MODEL)"),
                    (CHROMIUM, "Debian's chromium"), (CHROMEDRIVER, "Debian's chromedriver")]:
        if not p.exists():
            pytest.skip(f"{what} is missing: {p}")
    pytest.importorskip("selenium")


@pytest.fixture(scope="module")
def server():
    _require_inputs()
    s = Server()
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def browser():
    _require_inputs()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="kvc-chromium-") as profile:
        opts = webdriver.ChromeOptions()
        opts.binary_location = str(CHROMIUM)
        for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--no-proxy-server", "--window-size=1200,900",
                  f"--user-data-dir={profile}"]:
            opts.add_argument(a)
        service = Service(str(CHROMEDRIVER))
        driver = None
        try:
            driver = webdriver.Chrome(service=service, options=opts)
            driver.set_script_timeout(30)
            yield driver
        finally:
            if driver is not None:
                try:
                    driver.quit()
                except Exception:
                    pass
            service.stop()


def _state(driver) -> dict:
    """What the page shows: status, busy flag and every assistant message's text and figures."""
    return driver.execute_script("""
      return {
        status: document.getElementById('status').textContent,
        busy: document.body.dataset.busy,
        model: document.body.dataset.model || null,
        sendDisabled: document.getElementById('send').disabled,
        errors: Array.from(document.querySelectorAll('.msg .err')).map(e => e.textContent),
        answers: Array.from(document.querySelectorAll('.msg.assistant')).map(m => {
          const kv = m.querySelector('.kv');
          return {
            state: m.dataset.state || null,
            text: m.querySelector('.text').textContent,
            kv: kv ? Object.assign({}, kv.dataset) : null,
            kvText: kv ? kv.textContent : null,
          };
        }),
      };""")


def _wait(driver, server, what, cond, timeout):
    deadline = time.monotonic() + timeout
    while True:
        st = _state(driver)
        if cond(st):
            return st
        assert not st["errors"], f"the page shows an error while waiting for {what}: {st['errors']}\n{server.log()}"
        assert server.proc.poll() is None, f"kvcompact serve exited ({server.proc.returncode}):\n{server.log()}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s; page: {st}\nserver:\n{server.log()}"
        time.sleep(0.25)


def _int(kv: dict, key: str) -> int:
    v = kv.get(key)
    assert v is not None and re.fullmatch(r"\d+", v), f"data-{key} is {v!r}, not a whole number: {kv}"
    return int(v)


def test_served_page_is_the_source_file(server):
    status, body = http_get(server.url + "/")
    assert status == 200
    assert body == PAGE.read_text(encoding="utf-8"), (
        f"{BIN} serves another chat page than {PAGE}: the binary predates the page; rebuild it "
        "(CMake compiles the page in at configure time)")


def test_two_turns_show_cache_figures(server, browser):
    from selenium.webdriver.common.by import By

    driver = browser
    driver.get(server.url + "/")
    st = _wait(driver, server, "the page to be ready", lambda s: s["status"] == "ready" and s["model"], 30)
    assert st["model"] == MODEL.stem, st
    assert st["busy"] == "0" and not st["sendDisabled"]
    # A short answer keeps the test quick on two threads; temperature stays at its default, 0.
    driver.find_element(By.CSS_SELECTOR, "#settings summary").click()
    assert driver.find_element(By.ID, "temperature").get_attribute("value") == "0"
    max_tokens = driver.find_element(By.ID, "max-tokens")
    max_tokens.clear()
    max_tokens.send_keys("40")

    turns = []
    for i, prompt in enumerate(PROMPTS):
        box = driver.find_element(By.ID, "prompt")
        box.clear()
        box.send_keys(prompt)
        # Record every change of data-busy, #send's disabled flag and #status while the turn runs.
        driver.execute_script("""
          window.__turnLog = [];
          const send = document.getElementById('send'), status = document.getElementById('status');
          const note = () => window.__turnLog.push([document.body.dataset.busy, send.disabled, status.textContent]);
          if (window.__turnObserver) window.__turnObserver.disconnect();
          window.__turnObserver = new MutationObserver(note);
          window.__turnObserver.observe(document.body, {attributes: true, attributeFilter: ['data-busy']});
          window.__turnObserver.observe(send, {attributes: true, attributeFilter: ['disabled']});
          window.__turnObserver.observe(status, {childList: true, characterData: true, subtree: true});""")
        driver.find_element(By.ID, "send").click()
        st = _wait(driver, server, f"answer {i + 1}",
                   lambda s: len(s["answers"]) == i + 1 and s["answers"][i]["state"] not in (None, "streaming")
                   and s["busy"] == "0", ANSWER_TIMEOUT)
        assert st["status"] == "ready" and not st["sendDisabled"], st
        log = driver.execute_script("return window.__turnLog;")
        assert ["1", True, "generating"] in log, f"never busy with #send disabled and 'generating': {log}"
        a = st["answers"][i]
        assert a["state"] == "done", a
        assert a["text"].strip(), f"answer {i + 1} is empty: {a}"
        kv = a["kv"]
        assert kv, a
        figures = {k: _int(kv, k) for k in ["cacheEntries", "cacheBytes", "longestHead", "originalTokens",
                                             "compactions", "reusedTokens", "prefilledTokens", "promptTokens",
                                             "completionTokens"]}
        assert figures["cacheEntries"] > 0, kv
        assert figures["cacheBytes"] == figures["cacheEntries"] * ENTRY_BYTES, kv
        assert 0 < figures["longestHead"] <= 512, kv
        assert figures["compactions"] == 0, kv  # two short turns stay far below --ctx 512
        assert figures["reusedTokens"] + figures["prefilledTokens"] == figures["promptTokens"], kv
        assert figures["completionTokens"] >= 1, kv
        assert kv.get("session"), kv
        # The figures are shown as text too: exact bytes and a human-readable size.
        shown = a["kvText"].replace(",", "")
        assert str(figures["cacheEntries"]) in shown and f"({figures['cacheBytes']} bytes)" in shown, a["kvText"]
        assert re.search(r"\d(\.\d+)? (B|KiB|MiB|GiB)", a["kvText"]), a["kvText"]

        # The same conversation in GET /slots: the session whose id and token count match.
        status, body = http_get(server.url + "/slots")
        assert status == 200, (status, body)
        slots = json.loads(body)
        assert isinstance(slots, list), body
        match = [s for s in slots if s.get("id") == kv["session"] and s.get("tokens") == figures["originalTokens"]]
        assert len(match) == 1, f"no session {kv['session']} with {figures['originalTokens']} tokens in /slots: {slots}"
        s = match[0]
        assert s["cache_entries"] == figures["cacheEntries"], (s, kv)
        assert s["cache_bytes"] == figures["cacheBytes"], (s, kv)
        assert s["longest_head"] == figures["longestHead"], (s, kv)
        assert s["compactions"] == figures["compactions"], (s, kv)
        assert s["in_memory"] is True, s
        turns.append(figures)

    first, second = turns
    assert second["originalTokens"] > first["originalTokens"], turns
    assert second["cacheEntries"] > first["cacheEntries"], turns
    # The page resends the whole conversation; the server takes turn 1's prompt from its cache.
    assert second["promptTokens"] > first["promptTokens"], turns
    assert second["reusedTokens"] >= first["promptTokens"], turns
