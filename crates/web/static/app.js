// mailproof web: live thumbnails and spam verdicts (polling the test's status.json), keys for
// variants and clients, the zoom, the gallery's filters, the form's select all / none, the copy
// button, the diff's slider, and reports that appear in place when a link or content check ends.
// Everything works without it; it only saves reloads and clicks.
(function () {
  "use strict";

  function updateCard(card, c) {
    if (card.dataset.status === c.status) return;
    card.dataset.status = c.status;
    var status = card.querySelector(".status");
    if (status) status.textContent = c.status;
    if (c.status === "Bounced" && c.message && !card.querySelector(".bounce")) {
      var b = document.createElement("span");
      b.className = "bounce";
      b.textContent = c.message;
      status.after(b);
    }
    var mark = card.querySelector(".failed");
    if (mark && c.status !== "Complete") mark.remove();
    if (c.status === "Complete" && c.failed && !card.querySelector(".failed")) {
      var f = document.createElement("span");
      f.className = "failed";
      f.textContent = c.failed;
      status.after(f);
    }
    if (c.status === "Complete" && c.thumbnail_off) {
      card.dataset.srcOn = c.thumbnail;
      card.dataset.srcOff = c.thumbnail_off;
    }
    if (c.status === "Complete" && c.thumbnail && !card.querySelector("img")) {
      var img = document.createElement("img");
      img.src = c.thumbnail;
      img.alt = "Screenshot of the email in " + c.name;
      var ph = card.querySelector(".placeholder");
      if (ph) ph.replaceWith(img);
    }
  }

  function updateVerdict(v) {
    var cell = document.querySelector('#spam tr[data-filter="' + v.filter + '"] td.verdict');
    if (!cell || cell.dataset.verdict === v.verdict) return;
    cell.dataset.verdict = v.verdict;
    cell.textContent = v.label;
  }

  // Polls until the server says nothing is pending; the pause grows while nothing changes, so a
  // seed-list spam test left waiting for hours costs little.
  var lastSeen = null;

  function poll(url, pause) {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) return;
        var seen = JSON.stringify([s.finished, s.spam, !!s.arrival, !!s.inbox]);
        var unchanged = seen === lastSeen;
        lastSeen = seen;
        s.clients.forEach(function (c) {
          var card = document.querySelector('.card[data-client="' + c.id + '"]');
          if (card) updateCard(card, c);
        });
        (s.spam || []).forEach(updateVerdict);
        var arrival = document.querySelector('#arrival[data-state="pending"]');
        if (arrival && s.arrival) arrival.outerHTML = s.arrival;
        var inbox = document.querySelector('#inbox[data-state="pending"]');
        if (inbox && s.inbox) inbox.outerHTML = s.inbox;
        var bar = document.getElementById("progress");
        if (bar) { bar.max = Math.max(s.total, 1); bar.value = s.finished; }
        var text = document.getElementById("progress-text");
        if (text) text.textContent = s.finished + " of " + s.total;
        document.body.dataset.pending = s.pending ? "1" : "0";
        document.dispatchEvent(new Event("mailproof:status"));
        if (s.pending) {
          var next = unchanged ? Math.min(pause * 1.5, 15000) : 1500;
          setTimeout(function () { poll(url, next); }, next);
        }
      })
      .catch(function () { setTimeout(function () { poll(url, 5000); }, 5000); });
  }

  // Bound once, reading the links at each key: a client page that updates itself in place gets
  // its variants after load.
  function variantKeys() {
    if (!document.querySelector(".variants")) return;
    document.addEventListener("keydown", function (e) {
      if (typing(e)) return;
      var links = Array.prototype.slice.call(document.querySelectorAll(".variants a[data-key]"));
      if (!links.length) return;
      var cur = links.findIndex(function (a) { return a.getAttribute("aria-current") === "page"; });
      var next = -1;
      if (/^[1-9]$/.test(e.key)) next = parseInt(e.key, 10) - 1;
      else if (e.key === "ArrowRight") next = (cur + 1) % links.length;
      else if (e.key === "ArrowLeft") next = (cur - 1 + links.length) % links.length;
      if (next >= 0 && next < links.length && next !== cur) {
        e.preventDefault();
        window.location.href = links[next].href;
      }
    });
  }

  function typing(e) {
    var t = e.target.tagName;
    return e.altKey || e.ctrlKey || e.metaKey || t === "INPUT" || t === "TEXTAREA" || t === "SELECT";
  }

  // The gallery's filters (category, status with counts, light or dark profiles) and its
  // images-off switch, applied in place; a section with nothing shown hides, and the address
  // keeps the choice, so a reload or a copied link shows the same cards.
  function galleryFilter() {
    var form = document.querySelector("form.gallery-filter");
    if (!form) return;
    var show = form.querySelector("button.show");
    if (show) show.hidden = true;
    var count = document.getElementById("shown-count");
    var names = ["category", "status", "scheme", "images"];
    function value(name) { var el = form.elements[name]; return el ? el.value : ""; }
    function apply(keep) {
      var cat = value("category"), st = value("status"), scheme = value("scheme");
      var off = value("images") === "off";
      var shown = 0, total = 0, per = {};
      document.querySelectorAll("section.category").forEach(function (sec) {
        var any = false;
        sec.querySelectorAll(".card").forEach(function (card) {
          total++;
          per[card.dataset.status] = (per[card.dataset.status] || 0) + 1;
          var ok = (!cat || sec.dataset.category === cat) &&
            (!st || card.dataset.status === st) && (!scheme || card.dataset.scheme === scheme);
          card.hidden = !ok;
          if (ok) { any = true; shown++; }
          if (card.dataset.hrefOff) {
            var a = card.querySelector("a.shot"), img = card.querySelector(".frame img");
            if (a) a.href = off ? card.dataset.hrefOff : card.dataset.hrefOn;
            var src = off ? card.dataset.srcOff : card.dataset.srcOn;
            if (img && src && img.getAttribute("src") !== src) img.src = src;
          }
        });
        sec.hidden = !any;
      });
      var statuses = form.elements.status;
      Array.prototype.forEach.call(statuses.options, function (o) {
        o.textContent = o.dataset.label
          ? o.dataset.label + " (" + (per[o.value] || 0) + ")"
          : "All (" + total + ")";
      });
      count.textContent = shown + " shown";
      if (keep) {
        var q = new URLSearchParams(location.search);
        names.forEach(function (n) { if (value(n)) q.set(n, value(n)); else q.delete(n); });
        var query = q.toString();
        history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + location.hash);
      }
    }
    form.addEventListener("change", function () { apply(true); });
    form.addEventListener("submit", function (e) { e.preventDefault(); apply(true); });
    document.addEventListener("mailproof:status", function () { apply(false); });
    apply(false);
  }

  // The full view's zoom: fit the column (never above CSS size), CSS size, or one image pixel
  // per device pixel; the choice is remembered in this browser.
  function zoom() {
    var fig = document.querySelector("figure.full");
    var box = document.querySelector(".zoom");
    var img = document.getElementById("full-shot");
    if (!fig || !box || !img || box.dataset.bound) return;
    box.dataset.bound = "1";
    box.hidden = false;
    var scale = parseFloat(fig.dataset.scale) || 1;
    function set(mode) {
      fig.dataset.zoom = mode;
      box.querySelectorAll("button").forEach(function (b) {
        b.setAttribute("aria-pressed", b.dataset.zoom === mode ? "true" : "false");
      });
      if (!img.naturalWidth) return;
      var css = img.naturalWidth / scale;
      var px = mode === "device" ? img.naturalWidth / (window.devicePixelRatio || 1) : css;
      img.style.width = px + "px";
    }
    var saved = "fit";
    try { saved = localStorage.getItem("mailproof.zoom") || "fit"; } catch (e) { /* storage off */ }
    box.addEventListener("click", function (e) {
      var mode = e.target.closest("button") && e.target.closest("button").dataset.zoom;
      if (!mode) return;
      try { localStorage.setItem("mailproof.zoom", mode); } catch (err) { /* storage off */ }
      set(mode);
    });
    img.addEventListener("load", function () { set(fig.dataset.zoom); });
    set(saved);
  }

  // j / k: next and previous client in the full view (the arrows belong to the variants).
  function clientKeys() {
    if (!document.getElementById("next-client") && !document.getElementById("prev-client")) return;
    document.addEventListener("keydown", function (e) {
      if (typing(e)) return;
      var next = document.getElementById("next-client");
      var prev = document.getElementById("prev-client");
      var to = e.key === "j" ? next : e.key === "k" ? prev : null;
      if (to) { e.preventDefault(); window.location.href = to.href; }
    });
  }

  // The new-test form: select all or none (per category and overall) and a live count.
  function clientPicker() {
    var box = document.querySelector("fieldset.clients");
    if (!box) return;
    var all = box.querySelectorAll("input[name=clients]");
    var count = document.getElementById("clients-count");
    function update() {
      var n = box.querySelectorAll("input[name=clients]:checked").length;
      if (count) count.textContent = n + " of " + all.length + " clients selected";
    }
    box.querySelectorAll("[data-select]").forEach(function (b) {
      b.hidden = false;
      b.addEventListener("click", function () {
        var scope = b.closest("fieldset");
        var on = b.dataset.select === "all";
        scope.querySelectorAll("input[name=clients]").forEach(function (c) { c.checked = on; });
        update();
      });
    });
    box.addEventListener("change", update);
    update();
  }

  // Copy a read-only field (the share link) to the clipboard, saying so.
  function copyButtons() {
    document.querySelectorAll("[data-copy]").forEach(function (b) {
      if (b.dataset.bound) return;
      b.dataset.bound = "1";
      var field = document.getElementById(b.dataset.copy);
      // Each copy button says so in the status line beside it.
      var done = b.parentNode.querySelector("[role=status]") || document.getElementById("copy-done");
      if (!field) return;
      b.hidden = false;
      b.addEventListener("click", function () {
        field.select();
        var said = function (ok) { if (done) done.textContent = ok ? "Copied." : "Select the text and copy it."; };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(field.value).then(function () { said(true); }, function () { said(false); });
        } else {
          said(document.execCommand && document.execCommand("copy"));
        }
      });
    });
  }

  // A page waiting on background work fetches itself until the work is done. A waiting part with
  // an id (a client's screenshot, the spam verdicts, the click map) is replaced in place each
  // time it changes, the rest of the page untouched; a waiting note without one (a link or
  // content check) is replaced, with the whole report, once the work is done. The pause grows
  // while nothing changes, so a seed-list spam test left waiting for hours costs little.
  function refreshWhenDone(pause) {
    setTimeout(function () {
      fetch(window.location.href, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text === null) { refreshWhenDone(Math.min(pause * 2, 30000)); return; }
          var doc = new DOMParser().parseFromString(text, "text/html");
          var parts = document.querySelectorAll("[data-reload-after][id]");
          if (parts.length) {
            var still = false, changed = false;
            parts.forEach(function (el) {
              var fresh = doc.getElementById(el.id);
              if (!fresh) return;
              if (fresh.outerHTML !== el.outerHTML) { el.replaceWith(document.adoptNode(fresh)); changed = true; }
              if (fresh.hasAttribute("data-reload-after")) still = true;
            });
            if (changed) afterRefresh();
            if (still) refreshWhenDone(changed ? 1500 : Math.min(pause * 1.5, 30000));
            else document.body.dataset.refreshed = "1";
            return;
          }
          var fresh = doc.getElementById("main");
          if (!fresh || fresh.querySelector("[data-reload-after]")) { refreshWhenDone(pause); return; }
          document.getElementById("main").replaceChildren.apply(document.getElementById("main"), Array.prototype.slice.call(fresh.childNodes));
          afterRefresh();
          document.body.dataset.refreshed = "1";
        })
        .catch(function () { refreshWhenDone(Math.min(pause * 2, 30000)); });
    }, pause);
  }

  // What a part brought in by refreshWhenDone needs wired.
  function afterRefresh() {
    copyButtons();
    swipes();
    zoom();
  }

  // The visual diff page comes without figures: each client's comparison is fetched in turn
  // (the server compares one account's screenshots one pair at a time anyway), put in place
  // with its row of the summary, and the summary is sorted, most changed first, at the end.
  function diffOnDemand() {
    var pending = Array.prototype.slice.call(document.querySelectorAll("section.diff-client[data-diff-src]"));
    if (!pending.length) return;
    var total = pending.length, done = 0;
    var progress = document.getElementById("diff-progress");
    function said() { if (progress) progress.textContent = " (" + done + " of " + total + " compared)"; }
    function sortSummary() {
      var body = document.querySelector(".diff-summary tbody");
      if (!body) return;
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) { return (parseFloat(b.dataset.share) || 0) - (parseFloat(a.dataset.share) || 0); });
      rows.forEach(function (r) { body.appendChild(r); });
    }
    function next() {
      var sec = pending.shift();
      if (!sec) { sortSummary(); if (progress) progress.textContent = ""; document.body.dataset.diffDone = "1"; return; }
      var client = sec.dataset.client;
      fetch(sec.dataset.diffSrc, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text) {
            var doc = new DOMParser().parseFromString(text, "text/html");
            var fresh = doc.querySelector('section.diff-client[data-client="' + client + '"]');
            if (fresh) sec.replaceWith(document.adoptNode(fresh));
            var row = doc.querySelector('.diff-summary tr[data-client="' + client + '"]');
            var mine = document.querySelector('.diff-summary tr[data-client="' + client + '"]');
            if (row && mine) mine.replaceWith(document.adoptNode(row));
            swipes();
          }
          done++;
          said();
          next();
        })
        .catch(function () { done++; said(); next(); });
    }
    said();
    next();
  }

  // The visual diff's slider: the "after" screenshot over the "before" one, uncovered from the
  // left as far as the slider says.
  function swipes() {
    document.querySelectorAll(".swipe").forEach(function (box) {
      var range = box.querySelector(".swipe-range");
      var after = box.querySelector(".swipe-after");
      if (!range || !after || box.dataset.bound) return;
      box.dataset.bound = "1";
      box.hidden = false;
      function apply() { after.style.clipPath = "inset(0 0 0 " + range.value + "%)"; }
      range.addEventListener("input", apply);
      apply();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    copyButtons();
    swipes();
    galleryFilter();
    zoom();
    clientKeys();
    clientPicker();
    diffOnDemand();
    var firstError = document.querySelector("[aria-invalid=true]");
    if (firstError) firstError.focus();
    var url = document.body.dataset.statusUrl;
    if (url && document.querySelector(".card, #spam td.verdict, #arrival, #inbox")) poll(url, 1500);
    variantKeys();
    // A page waiting on background work (a link check, the content checks) fetches itself until
    // the work is done and then shows the report in place, without a reload.
    var wait = document.querySelector("[data-reload-after]");
    if (wait) refreshWhenDone(parseInt(wait.dataset.reloadAfter, 10) || 2000);
  });
})();
