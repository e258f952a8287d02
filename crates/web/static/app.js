// mailproof web: live thumbnails (polling the test's status.json) and keyboard navigation
// between screenshot variants, reloading a page that waits on a link check. Everything works
// without it; it only saves reloads and clicks.
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
    if (c.status === "Complete" && c.thumbnail && !card.querySelector("img")) {
      var img = document.createElement("img");
      img.src = c.thumbnail;
      img.alt = "Screenshot of the email in " + c.name;
      var ph = card.querySelector(".placeholder");
      if (ph) ph.replaceWith(img);
    }
  }

  function poll(url) {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) return;
        s.clients.forEach(function (c) {
          var card = document.querySelector('.card[data-client="' + c.id + '"]');
          if (card) updateCard(card, c);
        });
        var bar = document.getElementById("progress");
        if (bar) { bar.max = Math.max(s.total, 1); bar.value = s.finished; }
        var text = document.getElementById("progress-text");
        if (text) text.textContent = s.finished + " of " + s.total;
        if (s.finished < s.total) setTimeout(function () { poll(url); }, 1500);
      })
      .catch(function () { setTimeout(function () { poll(url); }, 5000); });
  }

  function variantKeys() {
    var links = Array.prototype.slice.call(document.querySelectorAll(".variants a[data-key]"));
    if (!links.length) return;
    document.addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      var t = e.target.tagName;
      if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT") return;
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

  document.addEventListener("DOMContentLoaded", function () {
    var url = document.body.dataset.statusUrl;
    if (url && document.querySelector(".card")) poll(url);
    variantKeys();
    // A page waiting on background work (a link check) reloads itself until the work is done.
    var wait = document.querySelector("[data-reload-after]");
    if (wait) setTimeout(function () { window.location.reload(); }, parseInt(wait.dataset.reloadAfter, 10) || 2000);
  });
})();
