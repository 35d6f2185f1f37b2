"""A real browser for the tests: Debian's Chromium, driven headless through Debian's
chromedriver over the W3C WebDriver protocol (plain HTTP and JSON: a few requests, so no
client library; selenium's current releases pin newer versions of packages requirements.lock
holds). Every session starts from a fresh profile and talks to nothing but this machine."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def executables() -> tuple[str | None, str | None]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/lib/chromium/chromedriver" if Path("/usr/lib/chromium/chromedriver").exists() else None
    )
    return browser, driver


class WebDriverError(RuntimeError):
    pass


class Browser:
    """One headless Chromium session: `with Browser(profile_dir) as b: b.open(url) ...`."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1000):
        self.browser, self.driver = executables()
        if not (self.browser and self.driver):
            raise WebDriverError(
                "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
            )
        self.profile, self.size = Path(profile), (width, height)

    def __enter__(self) -> Browser:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [self.driver, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        t0 = time.monotonic()
        while True:
            try:
                self._call("GET", "/status", session=False)
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() - t0 > 30 or self.proc.poll() is not None:
                    raise WebDriverError("chromedriver did not start") from None
                time.sleep(0.1)
        args = [*FLAGS, f"--user-data-dir={self.profile}", f"--window-size={self.size[0]},{self.size[1]}"]
        caps = {"browserName": "chrome", "goog:chromeOptions": {"binary": self.browser, "args": args}}
        self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}}, session=False)[
            "sessionId"
        ]
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._call("DELETE", "")
        except (WebDriverError, urllib.error.URLError, ConnectionError):
            pass
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _call(self, method: str, path: str, body: dict | None = None, session: bool = True):
        url = f"http://127.0.0.1:{self.port}" + (f"/session/{self.session}" if session else "") + path
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            value = json.loads(e.read() or b"{}").get("value", {})
            raise WebDriverError(f"{method} {path}: {value.get('error')}: {value.get('message', '')[:300]}") from None

    # --- what a test does -----------------------------------------------------
    def open(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def run(self, script: str, *args):
        """JavaScript in the page (a function body; `arguments` are args), its return value."""
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css: str) -> dict:
        return self._call("POST", "/element", {"using": "css selector", "value": css})

    def find_xpath(self, xpath: str) -> dict:
        return self._call("POST", "/element", {"using": "xpath", "value": xpath})

    def find_text(self, text: str, tag: str = "*") -> dict:
        """The innermost element whose own text is `text`."""
        return self._call("POST", "/element", {"using": "xpath", "value": f"//{tag}[normalize-space(text())='{text}']"})

    def click(self, element: dict) -> None:
        self._call("POST", f"/element/{element[ELEMENT]}/click")

    def wait_for(self, script: str, timeout: float = 15.0):
        """Poll `script` (returning a value) until it returns something truthy."""
        t0 = time.monotonic()
        while True:
            v = self.run(script)
            if v or time.monotonic() - t0 > timeout:
                return v
            time.sleep(0.2)

    def frame(self, element: dict | None) -> None:
        """Into an iframe (None: back to the page)."""
        if element is None:
            self._call("POST", "/frame/parent")
        else:
            self._call("POST", "/frame", {"id": element})

    def screenshot(self, path: Path) -> Path:
        Path(path).write_bytes(base64.b64decode(self._call("GET", "/screenshot")))
        return Path(path)
