"""End-to-end test of the voting page in a real headless Chromium (selenium + chromedriver).

Needs Debian's ``chromium`` and ``chromium-driver`` packages; skips with a reason otherwise.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from recsys_router.judge.store import JudgeStore
from recsys_router.judge.web import create_app
from test_judge_helpers import tiny_data
from test_judge_web import LiveServer, make_session, responses_of

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else shutil.which("chromedriver")

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                 reason="headless browser test needs Debian's chromium and chromium-driver "
                                        "(apt-get install -y chromium chromium-driver)")]


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver   # the test extra's dependency: a missing one is a failure
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,1000", f"--user-data-dir={tmp_path / 'chrome-profile'}"):
        opts.add_argument(flag)
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


def test_vote_reveal_stats_in_browser(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(browser, 20)
    data = tiny_data()
    answers = responses_of(data)
    with LiveServer(create_app(make_session(tmp_path / "j.db"))) as srv:
        browser.get(srv.url + "/")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#prompt option")) == 4)
        Select(browser.find_element(By.ID, "prompt")).select_by_value("qb")
        browser.find_element(By.ID, "start-picked").click()
        wait.until(EC.visibility_of_element_located((By.ID, "duel")))
        wait.until(lambda d: d.find_element(By.ID, "answer-A").text.strip() != "")
        assert browser.find_element(By.ID, "query").text == "beta?"
        shown_a = browser.find_element(By.ID, "answer-A").text
        shown_b = browser.find_element(By.ID, "answer-B").text
        assert not browser.find_element(By.ID, "reveal").is_displayed()  # identities hidden before the vote
        browser.refresh()  # a reload in the middle of a duel keeps it
        wait.until(lambda d: d.find_element(By.ID, "answer-A").text == shown_a)
        assert browser.find_element(By.ID, "answer-B").text == shown_b
        wait.until(EC.element_to_be_clickable((By.ID, "vote-A")))
        browser.find_element(By.ID, "vote-A").click()
        wait.until(EC.visibility_of_element_located((By.ID, "reveal")))
        llm_a = browser.find_element(By.ID, "llm-A").text
        llm_b = browser.find_element(By.ID, "llm-B").text
        # the reveal names the LLMs whose recorded answers were shown
        assert shown_a == answers.loc["qb", llm_a] and shown_b == answers.loc["qb", llm_b]
        assert browser.find_element(By.ID, "cost-A").text == "$" + {"x": "1.00", "y": "2.00", "z": "3.00"}[llm_a]
        rows = browser.find_elements(By.CSS_SELECTOR, "#router-votes tbody tr")
        cells = {r.find_elements(By.TAG_NAME, "td")[0].text: [c.text for c in r.find_elements(By.TAG_NAME, "td")]
                 for r in rows}
        assert {k: v[1] for k, v in cells.items()} == {"fx": "x", "fy": "y", "pz": "z"}
        for router, (_, llm, score) in cells.items():
            assert score == ("1" if llm == llm_a else "0" if llm == llm_b else "does not participate")
        assert all(not b.is_enabled() for b in browser.find_elements(By.CSS_SELECTOR, "button.vote"))
        record_id = browser.find_element(By.ID, "record-id").text
        browser.save_screenshot(str(tmp_path / "routejudge_reveal.png"))
        recs = JudgeStore(tmp_path / "j.db").records()
        assert len(recs) == 1
        assert (recs[0].record_id, recs[0].query_id, recs[0].label, recs[0].llm_a, recs[0].llm_b) == \
            (record_id, "qb", "A", llm_a, llm_b)

        browser.find_element(By.ID, "stats-link").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")) == 3)
        assert browser.find_element(By.ID, "n-records").text == "1 records"
        top = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")[0].find_elements(By.TAG_NAME, "td")
        winner = next(r for r, (_, llm, _s) in cells.items() if llm == llm_a)
        assert top[1].text == winner  # the router that chose the winning answer leads
        assert len(browser.find_elements(By.CSS_SELECTOR, "#h2h tbody tr")) == 3
        shot = tmp_path / "routejudge_stats.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
        browser.get(srv.url + "/")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#prompt option")) == 4)
        browser.save_screenshot(str(tmp_path / "routejudge_vote.png"))


def test_live_mode_custom_prompt_in_browser(tmp_path, browser, monkeypatch):
    import threading
    from http.server import ThreadingHTTPServer

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from recsys_router.judge.web import load_backends
    from test_judge_web import _FakeOpenAI

    fake = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    monkeypatch.setenv("FAKE_KEY", "sekrit")
    url = f"http://127.0.0.1:{fake.server_address[1]}/v1"
    (tmp_path / "b.yaml").write_text("".join(f"{m}: {{base_url: '{url}', model: m-{m}, api_key_env: FAKE_KEY}}\n"
                                             for m in "xyz"))
    wait = WebDriverWait(browser, 20)
    try:
        session = make_session(tmp_path / "j.db", backends=load_backends(tmp_path / "b.yaml", ["x", "y", "z"]))
        with LiveServer(create_app(session)) as srv:
            browser.get(srv.url + "/")
            wait.until(EC.visibility_of_element_located((By.ID, "custom-text")))
            browser.find_element(By.ID, "custom-text").send_keys("Why is the sky blue?")
            browser.find_element(By.ID, "start-custom").click()
            wait.until(lambda d: d.find_element(By.ID, "answer-B").text.strip() != "")
            shown_a = browser.find_element(By.ID, "answer-A").text
            browser.find_element(By.ID, "vote-both_bad").click()
            wait.until(EC.visibility_of_element_located((By.ID, "reveal")))
            llm_a = browser.find_element(By.ID, "llm-A").text
            assert shown_a == f"m-{llm_a} live: Why is the sky blue? [1 msg]"
            assert browser.find_element(By.ID, "verdict").text == "both are bad"
    finally:
        fake.shutdown()
    rec = JudgeStore(tmp_path / "j.db").records()[0]
    assert (rec.query, rec.label, rec.llm_a, rec.metadata["source"]) == ("Why is the sky blue?", "both_bad", llm_a, "live")
    assert all(v is None or v == 0.0 for v in rec.attribution.values())
