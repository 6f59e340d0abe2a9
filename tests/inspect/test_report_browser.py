"""kfmt report's page as a person sees it: opened in a real headless Chromium (support.browser) for the
samples, the Kafka 4.1 broker's log directory and a damaged copy. The page must make no request but
its own file and log nothing to the console, and what it shows -- the census, each partition's
segment count, the totals, every finding -- must be what `kfmt info` and `kfmt verify` say."""
from __future__ import annotations

from collections import defaultdict

import pytest
from selenium.webdriver.common.by import By
from support.browser import start_browser, text_of, visit
from support.cli import run_kfmt
from support.report_inputs import (
    SAMPLES,
    corpus4_log_dir,
    corpus36_log_dir,
    damaged_samples,
    info_json,
    verify_json,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.needs("chromium")]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = start_browser(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """kind -> (the input, its report page), each written once by `kfmt report -o`."""
    made = {}

    def page_of(kind: str):
        if kind not in made:
            root = tmp_path_factory.mktemp(kind)
            source = {"samples": lambda: SAMPLES, "kafka36": lambda: corpus36_log_dir(root),
                      "kafka4": lambda: corpus4_log_dir(root), "damaged": lambda: damaged_samples(root),
                      "damaged-deep": lambda: damaged_samples(root)}[kind]()
            html = root / "report.html"
            result = run_kfmt("report", source, "-o", html, "--no-progress", "--sample-bytes", "65536",
                              *DEPTH[kind])
            assert result.code == 0, result.err
            made[kind] = source, html
        return made[kind]

    return page_of


#: the page of the damaged copy at --deep too: its findings are then verify --deep's
DEPTH = defaultdict(tuple, {"damaged-deep": ("--deep",)})


@pytest.fixture(params=["samples", "kafka36", "kafka4", "damaged", "damaged-deep"])
def page(request, pages):
    return pages(request.param)


def test_opens_without_errors_or_requests(browser, page):
    _source, html = page
    seen = visit(browser, html.as_uri())
    assert seen.console == []
    assert seen.requests == [html.as_uri()]
    assert browser.title.startswith("kfmt report: ")


def _cells(browser, selector: str) -> list[list[str]]:
    return [[text_of(td) for td in row.find_elements(By.TAG_NAME, "td")]
            for row in browser.find_elements(By.CSS_SELECTOR, selector)][1:]  # the header row has <th>s


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_census_and_segment_counts_are_info_s(browser, page):
    source, html = page
    visit(browser, html.as_uri())
    infos = info_json(source)
    census = defaultdict(lambda: [0, 0, 0])
    for info in infos.values():
        for f in info["formats"]:
            row = census[(info["topic"], str(f["magic"]), f["compression"])]
            for i, key in enumerate(("batches", "records", "bytes")):
                row[i] += f[key]
    shown = {(t, m, c): [_number(b), _number(r), _number(n)]
             for t, m, c, b, r, n in _cells(browser, "#census-table tr")}
    read_by_info = {i["topic"] for i in infos.values()}
    assert {k: v for k, v in shown.items() if k[0] in read_by_info} == dict(census)
    blocks = {b.get_attribute("id"): b for b in browser.find_elements(By.CSS_SELECTOR, "details.partition")}
    for name, info in infos.items():
        block = blocks[f"p-{name}"]
        assert text_of(block.find_element(By.CSS_SELECTOR, "summary .segments")) == f"{info['segments']:,} segments"
        assert len(block.find_elements(By.CSS_SELECTOR, ".segments-table tr")) == info["segments"] + 1
    segments = sum(_number(b.get_attribute("data-segments")) for b in blocks.values())
    assert text_of(browser.find_element(By.CSS_SELECTOR, "#total-segments b")) == f"{segments:,}"


def test_findings_are_verify_s_and_lead_to_their_partition(browser, page):
    source, html = page
    visit(browser, html.as_uri())
    deep = "--deep" in DEPTH[html.parent.name.rstrip("0123456789")]
    problems = verify_json(source, *(("--deep",) if deep else ()))["problems"]
    depth = text_of(browser.find_element(By.ID, "verify-depth"))
    assert depth.startswith("Depth: deep" if deep else "Depth: log recovery")
    rows = browser.find_elements(By.CSS_SELECTOR, "#findings-table tr.finding")
    assert len(rows) == len(problems)
    for row, problem in zip(rows, problems):
        cells = [text_of(td) for td in row.find_elements(By.TAG_NAME, "td")]
        assert cells[0] == problem["severity"] and cells[1] == problem["check"] and cells[3] == problem["file"]
        assert cells[4] == ("" if problem["position"] is None else f"{problem['position']:,}")
        assert cells[6] == " ".join(problem["message"].split())
    status = text_of(browser.find_element(By.CSS_SELECTOR, "#total-verify b"))
    assert status == ("OK" if not any(p["severity"] == "error" for p in problems) else "FAILED")
    linked = browser.find_elements(By.CSS_SELECTOR, "#findings-table tr.error td a")
    if not linked:
        return
    target = linked[0].get_attribute("href").split("#", 1)[1]
    linked[0].click()  # the page's script opens the partition (and the segment table) it points into
    opened = browser.find_element(By.ID, target)
    assert opened.is_displayed()
    assert browser.execute_script("return document.getElementById(arguments[0]).closest('details.partition').open",
                                  target)


def test_internal_topics_shown_are_offsets_and_the_metadata_log_s(browser, pages):
    source, html = pages("kafka4")
    visit(browser, html.as_uri())
    offsets = run_kfmt("offsets", source)
    commits = offsets.lines[1:]
    assert len(_cells(browser, "#offsets-table tr")) == len(commits)
    groups = {line.split("\t")[0] for line in commits}
    assert {row[0] for row in _cells(browser, "#groups-table tr")} >= groups
    assert text_of(browser.find_element(By.ID, "metadata-version")) == "27"


def test_the_damaged_partitions_say_where_info_stopped(browser, pages):
    _source, html = pages("damaged")
    visit(browser, html.as_uri())
    block = browser.find_element(By.ID, "p-v1-gzip-0")
    assert "kfmt info stopped" in text_of(block) and "runs past the end of the data" in text_of(block)
    states = [text_of(row.find_elements(By.TAG_NAME, "td")[1]) for row in
              block.find_elements(By.CSS_SELECTOR, ".segments-table tr")[1:]]
    assert states.count("unreadable") == 1


def test_a_page_that_asks_for_anything_is_caught(browser, page, tmp_path):
    """The checks above see requests: the same page with one remote image added by hand logs the
    Content-Security-Policy's refusal, and the request it would have made is in the log."""
    _source, html = page
    tampered = tmp_path / "tampered.html"
    tampered.write_text(html.read_text().replace("<h1>", '<img src="http://127.0.0.1:9/x.png"><h1>', 1))
    seen = visit(browser, tampered.as_uri())
    assert any("Content Security Policy" in entry["message"] for entry in seen.console)
    assert "http://127.0.0.1:9/x.png" in seen.requests
