// The lab's graphs, drawn with plotly.js from the record the page embeds (<script type="application/json">):
// no inline script, so the page's Content-Security-Policy allows scripts from this server only.
"use strict";
(function () {
  // Store text reaches plotly's labels, which read a few HTML tags: it goes in as text.
  const esc = (s) => String(s === null || s === undefined ? "" : s)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                   "#7f7f7f", "#bcbd22"];
  const hover = "run #%{customdata[0]}<br>kernel %{customdata[1]}<br>commit %{customdata[2]}" +
                "<br>label %{customdata[3]}<br>%{y:.4s}<extra>%{fullData.name}</extra>";
  const config = {responsive: true, displaylogo: false};

  function read(id) {
    const el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function about(run) {
    return [run.run_id, esc(run.kernel), esc(run.commit ? run.commit.slice(0, 12) : "none"), esc(run.label || "")];
  }

  function opens(el) {
    el.on("plotly_click", (event) => {
      const point = event.points && event.points[0];
      if (point && point.customdata) {
        window.location.href = "/runs/" + encodeURIComponent(point.customdata[0]);
      }
    });
  }

  function drawn(el) {
    el.dataset.drawn = "1";
  }

  function seriesGraph(view, el) {
    const traces = [];
    const shapes = [];
    view.machines.forEach((machine, i) => {
      const color = palette[i % palette.length];
      const name = esc(machine.hostname);
      const x = [], y = [], data = [];
      machine.runs.forEach((run) => run.trials.forEach((value) => {
        x.push(run.x); y.push(value); data.push(about(run));
      }));
      traces.push({type: "scatter", mode: "markers", name: name + " trials", legendgroup: name, showlegend: false,
                   x: x, y: y, customdata: data, hovertemplate: hover,
                   marker: {color: color, size: 5, opacity: 0.45}});
      traces.push({type: "scatter", mode: "lines+markers", name: name, legendgroup: name,
                   x: machine.runs.map((r) => r.x), y: machine.runs.map((r) => r.mean),
                   customdata: machine.runs.map(about), hovertemplate: hover,
                   line: {color: color, width: 1.5}, marker: {color: color, size: 7}});
      const byRun = new Map(machine.runs.map((r) => [r.run_id, r]));
      const marked = machine.changes.filter((c) => byRun.has(c.run_id));
      marked.forEach((c) => shapes.push({type: "line", xref: "x", yref: "paper", x0: c.x, x1: c.x, y0: 0, y1: 1,
                                         line: {color: color, dash: "dash", width: 1.5}}));
      if (marked.length) {
        traces.push({type: "scatter", mode: "markers", name: name + " changes", legendgroup: name,
                     x: marked.map((c) => c.x), y: marked.map((c) => byRun.get(c.run_id).mean),
                     customdata: marked.map((c) => about(byRun.get(c.run_id))),
                     text: marked.map((c) => esc(machine.hostname + ": " + c.text)),
                     hovertemplate: "%{text}<br>" + hover,
                     marker: {color: color, size: 14, symbol: "star-open", line: {width: 2}}});
      }
    });
    const xaxis = {title: {text: esc(view.x_title)}};
    if (view.order === "time") {
      xaxis.type = "date";
    } else {
      xaxis.type = "category";
      xaxis.categoryorder = "array";
      xaxis.categoryarray = view.categories;
      // The categories are kernel releases or commits from the store, and plotly reads a tick's text as
      // markup (<b>, <a href>): each tick is given its category's text escaped.
      xaxis.tickmode = "array";
      xaxis.tickvals = view.categories;
      xaxis.ticktext = view.categories.map(esc);
    }
    const layout = {title: {text: esc(view.title)}, xaxis: xaxis, shapes: shapes, hovermode: "closest",
                    yaxis: {title: {text: esc(view.y_title)}, rangemode: "tozero"},
                    legend: {orientation: "h"}, margin: {t: 50}};
    return Plotly.newPlot(el, traces, layout, config);
  }

  function coresGraph(view, el) {
    const traces = [];
    view.lines.forEach((line, i) => {
      const color = palette[i % palette.length];
      const name = esc(line.name);
      const run = {run_id: line.run_id, kernel: line.kernel, commit: line.commit, label: line.label};
      const x = [], y = [];
      line.trials.forEach((trials, j) => trials.forEach((value) => { x.push(line.cores[j]); y.push(value); }));
      traces.push({type: "scatter", mode: "markers", name: name + " trials", legendgroup: name, showlegend: false,
                   x: x, y: y, customdata: x.map(() => about(run)), hovertemplate: hover,
                   marker: {color: color, size: 5, opacity: 0.45}});
      traces.push({type: "scatter", mode: "lines+markers", name: name, legendgroup: name,
                   x: line.cores, y: line.means, customdata: line.cores.map(() => about(run)),
                   hovertemplate: hover, line: {color: color}, marker: {color: color, size: 7}});
    });
    const layout = {title: {text: esc(view.title)}, hovermode: "closest",
                    xaxis: {title: {text: "cores"}, rangemode: "tozero"},
                    yaxis: {title: {text: esc(view.y_title)}, rangemode: "tozero"},
                    legend: {orientation: "h"}, margin: {t: 50}};
    return Plotly.newPlot(el, traces, layout, config);
  }

  const el = document.getElementById("graph");
  if (!el) {
    return;
  }
  const series = read("graph-data");
  const cores = read("cores-data");
  const drawing = series ? seriesGraph(series, el) : cores ? coresGraph(cores, el) : null;
  if (drawing) {
    drawing.then(() => { opens(el); drawn(el); });
  }
})();
