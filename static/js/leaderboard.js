// Draws the leaderboard's charts from json_script data: the ranking (horizontal bars with 95% interval whiskers),
// the score over time (points at each model's knowledge cut-off) and the failure categories (stacked bars); again
// whenever htmx swaps a breakdown in. Loaded with `defer`, so it runs once the whole page is parsed: a breakdown
// opened by link (?view=failures) is drawn too. Tables beside each chart hold the same numbers.
(function () {
  const COLOURS = { passed: "#1a7f37", syntax: "#8250df", name_import: "#bf3989", runtime: "#cf222e",
                    wrong_result: "#fb8500", timeout: "#9a6700", memory: "#0969da", forbidden: "#57606a",
                    tampering: "#24292f", unclassified: "#afb8c1" };

  // A label too narrow for its chart (a phone) on lines of whole words, never cut: the model's name wrapped, then its
  // setting, the trailing "(...)", on a line of its own, so "(reference line)" and "(with paper)" always show.
  function lines(label, chars) {
    const match = String(label).match(/^(.*?)\s*(\([^()]*\))$/);
    const parts = match && match[1] ? [match[1], match[2]] : [String(label)];
    const out = [];
    for (const part of parts) {
      let line = "";
      for (let word of part.split(/\s+/)) {
        while (word.length > chars) {  // a word longer than a line is split, not cut
          if (line) { out.push(line); line = ""; }
          out.push(word.slice(0, chars));
          word = word.slice(chars);
        }
        if (line && line.length + 1 + word.length <= chars) line += " " + word;
        else { if (line) out.push(line); line = word; }
      }
      if (line) out.push(line);
    }
    return out.length > 1 ? out : out[0] || "";
  }

  // The labels of a horizontal bar chart's rows wrapped for its width, and its box made tall enough for them (each
  // row at least `row` pixels, as the server sized it, more when a label takes more lines).
  function rowLabels(canvas, labels, row) {
    const chars = Math.max(14, Math.floor(canvas.parentElement.clientWidth / 20));  // a third of the width for names
    const wrapped = labels.map((label) => lines(label, chars));
    const most = Math.max(1, ...wrapped.map((l) => [].concat(l).length));
    canvas.parentElement.style.height = `${80 + labels.length * Math.max(row, 15 * most + 8)}px`;
    return wrapped;
  }

  function ranking() {
    const canvas = document.getElementById("ranking-chart");
    const source = document.getElementById("ranking-data");
    if (!canvas || !source || canvas.dataset.drawn) return;
    canvas.dataset.drawn = "1";
    const rows = JSON.parse(source.textContent);
    const labels = rowLabels(canvas, rows.map((r) => r.label), 36);
    const whiskers = {
      id: "whiskers",
      afterDatasetsDraw(chart) {
        const { ctx, scales: { x, y } } = chart;
        ctx.save();
        ctx.strokeStyle = "#1b1f24";
        ctx.lineWidth = 1.5;
        rows.forEach((row, i) => {
          const cy = y.getPixelForValue(i), lo = x.getPixelForValue(row.low), hi = x.getPixelForValue(row.high);
          ctx.beginPath();
          ctx.moveTo(lo, cy); ctx.lineTo(hi, cy);
          ctx.moveTo(lo, cy - 5); ctx.lineTo(lo, cy + 5);
          ctx.moveTo(hi, cy - 5); ctx.lineTo(hi, cy + 5);
          ctx.stroke();
        });
        ctx.restore();
      },
    };
    new window.Chart(canvas, {
      type: "bar",
      data: {
        labels: rows.map((r) => r.label),
        datasets: [{ label: "Scaled pass@1 (%)", data: rows.map((r) => r.value), backgroundColor: "#0a58ca99",
                     borderColor: "#0a58ca", borderWidth: 1 }],
      },
      options: {
        indexAxis: "y", maintainAspectRatio: false, animation: false,
        scales: { x: { min: 0, max: 100, title: { display: true, text: "scaled pass@1 (%)" } },
                  y: { ticks: { autoSkip: false, callback: (value) => labels[value] } } },
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: { title: (items) => rows[items[0].dataIndex].label,
                                  label: (c) => `${rows[c.dataIndex].value.toFixed(1)}% [${rows[c.dataIndex].low.toFixed(1)}, ${rows[c.dataIndex].high.toFixed(1)}]` } },
        },
      },
      plugins: [whiskers],
    });
  }

  // Scaled pass@1 against each model's knowledge cut-off (a date, drawn on a linear axis of milliseconds: the
  // vendored Chart.js has no date adapter), with the interval as a vertical whisker.
  function overTime() {
    const canvas = document.getElementById("over-time-chart");
    const source = document.getElementById("over-time-data");
    if (!canvas || !source || canvas.dataset.drawn) return;
    canvas.dataset.drawn = "1";
    const points = JSON.parse(source.textContent).map((p) => ({ ...p, x: Date.parse(p.date), y: p.value }));
    const day = (ms) => new Date(ms).toISOString().slice(0, 10);
    const whiskers = {
      id: "over-time-whiskers",
      afterDatasetsDraw(chart) {
        const { ctx, scales: { x, y } } = chart;
        ctx.save();
        ctx.strokeStyle = "#1b1f24";
        ctx.lineWidth = 1;
        points.forEach((p) => {
          const cx = x.getPixelForValue(p.x), lo = y.getPixelForValue(p.low), hi = y.getPixelForValue(p.high);
          ctx.beginPath();
          ctx.moveTo(cx, lo); ctx.lineTo(cx, hi);
          ctx.moveTo(cx - 4, lo); ctx.lineTo(cx + 4, lo);
          ctx.moveTo(cx - 4, hi); ctx.lineTo(cx + 4, hi);
          ctx.stroke();
        });
        ctx.restore();
      },
    };
    const month = 30 * 24 * 3600 * 1000;
    const xs = points.map((p) => p.x);
    // Ticks at the first of a month (every few months over a long span), labelled by that month: the linear
    // axis's own round-millisecond ticks fell mid-month, labelled the same month twice and beside a cut-off of
    // the 1st the label of the month before.
    const monthTicks = (axis) => {
      const starts = [];
      const first = new Date(axis.min);
      for (let y = first.getUTCFullYear(), m = first.getUTCMonth() + 1; ; m += 1) {
        const t = Date.UTC(y, m, 1);  // Date.UTC carries a month past 11 into the next year
        if (t > axis.max) break;
        starts.push(t);
      }
      const step = Math.max(1, Math.ceil(starts.length / 8));
      axis.ticks = starts.filter((_, i) => i % step === 0).map((value) => ({ value }));
    };
    new window.Chart(canvas, {
      type: "scatter",
      data: { datasets: [{ label: "Scaled pass@1 (%)", data: points, backgroundColor: "#0a58ca", pointRadius: 5,
                             clip: false }] },  // a point at 0% or 100% is drawn whole
      options: {
        maintainAspectRatio: false, animation: false,
        scales: {
          x: { type: "linear", min: Math.min(...xs) - month, max: Math.max(...xs) + month,
               title: { display: true, text: "knowledge cut-off" }, afterBuildTicks: monthTicks,
               ticks: { callback: (v) => day(v).slice(0, 7) } },
          y: { min: 0, max: 100, title: { display: true, text: "scaled pass@1 (%)" } },
        },
        plugins: {
          legend: { display: false },
          tooltip: { callbacks: { label: (c) => { const p = points[c.dataIndex];
            return `${p.label}: ${p.value.toFixed(1)}% [${p.low.toFixed(1)}, ${p.high.toFixed(1)}], cut-off ${p.date}`; } } },
        },
      },
      plugins: [whiskers],
    });
  }

  function failures() {
    const canvas = document.getElementById("failure-chart");
    const source = document.getElementById("failure-data");
    if (!canvas || !source || canvas.dataset.drawn) return;
    canvas.dataset.drawn = "1";
    const data = JSON.parse(source.textContent);
    const labels = rowLabels(canvas, data.labels, 32);
    new window.Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels,
        datasets: data.segments.map((s) => ({ label: s.label, data: s.shares, counts: s.counts,
                                              backgroundColor: COLOURS[s.key] || "#6e7781" })),
      },
      options: {
        indexAxis: "y", maintainAspectRatio: false, animation: false,
        scales: { x: { stacked: true, min: 0, max: 100, title: { display: true, text: "share of scored answers (%)" } },
                  y: { stacked: true, ticks: { autoSkip: false, callback: (value) => labels[value] } } },
        plugins: {
          legend: { position: "bottom" },
          tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${c.dataset.counts[c.dataIndex]} (${c.parsed.x.toFixed(1)}%)` } },
        },
      },
    });
  }

  function draw() {
    if (!window.Chart) return;
    ranking();
    overTime();
    failures();
  }

  draw();
  document.body.addEventListener("htmx:afterSettle", draw);
})();
