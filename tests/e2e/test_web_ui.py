"""The chat page (/) and the dashboard (/admin) in a real browser: Debian's chromium, headless,
driven by Selenium through Debian's chromedriver. One server for the module: the tiny shared model
(random weights, a real tokenizer) with cache.mode = tiered and an API key, which the pages take
from the key field as a person would type it.

Every run writes screenshots of both pages at 1280x800 into $STRATA_SCREENSHOT_DIR, else into the
test's temporary directory (the README's pictures under docs/ come from such a run). The admin API
is also tested without a browser, with httpx.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

from strata_server import DEFAULT_MODEL_FILE, metric, model_dir, model_path, start_default_server, start_server

pytestmark = pytest.mark.timeout(300)

KEY = "web-ui-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# How long the page may take to show what the server did (a release build needs well under a
# second; sanitizer builds are several times slower).
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def server():
    s = start_server(["-m", model_path("tiny-qwen2-gpt2-f16"), "--cache-mode", "tiered", "--api-key", KEY])
    yield s
    assert s.stop() == 0, "SIGTERM exits 0"


@pytest.fixture(scope="module")
def browser():
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.fail(f"{CHROMIUM} or {CHROMEDRIVER} is missing: install the Debian packages chromium and "
                    "chromium-driver (scripts/install-deps.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    # The page itself 1280x800, whatever the window's frame takes (the screenshots' size).
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    d = Path(os.environ.get("STRATA_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def wait_until(what: str, cond, deadline_s: float = DEADLINE_S):
    """Polls COND until it returns something true, and returns it; fails naming WHAT."""
    deadline = time.monotonic() + deadline_s
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not after {deadline_s} s"
        time.sleep(0.05)


def metrics(server) -> str:
    return httpx.get(f"{server.base_url}/metrics", headers=AUTH, timeout=30).text


def open_page(browser, server, path: str) -> None:
    """Opens PATH with the API key in the browser's storage, as the key field leaves it."""
    browser.get(f"{server.base_url}{path}")
    browser.execute_script("localStorage.setItem('strata.apiKey', arguments[0]);", KEY)
    browser.get(f"{server.base_url}{path}")


def by_css(browser, css: str):
    from selenium.webdriver.common.by import By
    return browser.find_elements(By.CSS_SELECTOR, css)


# Read in one script call: the chat page redraws its messages as tokens come, so an element found
# by one WebDriver call may be gone by the next.
LAST_MATCH = "const all = document.querySelectorAll(arguments[0]); return all.length ? all[all.length - 1] : null;"


def text_of(browser, css: str) -> str:
    """The visible text of the last element matching CSS ("" when none)."""
    return browser.execute_script(f"const e = (() => {{ {LAST_MATCH} }})(); return e ? e.innerText : '';", css)


def attr_of(browser, css: str, name: str) -> str | None:
    """Attribute NAME of the last element matching CSS (None when none, or no such attribute)."""
    return browser.execute_script(f"const e = (() => {{ {LAST_MATCH} }})(); return e ? e.getAttribute(arguments[1]) : null;",
                                  css, name)


def new_chat(browser, *, max_tokens: int, extra: str = "") -> None:
    """A fresh conversation with these settings."""
    by_css(browser, "#new-chat")[0].click()
    for field, value in (("max_tokens", str(max_tokens)), ("extra", extra), ("temperature", "0")):
        browser.execute_script("const e = document.getElementById(arguments[0]); e.value = arguments[1];"
                               "e.dispatchEvent(new Event('change'));", field, value)


def send(browser, text: str) -> None:
    box = by_css(browser, "#input")[0]
    box.clear()
    box.send_keys(text)
    by_css(browser, "#send")[0].click()


def answering(browser) -> bool:
    return browser.execute_script("return !document.getElementById('stop').disabled;")


def answers(browser) -> int:
    return browser.execute_script("return document.querySelectorAll('.msg.assistant').length;")


def cached_of_last_answer(browser) -> int:
    return int(attr_of(browser, ".msg.assistant .stats .cached", "data-cached") or -1)


# Watches the last answer every 5 ms: records the lengths of its text seen while Stop was enabled
# (the stream still open), so a test can tell an answer that grew from one that came at once.
WATCH_STREAMING = """
window.__seen = [];
clearInterval(window.__watch);
window.__watch = setInterval(() => {
  const answers = document.querySelectorAll('.msg.assistant .content');
  const last = answers[answers.length - 1];
  if (last && !document.getElementById('stop').disabled) window.__seen.push(last.textContent.length);
}, 5);
"""


