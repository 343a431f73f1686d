"""A headless Chromium for tests, driven through chromedriver's W3C WebDriver HTTP interface.

No client library: chromedriver speaks JSON over HTTP, which ``urllib`` sends.  Debian's
packages ``chromium`` and ``chromium-driver`` provide both programs (``.ci/run`` installs
them).  :class:`Browser` keeps one Chromium session for many pages; :meth:`Browser.open` (and
:func:`open_page`, one page in a browser of its own) loads a file and reports, for every
``<img>``, whether it loaded (``complete`` and a non-zero natural size), plus a screenshot
of the whole page.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests._ports import free_port

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver",)


def _which(names: tuple[str, ...]) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


def missing() -> str | None:
    """Why no browser test can run here (None when chromium and chromedriver are installed)."""
    if _which(CHROMIUM) is None or _which(DRIVER) is None:
        return ("headless Chromium is not installed: apt-get install -y chromium chromium-driver "
                "(.ci/run does this)")
    return None


@dataclass
class PageCheck:
    title: str
    images: list[dict[str, Any]]
    tables: int
    screenshot: bytes
    width: int
    height: int


def _call(base: str, method: str, path: str, body: dict | None = None, timeout: float = 120.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read().decode() or "{}").get("value")


class Browser:
    """One chromedriver and one headless Chromium session, for any number of pages.

    Starting Chromium costs more than loading a page, so the page tests share one
    (``with Browser() as browser: browser.open(path)``).
    """

    def __init__(self, *, width: int = 1280):
        self.width = width
        port = free_port()
        self._driver = subprocess.Popen([_which(DRIVER), f"--port={port}"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self._base = f"http://127.0.0.1:{port}"
        self._session = None
        try:
            give_up = time.monotonic() + 60
            while True:
                try:
                    _call(self._base, "GET", "/status", timeout=5)
                    break
                except OSError:
                    if time.monotonic() > give_up or self._driver.poll() is not None:
                        raise RuntimeError("chromedriver did not start") from None
                    time.sleep(0.1)
            options = {"binary": _which(CHROMIUM),
                       "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                f"--window-size={width},900"]}
            self._session = _call(self._base, "POST", "/session", {"capabilities": {"alwaysMatch": {
                "browserName": "chrome", "goog:chromeOptions": options}}})["sessionId"]
        except BaseException:
            self.close()
            raise

    def _do(self, method: str, path: str, body: dict | None = None) -> Any:
        return _call(self._base, method, f"/session/{self._session}{path}", body)

    def open(self, path: Path) -> PageCheck:
        """Load ``path`` and return what the page shows (the window sized to the whole page)."""
        self._do("POST", "/window/rect", {"width": self.width, "height": 900})
        self._do("POST", "/url", {"url": path.resolve().as_uri()})
        script = """return {title: document.title, tables: document.querySelectorAll('table').length,
            width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight,
            images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete,
                width: i.naturalWidth, height: i.naturalHeight, shown: i.getBoundingClientRect().width}))};"""
        info = self._do("POST", "/execute/sync", {"script": script, "args": []})
        height = min(int(info["height"]) + 40, 16000)
        self._do("POST", "/window/rect", {"width": self.width, "height": height})
        shot = base64.b64decode(self._do("GET", "/screenshot"))
        return PageCheck(info["title"], info["images"], info["tables"], shot, int(info["width"]),
                         int(info["height"]))

    def close(self) -> None:
        try:
            if self._session is not None:
                _call(self._base, "DELETE", f"/session/{self._session}")
        finally:
            self._session = None
            self._driver.terminate()
            self._driver.wait(timeout=30)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_page(path: Path, *, width: int = 1280) -> PageCheck:
    """Load ``path`` in a headless Chromium of its own and return what the page shows."""
    with Browser(width=width) as browser:
        return browser.open(path)
