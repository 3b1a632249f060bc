"""The web console in a real headless Chromium (Debian's, with its chromidriver, which `make
browser` installs) against a real server: log in with a token, see the subscriptions, open
one and count its drawn automaton's nodes against ``cesar explain --json``, try a query
that fails and one that compiles, look at the shards.  Screenshots land in
build/screenshots/, the test's artifacts."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from cesar.client import Client
from cesar.perf.serverproc import CESAR, QUERIES, STOCK, Server, sample_events

T = TypeVar("T")
SHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium'}", "--window-size=1280,900",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-a alice\ntok-b bob\ntok-root root scope=admin\n")
    server = Server(
        tmp_path / "data",
        *("--tokens", str(tokens), "--console-port", "0", "--snapshot-every-batches", "5"),
    ).start()
    assert server.process is not None and server.process.stdout is not None
    url = server.process.stdout.readline().split()[1]
    try:
        yield server, url
    finally:
        server.stop()


def until(driver: WebDriver, read: Callable[[WebDriver], T]) -> T:
    """Wait up to 30 s for ``read(driver)`` to be truthy and return it; an element the page
    re-rendered under the read (its live views redraw every few seconds) means read again."""
    wait = WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(read)


def wait_for(driver: WebDriver, css: str) -> list:  # type: ignore[type-arg]
    return until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, css))


def read_all(driver: WebDriver, css: str, read: Callable[[WebElement], T]) -> list[T]:
    """Read every element matching ``css`` at once, once some match; again if one went stale."""
    return until(driver, lambda d: [read(e) for e in d.find_elements(By.CSS_SELECTOR, css)])


NAMES = {"tok-a": "alice", "tok-b": "bob", "tok-root": "root (admin)"}


def log_in(driver: WebDriver, url: str, token: str) -> None:
    driver.get(url)
    field = wait_for(driver, "#token")[0]
    field.clear()
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    until(driver, lambda d: d.find_element(By.ID, "who").text == NAMES[token])


def test_the_console_shows_a_clients_subscriptions_automata_and_queries(served, browser) -> None:  # type: ignore[no-untyped-def]
    server, url = served
    SHOTS.mkdir(parents=True, exist_ok=True)
    with Client(server.address, token="tok-a") as alice:
        sub = alice.subscribe(QUERIES[1].read_text())
        rows = [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in sample_events()]
        alice.publish("Stock", rows)
    log_in(browser, url, "tok-a")
    (row,) = wait_for(browser, f'tr[data-subscription="{sub.id}"]')
    assert "Drops" in row.text and "key:Name" in row.text
    streams = [r.get_attribute("data-stream") for r in wait_for(browser, "tr[data-stream]")]
    assert streams == ["Drops", "Stock"]
    stock = browser.find_element(By.CSS_SELECTOR, 'tr[data-stream="Stock"]')
    newest = stock.find_element(By.CSS_SELECTOR, "td[data-newest]")
    newest_pair = ("26729040", "2020-10-26T20:00Z")
    assert (newest.get_attribute("data-newest"), newest.text) == newest_pair
    assert stock.find_element(By.CSS_SELECTOR, "td[data-lag]").text.endswith(" days")
    settled = stock.find_element(By.CSS_SELECTOR, "td[data-settled]")  # the publish closed it
    assert (settled.get_attribute("data-settled"), settled.text) == newest_pair
    assert stock.find_element(By.CSS_SELECTOR, "td[data-accepted]").text == "2,340"
    assert stock.find_element(By.CSS_SELECTOR, "td[data-rejected]").text == "none"
    browser.save_screenshot(str(SHOTS / "subscriptions.png"))

    row.find_element(By.TAG_NAME, "a").click()
    circles = wait_for(browser, "svg.automaton circle[data-node]")
    explained = subprocess.run(
        [str(CESAR), "explain", "--json", "--stream", STOCK, str(QUERIES[1])],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    automata = json.loads(explained.stdout)["automata"]
    assert len(circles) == sum(len(a["nodes"]) for a in automata)
    held = read_all(browser, "#runtime td[data-held]", lambda cell: cell.text)
    assert len(held) == 2 and all(text.endswith(" of 50,000") for text in held)
    assert browser.find_element(By.ID, "alert-rate").text.startswith("48 alerts")
    assert browser.find_element(By.ID, "events-in").text.startswith("2,340 events in")
    assert browser.find_element(By.ID, "latency").text.startswith("alert latency (publish")
    placed = browser.find_elements(By.CSS_SELECTOR, "main table tr[data-sharers]")
    assert placed and all(r.get_attribute("data-sharers") == "1" for r in placed)
    latest = browser.find_elements(By.CSS_SELECTOR, "main table tr[data-seq]")
    assert [int(r.get_attribute("data-seq")) for r in latest] == list(range(48, 28, -1))
    edges = browser.find_elements(By.CSS_SELECTOR, "svg.automaton path[data-edge]")
    assert len(edges) == sum(len(a["edges"]) for a in automata)
    assert "Subscription s1" in browser.find_element(By.TAG_NAME, "h2").text
    browser.save_screenshot(str(SHOTS / "subscription.png"))

    browser.get(url + "#/try")
    query = wait_for(browser, "#query")[0]
    query.send_keys("FILTER{Price >}(Stock)")
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    (error,) = wait_for(browser, "pre.error")
    assert error.text.startswith("INVALID_ARGUMENT: line 1, column 15: unexpected '}'")
    assert error.text.endswith("^")
    browser.save_screenshot(str(SHOTS / "try-error.png"))
    query.clear()
    query.send_keys("FILTER{Price > 3000}(Stock) PUBLISH Big")
    browser.find_element(By.CSS_SELECTOR, "main form button").click()
    assert wait_for(browser, "#explained svg.automaton circle[data-node]")
    browser.save_screenshot(str(SHOTS / "try.png"))
    browser.find_element(By.ID, "run-sample").click()
    (result,) = wait_for(browser, "#sample-result")
    amazon = sum(1 for e in sample_events() if float(e.attrs()["Price"]) > 3000)
    assert result.text.startswith(f"{amazon} alerts on the bundled day")
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr.sample-alert")) == min(amazon, 100)
    browser.save_screenshot(str(SHOTS / "try-sample.png"))
    browser.find_element(By.ID, "run-recent").click()  # the quotes alice published above
    until(
        browser,
        lambda d: d.find_element(By.ID, "sample-result").text.startswith(
            f"{amazon} alerts on the server's latest 2340 events"
        ),
    )

    browser.get(url + "#/shards")
    assert "subscriptions" in read_all(browser, "main table td", lambda cell: cell.text)
    charts = read_all(browser, "figure[data-chart]", lambda c: c.get_attribute("data-chart"))
    assert charts == ["alerts", "open"]  # alice's own only: her alerts and her open epochs
    log_in(browser, url + "#/shards", "tok-root")
    until(
        browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "figure[data-chart] polyline")) == 8
    )
    backlog = read_all(browser, "tr[data-backlog]", lambda r: r.get_attribute("data-backlog"))
    assert backlog == ["0", "1"]
    last = max(e.t1 for e in sample_events())
    more = [{"t1": last + k, "Name": "IBM", "Price": 1.0, "Volume": 1} for k in range(1, 301)]
    with Client(server.address, token="tok-a") as alice:
        alice.publish("Stock", more, batch=30)
    until(
        browser,  # the next samples see the quotes arrive, and keep them
        lambda d: all(
            "peak 0 "
            not in d.find_element(By.CSS_SELECTOR, f'figure[data-chart="{c}"] figcaption').text
            for c in ("events", "latency")
        ),
    )
    events = 'figure[data-chart="events"] '
    ticks = read_all(browser, events + "text.tick", lambda t: t.text)
    assert ticks[0] == "0" and ticks[-3:] == ["−2 min", "−1 min", "now"]
    assert read_all(browser, events + "text.unit", lambda t: t.text) == ["events/s"]
    checkpoints = "tr[data-checkpoint]"  # 3 batches of the day and 10 of 30: at 5 and 10
    until(
        browser,
        lambda d: (
            [
                r.get_attribute("data-checkpoint")
                for r in d.find_elements(By.CSS_SELECTOR, checkpoints)
            ]
            == ["10", "5"]
        ),
    )
    memory = 'tr[data-counter="rss_bytes"]'  # the front's first, then each shard's
    cells = read_all(
        browser, memory, lambda r: [td.text for td in r.find_elements(By.TAG_NAME, "td")]
    )
    group, name, value = cells[0]
    assert (group, name) == ("Memory, log and checkpoints", "rss, MB") and float(value) > 10
    browser.save_screenshot(str(SHOTS / "shards.png"))


def test_another_token_sees_none_of_those_subscriptions(served, browser) -> None:  # type: ignore[no-untyped-def]
    server, url = served
    with Client(server.address, token="tok-a") as alice:
        sub = alice.subscribe(QUERIES[1].read_text())
    log_in(browser, url, "tok-b")
    heading = wait_for(browser, "main h2")[0]
    assert heading.text == "Subscriptions (0)"
    streams = [r.get_attribute("data-stream") for r in wait_for(browser, "tr[data-stream]")]
    assert streams == ["Stock"]  # alice's Drops is hers
    browser.get(f"{url}#/subscription/{sub.id}")
    (error,) = wait_for(browser, "pre.error")
    assert error.text == f"NOT_FOUND: no subscription '{sub.id}' of yours"


def test_live_alerts_appear_as_they_are_made_and_pause(served, browser) -> None:  # type: ignore[no-untyped-def]
    """The live view is open before any quote: the alerts of the first half of the sample
    appear; paused, the second half's are held (not shown); resumed, they appear; the
    filter keeps one subscription's rows."""
    server, url = served
    events = sample_events()
    half = len(events) // 2
    while events[half].t1 == events[half - 1].t1:
        half += 1
    rows = [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in events]
    with Client(server.address, token="tok-a") as alice:
        sub = alice.subscribe(QUERIES[1].read_text())
        log_in(browser, url, "tok-a")
        browser.get(url + "#/alerts")
        until(browser, lambda d: d.find_element(By.ID, "alert-status").text == "live")
        alice.publish("Stock", rows[:half])
        first = alice.subscriptions()[0].last_seq
        until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#alerts tr")) == first)
        browser.find_element(By.ID, "pause").click()
        alice.publish("Stock", rows[half:])
        total = alice.subscriptions()[0].last_seq
        assert total > first
        browser.find_element(By.ID, "pause").click()  # resume: the held alerts appear
        until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#alerts tr")) == total)
    seqs = [
        int(r.get_attribute("data-seq"))
        for r in browser.find_elements(By.CSS_SELECTOR, "#alerts tr")
    ]
    assert seqs == list(range(total, 0, -1))  # newest first
    headings = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "main thead th")]
    assert headings == ["subscription", "seq", "time", "Name", "Before", "After"]  # Drops'
    newest = browser.find_elements(By.CSS_SELECTOR, "#alerts tr")[0]
    assert newest.find_element(By.CSS_SELECTOR, 'td[data-attribute="Name"]').text in {
        e.attrs()["Name"] for e in events
    }
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / "alerts.png"))
    browser.find_element(By.ID, "alert-filter").send_keys("s9")
    assert not [r for r in browser.find_elements(By.CSS_SELECTOR, "#alerts tr") if r.is_displayed()]
    assert sub.id == "s1"
    browser.get(url + "#/subscriptions")  # a new view: the backlog from seq 11 of s1
    browser.get(url + "#/alerts")
    until(browser, lambda d: d.find_element(By.ID, "alert-status").text == "live")
    browser.find_element(By.ID, "alert-filter").send_keys("s1")
    browser.find_element(By.ID, "alert-from").send_keys("11")
    browser.find_element(By.ID, "alert-back").click()
    until(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#alerts tr")) == total - 10)
    shown = [
        int(r.get_attribute("data-seq"))
        for r in browser.find_elements(By.CSS_SELECTOR, "#alerts tr")
    ]
    assert shown == list(range(total, 10, -1))


def test_a_query_subscribed_from_try_a_query_shows_its_alerts_live(served, browser) -> None:  # type: ignore[no-untyped-def]
    """The issue's path: paste a query, subscribe it from the page, open the live view,
    publish quotes, and see its alerts arrive."""
    server, url = served
    log_in(browser, url, "tok-a")
    browser.get(url + "#/try")
    wait_for(browser, "#query")[0].send_keys(QUERIES[1].read_text())
    browser.find_element(By.ID, "subscribe").click()
    until(browser, lambda d: d.current_url.endswith("#/subscription/s1"))
    assert wait_for(browser, "svg.automaton circle[data-node]")
    browser.get(url + "#/alerts")
    until(browser, lambda d: d.find_element(By.ID, "alert-status").text == "live")
    rows = [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in sample_events()]
    with Client(server.address, token="tok-a") as alice:
        (sub,) = alice.subscriptions()
        assert (sub.id, sub.owner, sub.stream) == ("s1", "alice", "Drops")
        alice.publish("Stock", rows)
        total = alice.subscriptions()[0].last_seq
    until(
        browser,
        lambda d: (
            len(d.find_elements(By.CSS_SELECTOR, '#alerts tr[data-subscription="s1"]')) == total
        ),
    )


def test_the_pages_work_from_the_keyboard(served, browser) -> None:  # type: ignore[no-untyped-def]
    """Tab from the page's start reaches each page link in order, and Enter opens it."""
    from selenium.webdriver.common.keys import Keys

    _, url = served
    log_in(browser, url, "tok-a")
    browser.refresh()  # the token stays for the tab; focus starts at the page's top
    wait_for(browser, "main h2")
    reached = []
    for _ in range(4):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        reached.append(browser.switch_to.active_element.text)
    assert reached == ["Subscriptions", "Live alerts", "Shards", "Try a query"]
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    assert wait_for(browser, "textarea#query")
    link = browser.find_element(By.CSS_SELECTOR, 'nav a[href="#/try"]')
    assert link.get_attribute("aria-current") == "page"


NESTED = (
    "PATTERN SEQ(Stock a, OR(SEQ(Stock b, Stock c), Stock d)) WHERE [Name] AND b.Price > a.Price"
    " AND c.Price < b.Price AND d.Volume > 400000 WITHIN 10 MIN PUBLISH Either"
)
UNION = "FILTER{Price > 3000} Stock UNION FILTER{Volume > 400000} Stock PUBLISH Big"


def drawn(browser: WebDriver, drawing: str) -> list[dict[str, object]]:
    """Each drawing of a kind on the page: its node ids, its edges' paths and label places."""
    return browser.execute_script(  # type: ignore[no-any-return]
        """return [...document.querySelectorAll(arguments[0])].map((svg) => ({
          nodes: [...svg.querySelectorAll("circle[data-node]")].map((c) => c.dataset.node),
          paths: [...svg.querySelectorAll("path[data-edge]")].map((p) => p.getAttribute("d")),
          labels: [...svg.querySelectorAll("text[data-label]")].map(
            (t) => [t.getAttribute("x"), t.getAttribute("y"), t.textContent]),
        }));""",
        f"svg.{drawing}",
    )


def test_a_patterns_page_shows_its_plan_and_form_and_draws_every_edge_apart(
    served, browser
) -> None:  # type: ignore[no-untyped-def]
    server, url = served
    with Client(server.address, token="tok-a") as alice:
        plan = alice.explain(NESTED)
        pattern = alice.subscribe(NESTED)
        union = alice.subscribe(UNION)
    log_in(browser, url, "tok-a")
    browser.get(url + f"#/subscription/{pattern.id}")
    wait_for(browser, "svg.place circle[data-node]")
    text = browser.find_element(By.ID, "main").text
    assert "undefined" not in text and "not a planned pattern" not in text
    explained = json.loads(subprocess.run(
        [str(CESAR), "explain", "--json", "--stream", STOCK, NESTED],
        capture_output=True, text=True, check=True,
    ).stdout)  # fmt: skip
    assert browser.find_element(By.ID, "plan").text == explained["plan"]
    assert browser.find_element(By.ID, "pattern").text == explained["pattern"]
    assert not browser.find_elements(By.ID, "algebra") and "plan: eager" in plan
    for automaton in drawn(browser, "automaton"):  # loops of one node nest: no label on another
        places = [(x, y) for x, y, _ in automaton["labels"]]
        assert len(set(places)) == len(places)
        kinds = ("forward", "filter", "stay", "rebind")
        assert all(text.startswith(kinds) for *_, text in automaton["labels"])
    table = browser.find_elements(By.CSS_SELECTOR, "main table tr[data-sharers]")
    ids = set()
    for row in table:
        source, target = row.find_elements(By.TAG_NAME, "td")[3].text.split(" → ")
        ids |= {source, target}
    assert {n for d in drawn(browser, "place") for n in d["nodes"]} == ids
    browser.save_screenshot(str(SHOTS / "pattern.png"))
    browser.find_element(By.CSS_SELECTOR, "svg.place").screenshot(str(SHOTS / "pattern-place.png"))
    automaton_drawing = browser.find_element(By.CSS_SELECTOR, "svg.automaton")
    automaton_drawing.screenshot(str(SHOTS / "pattern-automaton.png"))

    browser.get(url + f"#/subscription/{union.id}")
    wait_for(browser, "#algebra")  # the union's page drawn (the pattern's before it has none)
    (automaton,) = drawn(browser, "automaton")
    assert len(automaton["paths"]) == 2 and len(set(automaton["paths"])) == 2
    conditions = sorted(label for *_, label in automaton["labels"])
    assert conditions == ["forward StockPrice > 3000", "forward StockVolume > 400000"]
    assert browser.find_element(By.ID, "algebra").text.startswith("∪")