def test_the_chat_page_shows_an_answer_as_it_streams_and_its_figures_when_done(server, browser):
    open_page(browser, server, "/")
    wait_until("the model's name shows", lambda: "tiny" in text_of(browser, "#model"))
    new_chat(browser, max_tokens=300, extra='{"ignore_eos": true}')
    browser.execute_script(WATCH_STREAMING)
    send(browser, "Say something.")
    wait_until("the answer starts", lambda: answering(browser))
    wait_until("the answer ends", lambda: not answering(browser))
    seen = [n for n in browser.execute_script("return window.__seen") if n > 0]
    final = len(text_of(browser, ".msg.assistant .content"))
    assert seen and min(seen) < final, f"no partial answer was shown while streaming (lengths {seen[:5]}…, final {final})"
    stats = text_of(browser, ".msg.assistant .stats")
    assert "TTFT" in stats and "tok/s" in stats and "prompt tokens" in stats and "cached" in stats, stats
    assert "300 generated" in stats, stats


def test_stop_ends_a_long_answer_midway_and_the_server_stops_generating(server, browser):
    open_page(browser, server, "/")
    new_chat(browser, max_tokens=4000, extra='{"ignore_eos": true}')
    before = metric(metrics(server), "strata_generated_tokens_total")
    send(browser, "Tell me a very long story.")
    wait_until("the answer streams", lambda: answering(browser) and len(text_of(browser, ".msg.assistant .content")) > 20)
    by_css(browser, "#stop")[0].click()
    wait_until("the page shows it stopped", lambda: "stopped" in text_of(browser, ".msg.assistant .stats"))
    # The server lets go of the request: nothing runs, and the count of generated tokens stays.
    wait_until("nothing runs", lambda: metric(metrics(server), "strata_requests_running") == 0)
    settled = metric(metrics(server), "strata_generated_tokens_total")
    time.sleep(0.5)
    assert metric(metrics(server), "strata_generated_tokens_total") == settled, "still generating after Stop"
    assert settled - before < 3000, f"{settled - before} tokens: the request ran to its end"


def test_the_cached_token_figure_rises_on_the_second_turn(server, browser, shots):
    open_page(browser, server, "/")
    new_chat(browser, max_tokens=24, extra='{"ignore_eos": true}')
    send(browser, "Here is a question long enough to fill a few blocks of the cache, about the sea, "
                  "the wind, the boats and the harbour where they wait for the morning tide to turn.")
    wait_until("the first answer ends", lambda: answers(browser) == 1 and not answering(browser))
    first = cached_of_last_answer(browser)
    send(browser, "And what about the lighthouse?")
    wait_until("the second answer ends", lambda: answers(browser) == 2 and not answering(browser))
    second = cached_of_last_answer(browser)
    assert second > first >= 0, f"cached tokens: first turn {first}, second turn {second}"
    assert "RAM" in text_of(browser, ".msg.assistant .stats .cached"), "the figure names the tier"
    browser.save_screenshot(str(shots / "chat.png"))


def test_the_dashboard_numbers_follow_the_requests(server, browser, shots):
    open_page(browser, server, "/admin")
    wait_until("the stats show", lambda: text_of(browser, "#generated") not in ("", "–"))
    before = text_of(browser, "#generated")
    assert text_of(browser, "#model-id").startswith("tiny"), text_of(browser, "#model-id")
    assert text_of(browser, "#ssd-state") == "on"
    for turn in range(3):  # the same opening each time: hits to chart
        r = httpx.post(f"{server.base_url}/v1/chat/completions", headers=AUTH, timeout=120,
                       json={"messages": [{"role": "user", "content": "Count the waves by the shore. " * 6 + str(turn)}],
                             "max_tokens": 40, "ignore_eos": True})
        assert r.status_code == 200, r.text
        time.sleep(0.6)
    wait_until("the generated count changes", lambda: text_of(browser, "#generated") != before)
    wait_until("a TTFT percentile shows", lambda: text_of(browser, "#ttft-p50").endswith("s"))
    browser.save_screenshot(str(shots / "admin.png"))


def test_the_dashboard_switches_the_cache_mode_and_clears_each_tier(server, browser):
    from selenium.webdriver.support.ui import Select

    open_page(browser, server, "/admin")
    wait_until("the stats show", lambda: text_of(browser, "#cache-mode") == "tiered")
    Select(by_css(browser, "#mode-select")[0]).select_by_value("hot")
    by_css(browser, "#mode-apply")[0].click()
    wait_until("the mode shows hot", lambda: text_of(browser, "#cache-mode") == "hot")

    # Something cached in RAM, then the RAM tier cleared.
    httpx.post(f"{server.base_url}/v1/chat/completions", headers=AUTH, timeout=120,
               json={"messages": [{"role": "user", "content": "Fill a block or two " * 8}], "max_tokens": 8})
    ram = lambda: int(attr_of(browser, "#ram-cached", "data-bytes") or -1)  # noqa: E731
    wait_until("the RAM tier holds cached blocks", lambda: ram() > 0)
    by_css(browser, "#clear-hot")[0].click()
    wait_until("the RAM tier is empty", lambda: ram() == 0)

    # Back to tiered; the SSD tier holds what earlier requests wrote through; cleared after a confirm.
    Select(by_css(browser, "#mode-select")[0]).select_by_value("tiered")
    by_css(browser, "#mode-apply")[0].click()
    wait_until("the mode shows tiered", lambda: text_of(browser, "#cache-mode") == "tiered")
    ssd = lambda: int(attr_of(browser, "#ssd-records", "data-records") or -1)  # noqa: E731
    wait_until("the SSD tier holds records", lambda: ssd() > 0)
    by_css(browser, "#clear-ssd")[0].click()
    browser.switch_to.alert.accept()
    wait_until("the SSD tier is empty", lambda: ssd() == 0)
    assert "SSD tier cleared" in text_of(browser, "#clear-note")


