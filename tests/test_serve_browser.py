"""mosbench serve in a real browser: Debian's Chromium, headless, driven through selenium, against a waitress
server on a free port over the lab's store (tests/test_serve.py's). One browser for the module: every page
loads without a JavaScript error (the browser's log, where a Content-Security-Policy violation lands too), a
graph draws its points, hovering one names its run, a triage made through the form is there after a reload
and in the JSON, a signed-out browser has no way to triage, and store text shows as text."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import Request, urlopen

import pytest

from mosbench.web import serving
from mosbench.web.app import create_app
from tests.test_serve import EVIL_HOST, EVIL_KERNEL, SCRIPT, SECRET, TOKENS, make_lab_store

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian's chromium and chromium-driver (scripts/apt-packages.txt; Ubuntu has Chromium as a snap only)")

WAIT_S = 20


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The server on a free loopback port, and the lab's run ids."""
    path = tmp_path_factory.mktemp("browser-lab") / "lab.sqlite"
    ids = make_lab_store(path)
    app = create_app(str(path), TOKENS)
    served = serving.start(app, "127.0.0.1", 0)
    yield served.url.rstrip("/"), ids
    served.stop()
    app.extensions["mosbench.lab"].close()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def errors(driver) -> list[str]:
    """The browser's errors since last asked: scripts', resources' and the policy's."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait_drawn(driver):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT_S).until(ec.presence_of_element_located((By.CSS_SELECTOR, "#graph[data-drawn='1']")))


def submitted(driver, button: str) -> None:
    """Clicks a form's button and waits for the page it leads to (a click does not wait for the load)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    pressed = driver.find_element(By.ID, button)
    pressed.click()
    # Asked while the old page is being replaced, chromedriver may answer "Node with given id does not belong
    # to the document" rather than that the element is stale: asked again, it says stale.
    WebDriverWait(driver, WAIT_S, ignored_exceptions=(WebDriverException,)).until(ec.staleness_of(pressed))


