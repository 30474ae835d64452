"""``dvc plots show`` readable offline: DVC's HTML page with its chart library inlined, and PNG screenshots of it.

DVC's page loads vega, vega-lite and vega-embed from a CDN, so without network it is blank. This script writes
an HTML template holding the three libraries (``--html-template``, DVC's own option; the same versions DVC
names), renders DVC's plots with it, one page per view, and, with ``--screenshots``, takes a PNG of each page
with headless Chromium (Debian: ``apt-get install chromium``).

    python scripts/dvc_plots_offline.py                      # dvc_plots/<view>/index.html
    python scripts/dvc_plots_offline.py --screenshots docs/img/dvc

The libraries come from ``--js`` (a ``node_modules`` folder), else npm installs them once into
``~/.cache/codethinker/vega``. ``codethinker plots`` draws the same plots as PNGs with matplotlib, with no
browser and no npm.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

LIBS = {"vega": "5.20.2", "vega-lite": "5.2.0", "vega-embed": "6.18.2"}  # the versions dvc_render loads
VIEWS = {  # page -> (dvc plots show targets: files or ids of dvc.yaml's top-level plots, screenshot size)
    "funnel": (["plots/funnel.csv"], "700,380"),
    "evaluation": (["plots/train_eval.csv"], "720,380"),
    "learning": (["sft_loss", "grpo_reward_by_kind", "grpo_format_and_rcs"], "1000,800"),
}
PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>codethinker: DVC plots</title>
{libs}
<style>body {{ font-family: sans-serif; }} table {{ border-spacing: 15px; }}</style>
</head><body>
{{plot_divs}}
</body></html>
"""


def js_folder(given: Path | None) -> Path:
    """``node_modules`` with the three libraries: ``given``, else the cache (npm installs them there once)."""
    if given:
        return given
    cache = Path.home() / ".cache" / "codethinker" / "vega"
    mods = cache / "node_modules"
    if not all((mods / name / "build").is_dir() for name in LIBS):
        if not shutil.which("npm"):
            sys.exit(
                "dvc_plots_offline: npm is not installed; pass --js <node_modules with vega, vega-lite, vega-embed>"
            )
        cache.mkdir(parents=True, exist_ok=True)
        specs = [f"{n}@{v}" for n, v in LIBS.items()]
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(cache), *specs], check=True)
    return mods


def template(mods: Path) -> str:
    """DVC's page with the libraries inline (``{plot_divs}`` is DVC's placeholder; no ``{scripts}``: no CDN)."""
    scripts = []
    for name in LIBS:
        code = (mods / name / "build" / f"{name}.min.js").read_text().replace("</script>", "<\\/script>")
        scripts.append(f"<script>\n{code}\n</script>")
    return PAGE.format(libs="\n".join(scripts))


def screenshot(page: Path, png: Path, browser: str, size: str) -> None:
    png.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=10000",
            f"--window-size={size}",
            f"--screenshot={png.resolve()}",
            page.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=Path("dvc_plots"), help="folder of the pages (default: dvc_plots)")
    ap.add_argument("--js", type=Path, help="node_modules holding vega, vega-lite and vega-embed")
    ap.add_argument("--screenshots", type=Path, help="folder for a PNG of each page (needs chromium)")
    args = ap.parse_args(argv)
    dvc = Path(sys.executable).parent / "dvc"
    tpl = args.out / "template.html"
    tpl.parent.mkdir(parents=True, exist_ok=True)
    tpl.write_text(template(js_folder(args.js)))
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if args.screenshots and not browser:
        sys.exit("dvc_plots_offline: no chromium found for --screenshots")
    for view, (targets, size) in VIEWS.items():
        page = args.out / view
        cmd = [
            str(dvc) if dvc.exists() else "dvc",
            "plots",
            "show",
            *targets,
            "--html-template",
            str(tpl),
            "-o",
            str(page),
        ]
        subprocess.run(cmd, check=True, capture_output=True)
        print(f"{view}: {page / 'index.html'}")
        if args.screenshots:
            screenshot(page / "index.html", args.screenshots / f"{view}.png", browser, size)
            print(f"{view}: {args.screenshots / f'{view}.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
