// Draws every chart of a tunegate report from the JSON embedded in the page.
// When all are drawn, <body data-charts-drawn="all"> (or "failed"): the browser test reads it.
(function () {
  "use strict";
  var charts = JSON.parse(document.getElementById("tg-charts").textContent);
  var config = { displaylogo: false, responsive: true, showLink: false };
  var pending = charts.length;
  var failed = 0;
  document.body.dataset.charts = String(charts.length);
  function settled() {
    pending -= 1;
    if (pending === 0) { document.body.dataset.chartsDrawn = failed ? "failed" : "all"; }
  }
  if (pending === 0) { document.body.dataset.chartsDrawn = "all"; }
  charts.forEach(function (chart) {
    var element = document.getElementById("chart-" + chart.key);
    function fail(error) {
      failed += 1;
      element.dataset.drawn = "failed";
      element.textContent = "This chart could not be drawn: " + error;
      console.error("tunegate report: chart " + chart.key + ": " + error);
      settled();
    }
    try {
      Plotly.newPlot(element, chart.traces, chart.layout, config).then(function () {
        element.dataset.drawn = "1";
        settled();
      }, fail);
    } catch (error) {
      fail(error);
    }
  });
})();
