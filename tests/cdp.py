"""Open a page in headless Chromium and read its DOM and console, through the DevTools protocol on a pipe.

Chromium started with --remote-debugging-pipe reads protocol commands from file descriptor 3 and writes replies
and events to descriptor 4, each message JSON ended by a NUL byte (the transport Playwright and Puppeteer use).
No websocket, no port and no package beyond the standard library: only the browser binary.

    with Browser(path) as browser:
        page = browser.open("file:///tmp/report.html")
        page.evaluate("document.title"), page.errors
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# The flags the workplace's probe ran Debian's Chromium with as root in a sandboxed container: no sandbox, no GPU,
# and none of the background connections a closed network refuses (env/machines/python.md).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--remote-debugging-pipe")
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_ENV = "KERNELCAST_CHROMIUM"  # a browser binary to use instead of the first of CANDIDATES on PATH
TIMEOUT_S = 60.0
SETTLE_S = 0.5  # after the load event: late console messages (image decoding, layout) still arrive
PIPE_IN_FD, PIPE_OUT_FD = 3, 4
HIGH_FD = 100  # above any descriptor a test process holds open


def find_chromium() -> str | None:
    if os.environ.get(BROWSER_ENV):
        return os.environ[BROWSER_ENV]
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


class ProtocolError(RuntimeError):
    pass


@dataclass
class Page:
    browser: "Browser"
    session: str
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, browser log errors

    def evaluate(self, expression: str):
        reply = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                  session=self.session)
        if "exceptionDetails" in reply:
            raise ProtocolError(f"{expression!r} raised: {reply['exceptionDetails']}")
        return reply["result"].get("value")


class Browser:
    def __init__(self, binary: str) -> None:
        self.binary = binary
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict] = []

    def __enter__(self) -> "Browser":
        self._profile = tempfile.mkdtemp(prefix="kernelcast-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: the protocol's descriptors 3 and 4
            # first out of the way (either end may itself be 3 or 4), then into place
            high_in, high_out = (fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD) for fd in (to_browser_r, from_browser_w))
            os.dup2(high_in, PIPE_IN_FD)
            os.dup2(high_out, PIPE_OUT_FD)

        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, preexec_fn=wire_pipes,
            pass_fds=(PIPE_IN_FD, PIPE_OUT_FD))
        os.close(to_browser_r)
        os.close(from_browser_w)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.call("Browser.close", timeout_s=5.0)
        except (ProtocolError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        self._log.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def stderr_tail(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def _send(self, message: dict) -> None:
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"no answer from {self.binary} in time; its log:\n{self.stderr_tail()}")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    raise ProtocolError(f"{self.binary} closed the pipe; its log:\n{self.stderr_tail()}")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float = TIMEOUT_S) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._send(message)
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ProtocolError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _wait_for(self, method: str, session: str, deadline: float) -> None:
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method and event.get("sessionId") == session:
                    del self._events[i]
                    return
            self._events.append(self._receive(deadline))

    def _drain(self, until: float) -> None:
        """Keep reading events until `until` (monotonic seconds)."""
        while True:
            try:
                self._events.append(self._receive(until))
            except ProtocolError as exc:
                if "in time" in str(exc):
                    return
                raise

    def open(self, url: str, width: int | None = None, height: int = 800) -> Page:
        """Load `url` in a new tab (a window `width` x `height` CSS pixels where width is given); the page's
        console errors, exceptions and log errors land in Page.errors."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=session)
        if width is not None:
            self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                              "deviceScaleFactor": 1, "mobile": False},
                      session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        self._wait_for("Page.loadEventFired", session, time.monotonic() + TIMEOUT_S)
        self._drain(time.monotonic() + SETTLE_S)
        page = Page(self, session)
        page.errors = [text for e in self._events if e.get("sessionId") == session
                       for text in [_error_text(e)] if text]
        return page


def _error_text(event: dict) -> str | None:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return "console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description", "")))
                                                            for a in params.get("args", []))
    if method == "Runtime.exceptionThrown":
        details = params.get("exceptionDetails", {})
        return "exception: " + str(details.get("exception", {}).get("description", details.get("text", "")))
    if method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        entry = params["entry"]
        return f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".strip()
    return None


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
