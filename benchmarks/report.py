"""Turn the samples of a run into ``results.md`` (tables and targets) and ``chart.png``."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable, Optional

from .clients import CLIENTS, IMPORT_REFERENCES
from .soak import CHUNKS

__all__ = ["summarise", "write_report"]

#: The wire formats of (a)-(c), in the order the report shows them.
_FORMATS = ("openai", "anthropic", "responses")
_TITLES = {"openai": "OpenAI", "anthropic": "Anthropic", "responses": "OpenAI Responses API"}

Stat = tuple[float, float, float]  # median, min, max


def _stat(values: list[float]) -> Optional[Stat]:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def _fmt(stat: Optional[Stat], unit: str = "x", digits: int = 2) -> str:
    if stat is None:
        return "n/a"
    med, lo, hi = stat
    if lo == hi:
        return f"{med:.{digits}f}{unit}"
    return f"{med:.{digits}f}{unit} ({lo:.{digits}f}-{hi:.{digits}f})"


def _name(key: str) -> str:
    if key in IMPORT_REFERENCES:
        return f"`{IMPORT_REFERENCES[key]}` (reference)"
    return f"**{CLIENTS[key].name}**" if key.startswith("blazen") else CLIENTS[key].name


def _ratios(samples: dict[str, list[Any]], key: str, field: str = "us") -> list[float]:
    # Each repeat of a client is compared with the floor measured in the same repeat.
    floor = samples.get("raw", [])
    mine = samples.get(key, [])
    return [m[field] / f[field] for m, f in zip(mine, floor)]


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """Medians and ranges of every figure, keyed by scenario and client."""
    s = results["samples"]
    out: dict[str, Any] = {}
    for scenario in ("a", "b", "c", "c2"):
        for fmt in _FORMATS:
            group = s.get(f"{scenario}:{fmt}")
            if not group:
                continue
            for key in group:
                out[(scenario, fmt, key)] = {
                    "ratio": _stat(_ratios(group, key)),
                    "us": _stat([x["us"] for x in group[key]]),
                    "cpu_ratio": _stat(_ratios(group, key, "cpu_us")),
                }
    for fmt in _FORMATS:
        one, two = s.get(f"c:{fmt}", {}), s.get(f"c2:{fmt}", {})
        for key in one:
            if key in two:
                # Two noisy figures divided make a noisier one: compare the fastest sample of
                # each size (the cost without interference); the range is that of the
                # per-repeat ratios.
                pairs = [2 * b["us"] / a["us"] for a, b in zip(one[key], two[key])]
                best = 2 * min(b["us"] for b in two[key]) / min(a["us"] for a in one[key])
                out[("c-linear", fmt, key)] = (best, min(pairs), max(pairs))
    alone = s.get("d:alone", {})
    for name, group in s.items():
        if not name.startswith("d:") or name == "d:alone":
            continue
        for key, runs in group.items():
            base = statistics.median(alone[key]) if alone.get(key) else None
            out[(name, key)] = {
                "ratio": _stat([r["wall"] / base for r in runs]) if base else None,
                "threads_left": max(r["threads_left"] for r in runs),
                "fds_pooled": max(r["fds_pooled"] for r in runs),
                "fds_left": max(r["fds_left"] for r in runs),
            }
    for key, values in s.get("e", {}).items():
        out[("e", key)] = _stat([v * 1000 for v in values])
    for how in ("raise", "cancel"):
        for key, values in s.get(f"f:{how}", {}).items():
            never = sum(v is None for v in values)
            out[("f", how, key)] = (_stat([v for v in values if v is not None]), never)
    n = results["sizes"]["g"]
    for key, runs in s.get("g", {}).items():
        out[("g", key)] = {
            "peak_mib": _stat([r["peak_kib"] / 1024 for r in runs]),
            "text_mib": runs[0]["text_kib"] / 1024,
            "text_per_chunk": runs[0]["text_kib"] * 1024 / n,
            "peak_over_text": _stat([r["peak_kib"] / r["text_kib"] for r in runs]),
            "excess_per_chunk": _stat([(r["peak_kib"] - r["text_kib"]) * 1024 / n for r in runs]),
            # Between a stream of n/2 and one of n chunks: peak growth and text growth.
            "growth_per_chunk": _stat(
                [(r["peak_kib"] - r["half_peak_kib"]) * 1024 / (n - n // 2) for r in runs]
            ),
            "text_growth_per_chunk": (runs[0]["text_kib"] - runs[0]["half_text_kib"])
            * 1024
            / (n - n // 2),
        }
    for key, runs in s.get("h", {}).items():
        out[("h", key)] = runs[-1]  # one soak per client
    return out


def _clients(results: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for group in results["samples"].values():
        for key in group:
            if key not in seen:
                seen.append(key)
    return [k for k in CLIENTS if k in seen]


def _targets(results: dict[str, Any], summ: dict[str, Any]) -> list[str]:
    """The issue's targets, each with the figure that meets or misses it."""
    lines = []

    def med(x: Any) -> Optional[float]:
        return x[0] if x else None

    def check(label: str, value: Optional[float], ok: Callable[[float], bool], shown: str) -> None:
        if value is None:
            lines.append(f"| {label} | n/a | not measured |")
        else:
            lines.append(f"| {label} | {shown} | {'met' if ok(value) else '**not met**'} |")

    for sc, title in (("a", "(a) throughput"), ("b", "(b) one event per write")):
        mine = summ.get((sc, "openai", "blazen"), {}).get("ratio")
        check(f"{title}: blazen ≤ 1.5x floor", med(mine), lambda v: v <= 1.5, _fmt(mine))
        oa = summ.get((sc, "openai", "openai"), {}).get("ratio")
        if mine and oa:
            f = oa[0] / mine[0]
            check(f"{title}: ≥ 10x faster than openai SDK", f, lambda v: v >= 10, f"{f:.1f}x")
        an = summ.get((sc, "anthropic", "anthropic"), {}).get("ratio")
        if mine and an:
            f = an[0] / mine[0]
            check(
                f"{title}: ≥ 2x faster than anthropic SDK (ratios to each format's floor)",
                f,
                lambda v: v >= 2,
                f"{f:.1f}x",
            )
    lin = summ.get(("c-linear", "openai", "blazen"))
    check("(c) doubling deltas at most doubles time", med(lin), lambda v: v <= 2.0, _fmt(lin))
    # Issue 29: bulk and tool calls close to the floor, and ahead of what users write by
    # hand with the two SSE libraries, on both formats; one event per write ahead too.
    for sc, limit in (("a", 1.2), ("c", 1.25), ("b", None)):
        for fmt in ("openai", "anthropic"):
            mine = summ.get((sc, fmt, "blazen"), {}).get("ratio")
            if limit is not None:
                check(
                    f"({sc}) {fmt}: blazen ≤ {limit}x floor (issue 29)",
                    med(mine),
                    lambda v, lim=limit: v <= lim,
                    _fmt(mine),
                )
            for peer in ("httpx-sse", "requests-sseclient"):
                theirs = summ.get((sc, fmt, peer), {}).get("ratio")
                if mine and theirs:
                    f = theirs[0] / mine[0]
                    check(
                        f"({sc}) {fmt}: blazen ahead of {peer} (issue 29)",
                        f,
                        lambda v: v >= 1,
                        f"{f:.2f}x faster",
                    )
    for sc, title in (("a", "(a) throughput"), ("c", "(c) tool calls")):
        chat = summ.get((sc, "openai", "blazen"), {}).get("ratio")
        resp = summ.get((sc, "responses", "blazen"), {}).get("ratio")
        if chat and resp:
            # Each wire against its own floor: the Responses events are larger.
            f = resp[0] / chat[0]
            check(
                f"{title}: the Responses wire no slower per event than the chat wire "
                "(each over its own floor)",
                f,
                lambda v: v <= 1.1,
                f"{f:.2f}x",
            )
        sdk = summ.get((sc, "responses", "openai"), {}).get("ratio")
        if resp and sdk:
            f = sdk[0] / resp[0]
            check(
                f"{title}: Responses wire vs the openai SDK's Responses stream",
                f,
                lambda v: v >= 1,
                f"{f:.1f}x faster",
            )
    counts = results["sizes"]["d_counts"]
    for n, limit in zip(counts, (1.3, 2.0)):
        d = summ.get((f"d:{n}", "blazen"))
        r = d["ratio"] if d else None
        # What the contract's own shape (a worker thread per stream) costs, and what one
        # reader thread for every socket could reach, for reference.
        shown = _fmt(r)
        for key, label in (
            ("raw-threaded", "raw socket + worker thread"),
            ("raw-shared", "raw socket + one shared reader"),
        ):
            floor = summ.get((f"d:{n}", key))
            if floor and r:
                shown += f"; {label} {_fmt(floor['ratio'])}"
        check(
            f"(d) {n} streams ≤ {limit}x one stream", med(r), lambda v, lim=limit: v <= lim, shown
        )
        if d:
            left = d["threads_left"] + d["fds_left"]
            check(
                f"(d) {n} streams: no thread or descriptor left",
                float(left),
                lambda v: v <= 0,
                f"{d['threads_left']} threads, {d['fds_left']} fds",
            )
    # attrs is a dependency again (the design card's; issue 14): what blazen adds on top of
    # the three libraries it is built on is what its own code costs. The ratio to `import
    # requests, sseclient` alone is in the (e) table.
    e_b, e_a = summ.get(("e", "blazen")), summ.get(("e", "requests-sseclient-attrs"))
    if e_b and e_a:
        f = e_b[0] / e_a[0]
        check(
            "(e) import ≤ 1.2x `import requests, sseclient, attrs`",
            f,
            lambda v: v <= 1.2,
            f"{f:.2f}x",
        )
    for how in ("raise", "cancel"):
        got = summ.get(("f", how, "blazen"))
        stat = got[0] if got else None
        worst = stat[2] if stat else None
        check(
            f"(f) {how} → server sees close < 5 ms (worst)",
            worst,
            lambda v: v < 5,
            _fmt(stat, " ms"),
        )
    g = summ.get(("g", "blazen"))
    if g:
        # One object per chunk costs at least 56 bytes (an empty str). The text itself is
        # held twice for a moment while the response joins it.
        grow = g["growth_per_chunk"]
        limit = 2 * g["text_growth_per_chunk"] + 8
        check(
            f"(g) per chunk, the peak grows by the text (held twice while joined) and no "
            f"object (≤ {limit:.1f} B/chunk; one str per chunk costs ≥ 56 B)",
            med(grow),
            lambda v: v <= limit,
            _fmt(grow, " B", 1),
        )
    h = summ.get(("h", "blazen"))
    if h:
        per_100k = h["kib_per_10k"] * 10 / 1024
        check(
            "(h) 100,000 streams through one model add ≤ 3 MiB resident memory (issue 20)",
            per_100k,
            lambda v: v <= 3,
            f"{per_100k:.2f} MiB (slope over {h['streams']:,} streams)",
        )
    return lines


