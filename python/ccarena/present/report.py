"""The static HTML report of a results directory (``ccarena report DIR``).

    REPORT/index.html                 index of experiments
    REPORT/<experiment>/index.html    scenario, notes, metrics table, figures, per-run figures
                                      (and, for runs with web traffic, FCT figures and tables)
    REPORT/<experiment>/*.png|pdf     figures (PNG shown, PDF linked for papers)
    REPORT/<experiment>/points.csv    every metric per grid point: mean, 95 % CI, n
    REPORT/thumbs/<experiment>.png    small copy of the experiment's first figure (index)
    REPORT/compare/index.html         several experiments in one figure (``--compare``)

Figures are drawn from the database and the Parquet time series, never from
the engine: a report can be rebuilt at any time without rerunning anything.
The pages need no server and no network (plain HTML, inline CSS, one small
inline script that flags images that failed to load).
"""

from __future__ import annotations

import hashlib
import html
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ..version import __version__
from .figures import (
    default_figure_specs,
    fct_figure_spec,
    metric_label,
    run_distribution_figure,
    run_fct_figure,
    short_label,
    run_timeseries_figure,
    read_reference,
    stability_figure,
    sweep_figure,
    throughput_delay_figure,
)
from ..results.metrics import SHORT_RUN_EPOCHS, web_metrics
from .format import cell, pm, slug
from ..errors import StoreError
from ..results.store import Results, load