def fetch(url: str, method: str = "GET", data: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
    try:
        with urlopen(Request(url, method=method, data=data, headers=headers or {}), timeout=30) as r:
            return r.status, r.read().decode()
    except HTTPError as e:
        return e.code, e.read().decode()


def api(url: str) -> dict:
    status, text = fetch(url)
    assert status == 200, (url, text)
    return json.loads(text)


def drawn(url: str, within_s: float = 120.0) -> None:
    """A report asked for until drawn: a page that frames it then loads it whole (while it is drawn, the
    frame's 503 is one the browser's log counts, and the frame reloads itself)."""
    deadline = time.monotonic() + within_s
    while (status := fetch(url)[0]) == 503 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert status == 200, url


def summary_id(base: str, *machines: str) -> int:
    found = api(f"{base}/api/alerts")
    return next(s["id"] for s in found if sorted(s["machines"]) == sorted(machines))


def test_every_page_loads_without_a_javascript_error(lab, browser):
    base, ids = lab
    errors(browser)  # what came before
    drawn(f"{base}/runs/{ids[EVIL_HOST][-1]}/report")
    drawn(f"{base}/compare/report?a={ids['big4s'][0]}&b={ids['arm'][0]}")
    pages = ["/", "/alerts", f"/alerts/{summary_id(base, 'arm', 'big4s')}", "/graphs", "/graphs?order=kernel",
             "/graphs/cores", f"/runs/{ids[EVIL_HOST][-1]}", f"/compare?a={ids['big4s'][0]}&b={ids['arm'][0]}",
             "/signin", "/alerts?state=fixed", "/runs/99999"]
    for path in pages:
        browser.get(base + path)
        if path.startswith("/graphs"):
            wait_drawn(browser)
        found = errors(browser)
        if path == "/runs/99999":  # the 404 itself is logged as a failed load, and only it
            assert len(found) == 1 and "404" in found[0], found
            continue
        assert not found, (path, found)
        assert "mosbench lab" in browser.title, path


def test_a_graph_draws_its_points_and_hovering_names_a_run(lab, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    base, _ = lab
    browser.get(f"{base}/graphs?" + urlencode([("workload", "micro"), ("test", "t1"), ("variant", "procs"),
                                               ("cores", 8), ("machine", "big4s"), ("machine", "arm"),
                                               ("machine", "small2s")]))
    wait_drawn(browser)
    points = browser.find_elements(By.CSS_SELECTOR, "#graph .scatterlayer .trace .points path")
    # 3 machines × 18 runs × (3 trials + a mean), and the changes' marks.
    assert len(points) >= 3 * 18 * 4, len(points)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#graph .shapelayer path")) == 2  # big4s' and arm's changes
    means = [p for p in browser.find_elements(By.CSS_SELECTOR, "#graph .scatterlayer .trace:nth-child(2) .points path")]
    ActionChains(browser).move_to_element(means[5]).perform()
    hover = browser.find_element(By.CSS_SELECTOR, "#graph .hoverlayer").text
    assert "run #" in hover and "kernel 6.1.0-" in hover and "label night" in hover, hover
    assert not errors(browser)
    # A click opens the run (plotly takes it on its drag layer, where the point is).
    ActionChains(browser).move_to_element(means[5]).click().perform()
    assert "/runs/" in browser.current_url and "Run #" in browser.find_element(By.TAG_NAME, "h1").text


def test_the_papers_figure_draws_per_core_throughput_against_cores(lab, browser):
    from selenium.webdriver.common.by import By

    base, ids = lab
    chosen = [ids["big4s"][-1], ids["arm"][-1]]
    browser.get(f"{base}/graphs/cores?" + urlencode([("test", "micro/t1"), *(("run", i) for i in chosen)]))
    wait_drawn(browser)
    legend = browser.find_element(By.CSS_SELECTOR, "#graph .legend").text
    assert f"big4s #{chosen[0]} procs" in legend and f"arm #{chosen[1]} procs" in legend
    assert len(browser.find_elements(By.CSS_SELECTOR, "#graph .scatterlayer .trace .points path")) == 2 * 4 * 4
    assert not errors(browser)


def test_store_text_shows_as_text(lab, browser):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    base, ids = lab
    for path in (f"/alerts/{summary_id(base, EVIL_HOST)}", f"/runs/{ids[EVIL_HOST][-1]}",
                 f"/graphs?machine={EVIL_HOST}"):
        browser.get(base + path)
        if path.startswith("/graphs"):
            wait_drawn(browser)
            mean = browser.find_elements(By.CSS_SELECTOR, "#graph .scatterlayer .trace:nth-child(2) .points path")[0]
            ActionChains(browser).move_to_element(mean).perform()
            assert f"label {SCRIPT}" in browser.find_element(By.CSS_SELECTOR, "#graph .hoverlayer").text
        assert SCRIPT in browser.find_element(By.TAG_NAME, "body").text, path
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018 - asking is the check: no alert() ran
        assert not errors(browser), path
    # In kernel order the kernels are the axis' labels, which plotly reads as markup unless given as text.
    browser.get(f"{base}/graphs?" + urlencode({"machine": EVIL_HOST, "order": "kernel"}))
    wait_drawn(browser)
    ticks = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#graph .xtick text")]
    assert EVIL_KERNEL in ticks, ticks
    assert not errors(browser)


def test_a_triage_through_the_form_stays_and_a_signed_out_browser_cannot(lab, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base, _ = lab
    sid = summary_id(base, "arm", "big4s")
    browser.delete_all_cookies()
    browser.get(f"{base}/alerts/{sid}")
    assert not browser.find_elements(By.ID, "triage-form")
    assert "Sign in" in browser.find_element(By.ID, "triage-closed").text
    # Signed out, the form's request is refused whatever it carries.
    status, said = fetch(f"{base}/alerts/{sid}/triage", "POST", b"state=fixed&note=x",
                         {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 401 and "sign in" in said

    browser.find_element(By.CSS_SELECTOR, "#triage-closed a").click()
    browser.find_element(By.ID, "secret").send_keys(SECRET)
    submitted(browser, "signin-submit")
    assert browser.current_url == f"{base}/alerts/{sid}"
    Select(browser.find_element(By.ID, "triage-state-select")).select_by_visible_text("investigating")
    note = browser.find_element(By.NAME, "note")
    note.clear()
    note.send_keys("bisecting on big4s")
    browser.find_element(By.NAME, "link").send_keys("https://bugzilla.kernel.org/show_bug.cgi?id=42")
    submitted(browser, "triage-submit")
    browser.refresh()
    assert browser.find_element(By.ID, "state").text == "investigating"
    assert browser.find_element(By.ID, "note").text == "bisecting on big4s"
    assert browser.find_element(By.CSS_SELECTOR, "#link a").get_attribute("href").endswith("id=42")
    now = api(f"{base}/api/alerts/{sid}")
    assert (now["state"], now["note"], now["set_by"]) == ("investigating", "bisecting on big4s", "alice")
    assert not errors(browser)

    browser.find_element(By.CSS_SELECTOR, "form[action='/signout'] button").click()
    browser.get(f"{base}/alerts/{sid}")
    assert not browser.find_elements(By.ID, "triage-form")


def test_screenshots_of_the_overview_and_a_summary(lab, browser, tmp_path):
    """The README's pictures (MOSBENCH_SCREENSHOTS=DIR keeps them there): each page drawn whole, not blank."""
    from selenium.webdriver.common.by import By

    base, _ = lab
    where = Path(os.environ.get("MOSBENCH_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    browser.delete_all_cookies()
    for name, path in (("serve-overview", "/"), ("serve-alert", f"/alerts/{summary_id(base, 'arm', 'big4s')}")):
        browser.get(base + path)
        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1400, min(max(height + 40, 600), 1600))
        assert browser.find_element(By.TAG_NAME, "h1").is_displayed()
        png = where / f"{name}.png"
        assert browser.save_screenshot(str(png)) and png.stat().st_size > 20_000
    browser.set_window_size(1400, 1000)
