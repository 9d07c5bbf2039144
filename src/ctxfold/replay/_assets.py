"""The inline CSS and the chart script of a replay's HTML page.

They live in the page itself so that it opens anywhere, offline, with nothing fetched at
view time. The script reads the JSON block with id ``replay-data`` and draws an SVG.
"""

CSS = """
:root { --ink: #1d2330; --muted: #667085; --line: #d0d5dd; --ctx: #2563eb; --cut: #dc2626;
        --trig: #d97706; --tgt: #059669; --win: #111827; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
       margin: 0 auto; max-width: 1040px; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 8px; }
.stat { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
.stat b { display: block; font-size: 18px; }
.stat span { color: var(--muted); font-size: 13px; }
#chart { width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
#chart .axis { stroke: var(--line); }
#chart text { font-size: 11px; fill: var(--muted); }
#chart .context { fill: none; stroke: var(--ctx); stroke-width: 1.6; }
#chart circle.turn { fill: var(--ctx); }
#chart .line-window { stroke: var(--win); stroke-width: 1.2; }
#chart .line-trigger { stroke: var(--trig); stroke-dasharray: 6 4; }
#chart .line-target { stroke: var(--tgt); stroke-dasharray: 2 3; }
#chart .compaction line { stroke: var(--cut); stroke-width: 2; }
#chart .compaction circle { fill: var(--cut); }
#chart .compaction text { fill: var(--cut); font-weight: 600; }
.legend span { margin-right: 16px; font-size: 13px; color: var(--muted); }
.legend i { display: inline-block; width: 18px; height: 3px; vertical-align: middle;
            margin-right: 6px; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; border-bottom: 1px solid var(--line); padding: 6px 8px;
         vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { white-space: pre-wrap; background: #f8fafc; border: 1px solid var(--line);
      border-radius: 6px; padding: 10px; font-size: 13px; }
.note { color: var(--muted); font-size: 13px; }
"""

SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById("replay-data").textContent);
  var svg = document.getElementById("chart");
  var NS = "http://www.w3.org/2000/svg";
  var W = 960, H = 380, L = 64, R = 16, T = 16, B = 40;
  function el(name, attrs, parent, text) {
    var node = document.createElementNS(NS, name);
    for (var k in attrs) { node.setAttribute(k, attrs[k]); }
    if (text !== undefined) { node.textContent = text; }
    (parent || svg).appendChild(node);
    return node;
  }
  var turns = data.turns;
  var n = Math.max(turns.length, 1);
  var top = data.window;
  turns.forEach(function (t) { top = Math.max(top, t[1], t[2]); });
  top = top * 1.05;
  function x(turn) { return L + (W - L - R) * (n === 1 ? 0.5 : (turn - 1) / (n - 1)); }
  function y(tokens) { return T + (H - T - B) * (1 - tokens / top); }
  el("line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B});
  el("line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B});
  // Round tick steps (1, 2, 2.5 or 5 times a power of ten), about four of them.
  var raw = top / 4, mag = Math.pow(10, Math.floor(Math.log10(raw))), tick = 10 * mag;
  [1, 2, 2.5, 5].forEach(function (f) {
    if (f * mag >= raw && f * mag < tick) { tick = f * mag; }
  });
  for (var v = 0; v <= top; v += tick) {
    el("line", {class: "axis", x1: L - 3, x2: L, y1: y(v), y2: y(v)});
    el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, null, v.toLocaleString("en"));
  }
  var step = Math.max(1, Math.ceil(n / 10));
  for (var k = 1; k <= n; k += step) {
    el("text", {x: x(k), y: H - B + 16, "text-anchor": "middle"}, null, String(k));
  }
  el("text", {x: (W + L) / 2, y: H - 6, "text-anchor": "middle"}, null, "request (turn)");
  [["window", data.window], ["trigger", data.trigger], ["target", data.target]]
    .forEach(function (pair) {
      var line = el("line", {class: "line-" + pair[0], x1: L, x2: W - R,
                             y1: y(pair[1]), y2: y(pair[1])});
      el("title", {}, line, pair[0] + ": " + pair[1].toLocaleString("en") + " tokens");
      el("text", {x: W - R - 4, y: y(pair[1]) - 4, "text-anchor": "end"}, null, pair[0]);
    });
  var points = [];
  turns.forEach(function (t) {
    if (t[1] !== t[2]) { points.push(x(t[0]) + "," + y(t[1])); }
    points.push(x(t[0]) + "," + y(t[2]));
  });
  el("polyline", {class: "context", points: points.join(" ")});
  turns.forEach(function (t) {
    var dot = el("circle", {class: "turn", cx: x(t[0]), cy: y(t[2]), r: n > 300 ? 1.2 : 2.4,
                            "data-turn": t[0], "data-tokens": t[2]});
    el("title", {}, dot, "request " + t[0] + ": " + t[2].toLocaleString("en") + " tokens");
  });
  data.compactions.forEach(function (c, index) {
    var g = el("g", {class: "compaction", "data-turn": c.turn, "data-saved": c.saved});
    el("line", {x1: x(c.turn), x2: x(c.turn), y1: y(c.before), y2: y(c.after)}, g);
    el("circle", {cx: x(c.turn), cy: y(c.before), r: 3.5}, g);
    var right = x(c.turn) > W - 120;  // near the right edge, label to the left of the mark
    el("text", {x: x(c.turn) + (right ? -4 : 4), y: y(c.before) - 6,
                "text-anchor": right ? "end" : "start"}, g,
       "#" + (index + 1) + " \\u2212" + c.saved.toLocaleString("en"));
    el("title", {}, g, "compaction #" + (index + 1) + " before request " + c.turn + ": " +
       c.before.toLocaleString("en") + " \\u2192 " + c.after.toLocaleString("en") +
       " tokens (" + c.strategies + ")");
  });
  document.documentElement.setAttribute("data-chart", "rendered");
})();
"""