__all__ = ["write_report", "key_metrics", "experiment_shape", "slug"]

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1.05em;margin-top:1.2em}
table{border-collapse:collapse;font-size:.86em;margin:.6em 0}
th,td{border-bottom:1px solid #e4e4e4;padding:.25em .6em;text-align:right;white-space:nowrap}
th{background:#f5f5f5}td.l,th.l{text-align:left;white-space:normal}
.muted{color:#666}.warn{background:#fff7e0;border-left:4px solid #e0a800;padding:.5em .8em;margin:.8em 0}
.err{background:#fdecea;border-left:4px solid #c62828;padding:.5em .8em;margin:.8em 0}
figure{margin:1em 1em 1em 0;display:inline-block;vertical-align:top;max-width:100%}
figure.half{max-width:48%}@media (max-width:900px){figure.half{max-width:100%}}
.tw{overflow-x:auto}
figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.85em;color:#444;max-width:640px}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto;font-size:.82em}
details{margin:.4em 0}summary{cursor:pointer}
.broken{outline:3px solid #c62828}
td.kn{white-space:nowrap}img.thumb{width:240px;max-width:100%;border:1px solid #eee;margin-top:.3em}
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img');
  function count() {
    var ok = 0;
    imgs.forEach(function (img) { if (img.complete && img.naturalWidth > 0) { ok++; } });
    document.body.setAttribute('data-images-loaded', ok + '/' + imgs.length);
  }
  function broken(img) {
    img.classList.add('broken');
    var note = document.createElement('p');
    note.className = 'err';
    note.textContent = 'figure file missing: ' + img.getAttribute('src');
    img.parentNode.insertBefore(note, img.nextSibling);
  }
  imgs.forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) { return; }
    if (img.complete) { broken(img); return; }
    // A lazy image not fetched yet: judged when it is (scrolled near).
    img.addEventListener('load', count);
    img.addEventListener('error', function () { broken(img); count(); });
  });
  count();
});
"""


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>\n{body}\n<script>{_SCRIPT}</script></body></html>\n"
    )


def key_metrics(n_flows: int, n_groups: int, web: bool = False, udp: bool = False) -> list[str]:
    """The run metrics shown in tables, by the shape of the scenario (flows
    and [[flows]] tables under study; whether it has web traffic, UDP sources)."""
    if n_flows <= 1:
        out = ["utilization", "mean_srtt_l4", "mean_est_qdelay_l4", "total_retransmissions_l4", "total_rtos_l4", "mean_queue_delay_ms"]
    else:
        out = ["throughput_ratio", "jain_index"]
        if n_groups > 1:
            out.append("group_throughput_ratio")
        out += ["utilization", "mean_queue_delay_ms", "total_retransmissions_l4", "total_rtos_l4"]
    if web:
        out += ["median_fct_s", "p95_fct_s"]
    if udp:
        out.append("udp_throughput_mbps")
    return out


def experiment_shape(res: Results, run_ids) -> dict[str, Any]:
    """n_flows and n_groups of the flows under study (background flows are not
    what a sweep compares), and whether the runs have web traffic or UDP sources."""
    flows = res.flows[res.flows.run_id.isin(run_ids)]
    studied = flows[~flows.background.fillna(False).astype(bool)] if "background" in flows else flows
    runs = res.runs[res.runs.run_id.isin(run_ids)]
    return {
        "n_flows": int(studied.groupby("run_id").size().max()) if len(studied) else 0,
        "n_groups": int(studied.groupby("run_id")["group"].nunique().max()) if len(studied) else 0,
        "web": bool("web_flows" in runs and runs.web_flows.notna().any()),
        "udp": bool("udp_throughput_mbps" in runs and runs.udp_throughput_mbps.notna().any()),
    }


def _figure_html(files: list[Path], rel_to: Path, caption: str, cls: str = "", loading: str = "lazy") -> str:
    """A figure (PNG shown, vector linked); images load lazily (long pages
    hold hundreds of run figures) unless `loading` is "eager"."""
    png = files[0]
    rel = png.relative_to(rel_to).as_posix()
    vec = files[1].relative_to(rel_to).as_posix() if len(files) > 1 else rel
    kind = files[1].suffix[1:].upper() if len(files) > 1 else "PNG"
    return (f"<figure{' class=' + cls if cls else ''}><a href=\"{html.escape(vec)}\"><img src=\"{html.escape(rel)}\" alt=\"{html.escape(caption)}\" loading=\"{loading}\"></a>"
            f"<figcaption>{html.escape(caption)} <a href=\"{html.escape(vec)}\">{kind}</a></figcaption></figure>")


def _buffer_packets(engine: dict) -> float | None:
    b = engine.get("network", {}).get("buffer", {})
    if "packets" in b:
        return float(b["packets"])
    if "bytes" in b:
        return float(b["bytes"]) / 1500
    return None


def write_report(directory: str | Path, out: str | Path | None = None, per_run: str = "first",
                 progress: Callable[[str], None] | None = None, experiments: list[str] | None = None,
                 compare: list[str] | None = None, references: list[str | Path] | None = None) -> Path:
    """Writes the HTML report of a results directory; returns the index page.

    `per_run`: "first" draws the run figures of the first repetition of each
    grid point, "all" of every run, "none" of none. `compare`: experiments
    (ids or names) drawn together on a comparison page (``compare.html``).
    `references`: CSV files of reference data drawn in every sweep figure
    whose x and metric they have (docs/scenario.md, "Reference data").
    """
    res = load(directory)
    out_dir = Path(out) if out else Path(directory) / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda msg: None)
    rows = []
    exps = res.experiments
    if experiments:
        exps = exps[exps.experiment_id.isin(experiments) | exps.name.isin(experiments)]
    for _, exp in exps.iterrows():
        say(f"figures for {exp.experiment_id}")
        info: dict[str, Any] = {}
        page = _experiment_page(res, exp, out_dir, per_run, say, info, [Path(r) for r in references or []], Path(directory))
        runs = res.runs[res.runs.experiment_id == exp.experiment_id]
        counts = runs.status.value_counts().to_dict()
        rows.append((exp, page, counts, info))
    body = [f"<h1>ccarena results</h1><p class=\"muted\">{html.escape(str(Path(directory)))} &middot; report written "
            f"{datetime.now().strftime('%Y-%m-%d %H:%M')} by ccarena {html.escape(__version__)}</p>"]
    if compare:
        say("comparison page")
        cmp_page = _compare_page(res, [res.experiment_id(c) for c in compare], out_dir)
        body.append(f"<p><a href=\"{html.escape(cmp_page.relative_to(out_dir).as_posix())}\">Comparison of "
                    f"{html.escape(', '.join(compare))}</a></p>")
    if not rows:
        body.append("<p>No experiments in this results directory yet.</p>")
    else:
        body.append("<table><tr><th class=l>experiment</th><th class=l>what it shows</th><th class=l>key numbers</th>"
                    "<th>runs ok</th><th>failed</th><th>skipped</th><th>pending</th></tr>")
        for exp, page, counts, info in rows:
            label = exp.experiment_id
            href = html.escape(page.relative_to(out_dir).as_posix())
            thumb = info.get("thumb")
            thumb_html = (f"<br><a href=\"{href}\"><img class=thumb src=\"{html.escape(thumb.relative_to(out_dir).as_posix())}\" "
                          f"alt=\"main figure of {html.escape(label)}\" loading=\"lazy\"></a>") if thumb else ""
            body.append(
                f"<tr><td class=l><a href=\"{href}\">{html.escape(label)}</a>{thumb_html}</td>"
                f"<td class=l>{html.escape(exp.description)}{' <span class=muted>(' + html.escape(_short_notes(exp)) + ')</span>' if _short_notes(exp) else ''}"
                f"<br><span class=muted>{_provenance(exp)}</span></td>"
                f"<td class=\"l kn\">{'<br>'.join(info.get('key', [])) or '-'}</td>"
                f"<td>{counts.get('ok', 0)}</td><td>{counts.get('error', 0)}</td><td>{counts.get('skipped', 0)}</td><td>{counts.get('pending', 0)}</td></tr>"
            )
        body.append("</table>")
    index = out_dir / "index.html"
    index.write_text(_page("ccarena results", "\n".join(body)))
    return index


def _with_references(spec: dict, extra: list[Path], results_dir: Path | None) -> dict:
    """The sweep figure's spec with its reference files as paths that exist
    (relative ones: from the working directory, else from the results
    directory), plus those of `extra` that have its x and metric."""
    refs = []
    own = spec.get("reference")
    if own:
        p = Path(own)
        if not p.is_absolute() and not p.exists() and results_dir is not None and (results_dir / p).exists():
            p = results_dir / p
        refs.append(p)
    for p in extra:
        try:
            read_reference(p, spec["x"], spec.get("y", "jain_index"))
        except ValueError:
            continue  # drawn only where it fits
        refs.append(p)
    return {**spec, "reference": refs} if refs else spec


def _compare_page(res: Results, ids: list[str], out_dir: Path) -> Path:
    """One page drawing several experiments together: each key metric both
    have against their shared first axis (one line per experiment), and
    throughput against delay of every run (Pantheon's summary)."""
    d = out_dir / "compare"
    d.mkdir(parents=True, exist_ok=True)
    frames, groups, axes_of = [], {}, {}
    for eid in ids:
        ok = res.runs[(res.runs.experiment_id == eid) & (res.runs.status == "ok")]
        groups[eid] = ok
        axes_of[eid] = res.param_names(eid)
        if len(ok):
            frames.append(res.points(eid).assign(experiment=eid))
    body = [f"<p><a href=\"../index.html\">&larr; all experiments</a></p><h1>Comparison</h1>"
            f"<p>{html.escape(', '.join(ids))}</p>"]
    firsts = {a[0] for a in axes_of.values() if a}
    if frames and len(firsts) == 1 and all(axes_of.values()):
        x = firsts.pop()
        pts = pd.concat(frames, ignore_index=True)
        shape = experiment_shape(res, pd.concat(groups.values()).run_id)
        for m in key_metrics(shape["n_flows"], shape["n_groups"], shape["web"], shape["udp"]):
            if m not in pts or not pts[m].notna().any():
                continue
            try:
                files = sweep_figure(pts, {"x": x, "y": m, "series": "experiment"}, d / slug(f"{m}-vs-{x}"))
            except KeyError:
                continue
            body.append(_figure_html(files, d, f"{metric_label(m)} against {x}, one line per experiment; mean and 95 % CI over repetitions.", "half"))
    else:
        body.append("<p class=muted>The experiments do not share their first swept parameter: no metric-against-parameter figures.</p>")
    files = throughput_delay_figure(groups, d / "throughput-delay")
    body.append(_figure_html(files, d, "Throughput against delay: each run a dot, each experiment's mean a large marker "
                             "(aggregate throughput of the flows under study against their mean sRTT; better is up and right)."))
    page = d / "index.html"
    page.write_text(_page("ccarena comparison", "\n".join(body)))
    return page


def _provenance(exp) -> str:
    """Where the experiment's results come from: date, host, engine build, command line (HTML)."""
    parts = []
    if isinstance(exp.get("updated_at"), (datetime, pd.Timestamp)) and not pd.isna(exp.get("updated_at")):
        parts.append(pd.Timestamp(exp["updated_at"]).strftime("%Y-%m-%d %H:%M"))
    if exp.get("host"):
        parts.append("on " + html.escape(str(exp["host"])))
    if exp.get("build"):
        parts.append("build <code>" + html.escape(str(exp["build"])) + "</code>")
    if exp.get("command"):
        parts.append("<code>" + html.escape(str(exp["command"])) + "</code>")
    return " &middot; ".join(parts)


def _key_numbers(points: pd.DataFrame, metrics: list[str], limit: int = 3) -> list[str]:
    """The first few key metrics over the grid points: the value, or the range of the point means (HTML)."""
    out = []
    for m in metrics:
        if m not in points or not points[m].notna().any():
            continue
        v = points[m].dropna()
        val = cell(v.iloc[0]) if len(v) == 1 else f"{cell(v.min())} &ndash; {cell(v.max())}"
        out.append(f"{html.escape(short_label(m))} {val}")
        if len(out) == limit:
            break
    return out


def _thumbnail(png: Path, out: Path, width: int = 240) -> Path | None:
    """A small copy of a figure for the index (None if it cannot be read)."""
    try:
        # Pillow comes with matplotlib; imported here so the report module loads without drawing.
        from PIL import Image

        with Image.open(png) as im:
            im.thumbnail((width, width * 2))
            im.save(out, optimize=True)
        return out
    except (OSError, ImportError):
        return None


def _short_notes(exp) -> str:
    req = json.loads(exp.requires or "[]")
    return ("needs " + ", ".join(req)) if req else ""


def _experiment_page(res: Results, exp, out_dir: Path, per_run: str, say, info: dict | None = None,
                     references: list[Path] | None = None, results_dir: Path | None = None) -> Path:
    """Writes the experiment's page; fills `info` with what the index shows of
    it ("thumb": a small PNG of its first figure, "key": its key numbers)."""
    info = {} if info is None else info
    eid = exp.experiment_id
    d = out_dir / slug(eid)
    d.mkdir(parents=True, exist_ok=True)
    runs = res.runs[res.runs.experiment_id == eid]
    ok = runs[runs.status == "ok"]
    axes = json.loads(exp["axes"] or "[]")
    specs = json.loads(exp.figures or "[]")
    shape = experiment_shape(res, ok.run_id)
    n_flows, n_groups = shape["n_flows"], shape["n_groups"]
    if not specs:
        specs = default_figure_specs(axes, n_flows)
    if shape["web"] and not any(sp.get("y") == "median_fct_s" for sp in specs):
        fct_spec = fct_figure_spec(axes, specs)
        if fct_spec is not None:
            specs = [*specs, fct_spec]
    points = res.points(eid) if len(ok) else pd.DataFrame()
    body = [f"<p><a href=\"../index.html\">&larr; all experiments</a></p><h1>{html.escape(exp['name'])}"
            f"{' <span class=muted>(' + html.escape(exp.variant) + ')</span>' if exp.variant else ''}</h1>",
            f"<p>{html.escape(exp.description)}</p>"]
    if exp.source:
        body.append(f"<p class=muted>Source: {html.escape(exp.source)}</p>")
    req = json.loads(exp.requires or "[]")
    if req:
        body.append(f"<div class=warn><b>Runs without:</b> {html.escape(', '.join(req))} (not in the engine yet). {html.escape(exp.notes or '')}</div>")
    elif exp.notes:
        body.append(f"<div class=warn>{html.escape(exp.notes)}</div>")
    if exp.variant == "quick":
        body.append("<div class=warn><b>Quick mode:</b> shorter runs and fewer repetitions than the full set-up, so the "
                    "confidence intervals are wider, and where a run is too short for the flows to reach their operating "
                    "point the values themselves differ (the points flagged below). "
                    f"The full set-up: <code>ccarena reproduce {html.escape(exp['name'])} --full</code>.</div>")
    counts = runs.status.value_counts().to_dict()
    body.append("<p>" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + f" of {len(runs)} runs"
                + (f"; {len(points)} grid points" if len(points) else "") + ".</p>")
    skipped = runs[runs.status == "skipped"]
    if len(skipped):
        reasons = skipped.skip_reason.value_counts().to_dict()
        body.append("<div class=warn>Skipped: " + "; ".join(f"{html.escape(str(k))} ({v} runs)" for k, v in reasons.items())
                    + ". They run automatically once the engine has them (rerun the same command).</div>")
    failed = runs[runs.status == "error"]
    if len(failed):
        items = "".join(f"<li><code>{html.escape(r.run_id)}</code> {html.escape(str({a['name']: json.loads(r.params).get(a['name']) for a in axes}))}: {html.escape(str(r.error))}</li>" for _, r in failed.head(20).iterrows())
        body.append(f"<div class=err><b>{len(failed)} runs failed</b> (rerun the sweep to retry them):<ul>{items}</ul></div>")

    if len(points) and "short_run" in points and points.short_run.fillna(False).astype(bool).any():
        names_ = [a["name"] for a in axes]
        flagged = points[points.short_run.fillna(False).astype(bool)]
        which = "; ".join(", ".join(f"{n} = {p[n]}" for n in names_) or "the single point" for _, p in flagged.iterrows())
        body.append(f"<div class=warn><b>Runs too short for the physics at {len(flagged)} of {len(points)} points</b> "
                    f"(&dagger; in the table, grey rings in the figures): a loss-based flow under study saw fewer than "
                    f"{SHORT_RUN_EPOCHS} congestion epochs (loss events) after warm-up, so its mean is not that of its "
                    f"steady state and a longer run may give another value, not only a narrower interval "
                    f"(docs/metrics.md, &ldquo;Runs too short&rdquo;): {html.escape(which)}.</div>")

    # ---- experiment figures
    if len(points) and specs:
        body.append("<h2>Figures</h2>")
        interval = 0.1
        for k, spec in enumerate(specs):
            name = spec.get("name", f"{spec.get('kind', 'sweep')}-{spec.get('y', 'cov')}-vs-{spec.get('x', 'timescale')}")
            base = d / slug(name)
            try:
                if spec.get("kind", "sweep") == "stability":
                    files = stability_figure(points, spec, base, interval)
                else:
                    spec = _with_references(spec, references or [], results_dir)
                    files = sweep_figure(points, spec, base, runs=ok)
            except KeyError as e:
                body.append(f"<p class=err>figure {html.escape(name)}: no column {html.escape(str(e))} in the results</p>")
                continue
            except ValueError as e:  # a reference file that cannot be read or lacks the figure's columns
                body.append(f"<p class=err>figure {html.escape(name)}: {html.escape(str(e))}</p>")
                continue
            cap = (spec["caption"].rstrip(".") + "; " + _stat_note(spec, points)) if spec.get("caption") else _default_caption(spec, points)
            body.append(_figure_html(files, d, cap, "half", loading="eager"))
            if "thumb" not in info:
                (out_dir / "thumbs").mkdir(exist_ok=True)
                thumb = _thumbnail(files[0], out_dir / "thumbs" / f"{slug(eid)}.png")
                if thumb is not None:
                    info["thumb"] = thumb

    # ---- metrics table
    if len(points):
        names = [a["name"] for a in axes]
        km = key_metrics(n_flows, n_groups, shape["web"], shape["udp"])
        for spec in specs:
            y = spec.get("y")
            if isinstance(y, str) and y not in km and y in points:
                km.append(y)
        body.append("<h2>Metrics</h2><p class=muted>Mean over repetitions &plusmn; half-width of the 95 % confidence interval "
                    "(Student's t), to the digits it supports; [low, high] where the interval meets the metric's bound "
                    "(e.g. Jain's index at 1). Every metric of every grid point: <a href=\"points.csv\">points.csv</a>; "
                    "definitions in docs/metrics.md.</p>")
        info["key"] = _key_numbers(points, km)
        head = "".join(f"<th class=l>{html.escape(n)}</th>" for n in names) + "<th>n</th>" + "".join(f"<th title=\"{html.escape(m)}\">{html.escape(short_label(m))}</th>" for m in km)
        trs = []
        for _, p in points.iterrows():
            dagger = " &dagger;" if p.get("short_run", False) == True else ""  # noqa: E712 (NaN where the metric is missing)
            cells = "".join(f"<td class=l>{cell(p.get(n))}</td>" for n in names) + f"<td>{int(p.n)}{dagger}</td>"
            for m in km:
                mu, ci = p.get(m, float('nan')), p.get(f"{m}_ci95", float('nan'))
                cells += f"<td>{pm(mu, ci, sign=' &plusmn; ', low=p.get(f'{m}_low'), high=p.get(f'{m}_high'))}</td>"
            trs.append(f"<tr>{cells}</tr>")
        body.append(f"<div class=tw><table><tr>{head}</tr>{''.join(trs)}</table></div>")
        points.to_csv(d / "points.csv", index=False)

    # ---- per-run figures
    if per_run != "none" and len(ok):
        chosen = ok if per_run == "all" else ok[ok.repetition == ok.groupby("point").repetition.transform("min")]
        body.append(f"<h2>Runs</h2><p class=muted>Time series and distributions of {'every run' if per_run == 'all' else 'the first repetition of each grid point'}. "
                    "Per-flow tables of all runs are in the database (<code>ccarena.load(DIR).flows</code>"
                    + (", web flows in <code>.short_flows(experiment=...)</code>" if shape["web"] else "") + ").</p>")
        short = res.short_flows(run_id=list(chosen.run_id)) if shape["web"] else pd.DataFrame()
        udp_all = res.udp(run_id=list(chosen.run_id)) if shape["udp"] else pd.DataFrame()
        for _, r in chosen.iterrows():
            values = json.loads(r.params)
            params = ", ".join(f"{a['name']} = {values.get(a['name'])}" for a in axes) or "single run"
            label = f"{params}, seed {r.seed}"
            say(f"  run {r.run_id} ({label})")
            udp = udp_all[udp_all.run_id == r.run_id].set_index("source") if len(udp_all) else pd.DataFrame()
            try:
                ts, q = res.timeseries(r.run_id), res.queue(r.run_id)
                rq = res.reverse_queue(r.run_id)
                udp_ts = res.udp_timeseries(r.run_id) if len(udp) else None
            except FileNotFoundError:
                continue
            except StoreError as e:  # one damaged file costs that run's figures, not the report
                print(f"warning: run {r.run_id}: figures skipped: {e}", file=sys.stderr)
                body.append(f"<div class=warn>Run {html.escape(label)}: figures skipped: {html.escape(str(e))}</div>")
                continue
            fl = res.flows[res.flows.run_id == r.run_id].set_index("flow")
            engine = json.loads(r.engine_config) if isinstance(r.engine_config, str) else {}
            warm = engine.get("run", {}).get("warmup", 0) / 1e9
            end_s = float(r.simulated_s) if r.simulated_s == r.simulated_s else float("inf")
            rd = d / "runs"
            # A run never changes (its id is its content), so its figures are drawn once
            # (per title: the same run may be labelled differently by another sweep).
            tag = f"{r.run_id}-{hashlib.sha256(label.encode()).hexdigest()[:6]}"
            f1 = [rd / f"{tag}-timeseries.{e}" for e in ("png", "svg")]
            if not all(p.exists() for p in f1):
                f1 = run_timeseries_figure(ts, q, fl, rd / f"{tag}-timeseries", title=label, warmup_s=warm, buffer_packets=_buffer_packets(engine),
                                           udp_ts=udp_ts, udp=udp, reverse_queue=rq,
                                           buffer_bytes=engine.get("network", {}).get("buffer", {}).get("bytes"))
            f2 = [rd / f"{tag}-distributions.{e}" for e in ("png", "svg")]
            studied = fl[~fl.background.fillna(False).astype(bool)] if "background" in fl else fl
            if not all(p.exists() for p in f2):
                rate = engine.get("network", {}).get("bottleneck_rate")
                # With other traffic on the link, capacity / flows is no one's fair share.
                alone = len(studied) == len(fl) and not len(udp) and not len(short[short.run_id == r.run_id] if len(short) else short)
                f2 = run_distribution_figure(ts, studied, rd / f"{tag}-distributions", title=label,
                                             capacity_mbps=rate * 1448 / 1500 / 1e6 if rate and alone else None)
            ftab = "".join(
                f"<tr{' class=muted' if f.get('background', False) else ''}><td>{i}</td><td class=l>{html.escape(str(f.label))}"
                f"{' (reverse)' if f.get('direction', 'forward') == 'reverse' else ''}</td><td>{f.rtt_ms:.4g}</td><td>{f.start_s:.3g}</td><td>{f.throughput_mbps:.2f}</td>"
                f"<td>{cell(f.get('mean_cwnd_l4', f.get('mean_cwnd')))}</td><td>{cell(f.get('mean_srtt_l4', f.get('mean_srtt_ms')))}</td><td>{int(f.retransmissions)}</td><td>{int(f.rtos)}</td></tr>"
                for i, f in fl.iterrows()
            )
            bg_note = "" if len(studied) == len(fl) else (
                f"<p class=muted>Grey rows: background flows ({len(fl) - len(studied)}), left out of the fairness metrics; "
                "the time-series figure shows their throughput in grey, the distributions only the flows under study.</p>")
            ts_caption = "Throughput, cwnd, sRTT per flow and the bottleneck queue over time" + (
                " (background flows: thin grey, throughput only)" if len(studied) < len(fl) else "") + (
                "; dashed: UDP sources" if len(udp) else "") + ("; queue panel: both bottlenecks" if len(rq) else "") + "."
            extra = ""
            if len(udp):
                extra += _udp_table(udp)
            sf = short[short.run_id == r.run_id] if len(short) else short
            if len(sf):
                rates = {"forward": _mean_rate_mbps(q, warm, engine)}
                rates["reverse"] = _mean_rate_mbps(rq, warm, engine) if len(rq) else rates["forward"]
                f3 = [rd / f"{tag}-fct.{e}" for e in ("png", "svg")]
                if not all(p.exists() for p in f3):
                    f3 = run_fct_figure(sf, rd / f"{tag}-fct", rates, title=label, start_s=warm, end_s=end_s)
                extra += _short_flow_table(sf, rates, warm, end_s)
                extra += _figure_html(f3, d, "Web flows started after warm-up: completion time against size (a dot per flow, "
                                      "median per size bin, the ideal 1.5 x mean RTT + size / capacity) and the eCDF of completion times.")
            body.append(
                f"<details open><summary><b>{html.escape(label)}</b> <span class=muted>run {html.escape(r.run_id)}</span></summary>"
                "<div class=tw><table><tr><th>flow</th><th class=l>label</th><th>RTT ms</th><th>start s</th><th>Mbps</th><th>cwnd</th><th>sRTT ms</th><th>retrans</th><th>RTOs</th></tr>"
                f"{ftab}</table></div>{bg_note}{_figure_html(f1, d, ts_caption)}"
                f"{_figure_html(f2, d, 'eCDFs of throughput and sRTT samples, and each flow’s mean operating point' + (' (flows under study)' if len(studied) < len(fl) else '') + '.')}"
                f"{extra}</details>"
            )

    body.append(f"<h2>Scenario</h2><pre>{html.escape(exp.scenario_toml)}</pre>")
    page = d / "index.html"
    page.write_text(_page(f"{eid} - ccarena", "\n".join(body)))
    return page


def _mean_rate_mbps(q: pd.DataFrame, warm_s: float, engine: dict) -> float:
    """A bottleneck's mean rate after warm-up, from its samples (rate changes and traces included)."""
    after = q[q.t_s > warm_s] if len(q) and "rate_mbps" in q else q.iloc[0:0]
    if len(after):
        return float(after.rate_mbps.mean())
    return float(engine.get("network", {}).get("bottleneck_rate") or 0) / 1e6


def _short_flow_table(sf: pd.DataFrame, rates_mbps: dict[str, float], start_s: float, end_s: float) -> str:
    """Counts and completion times of a run's web flows (started after warm-up), per direction."""
    rates = {k: v * 1e6 for k, v in rates_mbps.items()}
    groups = [(d, sf[sf.direction == d]) for d in ("forward", "reverse") if (sf.direction == d).any()]
    if len(groups) > 1:
        groups.append(("both", sf))
    rows = []
    for name, g in groups:
        m = web_metrics(g, rates, start_s, end_s)
        rows.append(
            f"<tr><td class=l>{name}</td><td>{int(m['web_flows']):,}</td><td>{cell(100 * m['web_completed'], 1)}</td>"
            f"<td>{cell(1e3 * m['median_fct_s'], 0)}</td><td>{cell(1e3 * m['mean_fct_s'], 0)}</td><td>{cell(1e3 * m['p95_fct_s'], 0)}</td>"
            f"<td>{cell(m['median_fct_slowdown'], 2)}</td><td>{cell(m['p95_fct_slowdown'], 2)}</td></tr>"
        )
    return ("<div class=tw><table><tr><th class=l>web flows</th><th>started</th><th>completed %</th><th>median FCT ms</th><th>mean FCT ms</th>"
            "<th>p95 FCT ms</th><th>median slowdown</th><th>p95 slowdown</th></tr>" + "".join(rows) + "</table></div>"
            "<p class=muted>Web flows started after warm-up; FCT statistics over those that completed. Slowdown: FCT / "
            "(1.5 RTT + size / goodput capacity), each flow with its own RTT (docs/metrics.md).</p>")


def _udp_table(udp: pd.DataFrame) -> str:
    rows = "".join(
        f"<tr><td>{i}</td><td class=l>{html.escape(str(u.label))}</td><td class=l>{html.escape(str(u.direction))}</td><td>{u.rate_mbps:g}</td>"
        f"<td>{u.throughput_mbps:.2f}</td><td>{int(u.sent_packets):,}</td><td>{int(u.received_packets):,}</td><td>{cell(100 * u.loss_rate, 2)}</td></tr>"
        for i, u in udp.iterrows()
    )
    return ("<div class=tw><table><tr><th>UDP</th><th class=l>label</th><th class=l>direction</th><th>rate Mbps</th><th>received Mbps</th>"
            f"<th>sent</th><th>received</th><th>loss %</th></tr>{rows}</table></div>")


def _stat_note(spec: dict, points: pd.DataFrame) -> str:
    n = int(points.n.max()) if "n" in points and len(points) else 0
    if n <= 1:
        return "one repetition."
    if spec.get("yscale") == "log" and spec.get("kind", "sweep") == "sweep":
        return f"geometric mean of {n} repetitions, bars: 95 % confidence interval of the logarithm."
    return f"mean of {n} repetitions, bars: 95 % confidence interval."


def _default_caption(spec: dict, points: pd.DataFrame) -> str:
    y = metric_label(spec.get("y", "cov_throughput_l7")) if spec.get("kind", "sweep") == "sweep" else "CoV of per-flow throughput against the averaging time scale"
    x = spec.get("x", "")
    parts = [f"{y} against {x}" if spec.get("kind", "sweep") == "sweep" else y]
    if spec.get("series"):
        parts.append(f"one line per {spec['series']}")
    if spec.get("panels"):
        parts.append(f"one panel per {spec['panels']}")
    n = int(points.n.max()) if "n" in points and len(points) else 0
    if spec.get("yscale") == "log":
        parts.append(f"geometric mean of {n} repetitions, bars: 95 % confidence interval of the logarithm" if n > 1 else "one repetition")
    else:
        parts.append(f"mean of {n} repetitions, bars: 95 % confidence interval" if n > 1 else "one repetition")
    return "; ".join(parts) + "."
