// The crawl report's page: draws the tables and charts from the JSON in #report-data, and, on the
// live dashboard, polls data.json to draw them again. Every text from the crawl goes in as text
// (textContent), never as HTML: a crawled URL cannot inject markup.
(function () {
  "use strict";
  var PAGE = 100;
  var MAX_BINS = 600;  // the timeline's most points (the ledger's TIMELINE_BINS): the in-flight samples are binned too
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var charts = {};
  var CHANGE = "change:";  // a table view of one change: "change:gone" (any other view is a fate, or "all")
  var table = { view: "all", offset: 0, rows: null };

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      node.setAttribute(name, attrs[name]);
    });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function fill(id, children) {
    var node = document.getElementById(id);
    node.replaceChildren.apply(node, children);
  }

  function number(n) {
    return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US");
  }

  function bytes(n) {
    var units = ["B", "KB", "MB", "GB", "TB"];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i += 1;
    }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function pairs(counts) {
    var keys = Object.keys(counts);
    return keys.length ? keys.map(function (k) { return k + ": " + counts[k]; }).join(", ") : "-";
  }

  function link(url) {
    if (!url) return el("span", { class: "muted" }, ["(start)"]);
    // Only web addresses become links: a javascript: or data: URL from a crawled page stays text.
    return /^https?:\/\//i.test(url) ? el("a", { href: url, rel: "noreferrer" }, [url]) : el("span", {}, [url]);
  }

  function grid(headers, rows, attrs) {
    var head = el("tr", {}, headers.map(function (h) { return el("th", {}, [h]); }));
    var body = rows.map(function (cells) {
      return el("tr", {}, cells.map(function (c) {
        return el("td", {}, [typeof c === "object" && c !== null ? c : String(c)]);
      }));
    });
    return el("table", attrs || {}, [el("thead", {}, [head]), el("tbody", {}, body)]);
  }

  function drawTotals() {
    var t = data.totals;
    var cards = [
      ["URLs met", number(t.urls)], ["kept", number(t.kept)], ["skipped", number(t.skipped)],
      ["failed", number(t.failed)], ["queued", number(t.queued)], ["read", number(t.read)], ["requests", number(t.requests)],
      ["bytes", bytes(t.bytes)],
    ];
    var labels = {
      skipped: ["skipped URLs", "URLs left out, each counted once; the crawl's stats line counts skipped= per " +
        "link met, so a link on every page counts on every page there"],
      read: ["read", "robots.txt and sitemaps: files read for the links they list, not pages"],
    };
    fill("totals", cards.map(function (c) {
      var label = labels[c[0]] || [c[0], ""];
      var attrs = { class: "card", "data-total": c[0] };
      if (label[1]) attrs.title = label[1];
      return el("div", attrs, [el("b", {}, [c[1]]), el("span", {}, [label[0]])]);
    }));
    var settings = Object.keys(data.settings).map(function (k) { return [k, data.settings[k]]; });
    fill("settings", [grid(["setting", "value"], settings)]);
    fill("generated", [data.live ? "live, updated " + data.generated : "written " + data.generated]);
  }

  function drawHosts() {
    var rows = data.hosts.map(function (h) {
      // The row of hosts met as links only names them on hover: one row, however many a page links.
      var origin = h.hosts ? el("span", { title: h.hosts.join("\n"), class: "muted" }, [h.origin]) : h.origin;
      return [origin, number(h.requests), number(h.pages), pairs(h.statuses), pairs(h.errors), pairs(h.skips),
        h.p50_ms === null ? "-" : h.p50_ms + " ms", h.p95_ms === null ? "-" : h.p95_ms + " ms", bytes(h.bytes),
        h.pause || "-"];
    });
    fill("hosts", [grid(["origin", "requests", "pages kept", "statuses", "errors", "skips", "p50", "p95", "bytes",
      "paused"], rows, { id: "host-table" })]);
    var statuses = data.statuses.map(function (s) { return [String(s[0]), number(s[1])]; });
    fill("statuses", statuses.length ? [grid(["status", "responses"], statuses)] : ["No responses yet."]);
  }

  function foundOn(item) {
    // A recrawl meets the pages an earlier crawl kept as such, on no page of its own: no start URL.
    if (!item.referrer && item.change && item.change !== "new") return el("span", { class: "muted" }, ["(an earlier crawl)"]);
    return link(item.referrer);
  }

  function hash(value) {
    // A fingerprint shortened to 8 hex digits, whole on hover: enough to tell two apart at a glance.
    return value ? el("code", { title: value }, [value.slice(0, 8)]) : el("span", { class: "muted" }, ["none"]);
  }

  function drawChanges() {
    var changes = data.changes || [];
    document.getElementById("changes-section").hidden = !changes.length;
    if (!changes.length) return;
    fill("change-counts", changes.map(function (g) {
      return el("div", { class: "card", "data-change": g.change }, [el("b", {}, [number(g.count)]), el("span", {}, [g.change])]);
    }));
    fill("changes", changes.filter(function (g) { return g.samples.length; }).map(function (g) {
      var samples = g.samples.map(function (s) {
        var parts = [link(s.url)];
        if (g.change === "changed") {
          parts.push(" ", el("span", { class: "hashes" }, [hash(s.previous_hash), " \u2192 ", hash(s.hash)]));
        }
        if (s.reason) parts.push(el("div", { class: "detail" }, [s.reason]));
        return el("li", {}, parts);
      });
      var shown = g.count > g.samples.length ? " (the first " + g.samples.length + "; the URL table lists every one)" : "";
      return el("details", { open: "", "data-change": g.change }, [
        el("summary", {}, [el("b", {}, [g.change]), " " + number(g.count), el("span", { class: "muted" }, [shown])]),
        el("ul", {}, samples),
      ]);
    }));
    var filter = document.getElementById("url-filter");
    if (!filter.querySelector("optgroup[data-changes]")) {
      filter.appendChild(el("optgroup", { label: "by change", "data-changes": "" }, changes.map(function (g) {
        return el("option", { value: CHANGE + g.change }, [g.change]);
      })));
    }
  }

  function viewCount() {
    if (table.view === "all") return data.entries.total;
    if (table.view.indexOf(CHANGE) === 0) {
      var change = table.view.slice(CHANGE.length);
      var found = (data.changes || []).filter(function (g) { return g.change === change; })[0];
      return found ? found.count : 0;
    }
    return data.totals[table.view] || 0;
  }

  function groups(id, items, key, none) {
    if (!items.length) {
      fill(id, [el("p", { class: "muted" }, [none])]);
      return;
    }
    fill(id, items.map(function (g) {
      var samples = g.samples.map(function (s) {
        var parts = [link(s.url), el("span", { class: "muted" }, [" found on "]), foundOn(s)];
        if (s.detail) {
          parts.push(s.detail.indexOf("\n") >= 0 ? el("pre", {}, [s.detail]) : el("div", { class: "detail" }, [s.detail]));
        }
        return el("li", {}, parts);
      });
      return el("details", { open: "" }, [
        el("summary", {}, [el("b", {}, [g[key]]), " " + number(g.count)]),
        el("ul", {}, samples),
      ]);
    }));
  }

  function drawUrls() {
    var rows = table.rows !== null ? table.rows : (data.entries.first[table.view] || []);
    var recrawl = (data.changes || []).length > 0;  // a change column only where there are changes to show
    var shown = rows.map(function (r) {
      var cells = [link(r.url), r.fate + (r.reason ? ": " + r.reason : ""), r.status === null ? "-" : String(r.status),
        foundOn(r), String(r.depth), String(r.attempts)];
      if (recrawl) cells.splice(2, 0, r.change || "-");
      return cells;
    });
    var headers = ["URL", "fate", "status", "found on", "depth", "attempts"];
    if (recrawl) headers.splice(2, 0, "change");
    var count = viewCount();
    fill("urls", [grid(headers, shown, { id: "url-table" })]);
    var last = Math.min(table.offset + rows.length, count);
    var note = count ? (table.offset + 1) + "-" + last + " of " + number(count) : "none";
    if (!data.live && count > PAGE) {
      note += " (this file holds the first " + PAGE + "; serve the crawl with --dashboard to page through all)";
    }
    fill("url-page", [note]);
    document.getElementById("url-prev").disabled = !data.live || table.offset === 0;
    document.getElementById("url-next").disabled = !data.live || last >= count;
  }

  function loadUrls() {
    if (!data.live || (table.offset === 0 && table.view === "all")) {
      table.rows = null;
      drawUrls();
      return;
    }
    var filter = "";
    if (table.view.indexOf(CHANGE) === 0) {
      filter = "&change=" + encodeURIComponent(table.view.slice(CHANGE.length));
    } else if (table.view !== "all") {
      filter = "&fate=" + encodeURIComponent(table.view);
    }
    var query = "entries.json?offset=" + table.offset + filter;
    fetch(query).then(function (r) { return r.json(); }).then(function (rows) {
      table.rows = rows;
      drawUrls();
    });
  }

  function timelineData() {
    // One point a bin (timeline_step seconds) from the first to the last, at most MAX_BINS of them
    // however far apart the first and last are: a bin with no request is a zero, not a gap.
    var last = -1;
    data.timeline.forEach(function (p) { last = Math.max(last, p[0]); });
    data.in_flight.forEach(function (p) { last = Math.max(last, p[0]); });
    var step = Math.max(data.timeline_step || 1, Math.ceil((last + 1) / MAX_BINS));
    var bins = Math.floor(last / step) + 1;
    var xs = [];
    for (var bin = 0; bin < bins; bin += 1) xs.push(bin * step);
    var requests = xs.map(function () { return 0; });
    var pages = xs.map(function () { return 0; });
    var flight = xs.map(function () { return null; });
    data.timeline.forEach(function (p) {
      if (p[0] < 0) return;  // a page settled by a clock behind the first request's
      var bin = Math.floor(p[0] / step);
      requests[bin] += p[1] / step;  // per second, over the bin
      pages[bin] += p[2] / step;
    });
    data.in_flight.forEach(function (p) {
      if (p[0] < 0) return;
      var bin = Math.floor(p[0] / step);
      flight[bin] = Math.max(flight[bin] === null ? 0 : flight[bin], p[1]);  // the most in flight in the bin
    });
    return [xs, requests, pages, flight];
  }

  function latencyData() {
    return [data.latency.map(function (b, i) { return i; }), data.latency.map(function (b) { return b[1]; })];
  }

  function ms(bound) {
    return bound >= 1000 ? bound / 1000 + "k" : String(bound);
  }

  function latencyLabel(i) {
    var bucket = data.latency[i];
    if (!bucket) return "";
    return bucket[0] === null ? ">" + ms(data.latency[i - 1][0]) : "\u2264" + ms(bucket[0]);
  }

  function chart(id, options, values) {
    var box = document.getElementById(id);
    if (charts[id]) {
      charts[id].setData(values);
      return;
    }
    options.width = Math.max(box.clientWidth - 16, 300);  // inside the box's padding
    options.height = 220;
    charts[id] = new uPlot(options, values, box);
  }

  function drawCharts() {
    chart("timeline", {
      scales: { x: { time: false } },
      axes: [{ label: "seconds since the first request", incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600] }, { label: "per second" }, { side: 1, scale: "n", grid: { show: false }, label: "in flight" }],
      series: [
        { label: "second" },
        { label: "requests/s", stroke: "#3b6fd6", width: 2, fill: "rgba(59,111,214,0.12)" },
        { label: "pages/s", stroke: "#1f9d55", width: 2 },
        { label: "in flight", stroke: "#d97706", width: 2, scale: "n", spanGaps: true },
      ],
    }, timelineData());
    chart("latency", {
      legend: { show: false },
      scales: { x: { time: false, range: function () { return [-0.5, data.latency.length - 0.5]; } } },
      axes: [
        {
          label: "latency, ms (each bar: requests up to its bound)",
          font: "11px system-ui, sans-serif",
          gap: 3,
          splits: function () { return data.latency.map(function (b, i) { return i; }); },
          values: function (u, splits) { return splits.map(latencyLabel); },
        },
        { label: "requests" },
      ],
      series: [
        { label: "bucket", value: function (u, v) { return v === null ? "-" : latencyLabel(v); } },
        { label: "requests", stroke: "#6d28d9", fill: "rgba(109,40,217,0.55)", paths: uPlot.paths.bars({ size: [0.7, 80] }), points: { show: false } },
      ],
    }, latencyData());
  }

  function draw() {
    drawTotals();
    drawChanges();
    drawHosts();
    groups("skips", data.skips, "reason", "Nothing was skipped.");
    groups("failures", data.failures, "kind", "Nothing failed.");
    if (table.offset === 0 && table.view === "all") drawUrls();  // another page stays as fetched
    drawCharts();
  }

  document.getElementById("url-filter").addEventListener("change", function (event) {
    table.view = event.target.value;
    table.offset = 0;
    loadUrls();
  });
  document.getElementById("url-prev").addEventListener("click", function () {
    table.offset = Math.max(0, table.offset - PAGE);
    loadUrls();
  });
  document.getElementById("url-next").addEventListener("click", function () {
    table.offset += PAGE;
    loadUrls();
  });

  draw();
  document.body.setAttribute("data-drawn", "1");
  if (data.live) {
    var every = Number(document.body.getAttribute("data-refresh")) || 1000;
    var poll = function () {
      fetch("data.json").then(function (r) { return r.json(); }).then(function (next) {
        data = next;
        draw();
      }).catch(function () {
        fill("generated", ["the crawl has ended (the dashboard stopped answering)"]);
      }).then(function () {
        setTimeout(poll, every);
      });
    };
    setTimeout(poll, every);
  }
})();
