"""The user's path through the Prefect UI, in headless Chromium: pick a served deployment, open Run →
Custom run, edit one parameter in the form, submit, watch the run complete, and find the MLflow run
that carries the edited value and the flow-run id.

Along the way, what the form and the run page show: labels in words ("Batch size", "Number of heads"), a path
parameter as a plain text box (no "str / None" switch), the report artifact's figures drawn with no MLflow UI
running (they are inside the artifact), an out-of-range value refused on the field in Prefect's default (v2) form
before any run exists, and a cross-field rule (heads must divide the width) ending the run Failed with one line
and no traceback in its log.

Screenshots of the form and of the finished run are kept under the test's tmp folder and copied to
``test-artifacts/prefect-ui/`` at the repository root.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from paperflows import registry
from tests.conftest import keep_test_artifacts
from tests.platform.test_deploy import (
    MICRO,
    api,
    micro_project,
    mlflow_parent_run,
    paperflows_serve,
    prefect_server,
    wait_flow_run,
    wait_for,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EDITED_STEPS = MICRO["train"]["steps"] + 1
# the schema form renders one block per field, titled "<Title> (Optional)", with its input inside
FIELD_INPUT = (
    "xpath=//span[contains(@class,'schema-form-property__label') and normalize-space()='{label}']"
    "/ancestor::div[contains(concat(' ',@class,' '),' schema-form-property ')][1]//input"
)


def _deployment_runs(api_url: str, deployment_id: str) -> list[dict]:
    return api(api_url, "POST", "/flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}})[1]


def _run_logs(api_url: str, run_id: str) -> list[dict]:
    return api(api_url, "POST", "/logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "sort": "TIMESTAMP_ASC"})[
        1
    ]


@pytest.mark.slow
def test_custom_run_from_the_ui_is_tracked_in_mlflow(tmp_path: Path) -> None:
    if not CHROMIUM.is_file():
        pytest.skip(
            f"BROWSER TEST NOT RUN: {CHROMIUM} is missing (Debian package 'chromium'); the Prefect UI "
            f"path (form -> run -> MLflow) is untested on this machine"
        )
    from playwright.sync_api import sync_playwright

    shots = tmp_path / "screenshots"
    shots.mkdir()
    project = micro_project(tmp_path / "repo")
    started = time.monotonic()
    try:
        with prefect_server(tmp_path / "prefect-home") as api_url, paperflows_serve(project, api_url):
            ui = api_url.removesuffix("/api")
            deployment = api(api_url, "GET", "/deployments/name/nsot/nsot")[1]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    page.set_default_timeout(60_000)

                    # the deployments list shows one deployment per pipeline, ten to a page: find each through
                    # the search box; nsot (the fastest) last, so that the filtered list leaves it to click
                    page.goto(f"{ui}/deployments", wait_until="networkidle")
                    slugs = registry.slugs()
                    assert page.get_by_text(f"{len(slugs)} Deployments", exact=True).count() == 1
                    search = page.get_by_placeholder("Search deployments")
                    for slug in sorted(slugs, key=lambda s: s == "nsot"):
                        search.fill(slug)
                        page.get_by_text(slug, exact=True).first.wait_for()
                    link = page.locator(f"a[href*='/deployments/deployment/{deployment['id']}']").first
                    link.wait_for()
                    page.screenshot(path=str(shots / "1-deployments.png"), full_page=True)
                    link.click()
                    page.get_by_role("button", name="Run", exact=True).click()
                    page.get_by_text("Custom run", exact=True).click()

                    # the form: field descriptions from the params model; edit train.steps
                    steps = page.locator(FIELD_INPUT.format(label="Steps (Optional)"))
                    steps.wait_for()
                    assert steps.input_value() == str(MICRO["train"]["steps"])
                    assert page.get_by_text("Optimisation steps per model (the brief's length is 1500).").count() == 1
                    # labels read as words; a path parameter is a text box without a "str / None" switch
                    labels = page.locator(".schema-form-property__label").all_inner_texts()
                    assert {"Batch size (Optional)", "Number of heads (Optional)", "Learning rate (Optional)"} <= set(
                        labels
                    ), labels
                    assert not any("_" in label or "Batch Size" in label for label in labels), labels
                    path_box = page.locator(
                        FIELD_INPUT.format(label="PC15K root (Optional)").removesuffix("//input") + "//textarea"
                    )
                    assert path_box.count() == 1 and path_box.input_value() == ""
                    assert page.locator(".schema-form-property-any-of").count() == 0  # no type switch anywhere
                    assert page.get_by_text("Property is type None").count() == 0
                    steps.fill(str(EDITED_STEPS))
                    steps.scroll_into_view_if_needed()
                    page.screenshot(path=str(shots / "2-custom-run-form.png"))
                    submitted = time.time()
                    page.get_by_role("button", name="Submit").click()
                    try:
                        page.wait_for_url(f"**/deployments/deployment/{deployment['id']}*", timeout=120_000)
                    except Exception as err:
                        page.screenshot(path=str(shots / "3-after-submit.png"), full_page=True)
                        keep_test_artifacts(shots, "prefect-ui")
                        raise AssertionError(
                            "the form did not submit; the page says: "
                            + " | ".join(page.inner_text("body").splitlines()[-30:])
                        ) from err

                    # the run the form created carries the edited value
                    runs = api(
                        api_url,
                        "POST",
                        "/flow_runs/filter",
                        {
                            "flow_runs": {"deployment_id": {"any_": [deployment["id"]]}},
                            "sort": "EXPECTED_START_TIME_DESC",
                        },
                    )[1]
                    assert len(runs) == 1, runs
                    run = runs[0]
                    assert run["parameters"]["params"]["train"]["steps"] == EDITED_STEPS
                    assert run["parameters"]["params"]["seeds"] == MICRO["seeds"]  # the rest of the form kept
                    finished = wait_flow_run(api_url, run["id"], timeout=300)
                    assert finished["state"]["type"] == "COMPLETED", finished["state"]
                    trigger_to_completed = time.time() - submitted

                    page.goto(f"{ui}/runs/flow-run/{run['id']}", wait_until="networkidle")
                    page.get_by_text(run["name"]).first.wait_for()
                    page.get_by_text("Completed", exact=True).first.wait_for()
                    page.screenshot(path=str(shots / "3-finished-run.png"), full_page=True)

                    # the report artifact draws its figures itself: no MLflow UI runs in this test
                    report = api(
                        api_url,
                        "POST",
                        "/artifacts/filter",
                        {"artifacts": {"flow_run_id": {"any_": [run["id"]]}, "type": {"any_": ["markdown"]}}},
                    )[1]
                    assert len(report) == 1, report
                    page.goto(f"{ui}/artifacts/artifact/{report[0]['id']}", wait_until="networkidle")
                    page.locator("img[src^='data:image/png']").first.wait_for()
                    images = page.evaluate(
                        "() => Array.from(document.querySelectorAll('article img'))"
                        ".map(i => [i.src.slice(0, 22), i.naturalWidth])"
                    )
                    assert images and all(src == "data:image/png;base64," and width > 0 for src, width in images), (
                        images
                    )
                    page.screenshot(path=str(shots / "4-report-artifact.png"), full_page=True)

                    # Prefect's default (v2) form: an out-of-range value is refused on its field, no run is made
                    before = len(_deployment_runs(api_url, deployment["id"]))
                    page.goto(f"{ui}/v2/deployments/deployment/{deployment['id']}/run", wait_until="networkidle")
                    too_many = page.get_by_label("Steps (Optional)", exact=True)
                    too_many.fill(str(10**9))
                    page.get_by_role("button", name="Submit").click()
                    page.wait_for_timeout(3000)
                    state = too_many.evaluate(
                        "e => ({valid: e.validity.valid, message: e.validationMessage,"
                        " invalid: e.getAttribute('aria-invalid')})"
                    )
                    assert not state["valid"] or state["invalid"] == "true", state
                    page.screenshot(path=str(shots / "5-v2-form-out-of-range.png"), full_page=True)
                    assert len(_deployment_runs(api_url, deployment["id"])) == before

                    # a cross-field rule the schema cannot state: the run starts and ends Failed in one line
                    page.goto(f"{ui}/v2/deployments/deployment/{deployment['id']}/run", wait_until="networkidle")
                    page.get_by_label("Number of heads (Optional)", exact=True).fill("3")
                    page.get_by_role("button", name="Submit").click()
                    refused = wait_for(
                        lambda: next(
                            (
                                r
                                for r in _deployment_runs(api_url, deployment["id"])
                                if r["parameters"]["params"]["model"]["n_heads"] == 3
                            ),
                            None,
                        ),
                        60,
                        "the run with n_heads=3",
                    )
                    failed = wait_flow_run(api_url, refused["id"], timeout=300)
                    assert failed["state"]["type"] == "FAILED", failed["state"]
                    assert failed["state"]["message"] == "nsot.model: n_heads (3) must divide d_model (8)"

                    def refusal_logged() -> list[str] | None:  # the worker's own lines come first
                        logs = [e["message"] for e in _run_logs(api_url, refused["id"])]
                        return logs if any("parameters refused" in m for m in logs) else None

                    logs = wait_for(refusal_logged, 30, "the refusal in its logs")
                    assert any(m.startswith("nsot: parameters refused: nsot.model: n_heads (3)") for m in logs), logs
                    assert not any("Traceback" in m for m in logs), logs
                    page.goto(f"{ui}/runs/flow-run/{refused['id']}", wait_until="networkidle")
                    page.get_by_text("Failed", exact=True).first.wait_for()
                    page.screenshot(path=str(shots / "6-cross-field-failed-run.png"), full_page=True)
                finally:
                    browser.close()
    finally:
        keep_test_artifacts(shots, "prefect-ui")

    # MLflow: the parent run of that flow run, with the value typed into the form
    _, parent = mlflow_parent_run(f"sqlite:///{project / 'mlflow.db'}", "nsot", run["id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.params["train.steps"] == str(EDITED_STEPS)
    assert parent.data.tags["prefect.deployment_id"] == deployment["id"]
    assert {p.name for p in shots.iterdir()} >= {"2-custom-run-form.png", "3-finished-run.png", "4-report-artifact.png"}
    print(f"UI test: submit -> Completed {trigger_to_completed:.1f}s; whole test {time.monotonic() - started:.1f}s")
