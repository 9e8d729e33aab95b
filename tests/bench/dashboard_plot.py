#!/usr/bin/env python3
"""Draw the panels of a Grafana dashboard (docs/grafana/twopc-dashboard.json) with gnuplot, from
the same PromQL expressions asked of a Prometheus server's HTTP API (/api/v1/query_range). This
is not Grafana: Grafana's own variables are given fixed values ($__rate_interval: 10s, $instance:
every instance), and each panel becomes a gnuplot plot of its targets' series, named by their
legendFormat.

    dashboard_plot.py PROMETHEUS_URL START END DASHBOARD.json WORKDIR OUT.png
"""
import json
import math
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request

STEP = 2
VARIABLES = {"$__rate_interval": "10s", "$__interval": "2s", "$instance": ".+"}
UNITS = {"s": "seconds", "short": "", "bytes": "bytes"}


def query_range(url, expr, start, end):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": STEP})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise SystemExit(f"dashboard_plot: Prometheus refused {expr!r}: {body}")
    return body["data"]["result"]


def legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt or "") or \
        "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def gp_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    url, start, end, dashboard, work, out = sys.argv[1:7]
    start, end = int(start), int(end)
    panels = json.load(open(dashboard))["panels"]
    os.makedirs(work, exist_ok=True)
    rows = math.ceil(len(panels) / 2)
    gp = [
        f"set terminal pngcairo size 1600,{rows * 420 + 60} font 'sans,10'",
        f"set output {gp_string(out)}",
        "set termoption noenhanced",
        "set key below horizontal font 'sans,9'",
        "set grid",
        "set xlabel 'seconds since the job started'",
        f"set xrange [0:{end - start}]",
        "set multiplot layout %d,2 title %s font 'sans,12'" % (rows, gp_string(
            "twopc dashboard (docs/grafana/twopc-dashboard.json): its queries against Prometheus, "
            "drawn by gnuplot (tests/bench/dashboard_png.sh), not by Grafana")),
    ]
    for p, panel in enumerate(panels):
        curves = []
        for t, target in enumerate(panel["targets"]):
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            for s, series in enumerate(query_range(url, expr, start, end)):
                path = os.path.join(work, f"p{p}-t{t}-s{s}.dat")
                with open(path, "w") as f:
                    for ts, v in series["values"]:
                        v = float(v)
                        if math.isfinite(v):
                            f.write(f"{float(ts) - start:.1f} {v:.9g}\n")
                curves.append((path, legend(target.get("legendFormat"), series["metric"])))
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        gp.append(f"set title {gp_string(panel['title'])}")
        gp.append(f"set ylabel {gp_string(UNITS.get(unit, unit))}")
        gp.append("set yrange [0:*]")
        if curves:
            gp.append("plot " + ", ".join(
                f"{gp_string(path)} using 1:2 with lines lw 1.5 title {gp_string(name)}"
                for path, name in curves))
        else:
            gp.append("set label 1 'no data' at graph 0.45, graph 0.5")
            gp.append("plot 1/0 notitle")
            gp.append("unset label 1")
        print(f"panel {p + 1} {panel['title']!r}: {len(curves)} series", file=sys.stderr)
    gp.append("unset multiplot")
    script = os.path.join(work, "dashboard.gp")
    open(script, "w").write("\n".join(gp) + "\n")
    subprocess.run(["gnuplot", script], check=True)


if __name__ == "__main__":
    main()