def test_the_pages_fetch_nothing_from_outside_and_forbid_it(server, browser):
    browser.get_log("browser")  # what earlier tests left (a Stop's aborted stream)
    for path in ("/", "/admin"):
        open_page(browser, server, path)
        time.sleep(0.5)
        urls = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert urls, f"{path}: no resource loaded?"
        outside = [u for u in urls if not u.startswith(server.base_url + "/")]
        assert not outside, f"{path} fetched {outside}"
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, f"{path}: console errors {errors}"
        r = httpx.get(f"{server.base_url}{path}")
        assert r.status_code == 200, "the pages answer without a key"
        assert "default-src 'self'" in r.headers["content-security-policy"]


def test_the_default_model_answers_on_the_chat_page(browser, shots):
    """The one check against the real default model (SmolLM2-135M-Instruct): a real answer, rendered."""
    if not (model_dir() / DEFAULT_MODEL_FILE).is_file():
        pytest.fail(f"the default model is not in {model_dir()}: run scripts/fetch-model.sh")
    real = start_default_server(["--cache-mode", "hot", "--api-key", KEY])
    try:
        open_page(browser, real, "/")
        browser.execute_script("const e = document.getElementById('system'); e.value = arguments[0];"
                               "e.dispatchEvent(new Event('change'));",
                               "You are a knowledgeable assistant. Answer in one short sentence.")
        new_chat(browser, max_tokens=40)
        send(browser, "What is the capital of France?")
        wait_until("the answer ends", lambda: answers(browser) == 1 and not answering(browser), 120)
        assert "Paris" in text_of(browser, ".msg.assistant .content"), text_of(browser, ".msg.assistant")
        send(browser, "And of Italy?")
        wait_until("the second answer ends", lambda: answers(browser) == 2 and not answering(browser), 120)
        assert cached_of_last_answer(browser) > 0, "the second turn reuses the first one's prefix"
        browser.save_screenshot(str(shots / "chat-default-model.png"))
    finally:
        assert real.stop() == 0


# --- the admin API, without a browser ---------------------------------------------------------------

def admin(server, path: str, body=None, headers=AUTH) -> httpx.Response:
    url = f"{server.base_url}/admin/api/{path}"
    if body is None:
        return httpx.get(url, headers=headers, timeout=30)
    return httpx.post(url, headers=headers, timeout=30, content=body if isinstance(body, bytes) else json.dumps(body))


def test_the_admin_api_needs_the_key_but_the_pages_and_assets_do_not(server):
    assert admin(server, "stats", headers={}).status_code == 401
    assert admin(server, "cache/mode", {"mode": "hot"}, headers={}).status_code == 401
    assert admin(server, "cache/clear", {"tier": "hot"}, headers={}).status_code == 401
    for asset in ("chart.min.js", "highlight.min.js", "marked.min.js", "chat.js", "style.css"):
        r = httpx.get(f"{server.base_url}/assets/{asset}")
        assert r.status_code == 200 and len(r.content) > 100, asset
    assert httpx.get(f"{server.base_url}/assets/nope.js").status_code == 404


def test_the_cache_mode_endpoint_switches_the_mode_and_refuses_a_bad_one(server):
    r = admin(server, "cache/mode", {"mode": "sideways"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "mode", r.text
    assert admin(server, "cache/mode", b"not json").status_code == 400
    for mode in ("off", "hot", "tiered"):
        r = admin(server, "cache/mode", {"mode": mode})
        assert r.status_code == 200 and r.json() == {"cache_mode": mode}, r.text
        assert admin(server, "stats").json()["cache_mode"] == mode


def test_the_clear_endpoint_empties_a_tier_and_refuses_an_unknown_one(server):
    r = admin(server, "cache/clear", {"tier": "attic"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tier", r.text
    httpx.post(f"{server.base_url}/v1/chat/completions", headers=AUTH, timeout=120,
               json={"messages": [{"role": "user", "content": "Cache me " * 20}], "max_tokens": 4})
    wait_until("something is cached", lambda: admin(server, "stats").json()["tiers"]["ram"]["bytes_cached"] > 0)
    assert admin(server, "cache/clear", {"tier": "hot"}).json() == {"cleared": "hot"}
    wait_until("the RAM tier is empty", lambda: admin(server, "stats").json()["tiers"]["ram"]["bytes_cached"] == 0)
    assert admin(server, "cache/clear", {"tier": "ssd"}).json() == {"cleared": "ssd"}
    wait_until("the SSD tier is empty", lambda: admin(server, "stats").json()["tiers"]["ssd"]["records"] == 0)
