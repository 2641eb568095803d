// Draws the leaderboard's ranking as horizontal bars with 95% interval whiskers (data from json_script).
(function () {
  const canvas = document.getElementById("ranking-chart");
  const source = document.getElementById("ranking-data");
  if (!canvas || !source || !window.Chart) return;
  const rows = JSON.parse(source.textContent);
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
      scales: { x: { min: 0, max: 100, title: { display: true, text: "scaled pass@1 (%)" } } },
      plugins: {
        legend: { display: false },
        tooltip: { callbacks: { label: (c) => `${rows[c.dataIndex].value.toFixed(1)}% [${rows[c.dataIndex].low.toFixed(1)}, ${rows[c.dataIndex].high.toFixed(1)}]` } },
      },
    },
    plugins: [whiskers],
  });
})();
