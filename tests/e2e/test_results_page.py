"""The results page in a browser: ``paperflows report --html`` over a project with two runs, opened in
headless Chromium with every network request refused. The index, a results table, a claim badge, the
figures (decoded) and a pipeline graph must be visible; a full-page screenshot is kept in
``test-artifacts/results-page/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from paperflows import registry
from paperflows.__main__ import main
from tests.conftest import REPO, keep_test_artifacts
from tests.e2e.test_prefect_ui import CHROMIUM, CHROMIUM_ARGS
from tests.platform.test_results_page import constructed_report, file_params, write_run


def test_results_page_renders_offline_in_chromium(project: Path, tmp_path: Path) -> None:
    if not CHROMIUM.is_file():
        pytest.skip(
            f"BROWSER TEST NOT RUN: {CHROMIUM} is missing (Debian package 'chromium'); the results page "
            f"is checked by tests/platform/test_results_page.py only"
        )
    from playwright.sync_api import sync_playwright

    shutil.copy(REPO / "dvc.yaml", project / "dvc.yaml")
    write_run(
        project / "outputs" / "knots",
        constructed_report("knots"),
        file_params(project, "knots"),
        pngs=("plots/lambda_search.png", "plots/accuracy.png"),
    )
    edited = file_params(project, "oc_flow")
    edited["seeds"] = [0]
    write_run(
        project / "runs" / "oc_flow" / "20250501-edited",
        constructed_report("oc_flow"),
        edited,
        pngs=("plots/gamma_tradeoff.png",),
        entry="prefect",
    )
    page_file = project / "outputs" / "report.html"
    assert main(["report", "--html"]) == 0 and page_file.is_file()

    shots = tmp_path / "screenshots"
    shots.mkdir()
    requested: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(viewport={"width": 1300, "height": 900}, offline=True)

                def refuse(route) -> None:  # the page itself comes from file://; anything else is refused
                    if route.request.url != page_file.as_uri():
                        requested.append(route.request.url)
                        route.abort()
                    else:
                        route.continue_()

                context.route("**/*", refuse)
                page = context.new_page()
                page.set_default_timeout(20_000)
                page.goto(page_file.as_uri(), wait_until="load")

                index = page.locator("#index table.index")
                assert index.is_visible()
                assert index.locator("tbody tr").count() == len(registry.slugs())
                assert index.locator("tr", has_text="knots").get_by_text("1 / 2").is_visible()
                assert index.locator("tr", has_text="oc_flow").get_by_text("edited: seeds=[0]").is_visible()
                assert index.locator("tr", has_text="hrf").get_by_text("no run yet").is_visible()

                knots = page.locator("section#knots")
                results = knots.locator("table").first
                results.scroll_into_view_if_needed()
                assert results.is_visible() and results.get_by_text("baseline | tuned").is_visible()
                verdicts = knots.locator("table.claims tbody td:first-child")  # the raw verdict; Holm is beside it
                holds = verdicts.locator(".badge.holds")
                assert holds.count() == 1 and holds.is_visible() and holds.inner_text() == "holds"
                assert verdicts.locator(".badge.open").inner_text() == "not resolved"
                assert knots.locator("table.claims tbody tr").first.get_by_text("headline").is_visible()
                colour = holds.evaluate("e => getComputedStyle(e).backgroundColor")
                assert colour == "rgb(31, 122, 61)", colour  # the --holds green: the inline style sheet applied

                images = page.locator("section.paper figure img")
                assert images.count() == 3
                for i in range(images.count()):
                    image = images.nth(i)
                    image.scroll_into_view_if_needed()
                    assert image.is_visible()
                    assert image.evaluate("e => e.complete && e.naturalWidth") > 0, f"figure {i} did not decode"

                graph = knots.locator(".graph svg")
                graph.scroll_into_view_if_needed()
                assert graph.is_visible()
                box = graph.bounding_box()
                assert box is not None and box["width"] > 300 and box["height"] > 300
                assert graph.locator("g.stage").count() == 5  # knots: prepare, pretrain, finetune, merge, report
                assert graph.get_by_text("1. prepare").is_visible()
                assert page.locator("section.paper .graph svg").count() == len(registry.slugs())

                page.screenshot(path=str(shots / "results-page.png"), full_page=True)
            finally:
                browser.close()
    finally:
        keep_test_artifacts(shots, "results-page")
    assert requested == [], f"the page asked for {requested}"
    assert (shots / "results-page.png").stat().st_size > 10_000
