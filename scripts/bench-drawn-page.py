#!/usr/bin/env python3
"""Times webkit::protocol::DRAWN_PAGE_SCRIPT (the read-back every screenshot runs once after its
capture) in headless Chromium on the given email files, plus a synthetic 18,000-element page, and
prints the figures for BENCHMARKS.md.

    pip install playwright   # no browser download: it drives /usr/bin/chromium
    python3 scripts/bench-drawn-page.py ../shared/corpus/colorlib--01-restobar.html ...
"""
import pathlib
import re
import statistics
import sys

from playwright.sync_api import sync_playwright

PROTOCOL = pathlib.Path(__file__).resolve().parent.parent / "crates/webkit/src/protocol.rs"
SCRIPT = re.search(r'pub const DRAWN_PAGE_SCRIPT: &str = r#"(.*?)"#;', PROTOCOL.read_text(), re.S).group(1)
TIMED = "() => { const t0 = performance.now(); const out = " + SCRIPT + "; return [performance.now() - t0, out.length]; }"


def measure(page, runs):
    times = [page.evaluate(TIMED) for _ in range(runs)]
    return statistics.median(t[0] for t in times), max(t[0] for t in times), times[-1][1]


def main(files):
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 600, "height": 800})
        for f in files:
            page.set_content(pathlib.Path(f).read_text(), wait_until="domcontentloaded")
            n = page.evaluate("document.getElementsByTagName('*').length")
            median, worst, size = measure(page, 21)
            print(f"{pathlib.Path(f).name}: {n} elements, median {median:.2f} ms, max {worst:.2f} ms, answer {size} bytes")
        rows = "".join(
            f'<tr><td style="background-image:url(http://x.test/{i}.png)"><img src="http://x.test/i{i}.png"></td></tr>'
            for i in range(6000)
        )
        page.set_content(f"<table>{rows}</table>", wait_until="domcontentloaded")
        n = page.evaluate("document.getElementsByTagName('*').length")
        median, worst, _ = measure(page, 5)
        print(f"synthetic: {n} elements, median {median:.1f} ms, max {worst:.1f} ms")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
