// The comparison's charts, drawn with Observable Plot (static/vendor, shipped in the wheel) from
// the JSON the page carries (<script type="application/json" id="chart-data">, written by
// srtd/collector/_compare.py, Pareto fronts included).  Drawn again when live.js replaces
// <main> (the "srtd:refreshed" event) and when an axis or a series is toggled.
"use strict";
(function () {
  const state = { logX: false, logY: false, hidden: new Set() };
  const script = document.querySelector("script[nonce]");
  const nonce = script ? script.nonce : "";
  const X = "tok_s_per_user", Y = "tok_s_per_gpu";
  const LATENCIES = [
    ["ttft", "TTFT (ms)", "ttft_p50_ms", "ttft_p99_ms"],
    ["itl", "ITL (ms)", "itl_p50_ms", null],
    ["e2e", "e2e latency (ms)", "e2e_p50_ms", "e2e_p99_ms"],
    ["power", "tok/s per W", "tok_s_per_w", null], // drawn where the page has its figure (power sampled)
  ];
  // what a tip shows of a point besides the chart's own x and y, in this order
  const TIP = {
    series: "series", configuration: "config", job: "job_id", concurrency: "concurrency", "tok/s": "tok_s",
    "TTFT p50 (ms)": "ttft_p50_ms", "ITL p50 (ms)": "itl_p50_ms", "e2e p50 (ms)": "e2e_p50_ms",
  };
  const LATENCY_TIP = { series: "series", configuration: "config", "tok/s per GPU": Y, "tok/s per user": X };

  function data() {
    const holder = document.getElementById("chart-data");
    return holder ? JSON.parse(holder.textContent) : null;
  }

  function colors(series) {
    return { domain: series, range: series.map((_, i) => d3.schemeTableau10[i % 10]) };
  }

  // A log scale cannot place zero or less: such a point is left out while the axis is log.
  function placeable(p, keys) {
    return keys.every((k) => p[k] != null && (!(k === X ? state.logX : state.logY) || p[k] > 0));
  }

  // Plot's own <style> would be refused by the page's CSP without the page's nonce.
  function adopt(chart) {
    chart.querySelectorAll("style").forEach((s) => s.setAttribute("nonce", nonce));
    return chart;
  }

  function throughput(figure, points, color) {
    const shown = points.filter((p) => placeable(p, [X, Y]));
    // one path per series, in the series' order, each drawn left to right
    const order = (p) => color.domain.indexOf(p.series);
    const front = shown.filter((p) => p.pareto).sort((a, b) => order(a) - order(b) || a[X] - b[X]);
    const chart = Plot.plot({
      width: Math.max(320, figure.clientWidth - 8), height: 420, marginLeft: 64, marginBottom: 44,
      x: { type: state.logX ? "log" : "linear", label: "tok/s per user →", grid: true, nice: true },
      y: { type: state.logY ? "log" : "linear", label: "↑ output tok/s per GPU", grid: true, nice: true },
      color,
      marks: [
        Plot.line(front, { x: X, y: Y, z: "series", stroke: "series", strokeWidth: 2, className: "pareto" }),
        Plot.dot(shown, { x: X, y: Y, fill: "series", r: 5, className: "points", ariaLabel: "config", channels: TIP, tip: true }),
      ],
    });
    // each circle says which point it is (Plot draws them in the data's order)
    chart.querySelectorAll("g.points circle").forEach((c, i) => {
      c.dataset.job = shown[i].job_id;
      c.dataset.point = shown[i].point;
      c.dataset.series = shown[i].series;
      c.dataset.pareto = shown[i].pareto ? "1" : "0";
    });
    chart.querySelectorAll("g.pareto path").forEach((path, i) => {
      path.dataset.series = [...new Set(front.map((p) => p.series))][i];
    });
    return chart;
  }

  function latency(figure, points, color, title, p50, p99) {
    const shown = points.filter((p) => p.concurrency != null && p[p50] != null && (!state.logY || p[p50] > 0));
    const marks = [
      Plot.line(shown, { x: "concurrency", y: p50, z: "series", stroke: "series", marker: "circle", sort: "concurrency", channels: LATENCY_TIP, tip: true }),
    ];
    if (p99) {
      const tail = points.filter((p) => p.concurrency != null && p[p99] != null && (!state.logY || p[p99] > 0));
      marks.push(Plot.line(tail, { x: "concurrency", y: p99, z: "series", stroke: "series", strokeDasharray: "4,3", sort: "concurrency" }));
    }
    return Plot.plot({
      width: Math.max(260, figure.clientWidth - 8), height: 240, marginLeft: 56,
      title: p99 ? `${title}: p50 (solid), p99 (dashed)` : p50.endsWith("_ms") ? `${title}: p50` : title,
      x: { type: state.logX ? "log" : "linear", label: "concurrency →", grid: true, nice: true },
      y: { type: state.logY ? "log" : "linear", label: `↑ ${title}`, grid: true, nice: true, zero: !state.logY },
      color, marks,
    });
  }

  function toggle(label, checked, change) {
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = checked;
    box.addEventListener("change", () => { change(box.checked); draw(); });
    const wrap = document.createElement("label");
    wrap.append(box, " " + label);
    return wrap;
  }

  function controls(holder, series, color) {
    holder.replaceChildren(
      toggle("log x", state.logX, (on) => { state.logX = on; }),
      toggle("log y", state.logY, (on) => { state.logY = on; }),
    );
    series.forEach((name, i) => {
      const item = toggle(name, !state.hidden.has(name), (on) => { on ? state.hidden.delete(name) : state.hidden.add(name); });
      item.className = "series-toggle";
      item.dataset.series = name;
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = color.range[i];
      item.prepend(swatch);
      holder.append(item);
    });
  }

  function draw() {
    const got = data();
    const holder = document.getElementById("chart-controls");
    if (!got || !holder || typeof Plot === "undefined") return;
    const color = colors(got.series);
    controls(holder, got.series, color);
    const points = got.points.filter((p) => !state.hidden.has(p.series));
    const main = document.querySelector('[data-chart="throughput"]');
    if (main) main.replaceChildren(adopt(throughput(main, points, color)));
    for (const [name, title, p50, p99] of LATENCIES) {
      const figure = document.querySelector(`[data-chart="${name}"]`);
      if (figure) figure.replaceChildren(adopt(latency(figure, points, color, title, p50, p99)));
    }
  }

  document.addEventListener("srtd:refreshed", draw);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
