"""The console in Chromium against a real worker process (Spark, SQLite store), over HTTP.

One walk through what an operator does: create a function from a package
with the form, watch its processed count rise on the chart, read a state
key, drain it and see it STOPPED with the drain in its lifecycle record,
peek at its output topic, look at the worker. The keyboard drives it where
a user without a mouse would (shortcuts, labels, Tab order). With
``SPARKFN_SCREENSHOTS=1`` each page's screenshot goes to docs/images/console/.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from console_browser import screenshot
from playwright.sync_api import Page, expect
from worker_process import SharedWorker

from sparkfn.topics.producer import Producer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FUNCS = Path(__file__).resolve().parent / "funcs"
SENTENCES = ["apple banana", "apple cherry", "banana apple apple"]
ROUNDS = 10

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("shared_worker", ["sqlite"], indirect=True)]


def _produce(url: str, topic: str, values: list[str]) -> None:
    sent = httpx.post(
        f"{url}/topics/persistent/public/default/{topic}",
        json={"messages": [{"payload": v, "key": f"k{i}"} for i, v in enumerate(values)]},
        timeout=60,
    )
    assert sent.status_code == 200, sent.text


@pytest.mark.long_running(25)
def test_create_watch_drain_read_state_and_peek(shared_worker: SharedWorker, page: Page) -> None:
    url = shared_worker.url
    for topic in ("console-in", "console-out"):
        made = httpx.put(
            f"{url}/admin/v2/persistent/public/default/{topic}/partitions",
            json={"partitions": 2, "schemaType": "string"},
        )
        assert made.status_code == 204, made.text

    page.goto(url + "/")
    expect(page.get_by_role("heading", name="Functions")).to_be_visible()
    page.keyboard.press("n")  # the shortcut to a new function
    expect(page.get_by_role("heading", name="New function")).to_be_visible()

    # Checked in the browser as the CLI checks a config: nothing is sent.
    page.get_by_label("Name", exact=True).fill("bad name!")
    page.get_by_role("button", name="Create").click()
    expect(page.locator("#f-name-problem")).to_contain_text("'bad name!' is not a valid name")
    expect(page.locator("#f-inputs-problem")).to_contain_text("needs inputs (or topics_pattern)")
    expect(page.locator("#f-file-problem")).to_contain_text("give the package")
    expect(page.get_by_label("Name", exact=True)).to_be_focused()  # the first bad field
    assert httpx.get(f"{url}/admin/v3/functions/public/default").json() == []
    screenshot(page, "new-function")

    page.get_by_label("Name", exact=True).fill("console-wc")
    page.get_by_label("Package (.py, .zip, .whl)").set_input_files(str(EXAMPLES / "wordcount.py"))
    page.get_by_label("Class name").fill("wordcount.WordCount")
    page.get_by_label("Output", exact=True).fill("console-out")
    page.get_by_label("Processing guarantees").select_option("effectively_once")
    page.get_by_label("Parallelism").fill("2")
    # What only the worker can check it checks, and the form shows its answer.
    # (A missing topic is no refusal: topics are created on first use. A class the
    # package does not have is.)
    page.get_by_label("Inputs").fill("console-in")
    page.get_by_label("Class name").fill("wordcount.Nowhere")
    page.get_by_role("button", name="Create").click()
    refused = page.locator("form .error")
    expect(refused).to_contain_text("function_load_error")
    expect(refused).to_contain_text("Nowhere")
    page.get_by_label("Class name").fill("wordcount.WordCount")
    page.get_by_label("Output", exact=True).press("Enter")  # submits, as a form does

    expect(page).to_have_url(re.compile(r"#/functions/public/default/console-wc$"), timeout=120_000)
    head = page.locator(".page-head .badge")
    expect(head).to_have_text(re.compile("RUNNING|PARKED"), timeout=120_000)
    processed = page.get_by_test_id("processed-total")
    expect(processed).to_have_text("0")

    _produce(url, "console-in", SENTENCES * ROUNDS)
    total = len(SENTENCES) * ROUNDS
    expect(processed).to_have_text(str(total), timeout=120_000)
    throughput = page.get_by_test_id("chart-throughput")
    # The chart polls: a second point arrives on its next refresh, however fast the rise was.
    expect(throughput).to_have_attribute(
        "data-points", re.compile(r"^([2-9]|[1-9][0-9]+)$"), timeout=30_000
    )
    rows = page.get_by_test_id("instances").locator("tbody tr")
    expect(rows).to_have_count(2)
    # Per instance too: the two instances' processed counts add up to the total.
    processed_cells = rows.locator("td:nth-child(4)")
    page.wait_for_function(
        "([selector, total]) => [...document.querySelectorAll(selector)]"
        ".reduce((sum, td) => sum + Number(td.textContent.replace(/,/g, '')), 0) === total",
        arg=["[data-testid=instances] tbody tr td:nth-child(4)", total],
        timeout=30_000,
    )
    assert processed_cells.count() == 2

    # The state browser: each sentence's words are counters (examples/wordcount.py).
    page.get_by_label("Key", exact=True).first.fill("apple")
    page.get_by_role("button", name="Get").click()
    expect(page.get_by_test_id("state-value")).to_have_text(str(4 * ROUNDS))
    screenshot(page, "function")

    page.get_by_role("group", name="Lifecycle", exact=True).get_by_role(
        "button", name="drain"
    ).click()
    expect(head).to_have_text("STOPPED", timeout=120_000)
    transitions = page.get_by_test_id("transitions")
    expect(transitions).to_contain_text("drain", timeout=30_000)
    expect(transitions.locator("tbody tr").first).to_contain_text("STOPPED")
    status = httpx.get(f"{url}/admin/v3/functions/public/default/console-wc/status").json()
    assert status["state"] == "STOPPED"

    page.keyboard.press("Escape")
    page.locator("body").focus()
    page.keyboard.press("t")
    expect(page.get_by_role("heading", name="Topics")).to_be_visible()
    page.get_by_role("link", name="console-out").click()
    expect(page.get_by_test_id("partitions").locator("tbody tr")).to_have_count(2)
    page.get_by_role("button", name="Peek").click()
    messages = page.get_by_test_id("message")
    expect(messages).to_have_count(10)  # the latest 5 of each partition
    expect(messages.first).to_contain_text(re.compile("apple|banana"))
    screenshot(page, "topic")
    page.get_by_role("link", name="console-in").count()  # the list page is one step back
    page.go_back()
    expect(page.get_by_role("link", name="console-in")).to_be_visible()
    # schema, partitions, appended, retained, subscriptions, lag
    cells = ["string", "2", str(total), str(total), "1", "0"]
    in_row = page.locator("tr[data-topic='public/default/console-in'] td")
    expect(in_row).to_have_text(["console-in", *cells])
    out_row = page.locator("tr[data-topic='public/default/console-out'] td")
    expect(out_row).to_have_text(["console-out", *cells[:4], "0", "0"])
    screenshot(page, "topics")

    page.goto(url + "/#/functions/public/default/console-in-nothing")  # a name that is not there
    expect(page.get_by_role("alert").first).to_contain_text("function_not_found")

    page.goto(url + "/#/worker")
    facts = page.get_by_test_id("worker-facts")
    expect(facts).to_contain_text("local[1]")
    expect(facts).to_contain_text("0.1.0")
    expect(page.get_by_test_id("states")).to_contain_text("STOPPED")
    # Its store's cluster: this worker alone, its leader (a SQLite store serves one worker).
    me = page.get_by_test_id("cluster").locator("tbody tr")
    expect(me).to_have_count(1)
    expect(me).to_contain_text("(this one)")
    expect(me).to_contain_text("leader")
    screenshot(page, "worker")

    page.goto(url + "/#/functions")
    expect(page.locator("tr[data-fqfn='public/default/console-wc']")).to_contain_text("STOPPED")
    screenshot(page, "functions")


@pytest.mark.long_running(15)
def test_exceptions_death_instance_actions_update_and_state_put(
    shared_worker: SharedWorker, page: Page
) -> None:
    url = shared_worker.url
    for topic in ("picky-in", "picky-out", "fatal-in"):
        made = httpx.put(
            f"{url}/admin/v2/persistent/public/default/{topic}",
            json={"schemaType": "string"},
        )
        assert made.status_code == 204, made.text
    with (FUNCS / "picky.py").open("rb") as code:
        made = httpx.post(
            f"{url}/admin/v3/functions/public/default/picky",
            data={"functionConfig": '{"inputs": ["picky-in"], "output": "picky-out"}'},
            files={"data": ("picky.py", code)},
            timeout=120,
        )
    assert made.status_code == 200, made.text

    page.goto(url + "/#/functions/public/default/picky")
    head = page.locator(".page-head .badge")
    expect(head).to_have_text(re.compile("RUNNING|PARKED"), timeout=120_000)
    _produce(url, "picky-in", ["fine", "bad apple"])
    exceptions = page.get_by_role("region", name="Exceptions")
    user = exceptions.locator("details").filter(has_text="cannot take 'bad apple'")
    expect(user).to_have_count(1, timeout=120_000)
    expect(user).to_contain_text("ValueError")
    user.locator("summary").click()
    expect(user.locator("pre.trace")).to_contain_text("raise ValueError")
    expect(page.get_by_test_id("chart-exceptions")).to_contain_text("1 in all")

    # Per instance: restart instance 0, and the record says so.
    page.get_by_role("button", name="restart instance 0").click()
    expect(page.get_by_role("status").filter(has_text="restart: done")).to_be_visible()
    expect(page.get_by_test_id("transitions")).to_contain_text("restart", timeout=30_000)

    # Put a counter and a text, read them back.
    page.get_by_label("Key", exact=True).nth(1).fill("seen")
    page.get_by_label("Kind").select_option("counter")
    page.get_by_label("Value").fill("5")
    page.get_by_role("button", name="Put").click()
    expect(page.get_by_role("status").filter(has_text="seen saved")).to_be_visible()
    page.get_by_label("Key", exact=True).first.fill("seen")
    page.get_by_role("button", name="Get").click()
    expect(page.get_by_test_id("state-value")).to_have_text("5")
    page.get_by_label("Value").fill("abc")
    page.get_by_role("button", name="Put").click()
    expect(page.locator("#state-title ~ .error")).to_contain_text("a counter is a whole number")

    # Update: two instances now; the old version drains, v2 is current.
    page.get_by_role("link", name="Update…").click()
    expect(page.get_by_label("Inputs")).to_have_value(
        re.compile(r"^(persistent://)?public/default/picky-in$")
    )
    page.get_by_label("Parallelism").fill("2")
    page.get_by_role("button", name="Update").click()
    expect(page).to_have_url(re.compile(r"#/functions/public/default/picky$"), timeout=120_000)
    expect(page.get_by_text("v2 · wanted running")).to_be_visible(timeout=30_000)
    expect(page.get_by_test_id("instances").locator("tbody tr")).to_have_count(2, timeout=60_000)
    expect(page.get_by_label("Version")).to_have_value("2")
    page.get_by_label("Version").select_option("1")
    expect(page.locator("pre.json")).to_contain_text('"parallelism": 1', timeout=30_000)

    # Per instance, from the keyboard: suspend instance 1; it stops, instance 0 runs on.
    page.get_by_role("button", name="suspend instance 1").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status").filter(has_text="suspend: done")).to_be_visible()
    one = page.locator("[data-testid=instances] tbody tr[data-instance='1']")
    expect(one).to_contain_text("STOPPED", timeout=60_000)
    zero = page.locator("[data-testid=instances] tbody tr[data-instance='0']")
    expect(zero).to_contain_text(re.compile("RUNNING|PARKED"))
    expect(page.get_by_test_id("transitions")).to_contain_text("suspended", timeout=30_000)

    # A death: the instance ends with context.fatal; its exception and traceback show.
    with (FUNCS.parent.parent / "funcs" / "fatal_on_message.py").open("rb") as code:
        made = httpx.post(
            f"{url}/admin/v3/functions/public/default/fatal",
            data={"functionConfig": '{"inputs": ["fatal-in"]}'},
            files={"data": ("fatal_on_message.py", code)},
            timeout=120,
        )
    assert made.status_code == 200, made.text
    page.goto(url + "/#/functions/public/default/fatal")
    expect(head).to_have_text(re.compile("RUNNING|PARKED"), timeout=120_000)
    _produce(url, "fatal-in", ["last straw"])
    death = page.locator("details.death")
    expect(death).to_contain_text("cannot go on after 'last straw'", timeout=120_000)
    expect(death.locator("pre.trace")).not_to_be_empty()
    expect(head).to_have_text("ERROR", timeout=120_000)
    expect(page.get_by_test_id("transitions").locator("tbody tr").first).to_contain_text(
        "ERROR", timeout=30_000
    )
    screenshot(page, "function-error")


def test_a_peek_shows_json_pretty_and_binary_as_hex(
    shared_worker: SharedWorker, page: Page
) -> None:
    url = shared_worker.url
    for topic, kind in (("peek-json", "json"), ("peek-bytes", "bytes")):
        made = httpx.put(
            f"{url}/admin/v2/persistent/public/default/{topic}", json={"schemaType": kind}
        )
        assert made.status_code == 204, made.text
    _produce(url, "peek-json", ['{"id": 7, "tags": ["a", "b"]}'])
    with Producer(shared_worker.store, "public/default/peek-bytes") as producer:
        producer.send(b"\x00\xff\x10binary")
        producer.send(b"plain words")

    page.goto(url + "/#/topics/public/default/peek-json")
    page.get_by_role("button", name="Peek").click()
    message = page.get_by_test_id("message")
    expect(message.locator(".payload")).to_have_attribute("data-kind", "json")
    expect(message.locator("pre")).to_have_text(
        '{\n  "id": 7,\n  "tags": [\n    "a",\n    "b"\n  ]\n}'
    )
    message.get_by_role("button", name="hex").click()
    expect(message.locator("pre")).to_contain_text("7b 22 69 64 22")  # {"id"

    page.goto(url + "/#/topics/public/default/peek-bytes")
    page.get_by_role("button", name="Peek").click()
    messages = page.get_by_test_id("message")
    expect(messages).to_have_count(2)
    text = page.locator(".payload[data-kind='text'] pre")
    expect(text).to_have_text(["plain words"])
    binary = page.locator(".payload[data-kind='binary'] pre")
    expect(binary).to_have_text(["00 ff 10 62 69 6e 61 72 79"])
