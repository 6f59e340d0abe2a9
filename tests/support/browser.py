"""A real headless Chromium, the distribution's (`apt-get install chromium chromium-driver`, which
.ci/run does), driven through its chromedriver by Selenium: pages are opened as a person opens them,
and what the browser logged -- console messages and every network request (the DevTools
performance log's Network events) -- is read back.

Tests mark themselves `needs("chromium")` (support.tools): without Chromium or its driver they skip,
saying so; with KFMT_REQUIRE_BROWSER=1 (.ci/run sets it once it has installed them) they fail instead,
so CI never skips them silently."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import pytest
from support.tools import chromium

# The flags of a browser that must reach nothing of its own accord: no first-run pages, no update
# checks, no sync, no field trials (a request it made by itself would read as the page's).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--window-size=1200,900")


@dataclass
class Visit:
    """What the browser logged while a page was open."""

    console: list[dict] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, itself included

# The browser's own pages (its new-tab page loads dozens of chrome:// resources at start) are not the
# page's requests; anything else any document asked for is.
OWN_PAGES = ("chrome://", "chrome-untrusted://", "devtools://")


def start_browser(user_data_dir):
    """A headless Chromium under Selenium's control with an empty profile (a test that calls this
    carries the needs("chromium") marker)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = chromium()
    if found is None:
        pytest.fail("KFMT_REQUIRE_BROWSER is set, but there is no Chromium with its chromedriver on PATH")
    browser, driver = found
    os.environ.setdefault("SE_AVOID_STATS", "true")  # Selenium's own usage statistics: no request
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={user_data_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def visit(driver, url: str) -> Visit:
    """Open `url` and return what the browser logged while it loaded (the logs are read first, which
    empties them, so a visit sees its own page only)."""
    driver.get("about:blank")
    driver.get_log("performance")
    driver.get_log("browser")
    driver.get(url)
    driver.execute_script("return document.readyState")
    seen = Visit(console=driver.get_log("browser"))
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] != "Network.requestWillBeSent":
            continue
        params = message["params"]
        if params.get("documentURL", "").startswith(OWN_PAGES) and params["request"]["url"].startswith(
                OWN_PAGES + ("data:",)):
            continue
        seen.requests.append(params["request"]["url"])
    return seen


def text_of(element) -> str:
    """The element's text whether or not it is shown (a closed <details> hides its contents, and
    Selenium's .text is only what is visible)."""
    return " ".join((element.get_attribute("textContent") or "").split())