def _grown(h: dict[str, Any]) -> str:
    # The collector census counts a few objects of the harness itself (its futures'
    # weak references, the census's own counter): only growth that scales is shown.
    floor = max(50, h["streams"] // 1000)
    shown = [f"`{t.removeprefix('builtins.')}` +{n:,}" for t, n in h["objects"] if n >= floor]
    return ", ".join(shown) or "none"


def _soak_section(results: dict[str, Any], summ: dict[str, Any], clients: list[str]) -> list[str]:
    sizes = results["sizes"]
    out = [
        "## (h) Soak: resident memory over many short streams",
        "",
        "A fresh process per client; one client object (one blazen model, one `openai.OpenAI`, "
        f"one `requests.Session`...) shared by four threads, each stream {CHUNKS} text chunks "
        "in one write. After "
        f"{sizes['h_warmup']:,} streams of warm-up, resident memory is read after a full "
        f"collection every {sizes['h_every']:,} streams, up to {sizes['h_rounds']} times (a "
        f"client still streaming after {sizes['h_seconds']} s stops early). Growth per 10,000 "
        "streams is the slope of a least-squares line through those samples; total is the "
        "last sample minus the first. blazen mixes blocking calls, `complete_async`, "
        "`Streaming.start` handles, server errors, raising callbacks and three kinds of "
        "cancel through one model; objects are the types the garbage collector tracks more "
        "of at the end than after the warm-up.",
        "",
        "| client | streams after warm-up | growth per 10,000 streams | total growth "
        "| µs per stream | threads, fds left | objects that grew |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in clients:
        h = summ.get(("h", key))
        if h:
            out.append(
                f"| {_name(key)} | {h['streams']:,} | {h['kib_per_10k']:+,.0f} KiB "
                f"| {h['growth_kib']:+,} KiB | {h['us_per_stream']:,.0f} "
                f"| {h['threads_left']}, {h['fds_left']} | {_grown(h)} |"
            )
    out.append("")
    return out


def render(results: dict[str, Any]) -> str:
    """The markdown report."""
    summ = summarise(results)
    clients = _clients(results)
    m = results["machine"]
    sizes = results["sizes"]
    out = [
        f"# blazen benchmarks{': ' + results['label'] if results.get('label') else ''}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['system']}, Python {m['python']}. "
        f"Load average before/after: {results['load_before']} / {results.get('load_after')}. "
        f"Versions: {', '.join(f'{k} {v}' for k, v in m['versions'].items())}.",
        "",
        *[f"{note}\n" for note in results.get("notes", ())],
        "Cells are the median over repeats with (min-max); ratios compare each repeat with the "
        "raw-socket floor measured in the same repeat (lower is better; 1.00x is the floor).",
        "",
    ]
    for fmt in _FORMATS:
        rows = [k for k in clients if any((sc, fmt, k) in summ for sc in ("a", "b", "c"))]
        if not rows:
            continue
        title = _TITLES[fmt]
        out += [
            f"## {title} format: time per chunk vs the floor",
            "",
            f"(a) {sizes['a']:,} chunks written at once · (b) {sizes['b']:,} chunks, one write "
            f"each · (c) two parallel tool calls of {sizes['c']:,} argument deltas each, "
            "assembled (per delta pair); linearity is the time for twice the deltas over the "
            "time for the base size, fastest sample of each (2.00 is linear).",
            "",
            "| client | (a) throughput | µs/chunk | (b) one event per write | µs/chunk "
            "| (c) tool calls | (c) 2x deltas / 1x |",
            "|---|---|---|---|---|---|---|",
        ]
        for key in rows:
            a = summ.get(("a", fmt, key), {})
            b = summ.get(("b", fmt, key), {})
            c = summ.get(("c", fmt, key), {})
            lin = summ.get(("c-linear", fmt, key))
            us_a = a.get("us")
            us_b = b.get("us")
            out.append(
                f"| {_name(key)} | {_fmt(a.get('ratio'))} | {f'{us_a[0]:.1f}' if us_a else 'n/a'} "
                f"| {_fmt(b.get('ratio'))} | {f'{us_b[0]:.1f}' if us_b else 'n/a'} "
                f"| {_fmt(c.get('ratio'))} | {_fmt(lin, '', 2)} |"
            )
        out.append("")
        if any(k in rows for k in ("litellm",)) and fmt == "openai":
            out += [
                "litellm streams a tenth of the chunks in (a) and (c) (results are per chunk).",
                "",
            ]

    d_names = sorted(
        (n for n in results["samples"] if n.startswith("d:") and n != "d:alone"),
        key=lambda n: int(n[2:]),
    )
    if d_names:
        out += [
            "## (d) Concurrent streams in a ThreadPoolExecutor",
            "",
            f"Each stream: {sizes['d_chunks']} chunks, one every "
            f"{sizes['d_delay_us'] / 1000:g} ms. "
            "Wall time of N streams at once over one stream alone; threads and file descriptors "
            "left after the pool finished (pooled: kept by the library's connection pool; left: "
            "after closing the client).",
            "",
            "| client | "
            + " | ".join(f"{n[2:]} streams" for n in d_names)
            + " | threads left | fds pooled | fds left |",
            "|---|" + "---|" * (len(d_names) + 3),
        ]
        for key in clients:
            cells = [summ.get((n, key)) for n in d_names]
            if not any(cells):
                continue
            last = [c for c in cells if c]
            threads = max(c["threads_left"] for c in last)
            pooled = max(c["fds_pooled"] for c in last)
            left = max(c["fds_left"] for c in last)
            out.append(
                f"| {_name(key)} | "
                + " | ".join(_fmt(c["ratio"]) if c else "n/a" for c in cells)
                + f" | {threads} | {pooled} | {left} |"
            )
        out.append("")

    if any(("e", k) in summ for k in clients):
        ref = summ.get(("e", "requests-sseclient"))
        out += [
            "## (e) Import time (fresh process each time)",
            "",
            "| client | import | vs `import requests, sseclient` |",
            "|---|---|---|",
        ]
        for key in [*clients, *IMPORT_REFERENCES]:
            e = summ.get(("e", key))
            if e:
                rel = f"{e[0] / ref[0]:.2f}x" if ref else "n/a"
                out.append(f"| {_name(key)} | {_fmt(e, ' ms', 1)} | {rel} |")
        out.append("")

    if any(("f", "raise", k) in summ for k in clients):
        out += [
            "## (f) Abort: time until the server sees the connection close",
            "",
            "raise: the chunk handler (or the body of the loop) raises; cancel: another thread "
            "cancels while the reader waits for bytes. Over 2 s counts as never.",
            "",
            "| client | raise | cancel |",
            "|---|---|---|",
        ]
        for key in clients:
            cells = []
            for how in ("raise", "cancel"):
                got = summ.get(("f", how, key))
                if not got:
                    cells.append("no way to cancel")
                    continue
                stat, never = got
                cell = _fmt(stat, " ms")
                if never:
                    cell += f"; {never} never closed"
                cells.append(cell)
            out.append(f"| {_name(key)} | {cells[0]} | {cells[1]} |")
        out.append("")

    if any(("g", k) in summ for k in clients):
        out += [
            f"## (g) Peak memory for one stream of {sizes['g']:,} chunks",
            "",
            "Peak resident memory added by the stream (fresh process), the text it assembled, "
            "and how much the peak grows per chunk between a stream half as long and this one, "
            "next to how much the text grows (litellm is too slow to stream this many).",
            "",
            "| client | peak | text | peak / text | peak growth per chunk | text per chunk |",
            "|---|---|---|---|---|---|",
        ]
        for key in clients:
            g = summ.get(("g", key))
            if g:
                out.append(
                    f"| {_name(key)} | {_fmt(g['peak_mib'], ' MiB', 1)} | {g['text_mib']:.1f} MiB "
                    f"| {_fmt(g['peak_over_text'], 'x', 1)} "
                    f"| {_fmt(g['growth_per_chunk'], ' B', 1)} "
                    f"| {g['text_growth_per_chunk']:.1f} B |"
                )
        out.append("")

    if any(("h", k) in summ for k in clients):
        out += _soak_section(results, summ, clients)

    out += ["## Targets (issues 9, 26, 29)", "", "| target | blazen | verdict |", "|---|---|---|"]
    out += _targets(results, summ)
    out.append("")
    if results.get("errors"):
        out += ["## Errors", ""] + [f"- {e}" for e in results["errors"]] + [""]
    return "\n".join(out)


def chart(results: dict[str, Any], path: Path) -> bool:
    """Draw the ratios and import times; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    summ = summarise(results)
    clients = _clients(results)
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.5))
    labels = [("a", "(a) throughput"), ("b", "(b) one write per event"), ("c", "(c) tool calls")]
    for ax, fmt in zip(axes[:2], ("openai", "anthropic")):
        rows = [k for k in clients if ("a", fmt, k) in summ]
        width = 0.8 / max(len(labels), 1)
        for i, (sc, label) in enumerate(labels):
            meds, errs = [], [[], []]
            for key in rows:
                st = summ.get((sc, fmt, key), {}).get("ratio")
                med, lo, hi = st if st else (float("nan"),) * 3
                meds.append(med)
                errs[0].append(med - lo)
                errs[1].append(hi - med)
            xs = [j + (i - 1) * width for j in range(len(rows))]
            ax.bar(xs, meds, width, yerr=errs, label=label, capsize=2)
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([CLIENTS[k].name for k in rows], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("time per chunk / raw-socket floor (log)")
        ax.set_title(f"{'OpenAI' if fmt == 'openai' else 'Anthropic'} format")
        ax.legend(fontsize=8)
    ax = axes[2]
    rows = [k for k in clients if ("e", k) in summ]
    meds = [summ[("e", k)][0] for k in rows]
    ax.bar(range(len(rows)), meds, color=["tab:red" if k == "blazen" else "tab:gray" for k in rows])
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([CLIENTS[k].name for k in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ms (log)")
    ax.set_title("(e) import time")
    fig.suptitle(
        f"blazen benchmarks · {results['machine']['cpu']} · load {results['load_before']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_report(results: dict[str, Any], out: Path) -> str:
    """Write ``results.md`` and ``chart.png`` into ``out``; return the markdown."""
    text = render(results)
    (out / "results.md").write_text(text + "\n")
    chart(results, out / "chart.png")
    return text
